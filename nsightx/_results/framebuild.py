"""``pd.DataFrame(columns)`` for the aggregated frame's columns, built block by block where pandas allows it.

The aggregated frame of a small result has about 56 columns of a few rows; ``pd.DataFrame(dict)`` checks and
converts each column on its own (``sanitize_array``; pandas 3 builds every text column through
``ArrowStringArray._from_sequence``), which was 40% of ``to_dataframe()`` for a 44-run result (issue 35).
:func:`frame_of` hands pandas the blocks it would build itself: one 2-D array per numpy dtype (the columns of that
dtype stacked in column order), one extension array per text or nullable column, through
``pandas.api.internals.create_dataframe_from_blocks`` (pandas 3). The frame is the one ``pd.DataFrame(columns)``
gives, dtypes and values alike: each kind of column is taken this way only where the dtype pandas would infer for
it is known without asking (:func:`_part`); any other column, or an older pandas, sends the whole dict to
``pd.DataFrame``. ``tests/core/results/test_framebuild.py`` compares both on every kind.
"""

from __future__ import annotations

import functools
import itertools
import operator
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import pandas as pd

_INT64 = (-(2**63), 2**63 - 1)
_NUMPY_KINDS = frozenset({np.dtype(np.int64), np.dtype(np.float64), np.dtype(np.bool_)})
"""numpy dtypes ``pd.DataFrame`` keeps as they are (a numpy object array is inferred, so it is not among them)."""
_STR = frozenset({str})
_NONE = frozenset({type(None)})


def frame_of(columns: Mapping[str, Any], n: int) -> pd.DataFrame:
    """``pd.DataFrame(columns)`` for columns of ``n`` rows each, with a ``RangeIndex`` (see the module docstring)."""
    import pandas as pd

    text = _text_dtype()
    blocks = None if text is None else _blocks(columns, n, text)
    if blocks is None:
        return pd.DataFrame(columns)
    labels = _labels(tuple(columns), _same(text)).view()  # its own object (a user may rename it), over the same data
    return _assembler()(blocks, pd.RangeIndex(range(n)), labels)  # a range: no argument checks (the same index)


@functools.lru_cache(maxsize=64)
def _labels(names: tuple[str, ...], key: _Same) -> pd.Index:
    """``pd.Index(names)`` for the column names of a frame (the same few sets of names recur in a process)."""
    import pandas as pd

    text = key.value
    return pd.Index(_strings([list(names)], text)[0] if not isinstance(text, np.dtype) else list(names))


class _Text(list[str]):
    """A column of strings, made into the text dtype's array together with the frame's other text columns."""


def _blocks(columns: Mapping[str, Any], n: int, text: Any) -> list[tuple[Any, Any]] | None:
    """The frame's blocks as (array, column positions), or None where ``pd.DataFrame`` must decide.

    The numpy columns of a kept dtype (most of the frame's) are found by :func:`_layout`, once per set of names
    and column types, and stacked without a call of :func:`_part`; the other columns are taken one by one. A stack
    of a shape other than (columns, ``n``) (a column of another length or dimension) leaves the frame to pandas.
    """
    values = list(columns.values())
    layout = _layout(tuple(columns), tuple([v.dtype if type(v) is np.ndarray else type(v) for v in values]))
    if layout is None:
        return None
    stacked = {dtype: (list(take(values)), list(where)) for dtype, where, take in layout[0]}
    single: list[tuple[Any, int]] = []
    texts: list[list[str]] = []
    text_at: list[int] = []
    mixed = set()
    for i in layout[1]:
        part = _part(values[i], n)
        if part is None:
            return None
        if isinstance(part, _Text):
            texts.append(part)
            text_at.append(i)
        elif isinstance(part, np.ndarray):
            mixed.add(part.dtype)
            arrays, where = stacked.setdefault(part.dtype, ([], []))
            arrays.append(part)
            where.append(i)
        else:
            single.append((part, i))
    for array, i in zip(_strings(texts, text), text_at, strict=True):
        if isinstance(array, np.ndarray):  # text stored as numpy objects: one block with the other object columns
            mixed.add(array.dtype)
            arrays, where = stacked.setdefault(array.dtype, ([], []))
            arrays.append(array)
            where.append(i)
        else:
            single.append((array, i))
    return _stacks(stacked, mixed, single, len(values), n)


