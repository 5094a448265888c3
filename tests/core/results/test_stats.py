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


def test_mean_intervals_agree_with_mean_interval():
    """The vectorised interval (the DataFrame's, the flags') is the reference rule's, row by row."""
    from nsightx._results.stats import log_moments, mean_interval, mean_intervals

    rng = np.random.default_rng(11)
    rows = [list(rng.lognormal(rng.uniform(-5, 20), rng.uniform(0.0005, 2.5), rng.integers(2, 30))) for _ in range(200)]
    rows += [[0.0, 1.0, 4.0], [-2.0, 1.0, 3.0], [2.5, 2.5], [1.0], [0.0, 0.0], [1e-300, 1.0, 1e150]]
    ids = np.repeat(np.arange(len(rows)), [len(r) for r in rows])
    value = np.concatenate([np.asarray(r, dtype=np.float64) for r in rows])
    mean = np.array([math.fsum(r) / len(r) for r in rows])
    std = np.array([np.std(r, ddof=1) if len(r) > 1 else np.nan for r in rows])
    n = np.array([len(r) for r in rows])
    minimum, log_mean, log_var = log_moments(value, ids, len(rows))
    lower, upper = mean_intervals(mean, std, n, minimum, log_mean, log_var)
    for i, r in enumerate(rows):
        assert (lower[i], upper[i]) == pytest.approx(mean_interval(r), rel=1e-9, nan_ok=True), r


def test_mean_interval_of_skewed_positive_values():
    from nsightx._results.stats import mean_interval

    lower, upper = mean_interval([100.0, 110.0, 120.0, 5000.0])
    assert 100.0 * 0.025**0.25 == pytest.approx(lower)  # the floor that holds for any positive quantity
    assert upper > 5000.0
    assert mean_interval([3.0, 3.0]) == (3.0, 3.0)
    assert all(math.isnan(x) for x in mean_interval([1.0, math.inf]))
