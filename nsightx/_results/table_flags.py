"""The quality flags of every aggregated row at once, from the columnar view (what the DataFrame's ``Flags`` shows).

:mod:`nsightx._results.flags` states each rule over one row's evidence in plain Python; ``nsightx compare`` and
:func:`~nsightx._results.flags.row_flags` use those functions. This module computes the same verdicts for all
rows with numpy: counts and sums per group with ``np.bincount``, the clock rule on sorted per-group clocks, the
launch and serialisation rules per region execution. The Python rules stay the reference:

- ``clock_varied``, ``few_runs``, ``throttled``, ``warm``, ``serialized`` and ``launch_bound`` reproduce their
  rule's arithmetic exactly (same comparisons on the same numbers; the clock median is taken as
  ``statistics.median`` takes it);
- ``short`` and ``unstable`` compare a mean and a spread (for ``unstable``, the reach of the interval of the mean
  from its summaries and log moments) with a threshold; the rules use ``math.fsum``, this module plain sums, which
  can differ in the last bits. A row whose vectorised number lies within a rounding bound of the
  threshold (or is not finite) is judged again by the Python rule on its values, so every verdict is the rule's.

String work (the ``Flags`` cell) is done once per distinct set of flags.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from nsightx._results.flags import (
    CLOCK_VARIED_PCT,
    FEW_RUNS,
    FLAGS,
    GPU_TIME_METRIC,
    RULES,
    SHORT_NS,
    UNSTABLE_CI_PCT,
    CallEvidence,
    RowEvidence,
    flags_cell,
    run_clocks,
)
from nsightx._results.groupshare import SharedGroups, shared_groups
from nsightx._results.stats import SAFE_HIGH, SAFE_LOW, group_sums, log_moments, mean_intervals
from nsightx._results.store import SMALL, same_ints
from nsightx._results.table import MISSING, Floats, Ints, ResultTable, RowKeys, group_ids
from nsightx.columns import SERIALIZES_KERNELS

if TYPE_CHECKING:
    from nsightx._results.schema import ResultData

Bools = np.ndarray[Any, np.dtype[np.bool_]]

_EPS = float(np.finfo(np.float64).eps)
_RATIO_WINDOW = 1e-7
"""Relative distance to the ``unstable`` threshold under which the Python rule decides."""


@dataclass(frozen=True, eq=False)
class Groups:
    """The aggregated rows: each value row's group, numbered in first-seen order."""

    ids: Ints
    """Per value row, its group (0 .. count - 1)."""
    first: Ints
    """Per group, its first value row."""
    _shared: dict[int, tuple[RowKeys, SharedGroups | None]] = field(default_factory=dict, repr=False)

    @property
    def count(self) -> int:
        """Number of groups."""
        return len(self.first)

    @functools.cached_property
    def ascending(self) -> bool:
        """Whether :attr:`ids` never decrease (pandas then reduces each group with ``ufunc.reduceat``).

        Read by the value statistics and by each kind of collector statistics: found once per frame.
        """
        ids = self.ids
        return bool((ids[1:] >= ids[:-1]).all())

    def shared_by(self, keys: RowKeys) -> SharedGroups | None:
        """:func:`~nsightx._results.groupshare.shared_groups` of these groups over ``keys``, found once per keys.

        The collector statistics and the ``clock_varied`` flag both need the classes of groups that see the same
        runs; finding them sorts every value row, so they are found once per frame.
        """
        known = self._shared.get(id(keys))
        if known is None or known[0] is not keys:
            known = self._shared[id(keys)] = (keys, shared_groups(self.ids, self.count, keys.ids, self.first))
        return known[1]

    @classmethod
    def of(cls, table: ResultTable) -> Groups:
        """(annotation, metric, config) in first-seen order, as ``groupby(sort=False)`` has them.

        Numbered over the table's combinations, which are in first-seen order themselves, then spread to the rows.
        Where each combination is a group of its own (a kernel and a unit per group: the common case), the ids are
        the table's combination ids themselves, not a second row-long array (8 MB at a million values).
        """
        c = table.combinations
        per_combo, first_combo = group_ids(c.annotation, c.metric, c.config)
        if same_ints(per_combo, np.arange(len(per_combo))):
            return cls(c.ids, c.first[first_combo])
        return cls(per_combo[c.ids], c.first[first_combo])


