"""The noise floor of a comparison: how much a row's mean moves when nothing changed.

The rank test and the bootstrap interval (:mod:`nsightx._report.twosample`) see only the runs of one process on each
side. Two processes of the same code differ by more: another job on the machine, the clock, a cold page cache.
On a 2-core CPU with two busy loops beside it, the means of 16 processes of the same 2 ms region spread from
3.4 ms to 5.2 ms (+51%), each with a relative standard deviation of 42-57% over its 20 runs (2026-12-05). A
change is therefore a regression only when it is also larger than the floor, the larger of:

- **within**: the quieter side's run-to-run spread, in percent: NVBench's ``nvbench_compare.py`` calls a
  difference within the smaller of the two sides' relative standard deviations "SAME"; here the spread is the
  robust one, 1.4826 x the median absolute deviation over the median, so that a few runs stretched by a
  preemption (a 5 ms sleep measured at 10 ms twice in 40 runs: RSD 20%, robust spread 1%) do not blind the gate;
- **between**: the largest difference between the means of the stored processes of the baseline (its history:
  the baseline and up to 4 saves before it, with the same backend and device), in percent of the smaller mean's
  size, whatever its sign. One process cannot
  show the drift between processes; several stored ones can, and the newest new process is judged against it.

Rows whose history holds one process get the *within* part only.
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from nsightx._results.profileresults import ProfileResults

RowKey = tuple[str, str, str, str]
"""(function, annotation, metric, config as JSON (:func:`config_key`)): a row of a comparison within one test."""


def within_pct(baseline: Sequence[float], new: Sequence[float]) -> float:
    """The smaller robust relative spread of the two samples, in percent.

    A side without one (fewer than 2 values, or a median of 0) is not the quieter side: the other side's spread
    is the answer whichever side it is (``min`` with a NaN first gave NaN, so a baseline with a median of 0 left
    the row without its run-to-run floor while the same pair swapped had one). NaN when neither side has one.
    """
    spreads = [s for s in (spread_pct(baseline), spread_pct(new)) if math.isfinite(s)]
    return min(spreads) if spreads else math.nan


def spread_pct(values: Sequence[float]) -> float:
    """1.4826 x the median absolute deviation over the median, in percent (the RSD of a normal sample).

    Example:
        >>> round(spread_pct([10.0, 10.1, 9.9, 10.0, 30.0]), 1)
        1.5
    """
    if len(values) < 2:
        return math.nan
    mid = statistics.median(values)
    if mid == 0:
        return math.nan
    return 100.0 * 1.4826 * statistics.median(abs(v - mid) for v in values) / abs(mid)


def config_key(params: Sequence[str], config: Sequence[Any]) -> str:
    """A config's identity across results, as JSON: its values by parameter name, then any values past the names.

    The order the parameters are declared in does not count: ``f(n, m)`` at ``(1, 2)`` and ``f(m, n)`` at
    ``(2, 1)`` are the same config, and ``f(m, n)`` at ``(1, 2)`` is another one (matching by position compared
    n=1, m=2 with n=2, m=1).
    """
    named = sorted(([str(p), v] for p, v in zip(params, config, strict=False)), key=lambda pv: pv[0])
    return json.dumps([named, list(config[len(params) :])], default=repr)


def device_of(result: ProfileResults) -> tuple[str, object]:
    """(backend, device name): only stored processes measured the same way on the same kind of device count."""
    env = result.environment
    return result.backend, env.get("GPU") or env.get("CPU")


def process_means(result: ProfileResults) -> dict[RowKey, float]:
    """The mean of each row's finite per-run values in one stored process."""
    plan = result.data.plan
    sums: dict[RowKey, list[float]] = {}
    for v in result.data.values:
        if not math.isfinite(v.value):
            continue
        cfg = list(plan.configs[v.config]) if 0 <= v.config < len(plan.configs) else [v.config]
        key = (plan.function, v.annotation, v.metric, config_key(plan.params, cfg))
        acc = sums.setdefault(key, [0.0, 0.0])
        acc[0] += float(v.value)
        acc[1] += 1.0
    return {k: s / n for k, (s, n) in sums.items() if n}


def between_pct(processes: Sequence[ProfileResults]) -> dict[RowKey, tuple[float, int]]:
    """Per row: the largest relative difference between two stored processes' means (percent), and how many.

    Args:
        processes: The baseline's history, oldest first, the baseline last; only those measured with the
            baseline's backend on the same device (:func:`device_of`) are used.

    Returns:
        ``{row: (percent, processes)}``; the percent (:func:`_range_pct`) is NaN where fewer than 2 processes
        hold the row with a mean other than 0.
    """
    if not processes:
        return {}
    kind = device_of(processes[-1])
    means: dict[RowKey, list[float]] = {}
    for p in processes:
        if device_of(p) != kind:
            continue
        for key, m in process_means(p).items():
            means.setdefault(key, []).append(m)
    out: dict[RowKey, tuple[float, int]] = {}
    for key, ms in means.items():
        out[key] = (_range_pct([m for m in ms if m != 0]), len(ms))
    return out


def _range_pct(means: Sequence[float]) -> float:
    """How far apart the means are, in percent of the smallest one's size, whatever their sign.

    A derived metric may be negative, and its processes drift as much as a time's: -10, -12 and -11 are 20 %
    apart, as 10, 12 and 11 are. Means of one sign give ``max|m| / min|m| - 1``, the same expression as a
    comparison's change between the two (so a new process at the edge of the stored range is not above its own
    floor by a rounding error); means of both signs give ``(max - min) / min|m|``.
    """
    if len(means) < 2:
        return math.nan
    sizes = [abs(m) for m in means]
    if min(means) > 0 or max(means) < 0:
        return 100.0 * (max(sizes) / min(sizes) - 1.0)
    return 100.0 * (max(means) - min(means)) / min(sizes)
