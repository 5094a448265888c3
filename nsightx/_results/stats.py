"""Small statistics helpers with no SciPy dependency: Student's t quantiles and summary statistics.

The t quantile comes from inverting the regularised incomplete beta function (continued-fraction evaluation,
then bisection); it matches ``scipy.stats.t.ppf`` to about 1e-9, which the tests check.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

    Floats = np.ndarray[Any, np.dtype[np.float64]]
    Ints = np.ndarray[Any, np.dtype[np.int64]]


def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction for the incomplete beta function (modified Lentz's method)."""
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 300):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 1e-15:
            break
    return h


def betainc(a: float, b: float, x: float) -> float:
    """Regularised incomplete beta function I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    ln_front = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    front = math.exp(ln_front)
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def t_cdf(t: float, df: float) -> float:
    """Cumulative distribution function of Student's t with ``df`` degrees of freedom."""
    x = df / (df + t * t)
    tail = 0.5 * betainc(df / 2.0, 0.5, x)
    return 1.0 - tail if t >= 0 else tail


@functools.cache
def t_ppf(q: float, df: int) -> float:
    """Quantile of Student's t: the ``t`` with ``t_cdf(t, df) == q`` (``0.5 < q < 1``)."""
    if not 0.5 <= q < 1.0:
        raise ValueError(f"t_ppf needs 0.5 <= q < 1, got {q}")
    lo, hi = 0.0, 1.0
    while t_cdf(hi, df) < q:
        hi *= 2.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if t_cdf(mid, df) < q:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-12 * max(1.0, hi):
            break
    return 0.5 * (lo + hi)


def ci_half_width(std: float, n: int, confidence: float = 0.95) -> float:
    """Half-width of the two-sided Student-t confidence interval of a mean; NaN when ``n < 2``."""
    if n < 2 or not math.isfinite(std):
        return math.nan
    return t_ppf(0.5 + confidence / 2.0, n - 1) * std / math.sqrt(n)


def ci_half_widths(std: Sequence[float] | Floats, n: Sequence[int] | Ints, confidence: float = 0.95) -> Floats:
    """:func:`ci_half_width` of many rows at once (NaN where ``n < 2`` or the spread is not finite).

    The t quantile is computed once per distinct ``n``; each half-width is then the same product and quotient
    as :func:`ci_half_width`'s, so the two agree to the last bit.
    """
    import numpy as np

    spread = np.asarray(std, dtype=np.float64)
    counts = np.asarray(n, dtype=np.int64)
    out = np.full(spread.shape, np.nan)
    ok = (counts >= 2) & np.isfinite(spread)
    if ok.any():
        distinct = np.unique(counts[ok])
        quantiles = np.array([t_ppf(0.5 + confidence / 2.0, int(k) - 1) for k in distinct])
        t = quantiles[np.searchsorted(distinct, counts[ok])]
        out[ok] = t * spread[ok] / np.sqrt(counts[ok])
    return out
