"""The aggregated frame's blocks made into a frame without pandas' generic block helper and shape checks (issue 35).

:func:`~nsightx._results.framebuild._assembler` takes pandas' block classes directly where a probe finds that the
frame is the one ``pandas.api.internals.create_dataframe_from_blocks`` makes; these tests compare both on every
kind of column, check that an array pandas reshapes for its block (datetimes with a time zone) still gets
``pd.DataFrame``'s frame, and that the probe refuses an assembler whose frame differs.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest
from test_framebuild import _kinds, _same

from nsightx._results import framebuild
from nsightx._results.framebuild import frame_of

N = 3


def _public() -> Any:
    internals = pytest.importorskip("pandas.api.internals")
    if framebuild._text_dtype() is None:
        pytest.skip("no block hand-over on this pandas")
    return internals.create_dataframe_from_blocks


def test_direct_frame_is_the_public_functions() -> None:
    public = _public()
    columns = _kinds()
    text = framebuild._text_dtype()
    blocks = framebuild._blocks(columns, N, text)
    assert blocks is not None
    made = framebuild._assembler()(blocks, pd.RangeIndex(N), pd.Index(list(columns)))
    expected = public(framebuild._blocks(columns, N, text), pd.RangeIndex(N), pd.Index(list(columns)))
    _same(made, expected)
    assert [type(b) for b in made._mgr.blocks] == [type(b) for b in expected._mgr.blocks]
    made.iloc[0, 0] = -1  # the frame's blocks take writes as pandas' own
    assert made.iloc[0, 0] == -1 and expected.iloc[0, 0] != -1


def test_this_pandas_takes_the_direct_way() -> None:
    public = _public()
    assert framebuild._assembler() is not public, "the probe found the direct frame different on this pandas"


def test_arrays_pandas_reshapes_get_pandas_frame() -> None:
    _public()
    stamps = pd.Series(pd.date_range("2026-01-01", periods=N, tz="UTC"))
    columns = {**_kinds(), "When": stamps, "Span": pd.Series(pd.to_timedelta(np.arange(N), unit="s"))}
    _same(frame_of(columns, N), pd.DataFrame(columns))


def test_probe_refuses_a_different_frame() -> None:
    public = _public()

    def reversed_blocks(blocks: list[tuple[Any, Any]], index: Any, labels: Any) -> pd.DataFrame:
        return public(blocks[::-1], index, labels)  # the same frame's columns, other blocks' order

    def copied(blocks: list[tuple[Any, Any]], index: Any, labels: Any) -> pd.DataFrame:
        return public([(np.array(a) if isinstance(a, np.ndarray) else a, w) for a, w in blocks], index, labels)

    assert framebuild._same_assembly(public, public)
    assert not framebuild._same_assembly(reversed_blocks, public)
    assert not framebuild._same_assembly(copied, public)