def throttled_rows(table: ResultTable, throttled: Mapping[Any, bool]) -> tuple[Bools, Bools]:
    """Per value row: whether its run was throttled, and whether that is unknown (no verdict for its run).

    Args:
        table: The result's columnar view.
        throttled: (config, run) -> throttled (``throttled_runs`` of the DataFrame module).
    """
    found, codes = table.lookup("run", throttled)
    values = np.append(np.asarray(found, dtype=np.bool_), False)[codes]  # MISSING (-1) picks the False
    return values, codes == MISSING


@dataclass(frozen=True, eq=False)
class Spread:
    """Per group: finite value count, mean, mean absolute value, sample standard deviation (plain sums).

    With the minimum and log moments (:func:`~nsightx._results.stats.log_moments`) the interval of the mean needs.
    """

    n: Ints
    mean: Floats
    mean_abs: Floats
    std: Floats
    minimum: Floats
    log_mean: Floats
    log_var: Floats


def spread_of(table: ResultTable, groups: Groups) -> Spread:
    """The groups' :class:`Spread` over their finite values (the DataFrame reuses its log moments).

    Up to :data:`~nsightx._results.store.SMALL` value rows the sums run over Python floats (:func:`_small_spread`).
    """
    if len(table.value) <= SMALL:
        return _small_spread(table.value, groups.ids, groups.count)
    return _spread(table.value, groups.ids, groups.count)


def _spread(value: Floats, g: Ints, count: int) -> Spread:
    """:func:`spread_of` with numpy.

    The sums are :func:`~nsightx._results.stats.group_sums`: the values, their absolute values and squared
    deviations are made a block of rows at a time (the same numbers as ``np.bincount`` over whole arrays, without
    the 8 MB arrays a million values made).
    """
    finite = np.isfinite(value)
    every = bool(finite.all())
    if every:  # the common case: no float copy of ``finite`` as weights
        n = np.bincount(g, minlength=count).astype(np.int64)
    else:
        n = group_sums(g, count, lambda start, stop: finite[start:stop].astype(np.float64)).astype(np.int64)

    def kept(start: int, stop: int) -> Floats:
        """A block's values, those that are not finite as 0."""
        block = value[start:stop]
        return block if every else np.where(finite[start:stop], block, 0.0)

    def squares(start: int, stop: int) -> Floats:
        """A block's squared deviations from their group's mean, 0 where the value is not finite."""
        dev = value[start:stop] - mean[g[start:stop]]
        if not every:
            dev[~finite[start:stop]] = 0.0
        return np.multiply(dev, dev, out=dev)

    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        mean = group_sums(g, count, kept) / n
        mean_abs = group_sums(g, count, lambda start, stop: np.abs(kept(start, stop))) / n
        std = np.sqrt(group_sums(g, count, squares) / (n - 1))
    std[n < 2] = np.nan
    minimum, log_mean, log_var = log_moments(value, g, count)  # over the finite values, as above
    return Spread(n, mean, mean_abs, std, minimum, log_mean, log_var)


