"""The small-result check of :func:`~nsightx._results.extremes.rescale_extremes` changes no number (issue 35).

Up to ``_FEW`` rows the function first asks, over Python floats, whether any row lies at an edge of the float
range; where none does it returns the statistics untouched. The rows drawn here mix ordinary values with every
edge the numpy checks look for (huge and tiny sizes, zeros of both signs, infinities of one or both signs, NaN),
and the statistics must be those of the numpy checks alone, bit for bit.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nsightx._results import extremes
from nsightx._results.dataframe import _plain_moments
from nsightx._results.stats import SAFE_HIGH, SAFE_LOW

_VALUES = st.one_of(
    st.floats(1e-6, 1e3),
    st.sampled_from([0.0, -0.0, np.inf, -np.inf, np.nan, sys.float_info.max, -sys.float_info.max, 5e-324]),
    st.sampled_from([SAFE_LOW, SAFE_LOW / 2, SAFE_HIGH, SAFE_HIGH * 2, 1e-300, 1e200, -1e200, 1.7e308]),
    st.floats(allow_nan=True, allow_infinity=True),
)


def _rescaled(values: Any, ids: Any, count: int, few: int) -> dict[str, Any]:
    """``rescale_extremes`` of the groups' plain statistics, with ``_FEW`` set to ``few`` (0: numpy's checks)."""
    kept = extremes._FEW
    extremes._FEW = few
    try:
        out = _plain_moments(values, ids, count, True)
        return extremes.rescale_extremes(values, ids, True, out, _plain_moments)
    finally:
        extremes._FEW = kept


def _bits(out: dict[str, Any]) -> dict[str, str]:
    """Each column's bytes, as hex: equal only where every number is equal bit for bit (NaN signs too)."""
    return {name: np.asarray(column).tobytes().hex() for name, column in out.items()}


@settings(max_examples=300, deadline=None)
@given(rows=st.lists(st.lists(_VALUES, min_size=1, max_size=5), min_size=1, max_size=6))
def test_small_results_get_the_numbers_of_the_numpy_checks(rows: list[list[float]]) -> None:
    values = np.array([v for row in rows for v in row], dtype=np.float64)
    ids = np.repeat(np.arange(len(rows), dtype=np.int64), [len(row) for row in rows])
    with np.errstate(all="ignore"):
        assert _bits(_rescaled(values, ids, len(rows), extremes._FEW)) == _bits(_rescaled(values, ids, len(rows), 0))


@pytest.mark.parametrize("size", [1e-300, 1e200, 1.5e308])
def test_a_small_result_at_an_edge_is_still_rescaled(size: float) -> None:
    values = np.array([size, size * 1.1, size * 1.05])
    ids = np.zeros(3, dtype=np.int64)
    with np.errstate(all="ignore"):
        plain = _plain_moments(values, ids, 1, True)
        out = _rescaled(values, ids, 1, extremes._FEW)
    spread = float(plain["StdDev"][0])
    assert not (np.isfinite(spread) and spread > 0)  # the plain arithmetic over- or underflowed
    assert np.isfinite(out["StdDev"][0]) and out["StdDev"][0] > 0
    assert not extremes._inside([size])
