"""Two-sample statistics for ``nsightx compare``, with no SciPy dependency (the tests check them against SciPy).

- :func:`mann_whitney_u`: two-sided Mann-Whitney U test; exact distribution for small samples without ties,
  else the normal approximation with tie and continuity corrections (what ``scipy.stats.mannwhitneyu`` does
  with ``method="auto"``).
- :func:`bootstrap_ratio_ci`: percentile bootstrap interval of ``mean(new) / mean(baseline)``, resampling each
  sample independently with a fixed seed, so the same inputs always give the same interval.
- :func:`holm`: Holm's step-down adjustment of p-values for testing many rows of a sweep at once.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

EXACT_MAX = 50
"""Largest sample size (each side) for which the exact U distribution is used when there are no ties."""


def _ranks(values: Sequence[float]) -> tuple[list[float], list[int]]:
    """Mid-ranks (1-based) of ``values`` and the sizes of the tie groups."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    ties: list[int] = []
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        mid = (i + j) / 2.0 + 1.0
        for k in range(i, j + 1):
            ranks[order[k]] = mid
        ties.append(j - i + 1)
        i = j + 1
    return ranks, ties


def _u_counts(m: int, n: int) -> list[int]:
    """Number of arrangements giving each U in ``0..m*n`` (coefficients of the Gaussian binomial [m+n, m]_q)."""
    size = m * n + 1
    poly = [0] * size
    poly[0] = 1
    for i in range(1, m + 1):
        # multiply by (1 - q^(n+i)), then divide by (1 - q^i); both keep integer coefficients
        shift = n + i
        for d in range(size - 1, shift - 1, -1):
            poly[d] -= poly[d - shift]
        for d in range(i, size):
            poly[d] += poly[d - i]
    return poly


def _normal_sf(z: float) -> float:
    return 0.5 * math.erfc(z / math.sqrt(2.0))


def mann_whitney_u(x: Sequence[float], y: Sequence[float]) -> tuple[float, float]:
    """Two-sided Mann-Whitney U test of ``x`` against ``y``.

    Args:
        x: First sample (e.g. baseline runs).
        y: Second sample (e.g. new runs).

    Returns:
        ``(U, p)``: U of ``x`` (the number of pairs with ``x > y``, ties counting one half) and the two-sided
        p-value. ``p`` is 1.0 when either sample is empty.
    """
    m, n = len(x), len(y)
    if m == 0 or n == 0:
        return math.nan, 1.0
    ranks, ties = _ranks([*x, *y])
    u = sum(ranks[:m]) - m * (m + 1) / 2.0
    if all(t == 1 for t in ties) and max(m, n) <= EXACT_MAX:
        counts = _u_counts(m, n)
        total = sum(counts)
        k = round(max(u, m * n - u))
        upper = sum(counts[k:])
        return u, min(1.0, 2.0 * upper / total)
    big_n = m + n
    tie_term = sum(t**3 - t for t in ties) / (big_n * (big_n - 1))
    var = m * n / 12.0 * ((big_n + 1) - tie_term)
    if var <= 0:
        return u, 1.0
    mean = m * n / 2.0
    z = (abs(u - mean) - 0.5) / math.sqrt(var)
    return u, min(1.0, 2.0 * _normal_sf(max(z, 0.0)))


def bootstrap_ratio_ci(
    baseline: Sequence[float],
    new: Sequence[float],
    *,
    confidence: float = 0.95,
    resamples: int = 4000,
    seed: int = 0,
) -> tuple[float, float]:
    """Percentile bootstrap interval of ``mean(new) / mean(baseline)``.

    Args:
        baseline: Baseline runs.
        new: New runs.
        confidence: Two-sided level of the interval.
        resamples: Bootstrap resamples.
        seed: Seed of the generator (fixed: the same inputs give the same interval).

    Returns:
        ``(lower, upper)``; NaN when a sample has fewer than 2 values or a resampled baseline mean is 0.
    """
    import numpy as np

    a = np.asarray(baseline, dtype="float64")
    b = np.asarray(new, dtype="float64")
    if a.size < 2 or b.size < 2:
        return math.nan, math.nan
    rng = np.random.default_rng(seed)
    ma = a[rng.integers(0, a.size, size=(resamples, a.size))].mean(axis=1)
    mb = b[rng.integers(0, b.size, size=(resamples, b.size))].mean(axis=1)
    if np.any(ma == 0):
        return math.nan, math.nan
    ratios = mb / ma
    tail = 50.0 * (1.0 - confidence)
    lo, hi = np.percentile(ratios, [tail, 100.0 - tail])
    return float(lo), float(hi)


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm-adjusted p-values (family-wise error control over all rows compared at once); NaN stays NaN."""
    idx = [i for i, p in enumerate(pvalues) if not math.isnan(p)]
    order = sorted(idx, key=lambda i: pvalues[i])
    out = [math.nan] * len(pvalues)
    running = 0.0
    k = len(order)
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (k - rank) * pvalues[i]))
        out[i] = running
    return out
