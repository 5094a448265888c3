"""Statistics checked against SciPy and hand-computed values."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from nsightx._results.stats import betainc, ci_half_width, t_cdf, t_ppf


@pytest.mark.parametrize("df", [1, 2, 3, 4, 5, 9, 19, 29, 99, 999])
@pytest.mark.parametrize("q", [0.9, 0.975, 0.995])
def test_t_ppf_matches_scipy(df, q):
    assert t_ppf(q, df) == pytest.approx(stats.t.ppf(q, df), rel=1e-9)


@pytest.mark.parametrize("t", [-3.0, -0.5, 0.0, 0.7, 2.5])
def test_t_cdf_matches_scipy(t):
    assert t_cdf(t, 7) == pytest.approx(stats.t.cdf(t, 7), abs=1e-12)


def test_betainc_edges():
    assert betainc(2, 3, 0.0) == 0.0 and betainc(2, 3, 1.0) == 1.0
    assert betainc(1, 1, 0.3) == pytest.approx(0.3)


def test_ci_half_width_hand_computed():
    # n = 2, std = 1: t(0.975, 1) = 12.7062047...; half = 12.7062 / sqrt(2)
    assert ci_half_width(1.0, 2) == pytest.approx(12.706204736174707 / math.sqrt(2), rel=1e-9)
    assert math.isnan(ci_half_width(1.0, 1))


def test_ci_matches_scipy_interval():
    x = np.array([10.0, 11.0, 9.5, 10.4, 10.1])
    lo, hi = stats.t.interval(0.95, len(x) - 1, loc=x.mean(), scale=stats.sem(x))
    half = ci_half_width(float(x.std(ddof=1)), len(x))
    assert x.mean() - half == pytest.approx(lo) and x.mean() + half == pytest.approx(hi)


def test_ci_half_widths_agree_with_ci_half_width_to_the_bit():
    from nsightx._results.stats import ci_half_widths

    std = [1.0, 0.5, math.nan, 2.0, math.inf, 3.25, 0.0]
    n = [2, 5, 5, 1, 4, 30, 3]
    got = ci_half_widths(std, n)
    for g, s, k in zip(got.tolist(), std, n, strict=True):
        want = ci_half_width(s, k)
        assert (math.isnan(g) and math.isnan(want)) or g == want
