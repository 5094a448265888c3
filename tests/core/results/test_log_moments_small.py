""":func:`~nsightx._results.stats.log_moments` of a few rows, summed over Python floats, is the numpy path's.

Up to ``_FEW_ROWS`` rows the logs' group sums run over Python floats (one ``np.log`` call for all rows, as before);
the minima, log means and log variances must be the numpy path's bit for bit, on values with zeros of both
signs, negatives, subnormals, infinities and NaN, in any group order.
"""

from __future__ import annotations

import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nsightx._results import stats

_VALUES = st.one_of(
    st.floats(1e-6, 1e6),
    st.sampled_from([0.0, -0.0, -1.0, 5e-324, sys.float_info.max, np.inf, -np.inf, np.nan, 1.0]),
    st.floats(allow_nan=True, allow_infinity=True),
)


def _hex(arrays: tuple[np.ndarray, ...]) -> list[str]:
    """Each array's bytes, as hex (NaN signs and payloads compared too)."""
    return [np.asarray(a, dtype=np.float64).tobytes().hex() for a in arrays]


@settings(max_examples=300, deadline=None)
@given(
    rows=st.lists(st.tuples(_VALUES, st.integers(0, 4)), min_size=1, max_size=30),
    given_minimum=st.booleans(),
)
def test_few_rows_get_the_numpy_paths_log_moments(rows: list[tuple[float, int]], given_minimum: bool) -> None:
    values = np.array([v for v, _ in rows], dtype=np.float64)
    ids = np.array([g for _, g in rows], dtype=np.int64)
    minimum = None
    if given_minimum:
        minimum = np.full(5, np.inf)
        np.minimum.at(minimum, ids, np.where(np.isfinite(values), values, np.inf))
    with np.errstate(all="ignore"):
        few = stats.log_moments(values, ids, 5, None if minimum is None else minimum.copy())
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(stats, "_FEW_ROWS", 0)
            numpy = stats.log_moments(values, ids, 5, None if minimum is None else minimum.copy())
    assert _hex(few) == _hex(numpy)