def _stacks(
    stacked: dict[Any, tuple[list[Any], list[int]]], mixed: set[Any], single: list[tuple[Any, int]], width: int, n: int
) -> list[tuple[Any, Any]] | None:
    """The blocks: one per single column, one 2-D array per stacked dtype (its columns in column order).

    ``mixed``: the dtypes whose stack took columns out of order (they are put back in order). None where a stack
    is not (columns, ``n``): ``np.array`` of equal 1-D arrays is ``np.vstack``'s rows, without its checks.
    """
    positions = np.arange(width, dtype=np.intp)
    blocks: list[tuple[Any, Any]] = [(array, positions[i : i + 1]) for array, i in single]
    for dtype, (arrays, where) in stacked.items():
        if dtype in mixed:
            order = sorted(range(len(where)), key=where.__getitem__)
            arrays, where = [arrays[k] for k in order], [where[k] for k in order]
        try:
            block = np.array(arrays)
        except ValueError:  # arrays of different lengths or dimensions
            return None
        if block.shape != (len(where), n) or block.dtype != dtype:
            return None
        blocks.append((block, np.array(where, dtype=np.intp)))
    return blocks


_Layout = tuple[tuple[tuple[Any, tuple[int, ...], Callable[[list[Any]], tuple[Any, ...]]], ...], tuple[int, ...]]


@functools.lru_cache(maxsize=64)
def _layout(names: tuple[Any, ...], kinds: tuple[Any, ...]) -> _Layout | None:
    """Where a frame's columns go, from their names and types (numpy dtypes for arrays); None: a name not a str.

    Per kept numpy dtype (in first-seen order): its columns' positions and a function that takes them from the
    list of column values (one tuple each); then the positions of the other columns. The same few layouts recur in
    a process (a function's frames): found once each, not a dictionary step and checks per column per frame.
    """
    if any(type(name) is not str for name in names):
        return None
    at: dict[Any, list[int]] = {}
    rest: list[int] = []
    for i, kind in enumerate(kinds):
        if kind in _NUMPY_KINDS:
            at.setdefault(kind, []).append(i)
        else:
            rest.append(i)
    stacks = tuple((dtype, tuple(where), _getter(where)) for dtype, where in at.items())
    return stacks, tuple(rest)


def _getter(where: list[int]) -> Callable[[list[Any]], tuple[Any, ...]]:
    """A function that takes the items at ``where`` of a list, as a tuple (``operator.itemgetter``, one or more)."""
    take = operator.itemgetter(*where)
    if len(where) == 1:
        return lambda values: (take(values),)
    return take


def _part(value: Any, n: int) -> Any:
    """One column as ``pd.DataFrame`` would store it, or None for a column whose dtype is left to pandas.

    A 1-D numpy array (stacked with the others of its dtype), an extension array, or :class:`_Text`. A column of
    ``None`` only (the host backend's ``GPU`` and rated clocks) stays a numpy object array, as pandas keeps it;
    strings mixed with ``None`` are left to pandas (it makes them ``str`` with NaN).
    """
    if isinstance(value, np.ndarray):
        if value.ndim != 1 or len(value) != n:
            return None
        dtype = value.dtype
        if dtype in _NUMPY_KINDS:
            return value
        if dtype.kind == "O":  # objects
            items = value.tolist()
            kinds = set(map(type, items))
            if kinds <= _STR:
                return _Text(items)
            return value if kinds == _NONE else None  # kept as objects (an unknown GPU, clock)
        return None
    if isinstance(value, list):
        return _listed(value) if len(value) == n else None
    import pandas as pd  # after the numpy and list columns, most of a frame's

    if isinstance(value, pd.Series):  # a Series keeps its dtype (no inference); aligned on the same RangeIndex
        index = value.index
        if not (isinstance(index, pd.RangeIndex) and index.equals(pd.RangeIndex(n))):
            return None
        value = value.array
        if isinstance(value, pd.arrays.NumpyExtensionArray):
            array = value.to_numpy()
            return array.copy() if array.dtype in _NUMPY_KINDS or array.dtype == object else None
    if isinstance(value, pd.api.extensions.ExtensionArray) and len(value) == n:
        return value.copy()
    return None


