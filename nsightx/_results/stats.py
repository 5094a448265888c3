"""Small statistics helpers with no SciPy dependency: Student's t quantiles and summary statistics.

The t quantile comes from inverting the regularised incomplete beta function (continued-fraction evaluation,
then bisection); it matches ``scipy.stats.t.ppf`` to about 1e-9, which the tests check.

Why not SciPy, which the project would otherwise use: it is not a runtime dependency (113 MB installed), and the
first ``to_dataframe()`` of a process would import ``scipy.stats`` for one quantile per distinct run count: 0.73 s
on the 2-core CI VM, against a frame that costs about a millisecond (issue 35's whole call). A call of
``scipy.stats.t.ppf`` also costs ~45 us there, more than this module's cached quantile.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

    Floats = np.ndarray[Any, np.dtype[np.float64]]
    Ints = np.ndarray[Any, np.dtype[np.int64]]

STABLE_RSD_PCT = 2.0
"""A row is ``StableMeasurement`` when its relative standard deviation is under this, it has at least
:data:`~nsightx._results.flags.FEW_RUNS` valid runs (a row the ``few_runs`` flag marks is never stable) and no run
throttled. Kept here rather than in the DataFrame module so that text renderers (``nsightx demo``) can name it
without loading NumPy, which the demo must not load before it has chosen its BLAS threads."""
_BLOCK = 1 << 16
"""Rows :func:`group_sums` adds at a time (the weights of a block are all that is made of them)."""


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
    t = t_ppf(0.5 + confidence / 2.0, n - 1)
    half = t * std / math.sqrt(n)
    return t * (std / math.sqrt(n)) if math.isinf(half) else half  # t * std past 1.8e308, the half-width not


SAFE_LOW = 2.0**-400
"""Values whose largest size is under this are scaled up before a spread is taken (:func:`scale_shift`)."""
SAFE_HIGH = 2.0**500
"""Values whose largest size is over this are scaled down before a spread is taken (:func:`scale_shift`)."""
SCALED_EXPONENT = 500
"""Scaled values' largest size lies in ``[2**499, 2**500)``: squares of deviations of 10**5 such values (and
more) stay finite, and a value smaller by up to ``2**-574`` stays a normal float."""


def scale_shift(values: Sequence[float]) -> int:
    """The power of two ``s`` that brings the values' largest finite size near ``2**500``; 0 where it need not.

    Why: squared deviations of values past :data:`SAFE_HIGH` overflow (a spread of 1e200s was ``inf``) and
    those of values under :data:`SAFE_LOW` underflow (a spread of 1e-300s was 0: equal values, "stable").
    Multiplying by a power of two is exact (as long as nothing under- or overflows), so the statistics of
    ``v * 2**-s`` times ``2**s`` are those of ``v``; values inside the range are left as they are, bit for bit.
    """
    big = max((abs(v) for v in values if math.isfinite(v)), default=0.0)
    if big == 0.0 or SAFE_LOW <= big <= SAFE_HIGH:
        return 0
    return math.frexp(big)[1] - SCALED_EXPONENT


def times_pow2(x: float, s: int) -> float:
    """``x * 2**s`` in two exact steps (``2.0**s`` itself overflows from ``s = 1024``); inf past the float range."""
    return x * 2.0 ** (s // 2) * 2.0 ** (s - s // 2)


def fsum_mean(values: Sequence[float]) -> float:
    """``math.fsum(values) / len(values)``, also where the sum of finite values overflows (fsum raises there)."""
    s = scale_shift(values)
    if s <= 0:
        return math.fsum(values) / len(values)
    return times_pow2(math.fsum(times_pow2(v, -s) for v in values) / len(values), s)


_EXP_MAX = 709.78
"""``math.exp`` of more than this overflows; :func:`mean_interval` reads it as an unbounded upper end."""


def _exp(x: float) -> float:
    return math.inf if x > _EXP_MAX else math.exp(x)


LOGNORMAL_MIN_RUNS = 5
"""Fewest values for which the lognormal interval joins the t interval of positive values (the ``few_runs`` count).