def _small_spread(value: Floats, g: Ints, count: int) -> Spread:
    """:func:`_spread` over Python floats: the same sums in the same order (IEEE double arithmetic either way).

    A group without a finite value gets numpy's ``0.0 / 0`` (a NaN with its sign bit set), as the numpy path.
    """
    values, ids = value.tolist(), g.tolist()
    n, total, total_abs = [0] * count, [0.0] * count, [0.0] * count
    for v, i in zip(values, ids, strict=True):
        if math.isfinite(v):
            n[i] += 1
            total[i] += v
            total_abs[i] += abs(v)
        else:  # numpy adds a zero weight for the row: 0.0 + 0.0 turns a sum of -0.0 into 0.0
            total[i] += 0.0
            total_abs[i] += 0.0
    mean = [t / k if k else _zero_by_zero() for t, k in zip(total, n, strict=True)]
    mean_abs = [t / k if k else _zero_by_zero() for t, k in zip(total_abs, n, strict=True)]
    squares = [0.0] * count
    for v, i in zip(values, ids, strict=True):
        dev = v - mean[i] if math.isfinite(v) else 0.0
        squares[i] += dev * dev
    std = [math.sqrt(q / (k - 1)) if k >= 2 else math.nan for q, k in zip(squares, n, strict=True)]
    minimum, log_mean, log_var = log_moments(value, g, count)
    counts = np.array(n, dtype=np.int64)
    return Spread(counts, np.array(mean), np.array(mean_abs), np.array(std), minimum, log_mean, log_var)


@functools.cache
def _zero_by_zero() -> float:
    """The NaN numpy's ``0.0 / 0`` gives on this machine (its sign bit is the processor's choice), asked once."""
    with np.errstate(invalid="ignore"):
        return float((np.zeros(1) / np.zeros(1, dtype=np.int64))[0])


def shares_interval(spread: Spread, n: Ints, mean: Floats, minimum: Floats) -> bool:
    """Whether summaries (count, mean, minimum per group) are ``spread``'s own, bit for bit.

    Then they describe the same finite values (a group with a value that is not finite differs in its count), and
    an interval of the mean made from them may stand for the one :func:`flag_cells` makes from ``spread``.
    """
    return (
        n.tobytes() == spread.n.tobytes()
        and mean.tobytes() == spread.mean.tobytes()
        and minimum.tobytes() == spread.minimum.tobytes()
    )


def _first_units(table: ResultTable, groups: Groups) -> Ints:
    """Per group, the code of its first unit that is not ``None`` (as ``row_evidence`` keeps it); -1 without one.

    Read per combination of the table: they are in first-seen order, so a group's first combination with a unit
    holds its first row with one.
    """
    if len(table.units) == 1 and table.units[0] is not None:  # one unit in every row (one metric): code 0
        return np.zeros(groups.count, dtype=np.int64)
    out = np.full(groups.count, -1, dtype=np.int64)
    known = np.array([u is not None for u in table.units], dtype=np.bool_)
    c = table.combinations
    combos = np.flatnonzero(known[c.unit])
    group = groups.ids[c.first[combos]]
    out[group[::-1]] = c.unit[combos][::-1]  # repeated index: the last write wins, the first combination
    return out


def _short_and_unstable(
    spread: Spread, unit_ns: Bools, interval: tuple[Floats, Floats] | None = None
) -> tuple[Bools, Bools, Bools, Bools]:
    """``short`` and ``unstable`` per group, and the groups too close to their threshold to call with plain sums.

    A plain sum of n terms is within about ``n * eps * sum(|x|)`` of the exact one; the margin is 64 times that.
    ``interval``: the interval of each group's mean from summaries of the same finite values (see
    :func:`flag_cells`), when the caller has it; else it is computed from ``spread``.
    """
    n, mean = spread.n, spread.mean
    if len(n) <= SMALL:
        return _small_short_and_unstable(spread, unit_ns, interval)
    tol = 64.0 * (n + 1) * _EPS * spread.mean_abs
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        short = unit_ns & (n > 0) & (mean < SHORT_NS)
        short_unsure = unit_ns & (n > 0) & ~(np.abs(mean - SHORT_NS) > tol)
        if interval is None:
            interval = mean_intervals(*_moments(spread))
        lower, upper = interval
        reach = np.maximum(upper - mean, mean - lower)  # NaN when either end is
        ratio = 100.0 * reach / np.abs(mean)
        judged = n >= 2
        unstable = judged & (mean != 0) & ~np.isnan(reach) & (ratio > UNSTABLE_CI_PCT)
        close = ~(np.abs(ratio - UNSTABLE_CI_PCT) > _RATIO_WINDOW * UNSTABLE_CI_PCT)
        unstable_unsure = judged & (close | ~(np.abs(mean) > tol) | ~(np.abs(reach) < 1e300))
        # values at the edges of the float range: plain squares over- or underflow, the rule scales them
        edge = (spread.mean_abs > 0.0) & ~((spread.mean_abs >= SAFE_LOW) & (spread.mean_abs * n <= SAFE_HIGH))
        unstable_unsure |= judged & edge
    return short, short_unsure, unstable, unstable_unsure


