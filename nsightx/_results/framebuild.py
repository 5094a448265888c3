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
from collections.abc import Mapping
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

    blocks = _blocks(columns, n)
    if blocks is None:
        return pd.DataFrame(columns)
    from pandas.api.internals import create_dataframe_from_blocks

    return create_dataframe_from_blocks(blocks, pd.RangeIndex(n), pd.Index(list(columns)))


def _blocks(columns: Mapping[str, Any], n: int) -> list[tuple[Any, Any]] | None:
    """The frame's blocks as (array, column positions), or None where ``pd.DataFrame`` must decide."""
    text = _text_dtype()
    if text is None or not all(type(name) is str for name in columns):
        return None
    stacked: dict[np.dtype[Any], tuple[list[Any], list[int]]] = {}
    single: list[tuple[Any, Any]] = []
    for i, value in enumerate(columns.values()):
        part = _part(value, n, text)
        if part is None:
            return None
        if isinstance(part, np.ndarray):
            arrays, where = stacked.setdefault(part.dtype, ([], []))
            arrays.append(part)
            where.append(i)
        else:
            single.append((part, np.array([i], dtype=np.intp)))
    for arrays, where in stacked.values():
        single.append((np.vstack(arrays), np.array(where, dtype=np.intp)))
    return single


def _part(value: Any, n: int, text: Any) -> Any:
    """One column as ``pd.DataFrame`` would store it: a 1-D numpy array (stacked by dtype) or an extension array.

    None for a column of another kind (its dtype is left to pandas).
    """
    import pandas as pd

    if isinstance(value, np.ndarray):
        if value.ndim != 1 or len(value) != n:
            return None
        if value.dtype in _NUMPY_KINDS:
            return value
        if value.dtype == object and all(type(v) is str for v in value.tolist()):
            return _strings(value.tolist(), text)
        return None
    if isinstance(value, list):
        return _listed(value, n, text) if len(value) == n else None
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


def _listed(items: list[Any], n: int, text: Any) -> Any:
    """A list column as pandas infers it, for lists of one plain type (else None)."""
    kinds = set(map(type, items))
    if len(kinds) != 1:
        return None
    kind = next(iter(kinds))
    if kind is str:
        return _strings(items, text)
    if kind is bool:
        return np.array(items, dtype=np.bool_)
    if kind is int and _INT64[0] <= min(items) and max(items) <= _INT64[1]:
        return np.array(items, dtype=np.int64)
    if kind is float and not any(v != v for v in items):
        return np.array(items, dtype=np.float64)
    return None


def _strings(items: list[str], text: Any) -> Any:
    """A column of strings with the dtype pandas infers for it (``text``)."""
    if text == object:
        return np.array(items, dtype=object)
    import pyarrow as pa

    return text.construct_array_type()(pa.array(items, type=pa.large_string()), dtype=text)


def _text_dtype() -> Any:
    """The dtype pandas gives a list of strings, where this module can build it; else None.

    numpy ``object``, or pandas 3's ``str`` (pyarrow storage); None before pandas 3 (no public way to hand over
    blocks) and for the python-storage string dtype.
    """
    import pandas as pd

    return _text_dtype_of(pd.__version__, bool(pd.get_option("future.infer_string")))


@functools.cache
def _text_dtype_of(version: str, infer_string: bool) -> Any:
    """:func:`_text_dtype` for a pandas version and ``future.infer_string`` setting (asked of pandas once)."""
    import pandas as pd

    try:
        from pandas.api.internals import create_dataframe_from_blocks  # noqa: F401
    except ImportError:
        return None
    dtype = pd.DataFrame({"s": ["s"]})["s"].dtype
    if dtype == object:
        return dtype
    if isinstance(dtype, pd.StringDtype) and dtype.storage == "pyarrow":
        return dtype
    return None