def _listed(items: list[Any]) -> Any:
    """A list column as pandas infers it, for lists of one plain type (else None)."""
    kinds = set(map(type, items))
    if len(kinds) != 1:
        return None
    kind = next(iter(kinds))
    if kind is str:
        return _Text(items)
    if kind is bool:
        return np.array(items, dtype=np.bool_)
    if kind is int and _INT64[0] <= min(items) and max(items) <= _INT64[1]:
        return np.array(items, dtype=np.int64)
    if kind is float and not any(v != v for v in items):
        return np.array(items, dtype=np.float64)
    if kind is type(None):  # pandas keeps a column of None as objects
        return np.array(items, dtype=object)
    return None


def _strings(columns: list[list[str]], text: Any) -> list[Any]:
    """Columns of strings with the dtype pandas infers for them (``text``).

    numpy objects, or arrays over slices of one Arrow-backed array: one conversion and one array check for all the
    frame's text columns, where pandas converted each on its own. A small frame's text (up to
    :data:`_CACHED_TEXT` strings) is looked up by its columns: the checked data's slices are kept with it, so a
    frame makes only a new array object per column (:func:`_wrapper`) or, where pandas' own slicing must be used, a
    slice of the kept array (pandas' public ``__getitem__``, which pandas 3 makes without checking the Arrow data
    again).
    """
    if isinstance(text, np.dtype):  # object
        return [np.array(items, dtype=object) for items in columns]
    key = tuple(map(tuple, columns))
    same = _same(text)
    whole, parts = _sliced(key, same) if sum(map(len, key)) <= _CACHED_TEXT else _sliced.__wrapped__(key, same)
    wrap = _wrapper_of(same)
    if wrap is None:
        return [whole[a:b] for a, b in parts]  # a slice shares the dtype and the Arrow buffer
    return [wrap(part) for part in parts]


_CACHED_TEXT = 512
"""Up to this many strings a frame's text is kept (:func:`_sliced`): the text of a small result's frame."""


@functools.lru_cache(maxsize=16)
def _sliced(columns: tuple[tuple[str, ...], ...], key: _Same) -> tuple[Any, tuple[Any, ...]]:
    """The strings of ``columns`` as one array of the text dtype, checked by pandas, and each column's part of it.

    Cached for a few recent texts: a small result's frame has the same text as the last call's of the same function
    (its names, environment, units and, most often, flags), so the conversion, pandas' check of the Arrow data and
    the slicing are made once. A column's part is its slice of the checked Arrow data where :func:`_wrapper` makes
    the arrays, else its (start, stop) in the array. The array itself is never handed out, and Arrow data is
    immutable (a frame's column that is written to gets new Arrow data, not a change to this array's), so frames
    that share it stay their own.
    """
    import pyarrow as pa

    text = key.value
    flat = [v for items in columns for v in items]
    whole = text.construct_array_type()(pa.array(flat, type=pa.large_string()), dtype=text)
    bounds = list(itertools.pairwise(itertools.accumulate(map(len, columns), initial=0)))
    if _wrapper_of(key) is None:
        return whole, tuple(bounds)
    checked = whole._pa_array  # the checked data, sliced without a copy: a column's own array over its part
    return whole, tuple(checked.slice(a, b - a) for a, b in bounds)


class _Same:
    """A dtype as a cache key by identity: pandas' string dtype hashes its fields at each look-up (~0.9 us).

    The key holds its dtype, so no other object takes that identity while a cache keeps the key.
    """

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    def __hash__(self) -> int:
        return id(self.value)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Same) and other.value is self.value


_SAME: dict[int, _Same] = {}


def _same(text: Any) -> _Same:
    """The identity key of ``text`` (one per dtype object: a frame's text dtype is one of two, made once)."""
    known = _SAME.get(id(text))
    if known is None or known.value is not text:
        known = _SAME[id(text)] = _Same(text)
    return known