def _small_short_and_unstable(
    spread: Spread, unit_ns: Bools, interval: tuple[Floats, Floats] | None
) -> tuple[Bools, Bools, Bools, Bools]:
    """:func:`_short_and_unstable` for a few groups, one group at a time over Python floats.

    The same IEEE double operations in the same order (``reach`` is NaN where either side is, as ``np.maximum``
    makes it), so the same verdicts and the same groups left to the rule; a group whose mean is zero, where numpy
    divides by zero, is never ``unstable`` and always judged again (its mean is not above the margin). About 20
    numpy calls on arrays of a few elements were a quarter of a small frame's flags (issue 35).
    """
    if interval is None:
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
            interval = mean_intervals(*_moments(spread))
    short, short_unsure, unstable, unstable_unsure = [], [], [], []
    window = _RATIO_WINDOW * UNSTABLE_CI_PCT
    lists = (spread.n, spread.mean, spread.mean_abs, unit_ns, *interval)
    for n, mean, mean_abs, ns, lower, upper in zip(*(a.tolist() for a in lists), strict=True):
        tol = 64.0 * (n + 1) * _EPS * mean_abs
        short.append(ns and n > 0 and mean < SHORT_NS)
        short_unsure.append(ns and n > 0 and not abs(mean - SHORT_NS) > tol)
        if n < 2:
            unstable.append(False)
            unstable_unsure.append(False)
            continue
        above, below = upper - mean, mean - lower
        reach = math.nan if math.isnan(above) or math.isnan(below) else max(above, below)
        edge = mean_abs > 0.0 and not (mean_abs >= SAFE_LOW and mean_abs * n <= SAFE_HIGH)
        if mean == 0.0:
            unstable.append(False)
            unstable_unsure.append(True)
            continue
        ratio = 100.0 * reach / abs(mean)
        unstable.append(not math.isnan(reach) and ratio > UNSTABLE_CI_PCT)
        close = not abs(ratio - UNSTABLE_CI_PCT) > window
        unstable_unsure.append(close or not abs(mean) > tol or not abs(reach) < 1e300 or edge)
    return tuple(np.array(v, dtype=np.bool_) for v in (short, short_unsure, unstable, unstable_unsure))  # type: ignore[return-value]


def _moments(spread: Spread) -> tuple[Floats, Floats, Ints, Floats, Floats, Floats]:
    """``spread``'s summaries in :func:`~nsightx._results.stats.mean_intervals`' order."""
    return spread.mean, spread.std, spread.n, spread.minimum, spread.log_mean, spread.log_var


def _judge_again(
    data: ResultData, table: ResultTable, groups: Groups, unsure: Bools, rule: str, verdict: Bools, unit: Ints
) -> None:
    """Judge the ``unsure`` groups again with the Python rule ``rule`` on their finite values (``verdict`` in place)."""
    todo = np.flatnonzero(unsure).tolist()
    if not todo:
        return
    call = CallEvidence(
        cache_control=data.plan.cache_control,
        serializes=bool(data.environment.get(SERIALIZES_KERNELS)),
        regions={},
        gpu_ns={},
        clocks={},
        throttled={},
    )
    order = np.argsort(groups.ids, kind="stable")
    size = np.bincount(groups.ids, minlength=groups.count)
    start = np.cumsum(size) - size
    annotations = table.annotations
    for gi in todo:
        rows = order[start[gi] : start[gi] + size[gi]]
        rows = rows[np.isfinite(table.value[rows])]
        first = groups.first[gi]
        row = RowEvidence(
            annotation=annotations[table.annotation[first]],
            metric=table.metrics[table.metric[first]],
            config=int(table.config[first]),
            unit=table.units[unit[gi]] if unit[gi] >= 0 else None,
            values=table.value[rows].tolist(),
            runs=table.run[rows].tolist(),
        )
        verdict[gi] = RULES[rule](row, call)


