"""The value statistics of rows whose values lie at the edges of the float range, taken over scaled values.

The aggregated frame's statistics follow pandas' arithmetic (:mod:`~nsightx._results.groupstats`): Welford's
variance squares deviations, a plain sum adds the values. Past ``2**500`` the squares overflow (runs of 1e200
had ``StdDev`` inf, so no interval and no relative spread) and a sum of finite values can overflow (two runs of
1.5e308 had ``AvgValue`` inf); under ``2**-400`` the squares underflow (runs of 1e-300 to 5e-300 had ``StdDev``
0, a one-point interval and ``StableMeasurement`` true). Such rows are computed again over their values times a
power of two that brings their largest size near ``2**500``, and scaled back: multiplying by a power of two is
exact, so these are the numbers the same arithmetic gives where nothing over- or underflows. Rows inside the
range are not touched (their numbers stay pandas', bit for bit); neither are the minimum, maximum and count,
which no arithmetic made.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from nsightx._results.stats import SAFE_HIGH, SAFE_LOW, SCALED_EXPONENT

Moments = Callable[[Any, Any, int, bool], dict[str, Any]]
"""``(values, ids, count, ascending) -> {"AvgValue": ..., "StdDev": ..., ...}``: the plain statistics."""


def rescale_extremes(values: Any, ids: Any, ascending: bool, out: dict[str, Any], plain: Moments) -> dict[str, Any]:
    """``out`` (the plain statistics per group) with the rows at the edges of the float range computed again.

    Args:
        values: Per row, the value (float64).
        ids: Per row, its group.
        ascending: Whether ``ids`` never decrease (passed on to ``plain``).
        out: ``plain``'s statistics of ``values``; changed in place where a row is computed again.
        plain: The function that made ``out``.

    A row is scaled when its largest finite size (of its minimum and maximum) is over
    :data:`~nsightx._results.stats.SAFE_HIGH` or positive and under :data:`~nsightx._results.stats.SAFE_LOW`:
    its ``StdDev`` is replaced, and its ``AvgValue`` where it is not finite (a mean of finite values is finite:
    the plain sum overflowed). A median that is infinite is taken again over the values halved
    (:func:`_halved_medians`), and the mean of a row with infinite runs of one sign only is that infinity (a
    plain sum made NaN of ``1.7e308 + 1.7e308 - inf``).
    """
    low, high, avg = out["MinValue"], out["MaxValue"], out["AvgValue"]
    if len(avg) <= _FEW and _inside(low.tolist() + high.tolist()):
        return out  # nothing at the edges (a small result's usual case): the checks below over Python floats
    with np.errstate(invalid="ignore"):
        big = np.maximum(np.abs(low), np.abs(high))
        bad = np.isfinite(big) & (big > 0.0) & ((big < SAFE_LOW) | (big > SAFE_HIGH))
        one_sided = np.isnan(avg) & ((low == -np.inf) != (high == np.inf)) & (out["NumRuns"] > 0)
    avg[one_sided] = np.where(low[one_sided] == -np.inf, -np.inf, np.inf)
    if np.isinf(out["MedianValue"]).any():
        _halved_medians(values, ids, ascending, out["MedianValue"], plain)
    if not bad.any():
        return out
    shift = np.zeros(len(bad), dtype=np.int64)
    shift[bad] = np.frexp(big[bad])[1] - SCALED_EXPONENT
    got = plain(*_rows_of(values, ids, bad, shift), ascending)
    back = shift[bad]
    with np.errstate(over="ignore"):  # a spread past the float range is inf
        out["StdDev"][bad] = np.ldexp(got["StdDev"], back)
        redo = ~np.isfinite(avg[bad])
        avg[np.flatnonzero(bad)[redo]] = np.ldexp(got["AvgValue"][redo], back[redo])
    return out


_FEW = 64
"""Up to this many rows :func:`rescale_extremes` first asks :func:`_inside` (a few numpy calls on tiny arrays cost
more than a loop over Python floats, issue 35)."""


def _inside(ends: list[float]) -> bool:
    """Whether the rows' minima and maxima (``ends``) leave :func:`rescale_extremes` nothing to do.

    They do where each is zero or of a size within [``SAFE_LOW``, ``SAFE_HIGH``]: then no row's largest size is out
    of range, no end is infinite (a row with infinite runs of one sign has one) and no median is (a half sum of two
    such values is finite). False (a NaN end too) is only "maybe": the numpy checks decide.
    """
    return all(x == 0.0 or SAFE_LOW <= abs(x) <= SAFE_HIGH for x in ends)


def _rows_of(values: Any, ids: Any, picked: Any, shift: Any) -> tuple[Any, Any, int]:
    """The values of the ``picked`` groups times ``2**-shift`` of their group, their new ids and the group count."""
    rows = np.flatnonzero(picked[ids])
    return np.ldexp(values[rows], -shift[ids[rows]]), (np.cumsum(picked) - 1)[ids[rows]], int(picked.sum())


def _halved_medians(values: Any, ids: Any, ascending: bool, median: Any, plain: Moments) -> None:
    """The infinite medians (in place), taken again over the values halved, then doubled.

    Only the half sum of two middle values of one sign, both near the largest float, overflows (the median of
    ``[inf, 1.7e308, 1.7e308, 1.7e308]`` was inf); halving them is exact. Two infinite middles give inf again.
    """
    redo = np.isinf(median)
    got = plain(*_rows_of(values, ids, redo, np.ones(len(redo), dtype=np.int64)), ascending)
    with np.errstate(over="ignore"):
        median[redo] = np.ldexp(got["MedianValue"], 1)
