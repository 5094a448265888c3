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

from nsightx._results.stats import SAFE_HIGH, SAFE_LOW

Moments = Callable[[Any, Any, int, bool], dict[str, Any]]
"""``(values, ids, count, ascending) -> {"AvgValue": ..., "StdDev": ..., ...}``: the plain statistics."""
_TARGET_EXPONENT = 500
"""The scaled values' largest size lies in ``[2**499, 2**500)``: squares of deviations of 10**5 such values (and
more) stay finite, and a value smaller by up to ``2**-574`` stays a normal float."""


def rescale_extremes(values: Any, ids: Any, ascending: bool, out: dict[str, Any], plain: Moments) -> dict[str, Any]:
    """``out`` (the plain statistics per group) with the rows at the edges of the float range computed again.

    Args:
        values: Per row, the value (float64).
        ids: Per row, its group.
        ascending: Whether ``ids`` never decrease (passed on to ``plain``).
        out: ``plain``'s statistics of ``values``; changed in place where a row is computed again.
        plain: The function that made ``out``.

    A row is computed again when its largest finite size (of its minimum and maximum) is over
    :data:`~nsightx._results.stats.SAFE_HIGH` or positive and under :data:`~nsightx._results.stats.SAFE_LOW`;
    its ``StdDev`` is replaced, and its ``AvgValue`` and ``MedianValue`` where they are not finite (a mean or
    median of finite values is finite: the plain one overflowed). A row with an infinite value is left as it is.
    """
    with np.errstate(invalid="ignore"):
        big = np.maximum(np.abs(out["MinValue"]), np.abs(out["MaxValue"]))
        bad = np.isfinite(big) & (big > 0.0) & ((big < SAFE_LOW) | (big > SAFE_HIGH))
    if not bad.any():
        return out
    shift = np.zeros(len(bad), dtype=np.int64)
    shift[bad] = np.frexp(big[bad])[1] - _TARGET_EXPONENT
    rows = np.flatnonzero(bad[ids])
    scaled = np.ldexp(values[rows], -shift[ids[rows]])
    got = plain(scaled, (np.cumsum(bad) - 1)[ids[rows]], int(bad.sum()), ascending)
    back = shift[bad]
    with np.errstate(over="ignore"):  # a spread past the float range is inf
        out["StdDev"][bad] = np.ldexp(got["StdDev"], back)
        for name in ("AvgValue", "MedianValue"):
            column = out[name]
            redo = ~np.isfinite(column[bad])
            column[np.flatnonzero(bad)[redo]] = np.ldexp(got[name][redo], back[redo])
    return out