def _clock_varied(table: ResultTable, finite: Bools, groups: Groups, clocks: Mapping[Any, float]) -> Bools:
    """``clock_varied`` per group: the range of its runs' measured clocks against their median (exactly the rule).

    A group's verdict depends only on the clocks of its rows' runs: when every value is finite, groups that see the
    same runs (:meth:`Groups.shared_by`) are judged once, over one group of each class (issue 35: sorting all the
    rows by group and clock was the flags' largest cost with the nvml plugin's values).
    """
    if not clocks:
        return np.zeros(groups.count, dtype=np.bool_)
    if table.n <= SMALL:
        return _small_clock_varied(table, finite, groups, clocks)
    found, codes = table.lookup("run", clocks)
    per_key = np.append(np.asarray(found, dtype=np.float64), np.nan)  # MISSING (-1) picks the NaN
    shared = groups.shared_by(table.row_keys("run")) if bool(finite.all()) else None
    if shared is None:
        per_row = per_key[codes]
        return _varied(groups.ids, per_row, finite & ~np.isnan(per_row), groups.count)
    clock = per_key[codes[shared.rows]]  # the representative rows' clocks alone (no row-long array)
    return _varied(shared.ids, clock, ~np.isnan(clock), int(shared.of_group.max()) + 1)[shared.of_group]


def _small_clock_varied(table: ResultTable, finite: Bools, groups: Groups, clocks: Mapping[Any, float]) -> Bools:
    """:func:`_clock_varied` for a few value rows: each group over its own rows, in Python lists.

    A run's clock is looked up once per run (as :meth:`~nsightx._results.table.ResultTable.lookup` does; ``None``
    or no entry: no clock) and made a float as numpy makes it; each group is then judged by :func:`_small_varied`
    over its rows, which the classes of groups that see the same runs only spare repeating (their verdicts are
    those of each group's own rows). The lookup arrays and the classes cost more than the rule for a few rows.
    """
    keys = table.row_keys("run")
    per_key = [math.nan if v is None else float(v) for v in map(clocks.get, keys.keys)]
    clock = [per_key[c] for c in keys.ids.tolist()]
    kept = [f and not math.isnan(c) for f, c in zip(finite.tolist(), clock, strict=True)]
    return _small_varied(groups.ids.tolist(), clock, kept, groups.count)


def _varied(ids: Ints, clock: Floats, kept: Bools, count: int) -> Bools:
    """Per id (0 .. ``count`` - 1), the clock rule over the ``kept`` rows' ``clock`` (see :func:`_clock_varied`)."""
    if len(ids) <= SMALL:
        return _small_varied(ids.tolist(), clock.tolist(), kept.tolist(), count)
    out = np.zeros(count, dtype=np.bool_)
    rows = np.flatnonzero(kept)
    g, c = ids[rows], clock[rows]
    order = np.lexsort((c, g))
    g, c = g[order], c[order]
    k = np.bincount(g, minlength=count)
    start = np.cumsum(k) - k
    has = np.flatnonzero(k >= 2)
    s, m = start[has], k[has]
    low, high, mid = c[s], c[s + m - 1], s + m // 2
    median = np.where(m % 2 == 1, c[mid], (c[mid - 1] + c[mid]) / 2)  # statistics.median's arithmetic
    with np.errstate(invalid="ignore", divide="ignore"):
        out[has] = (median > 0) & (100.0 * (high - low) / median > CLOCK_VARIED_PCT)
    return out


