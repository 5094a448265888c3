"""The frame's text columns as arrays of the text dtype, made without pandas' per-slice checks where that is safe.

On pandas 3.0 a slice of an ``ArrowStringArray`` went through its ``__init__`` again (about 7 us a column, issue
35); :func:`~nsightx._results.framebuild._wrapper` makes the same array directly, only where a probe finds that
pandas' slice holds nothing else than its Arrow data, dtype, ``_readonly`` flag and (pandas 3.1) an empty
``_cache``, and no attribute the constructor sets is missing from it. These tests compare each text column with
pandas' own slice, on whatever pandas runs them (3.0.6 and 3.1 both take the direct way), and check that any other
kind of array keeps pandas' slicing.
"""

from __future__ import annotations

import itertools
from typing import Any

import pandas as pd
import pyarrow as pa
import pytest
from _paths import FIXTURES

import nsightx
from nsightx._results import framebuild

TEXTS = [["a", "bb"], [""], ["x", "y", "z", "x"], ["é", "long text " * 5]]


def _text() -> Any:
    text = framebuild._text_dtype()
    if text is None or not isinstance(text, pd.StringDtype):
        pytest.skip("text columns are numpy objects here (no Arrow-backed text dtype)")
    return text


def test_each_text_column_is_pandas_slice_of_the_whole() -> None:
    text = _text()
    made = framebuild._strings(TEXTS, text)
    flat = pa.array([v for items in TEXTS for v in items], type=pa.large_string())
    whole = text.construct_array_type()(flat, dtype=text)
    bounds = list(itertools.accumulate(map(len, TEXTS), initial=0))
    for array, items, (a, b) in zip(made, TEXTS, itertools.pairwise(bounds), strict=True):
        expected = whole[a:b]
        assert type(array) is type(expected)
        assert vars(array).keys() == vars(expected).keys()
        assert array.dtype is expected.dtype
        assert array._pa_array.type == expected._pa_array.type
        assert array._pa_array.equals(expected._pa_array)
        assert array.tolist() == items
        pd.testing.assert_extension_array_equal(array, expected)


def test_fixture_frames_equal_pandas_own_frame_on_this_pandas() -> None:
    for name in ("sweep-events.parquet", "sweep-cupti.parquet"):
        result = nsightx.load(FIXTURES / "gpu-results" / name)
        frame = result.to_dataframe()
        rebuilt = pd.DataFrame({c: frame[c].tolist() for c in frame.columns if frame[c].dtype == _text()})
        for column in rebuilt.columns:
            pd.testing.assert_series_equal(frame[column], rebuilt[column], check_exact=True)
        frame.loc[0, "Metric"] = "changed"  # its text arrays are its own
        assert result.to_dataframe().loc[0, "Metric"] != "changed"


class _Extra(pd.arrays.ArrowStringArray):
    """An array whose constructor keeps one more attribute: a direct wrapper would not make it."""

    def __init__(self, values: Any, *, dtype: Any = None) -> None:
        super().__init__(values, dtype=dtype)
        self.extra = True


class _ExtraDtype(pd.StringDtype):
    """A text dtype whose arrays are :class:`_Extra`."""

    def construct_array_type(self) -> type[_Extra]:  # type: ignore[override]
        return _Extra


def test_arrays_with_other_attributes_keep_pandas_slicing() -> None:
    _text()
    text = _ExtraDtype(storage="pyarrow", na_value=float("nan"))
    assert framebuild._wrapper(text) is None
    made = framebuild._strings([["a"], ["b", "c"]], text)
    assert [type(a) for a in made] == [_Extra, _Extra]
    assert [a.tolist() for a in made] == [["a"], ["b", "c"]]
