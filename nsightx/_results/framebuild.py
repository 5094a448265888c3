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
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import pandas as pd

_INT64 = (-(2**63), 2**63 - 1)
_NUMPY_KINDS = frozenset({np.dtype(np.int64), np.dtype(np.float64), np.dtype(np.bool_)})
"""numpy dtypes ``pd.DataFrame`` keeps as they are (a numpy object array is inferred, so it is not among them)."""


def frame_of(columns: Mapping[str, Any], n: int) -> pd.DataFrame:
    """``pd.DataFrame(columns)`` for columns of ``n`` rows each, with a ``RangeIndex`` (see the module docstring)."""
    import pandas as pd

    text = _text_dtype()
    blocks = None if text is None else _blocks(columns, n, text)
    if blocks is None:
        return pd.DataFrame(columns)
    from pandas.api.internals import create_dataframe_from_blocks

    labels = _labels(tuple(columns), text).view()  # its own object (a user may rename it), over the same data
    return create_dataframe_from_blocks(blocks, pd.RangeIndex(n), labels)


@functools.lru_cache(maxsize=64)
def _labels(names: tuple[str, ...], text: Any) -> pd.Index:
    """``pd.Index(names)`` for the column names of a frame (the same few sets of names recur in a process)."""
    import pandas as pd

    return pd.Index(_strings([list(names)], text)[0] if not isinstance(text, np.dtype) else list(names))


class _Text(list[str]):
    """A column of strings, made into the text dtype's array together with the frame's other text columns."""


def _blocks(columns: Mapping[str, Any], n: int, text: Any) -> list[tuple[Any, Any]] | None:
    """The frame's blocks as (array, column positions), or None where ``pd.DataFrame`` must decide.

    A numpy column of a kept dtype (most of the frame's) is taken without a call of :func:`_part`; the positions
    of single-column blocks are slices of one ``arange`` (a new array each otherwise).
    """
    stacked: dict[np.dtype[Any], tuple[list[Any], list[int]]] = {}
    single: list[tuple[Any, Any]] = []
    texts: list[list[str]] = []
    text_at: list[int] = []
    kept = _NUMPY_KINDS
    for i, (name, value) in enumerate(columns.items()):
        if type(name) is not str:
            return None
        if type(value) is np.ndarray and value.dtype in kept and value.ndim == 1 and len(value) == n:
            part: Any = value
        else:
            part = _part(value, n)
            if part is None:
                return None
            if isinstance(part, _Text):
                texts.append(part)
                text_at.append(i)
                continue
        if isinstance(part, np.ndarray):
            arrays, where = stacked.setdefault(part.dtype, ([], []))
            arrays.append(part)
            where.append(i)
        else:
            single.append((part, i))
    for array, i in zip(_strings(texts, text), text_at, strict=True):
        if isinstance(array, np.ndarray):  # text stored as numpy objects: one block with the other object columns
            arrays, where = stacked.setdefault(array.dtype, ([], []))
            arrays.append(array)
            where.append(i)
        else:
            single.append((array, i))
    positions = np.arange(len(columns), dtype=np.intp)
    blocks = [(array, positions[i : i + 1]) for array, i in single]
    for arrays, where in stacked.values():  # np.array of equal 1-D arrays: np.vstack's rows, without its checks
        blocks.append((np.array(arrays), np.array(where, dtype=np.intp)))
    return blocks


def _part(value: Any, n: int) -> Any:
    """One column as ``pd.DataFrame`` would store it, or None for a column whose dtype is left to pandas.

    A 1-D numpy array (stacked with the others of its dtype), an extension array, or :class:`_Text`. A column of
    ``None`` only (the host backend's ``GPU`` and rated clocks) stays a numpy object array, as pandas keeps it;
    strings mixed with ``None`` are left to pandas (it makes them ``str`` with NaN).
    """
    if isinstance(value, np.ndarray):
        if value.ndim != 1 or len(value) != n:
            return None
        if value.dtype in _NUMPY_KINDS:
            return value
        if value.dtype == object:
            items = value.tolist()
            if all(type(v) is str for v in items):
                return _Text(items)
            return value if all(v is None for v in items) else None  # kept as objects (an unknown GPU, clock)
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

    numpy objects, or slices of one Arrow-backed array: one conversion and one array check for all the frame's
    text columns, where pandas converted each on its own (a slice of an ``ArrowStringArray`` is pandas' public
    ``__getitem__``, which pandas 3 makes without checking the Arrow data again).
    """
    if isinstance(text, np.dtype):  # object
        return [np.array(items, dtype=object) for items in columns]
    flat = tuple(v for items in columns for v in items)
    whole = _checked(flat, text) if len(flat) <= _CACHED_TEXT else _checked.__wrapped__(flat, text)
    bounds = list(itertools.accumulate(map(len, columns), initial=0))
    wrap = _wrapper(text)
    if wrap is None:
        return [whole[a:b] for a, b in itertools.pairwise(bounds)]  # a slice shares the dtype and the Arrow buffer
    chunked = whole._pa_array  # the checked data, sliced without a copy: a column's own array over its part
    return [wrap(chunked.slice(a, b - a)) for a, b in itertools.pairwise(bounds)]


_CACHED_TEXT = 512
"""Up to this many strings a frame's text is kept (:func:`_checked`): the text of a small result's frame."""


@functools.lru_cache(maxsize=16)
def _checked(flat: tuple[str, ...], text: Any) -> Any:
    """The strings ``flat`` as one array of the text dtype, checked by pandas (cached for a few recent texts).

    A small result's frame has the same text as the last call's of the same function (its names, environment,
    units and, most often, flags): the conversion and pandas' check of the Arrow data are made once, then each
    frame takes slices of the cached array. The array itself is never handed out, and Arrow data is immutable (a
    frame's column that is written to gets new Arrow data, not a change to this array's), so frames that share
    it stay their own.
    """
    import pyarrow as pa

    return text.construct_array_type()(pa.array(flat, type=pa.large_string()), dtype=text)


@functools.cache
def _wrapper(text: Any) -> Callable[[Any], Any] | None:
    """A function that wraps a slice of checked Arrow text data as the text dtype's array, or None: use slicing.

    pandas 3.0's slice of an ``ArrowStringArray`` goes through its ``__init__`` (type checks, a cast test and an
    ``ArrowDtype`` made and thrown away): about 7 us a column, a tenth of a small frame (issue 35); pandas 3.1
    slices without them. Where pandas' slice is exactly its Arrow data, its dtype and a ``_readonly`` flag (no
    other attribute, such as pandas 3.1's per-array cache), a slice is made as that array with those attributes
    set. The probe here checks, once per process, that such an array has the same attributes and values as
    pandas' own slice; any other pandas keeps public slicing.
    """
    import pyarrow as pa

    cls = text.construct_array_type()
    whole = cls(pa.array(["a", "b", "c"], type=pa.large_string()), dtype=text)
    sliced = whole[1:3]
    names = set(vars(sliced))
    if not {"_pa_array", "_dtype"} <= names <= {"_pa_array", "_dtype", "_readonly"}:
        return None
    flag = {"_readonly": sliced._readonly} if "_readonly" in names else {}
    if flag and flag["_readonly"] is not False:  # a slice of a new array is writable; anything else: pandas' way
        return None

    def wrap(data: Any) -> Any:
        array = object.__new__(cls)
        array.__dict__.update(_pa_array=data, _dtype=text, **flag)
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