def _small_varied(ids: list[int], clock: list[float], kept: list[bool], count: int) -> Bools:
    """:func:`_varied` over Python lists: each id's sorted clocks, the same median and comparisons."""
    per_id: list[list[float]] = [[] for _ in range(count)]
    for i, c, k in zip(ids, clock, kept, strict=True):
        if k:
            per_id[i].append(c)
    out = [False] * count
    for i, clocks in enumerate(per_id):
        m = len(clocks)
        if m < 2:
            continue
        clocks.sort()
        mid = m // 2
        median = clocks[mid] if m % 2 == 1 else (clocks[mid - 1] + clocks[mid]) / 2  # statistics.median's arithmetic
        out[i] = median > 0 and 100.0 * (clocks[-1] - clocks[0]) / median > CLOCK_VARIED_PCT
    return np.array(out, dtype=np.bool_)


def _gpu_ns(table: ResultTable) -> Floats:
    """Per region execution, the sum of its finite ``gpu__time_duration.sum`` records (NaN without one)."""
    regs = table.regions
    if not table.has_metric(GPU_TIME_METRIC):  # most results that get here have none (the host backend)
        return np.full(regs.n, np.nan)
    rec = table.columns.records
    picked = np.flatnonzero(rec.metric.codes == rec.metric.names.index(GPU_TIME_METRIC))
    value = rec.value[picked]
    ids, _ = group_ids(
        np.concatenate([regs.annotation, table.annotation_codes(rec.annotation)[picked]]),
        np.concatenate([regs.config, rec.config[picked]]),
        np.concatenate([regs.run, rec.run[picked]]),
    )
    ok = np.isfinite(value)
    span = int(ids.max()) + 1
    rec_ids = ids[regs.n :][ok]
    sums = np.bincount(rec_ids, weights=value[ok], minlength=span)  # in record order from 0.0, as the rule adds
    seen = np.bincount(rec_ids, minlength=span) > 0
    reg_ids = ids[: regs.n]
    return np.where(seen[reg_ids], sums[reg_ids], np.nan)


def _launch_verdicts(table: ResultTable) -> tuple[Bools, Bools] | None:
    """Per region execution: its launch-bound verdict and whether it has one (``_run_launch_bound`` of flags).

    None when no execution has a verdict (no backend attribute and no GPU time: the host backend), found without
    reading the executions' ids or host times.
    """
    regs = table.regions
    if not regs.has_attributes and not table.has_metric(GPU_TIME_METRIC):
        return None  # no execution has evidence, and no column of them was read
    own = regs.launch_bound
    if regs.n and bool((own >= 0).all()):  # the backend judged every execution itself (cupti): no time is read
        return own == 1, ~regs.failed
    gpu = regs.attribute("device_ns")
    with np.errstate(invalid="ignore"):
        use = ~(gpu > 0)
        gpu[use] = regs.attribute("span_ns")[use]
        if (~(gpu > 0) & (own < 0)).any():
            use = ~(gpu > 0)
            gpu[use] = _gpu_ns(table)[use]
        judged = (own >= 0) | (gpu > 0)
        if not judged.any():
            return None
        verdict = np.where(own >= 0, own == 1, regs.host_ns > gpu)  # host wall time, as the rule
    return verdict, judged & ~regs.failed


def _region_flags(table: ResultTable, groups: Groups, serializes: bool) -> tuple[Bools, Bools]:
    """``serialized`` and ``launch_bound`` per group, from the executions of its (annotation, config) region."""
    none = np.zeros(groups.count, dtype=np.bool_)
    regs = table.regions
    if serializes:
        with np.errstate(invalid="ignore"):
            many = regs.attribute("kernel_count") > 1
        if not many.any():
            return none, none
        (n_many,) = _region_sums(table, groups, many)
        return n_many > 0, none
    if regs.n + groups.count <= SMALL:
        if not regs.has_attributes and not table.has_metric(GPU_TIME_METRIC):
            return none, none  # no execution has evidence (the host backend)
        return none, _small_launch_bound(table, groups)
    verdicts = _launch_verdicts(table)
    if verdicts is None:
        return none, none
    verdict, judged = verdicts
    n_judged, n_bound = _region_sums(table, groups, judged, judged & verdict)
    return none, (n_judged > 0) & (2 * n_bound > n_judged)