@functools.cache
def _wrapper_of(key: _Same) -> Callable[[Any], Any] | None:
    """:func:`_wrapper` of the dtype of ``key``, found once per dtype (its look-up by identity)."""
    return _wrapper(key.value)


@functools.cache
def _wrapper(text: Any) -> Callable[[Any], Any] | None:
    """A function that wraps a slice of checked Arrow text data as the text dtype's array, or None: use slicing.

    pandas 3.0's slice of an ``ArrowStringArray`` goes through its ``__init__`` (type checks, a cast test and an
    ``ArrowDtype`` made and thrown away): about 7 us a column, a tenth of a small frame (issue 35); pandas 3.1
    slices without them, but with the checks of ``__getitem__`` (1.5 us a column). Where pandas' slice is exactly
    its Arrow data, its dtype, a ``_readonly`` flag and (pandas 3.1) an empty per-array ``_cache`` of derived
    values, a slice is made as that array with those attributes set (a new empty cache each, as pandas'
    ``_from_pyarrow_array`` makes them). The probe here checks, once per process, that such an array has the same
    attributes and values as pandas' own slice; any other pandas keeps public slicing.
    """
    import pyarrow as pa

    cls = text.construct_array_type()
    whole = cls(pa.array(["a", "b", "c"], type=pa.large_string()), dtype=text)
    sliced = whole[1:3]
    names = set(vars(sliced))
    if names - {"_readonly"} != set(vars(whole)) - {"_readonly"}:  # the constructor sets another (as in pandas'
        return None  # own frame's arrays), which a slice lacks: pandas' way
    if not {"_pa_array", "_dtype"} <= names <= {"_pa_array", "_dtype", "_readonly", "_cache"}:
        return None
    flag = {"_readonly": sliced._readonly} if "_readonly" in names else {}
    if flag and flag["_readonly"] is not False:  # a slice of a new array is writable; anything else: pandas' way
        return None
    cached = "_cache" in names
    if cached and sliced._cache != {}:  # derived values made by the slice: pandas' way
        return None

    def wrap(data: Any) -> Any:
        array = object.__new__(cls)
        array.__dict__.update(_pa_array=data, _dtype=text, **flag)
        if cached:
            array._cache = {}
        return array

    made = wrap(whole._pa_array.slice(1, 2))
    same = vars(made).keys() == vars(sliced).keys() and made._pa_array.equals(sliced._pa_array)
    same = same and made._pa_array.type == sliced._pa_array.type and made.dtype is sliced.dtype
    return wrap if same and made.tolist() == sliced.tolist() else None


def _text_dtype() -> Any:
    """The dtype pandas gives a list of strings, where this module can build it; else None.

    numpy ``object``, or pandas 3's ``str`` (pyarrow storage); None before pandas 3 (no public way to hand over
    blocks) and for the python-storage string dtype.
    """
    using_string_dtype = _string_switch()
    return None if using_string_dtype is None else _text_dtype_of(bool(using_string_dtype()))


@functools.cache
def _string_switch() -> Any:
    """The switch pandas reads itself (``using_string_dtype``, without a deprecation warning); None before pandas 3.

    Looked up once, not at every frame: its import statements were a visible part of a small frame's time.
    """
    try:
        from pandas._config import using_string_dtype
        from pandas.api.internals import create_dataframe_from_blocks  # noqa: F401
    except ImportError:
        return None
    return using_string_dtype


@functools.cache
def _text_dtype_of(infer_string: bool) -> Any:
    """:func:`_text_dtype` for a ``future.infer_string`` setting (asked of pandas once)."""
    import pandas as pd

    dtype = pd.Series(["s"]).dtype  # what ``pd.DataFrame`` infers for a list column too (``sanitize_array``)
    if isinstance(dtype, np.dtype):  # object: text as numpy objects
        return dtype
    if isinstance(dtype, pd.StringDtype) and dtype.storage == "pyarrow":
        return dtype
    return None


