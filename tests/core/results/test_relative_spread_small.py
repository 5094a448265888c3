"""``RelativeStdDevPct`` of a few rows, over Python floats, is the numpy path's, bit for bit.

Means of zero (both signs), NaN, infinities and subnormals, deviations past ``1.8e308 / 100``: each row's
``100 * std / |avg|`` (NaN where not finite) must be the same bytes on both paths.
"""

from __future__ import annotations

import sys

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from nsightx._results.dataframe import _few_relative_spread, _relative_spread

_EDGES = [0.0, -0.0, 5e-324, -5e-324, 1e-300, 1.0, -1.0, 2e306, sys.float_info.max, np.inf, -np.inf, np.nan]
_NUMBER = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.sampled_from(_EDGES), st.floats(-1e3, 1e3))


@settings(max_examples=400, deadline=None)
@given(rows=st.lists(st.tuples(_NUMBER, _NUMBER), min_size=0, max_size=12))
def test_few_rows_get_the_numpy_paths_relative_spread(rows: list[tuple[float, float]]) -> None:
    std = np.array([s for s, _ in rows], dtype=np.float64)
    avg = np.array([a for _, a in rows], dtype=np.float64)
    assert _few_relative_spread(std, avg).tobytes() == _relative_spread(std.copy(), avg.copy()).tobytes()


def test_an_overflowing_product_keeps_the_ratio() -> None:
    std, avg = np.array([1e307, 1e307, 0.0]), np.array([1e306, 0.0, -0.0])
    assert _few_relative_spread(std, avg).tolist()[0] == 1000.0
    assert _few_relative_spread(std, avg).tobytes() == _relative_spread(std, avg).tobytes()