def _small_launch_bound(table: ResultTable, groups: Groups) -> Bools:
    """``launch_bound`` per group for a few executions: :func:`_launch_verdicts` and :func:`_region_sums` in one pass.

    The same comparisons on the same numbers, per execution in plain Python: the two time attributes are read in one
    pass over the executions (:meth:`~nsightx._results.table.RegionView.attribute_lists`), the regions' GPU time
    from the records only where an execution without a verdict of its own has no time of its own (as there).
    Counts are exact integers either way.
    """
    regs = table.regions
    own = regs.launch_bound.tolist()
    device, span = regs.attribute_lists(("device_ns", "span_ns"))
    records: list[float] | None = None
    totals: dict[tuple[int, int], list[int]] = {}
    keys = zip(regs.annotation.tolist(), regs.config.tolist(), strict=True)
    rows = zip(keys, own, device, span, regs.host_ns.tolist(), regs.failed.tolist(), strict=True)
    for i, (key, mine, gpu, spent, host, failed) in enumerate(rows):
        if not gpu > 0:
            gpu = spent
            if not gpu > 0 and mine < 0:
                records = _gpu_ns(table).tolist() if records is None else records
                gpu = records[i]
        judged = (mine >= 0 or gpu > 0) and not failed
        bound = mine == 1 if mine >= 0 else host > gpu
        sums = totals.setdefault(key, [0, 0])
        sums[0] += judged
        sums[1] += judged and bound
    first = groups.first
    none = (0, 0)
    group_keys = zip(table.annotation[first].tolist(), table.config[first].tolist(), strict=True)
    per_group = [totals.get(key, none) for key in group_keys]
    return np.array([n > 0 and 2 * k > n for n, k in per_group], dtype=np.bool_)


def _region_sums(table: ResultTable, groups: Groups, *weights: Bools) -> list[Floats]:
    """Per group, the sum of each per-execution weight over the executions of its (annotation, config) region.

    ``np.bincount`` sums over one numbering of the regions; up to :data:`~nsightx._results.store.SMALL` executions
    and groups, a dictionary of (annotation, config) over Python lists (the same sums, added in the same order).
    """
    regs = table.regions
    if regs.n + groups.count > SMALL:
        reg_ids, grp_ids, span = _region_keys(table, groups)
        counted = [np.bincount(reg_ids, weights=w, minlength=span) for w in weights]  # float64: weighted
        return [c.astype(np.float64, copy=False)[grp_ids] for c in counted]
    totals: dict[tuple[int, int], list[float]] = {}
    keys = zip(regs.annotation.tolist(), regs.config.tolist(), strict=True)
    for key, *row in zip(keys, *(w.tolist() for w in weights), strict=True):
        sums = totals.setdefault(key, [0.0] * len(weights))
        for j, w in enumerate(row):
            sums[j] += w
    none = [0.0] * len(weights)
    first = groups.first
    group_keys = zip(table.annotation[first].tolist(), table.config[first].tolist(), strict=True)
    per_group = [totals.get(key, none) for key in group_keys]
    return [np.array([sums[j] for sums in per_group], dtype=np.float64) for j in range(len(weights))]


def _region_keys(table: ResultTable, groups: Groups) -> tuple[Ints, Ints, int]:
    """One numbering of (annotation, config) over the region executions and the groups: their ids, and the span."""
    regs = table.regions
    ids, _ = group_ids(
        np.concatenate([regs.annotation, table.annotation[groups.first]]),
        np.concatenate([regs.config, table.config[groups.first]]),
    )
    return ids[: regs.n], ids[regs.n :], int(ids.max()) + 1