@functools.cache
def _assembler() -> Callable[[list[tuple[Any, Any]], Any, Any], pd.DataFrame]:
    """A function that makes the frame of :func:`_blocks`' blocks, its index and its column labels.

    pandas' public ``create_dataframe_from_blocks`` makes each block through a generic helper (a dtype dispatch, a
    coercion that leaves these dtypes alone) and then checks the frame's shape block by block: half of its time for
    a small frame of 16 blocks (issue 35). The blocks here are built to that shape (:func:`_blocks`), so where
    pandas has the same block constructors, the frame is made with the block class pandas picks for each dtype, and
    the block manager without the checks. A probe compares such a frame with the public function's, once per
    process (block classes, placements, values, dtypes, axes); any difference, or another pandas, keeps the public
    function.
    """
    from pandas.api.internals import create_dataframe_from_blocks

    try:
        fast = _direct_assembler()
    except (ImportError, AttributeError):  # another pandas' internals
        return create_dataframe_from_blocks
    return fast if _same_assembly(fast, create_dataframe_from_blocks) else create_dataframe_from_blocks


def _direct_assembler() -> Callable[[list[tuple[Any, Any]], Any, Any], pd.DataFrame]:
    """:func:`_assembler`'s direct way, over pandas' internal block classes (for the probe to compare).

    The block class is found once per numpy dtype, and once per extension array type (a dtype's hash is slow for
    pandas' own dtypes). An extension array that pandas reshapes or converts for its block (a dtype that supports
    2-D blocks, datetimes, durations) sends the frame to the public function.
    """
    import pandas as pd
    from pandas._libs.internals import BlockPlacement
    from pandas.api.internals import create_dataframe_from_blocks
    from pandas.core.arrays import DatetimeArray, TimedeltaArray
    from pandas.core.internals.blocks import get_block_type
    from pandas.core.internals.managers import BlockManager

    from_mgr = pd.DataFrame._from_mgr
    kinds: dict[Any, Any] = {}

    def kind_of(values: Any) -> Any:
        """The block class for ``values``, or None where pandas' own helper must make the block."""
        if isinstance(values, np.ndarray):
            return get_block_type(values.dtype)
        dtype = values.dtype
        if getattr(dtype, "_supports_2d", True) or isinstance(values, (DatetimeArray, TimedeltaArray)):
            return None
        return get_block_type(dtype)

    def assemble(blocks: list[tuple[Any, Any]], index: Any, labels: Any) -> pd.DataFrame:
        made = []
        for values, where in blocks:
            key = values.dtype if type(values) is np.ndarray else type(values)
            kind = kinds.get(key, False)
            if kind is False:
                kind = kinds[key] = kind_of(values)
            if kind is None:
                return create_dataframe_from_blocks(blocks, index, labels)
            made.append(kind(values, ndim=2, placement=BlockPlacement(where)))
        manager = BlockManager(made, [labels, index], verify_integrity=False)
        return from_mgr(manager, manager.axes)

    return assemble


def _same_assembly(fast: Callable[..., pd.DataFrame], public: Callable[..., pd.DataFrame]) -> bool:
    """Whether ``fast`` makes the frame ``public`` makes, on blocks of every kind :func:`_blocks` hands over."""
    import pandas as pd

    columns = {
        "f": np.array([1.0, -np.nan]),
        "i": np.array([1, 2]),
        "t": ["a", "b"],
        "b": np.array([True, False]),
        "o": np.array([None, None], dtype=object),
        "g": np.array([2.5, 3.5]),
        "m": pd.array([True, None], dtype="boolean"),
    }
    text = _text_dtype()
    blocks = _blocks(columns, 2, text) if text is not None else None
    if blocks is None:
        return False
    made, expected = (f(blocks, pd.RangeIndex(2), pd.Index(list(columns))) for f in (fast, public))
    mine, theirs = made._mgr, expected._mgr
    if len(mine.blocks) != len(theirs.blocks) or not made.equals(expected):
        return False
    for a, b in zip(mine.blocks, theirs.blocks, strict=True):
        same_values = a.values is b.values and a.dtype == b.dtype and type(a) is type(b)
        if not (same_values and a.mgr_locs.as_array.tolist() == b.mgr_locs.as_array.tolist()):
            return False
    return made.dtypes.equals(expected.dtypes) and mine.axes[0].equals(theirs.axes[0])