Under it the logs' variance rests on one to three degrees of freedom, and the lognormal interval's upper end runs to
hundreds of times the mean on a single slow run ([100, 110, 120, 5000] gave 496,504): no one can read such a
number. Such rows keep the t interval, with its lower end raised to the positive floor; the ``few_runs`` flag
marks them and they are never ``StableMeasurement``.
"""


def mean_interval(values: Sequence[float], confidence: float = 0.95) -> tuple[float, float]:
    """Confidence interval of the mean of ``values``: the reference rule, one row (NaN, NaN under 2 finite values).

    Values that can be zero or negative get the Student-t interval (its lower end at least 0 when no value is
    negative). Strictly positive values (times, bytes, counts) get the union of the Student-t interval and the
    lognormal interval of the mean (the modified Cox interval: ``exp(m + v/2 -+ t * sqrt(v/n + v**2/(2(n-1))))``
    over the logs' mean ``m`` and variance ``v``) from :data:`LOGNORMAL_MIN_RUNS` values on (the t interval alone
    under it), whose lower end is raised to ``min(values) * (alpha/2)**(1/n)``:
    a bound that holds for the mean of any positive quantity (Markov's inequality), so the interval stays above
    zero (equal values keep the t interval: their mean, exactly). Why: GPU times are right-skewed, and on skewed
    data the t interval is too short on the high side and crosses zero at small ``n``; the lognormal interval keeps
    its coverage there, and the t interval keeps it where the logs are not normal and ``n`` is large. The interval
    always contains the mean.

    :func:`mean_intervals` computes the same for many rows from their summaries.
    """
    n = len(values)
    if n < 2 or not all(math.isfinite(v) for v in values):
        return math.nan, math.nan
    s = scale_shift(values)
    if s:  # a spread that over- or underflows: the interval of the values scaled by a power of two, scaled back
        lower, upper = mean_interval([times_pow2(v, -s) for v in values], confidence)
        return times_pow2(lower, s), times_pow2(upper, s)
    mean = math.fsum(values) / n
    std = math.sqrt(math.fsum((v - mean) * (v - mean) for v in values) / (n - 1))
    low = min(values)
    if low <= 0.0 or std == 0.0:  # equal values: the t interval is the point, exactly
        half = ci_half_width(std, n, confidence)
        return (max(mean - half, 0.0) if low == 0.0 else mean - half), mean + half
    logs = [math.log(v) for v in values]
    log_mean = math.fsum(logs) / n
    log_var = math.fsum((x - log_mean) * (x - log_mean) for x in logs) / (n - 1)
    t = t_ppf(0.5 + confidence / 2.0, n - 1)
    t_half = t * std / math.sqrt(n)
    floor = low * ((1.0 - confidence) / 2.0) ** (1.0 / n)
    if n < LOGNORMAL_MIN_RUNS:
        return max(mean - t_half, floor), mean + t_half
    cox = t * math.sqrt(log_var / n + log_var * log_var / (2.0 * (n - 1)))
    centre = log_mean + log_var / 2.0
    lower = max(min(mean - t_half, _exp(centre - cox)), floor)
    return lower, max(mean + t_half, _exp(centre + cox))


def log_moments(value: Floats, ids: Ints, count: int, minimum: Floats | None = None) -> tuple[Floats, Floats, Floats]:
    """Per group: the minimum, and the mean and sample variance of the logs, of ``value``'s finite entries.

    The log moments are NaN for a group with a value that is not positive (or fewer than 2 finite values): only
    :func:`mean_intervals`' positive rows read them. A caller that has the groups' minimum passes it (it is
    returned as given). The logs are taken a block at a time (:func:`group_sums`): no row-long array is made
    where every value is finite.
    """
    import numpy as np

    finite = np.isfinite(value)
    g, x = (ids, value) if finite.all() else (ids[finite], value[finite])
    del finite
    if minimum is None:
        minimum = np.full(count, np.inf)
        np.minimum.at(minimum, g, x)
        minimum[minimum == np.inf] = np.nan  # no finite value (an all-infinite group has no interval anyway)
    positive = bool((x > 0.0).all())
    if len(x) <= _FEW_ROWS:
        return (minimum, *_few_log_moments(np.log(x if positive else np.where(x > 0.0, x, 1.0)), g, minimum, count))

    def logs(start: int, stop: int) -> Floats:
        block = x[start:stop]
        return np.log(block if positive else np.where(block > 0.0, block, 1.0))

    def squares(start: int, stop: int) -> Floats:
        dev = logs(start, stop)
        dev -= log_mean[g[start:stop]]
        return np.multiply(dev, dev, out=dev)

    with np.errstate(invalid="ignore", divide="ignore"):
        n = np.bincount(g, minlength=count)
        log_mean = group_sums(g, count, logs) / n
        log_var = group_sums(g, count, squares) / (n - 1)
    bad = ~(minimum > 0.0) | (n < 2)
    log_mean[bad] = np.nan
    log_var[bad] = np.nan
    return minimum, log_mean, log_var


def _few_log_moments(logs: Floats, ids: Ints, minimum: Floats, count: int) -> tuple[Floats, Floats]:
    """:func:`log_moments`' mean and variance of a few rows' logs, the group sums over Python floats.

    The same sums in the same (row) order as :func:`group_sums`, divided as numpy divides (the count as a float);
    a group with a minimum that is not positive or fewer than 2 values is NaN, as there.
    """
    import numpy as np

    listed, groups = logs.tolist(), ids.tolist()
    n, sums, squares = [0] * count, [0.0] * count, [0.0] * count
    for v, i in zip(listed, groups, strict=True):
        n[i] += 1
        sums[i] += v
    kept = [k >= 2 and low > 0.0 for k, low in zip(n, minimum.tolist(), strict=True)]
    mean = [t / k if ok else math.nan for t, k, ok in zip(sums, n, kept, strict=True)]
    for v, i in zip(listed, groups, strict=True):
        dev = v - mean[i]
        squares[i] += dev * dev
    var = [q / (k - 1) if ok else math.nan for q, k, ok in zip(squares, n, kept, strict=True)]
    return np.array(mean, dtype=np.float64), np.array(var, dtype=np.float64)


def group_sums(ids: Ints, count: int, weights: Callable[[int, int], Floats]) -> Floats:
    """Per group (``ids`` in ``range(count)``), the sum of its rows' weights, ``weights(start, stop)`` giving a block's.

    The same numbers, bit for bit, as ``np.bincount(ids, weights=w, minlength=count)`` over the whole weights
    ``w``: both add each row's weight to its group's sum in row order (``np.add.at`` here, a block of rows at a
    time). The weights are made a block at a time: at a million values the whole array would be 8 MB (issue 35).
    """
    import numpy as np

    sums = np.zeros(count, np.float64)
    for start in range(0, len(ids), _BLOCK):
        stop = min(start + _BLOCK, len(ids))
        block = weights(start, stop)
        with np.errstate(invalid="ignore", over="ignore"):  # as quiet as bincount (inf - inf is NaN there too)
            np.add.at(sums, ids[start:stop], block)
    return sums


_FEW_ROWS = 512
"""Up to this many rows :func:`mean_intervals` finds each row's t quantile with a dictionary (the same numbers).
Equal to :data:`nsightx._results.store.SMALL` (this module imports nothing of nsightx; a test keeps them equal)."""


def mean_intervals(
    mean: Floats, std: Floats, n: Ints, minimum: Floats, log_mean: Floats, log_var: Floats, confidence: float = 0.95
) -> tuple[Floats, Floats]:
    """:func:`mean_interval` of many rows from their summaries: (lower, upper), NaN where it is NaN.

    Every row's candidate ends are computed with whole-array arithmetic, then each row takes its rule's: no
    per-row Python, and the t quantile once per distinct count.

    Args:
        mean: Per row, the mean of its values.
        std: Their sample standard deviation (NaN under 2 values or when a value is not finite).
        n: Their count.
        minimum: Their minimum.
        log_mean: The mean of their logs (rows whose minimum is positive; :func:`log_moments`).
        log_var: The sample variance of their logs.
        confidence: The interval's confidence level.
    """
    import numpy as np

    counts = np.asarray(n, dtype=np.int64)
    if len(counts) <= _PLAIN_ROWS:
        plain = _plain_intervals(mean, std, counts, minimum, log_mean, log_var, confidence)
        if plain is not None:
            return plain
    ok = (counts >= 2) & np.isfinite(std)
    t = np.full(counts.shape, np.nan)
    if len(counts) <= _FEW_ROWS:  # a small result: its counts as Python ints, no np.unique and searchsorted
        listed = counts[ok].tolist()
        quantile = {d: t_ppf(0.5 + confidence / 2.0, d - 1) for d in set(listed)}
        t[ok] = [quantile[d] for d in listed]
    elif ok.any():
        distinct = np.unique(counts[ok])
        quantiles = np.array([t_ppf(0.5 + confidence / 2.0, int(d) - 1) for d in distinct])
        t[ok] = quantiles[np.searchsorted(distinct, counts[ok])]
    k = counts.astype(np.float64)
    v = log_var
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        half, lower, upper = _t_ends(mean, std, counts, t)
        cox = t * np.sqrt(v / k + v * v / (2.0 * (k - 1.0)))
        centre = log_mean + v / 2.0
        floor = minimum * ((1.0 - confidence) / 2.0) ** (1.0 / k)
        positive = (minimum > 0.0) & (half > 0.0)  # NaN (unknown) compares false
        signed = np.where(minimum == 0.0, np.maximum(lower, 0.0), lower)
        joined = positive & (counts >= LOGNORMAL_MIN_RUNS)  # few values: the t interval, raised to the floor
        low_end = np.where(joined, np.minimum(lower, np.exp(centre - cox)), lower)
        lower = np.where(positive, np.maximum(low_end, floor), signed)
        upper = np.where(joined, np.maximum(upper, np.exp(centre + cox)), upper)
    return lower, upper


_PLAIN_ROWS = 16
"""Up to this many rows :func:`mean_intervals` takes rows of ordinary numbers over Python floats
(:func:`_plain_intervals`): 14 against 25 us for 4 rows, as fast as numpy at 16 (2-core VM, warm; in a frame,
numpy's fixed costs weigh more)."""


def _plain_intervals(
    mean: Floats, std: Floats, counts: Ints, minimum: Floats, log_mean: Floats, log_var: Floats, confidence: float
) -> tuple[Floats, Floats] | None:
    """:func:`mean_intervals` of a few rows, each of ordinary numbers, over Python floats; None otherwise.

    Ordinary: float64 summaries of at least :data:`LOGNORMAL_MIN_RUNS` values with a positive minimum (every row
    takes the joined interval: a sweep's timings), every sum, product and end below finite. Then no NaN, infinity
    or signed zero enters the arithmetic, whose operations are the numpy path's in its order (IEEE doubles either
    way: the same bits); the power and the exponentials stay numpy's, over arrays of every row as there (numpy's
    own ``exp`` may differ from the C library's by an ulp). A small result's interval was ~35 numpy calls on
    4-element arrays, ~80 us of a ~0.8 ms frame (2-core VM, issue 35).
    """
    import numpy as np

    if any(a.dtype != np.float64 for a in (mean, std, minimum, log_mean, log_var)):
        return None
    ns = counts.tolist()
    if not ns or min(ns) < LOGNORMAL_MIN_RUNS:
        return None
    q = 0.5 + confidence / 2.0
    rows = []
    for c, m, s, low, lm, v in zip(ns, *(a.tolist() for a in (mean, std, minimum, log_mean, log_var)), strict=True):
        t = t_ppf(q, c - 1)
        k = float(c)
        half = t * s / math.sqrt(c)
        if not (math.isfinite(m) and 0.0 < half < math.inf and 0.0 < low < math.inf and math.isfinite(lm)):
            return None
        if not 0.0 <= v < math.inf:
            return None
        cox = t * math.sqrt(v / k + v * v / (2.0 * (k - 1.0)))
        centre = lm + v / 2.0
        if not (math.isfinite(cox) and math.isfinite(centre)):
            return None
        rows.append((m - half, m + half, centre - cox, centre + cox, low))
    with np.errstate(over="ignore", under="ignore"):
        power = ((1.0 - confidence) / 2.0) ** (1.0 / counts.astype(np.float64))
        down = np.exp(np.array([r[2] for r in rows])).tolist()
        up = np.exp(np.array([r[3] for r in rows])).tolist()
    lower = [max(min(r[0], e), r[4] * p) for r, e, p in zip(rows, down, power.tolist(), strict=True)]
    upper = [max(r[1], e) for r, e in zip(rows, up, strict=True)]
    return np.array(lower, dtype=np.float64), np.array(upper, dtype=np.float64)


def _t_ends(mean: Floats, std: Floats, counts: Ints, t: Floats) -> tuple[Floats, Floats, Floats]:
    """Per row, the t interval's half-width and its ends ``mean -+ half`` (:func:`ci_half_width`'s arithmetic).

    A half-width past the float range (``inf``) can still give an end inside it: two runs of -2e307 and -5e307
    have a half-width of 1.9e308 and an upper end of 1.56e308, which ``mean + inf`` made ``inf``. Such rows take
    their ends as twice ``mean/2 -+ half/2`` (halving and doubling are exact at that size); an end that is truly
    past the range is still ``inf``. The caller silences numpy's overflow warnings.
    """
    import numpy as np

    half = t * std / np.sqrt(counts)
    past = np.isinf(half) & np.isfinite(std)
    if not past.any():
        return half, mean - half, mean + half
    half[past] = (t * (std / np.sqrt(counts)))[past]  # t * std past 1.8e308, the half-width not
    lower, upper = mean - half, mean + half
    beyond = past & np.isinf(half)  # the half-width itself past 1.8e308, the ends maybe not
    if beyond.any():
        halved = (0.5 * t[beyond]) * (std[beyond] / np.sqrt(counts[beyond]))
        centre = 0.5 * mean[beyond]
        lower[beyond] = 2.0 * (centre - halved)
        upper[beyond] = 2.0 * (centre + halved)
    return half, lower, upper


def percent_of(part: float, whole: float) -> float:
    """``100 * part / |whole|``, also where ``100 * part`` alone is past the float range (``part`` over 1.8e306)."""
    pct = 100.0 * part / abs(whole)
    return 100.0 * (part / abs(whole)) if math.isinf(pct) and math.isfinite(part) else pct


def interval_reach(values: Sequence[float], mean: float, confidence: float = 0.95) -> float:
    """How far :func:`mean_interval`'s farther end lies from ``mean`` (the values' mean); NaN when it is NaN.

    The interval may be asymmetric: this is what a symmetric interval's half-width was, the larger side.
    """
    lower, upper = mean_interval(values, confidence)
    if math.isnan(lower) or math.isnan(upper):
        return math.nan
    return max(upper - mean, mean - lower)