def flag_cells(
    data: ResultData,
    table: ResultTable,
    groups: Groups,
    throttled: Mapping[Any, bool] | None,
    spread: Spread | None = None,
    was_throttled: Bools | None = None,
    interval: tuple[Floats, Floats] | None = None,
    clocks: Mapping[Any, float] | None = None,
) -> list[str]:
    """The ``Flags`` cell of every group, in group order (``row_flags``' cells for the same rows).

    Args:
        data: The result (plan and environment).
        table: Its columnar view.
        groups: The aggregated rows.
        throttled: (config, run) -> throttled (``throttled_runs`` of the DataFrame module); ``None``: none known.
        spread: :func:`spread_of` the table and groups, when the caller has it already.
        was_throttled: :func:`throttled_rows`' first array for ``throttled``, when the caller has it already.
        interval: (lower, upper) of each group's mean, from summaries of the same finite values as ``spread``'s
            (its counts, means and minima; a standard deviation within rounding of its own), when the caller has
            it already (the DataFrame's ``CI95`` columns, :func:`shares_interval`). The ``unstable`` verdict
            compares it with a window far wider than rounding and judges a group inside the window again by the
            rule, so either interval gives the rule's verdicts.
        clocks: :func:`~nsightx._results.flags.run_clocks` of the table's clock values, when the caller has it
            already (the DataFrame's throttling verdict reads them in the same pass).
    """
    finite = np.isfinite(table.value)
    if was_throttled is None:
        was_throttled = np.zeros(table.n, np.bool_) if not throttled else throttled_rows(table, throttled)[0]
    spread = spread_of(table, groups) if spread is None else spread
    unit = _first_units(table, groups)
    unit_ns = (unit == table.units.index("ns")) if "ns" in table.units else np.zeros(groups.count, np.bool_)
    short, short_unsure, unstable, unstable_unsure = _short_and_unstable(spread, unit_ns, interval)
    _judge_again(data, table, groups, short_unsure, "short", short, unit)
    _judge_again(data, table, groups, unstable_unsure, "unstable", unstable, unit)
    serialized, launch_bound = _region_flags(table, groups, bool(data.environment.get(SERIALIZES_KERNELS)))
    verdicts = {
        "clock_varied": _clock_varied(
            table, finite, groups, run_clocks(table.clock_values) if clocks is None else clocks
        ),
        "few_runs": spread.n < FEW_RUNS,
        "launch_bound": launch_bound,
        "serialized": serialized,
        "short": short,
        "throttled": _any_per_group(groups, was_throttled & finite),
        "unstable": unstable,
        "warm": np.full(groups.count, data.plan.cache_control == "none"),
    }
    return _cells(verdicts)


def _any_per_group(groups: Groups, rows: Bools) -> Bools:
    """Per group, whether any of its rows is set in ``rows`` (no row-long weights: ``bincount`` makes them float)."""
    out = np.zeros(groups.count, np.bool_)
    out[groups.ids[rows]] = True
    return out


def _cells(verdicts: Mapping[str, Bools]) -> list[str]:
    """The comma-joined cell of each row's flags, made once per distinct combination."""
    if len(verdicts[FLAGS[0]]) <= SMALL:  # a few rows: their verdicts as Python tuples, no numpy call per flag
        rows = list(zip(*(verdicts[name].tolist() for name in FLAGS), strict=True))
        text = {row: flags_cell(name for name, v in zip(FLAGS, row, strict=True) if v) for row in set(rows)}
        return [text[row] for row in rows]
    bits = np.zeros(len(verdicts[FLAGS[0]]), dtype=np.int64)
    for i, name in enumerate(FLAGS):
        bits |= verdicts[name].astype(np.int64) << i
    cells = {
        int(b): flags_cell(name for i, name in enumerate(FLAGS) if int(b) >> i & 1) for b in np.unique(bits).tolist()
    }
    return [cells[b] for b in bits.tolist()]
