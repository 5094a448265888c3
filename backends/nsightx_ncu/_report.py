"""Turning the report's actions into nsightx records (pure functions).

:mod:`nsightx_ncu._reader` walks the report (in a child process) into plain :class:`Action` rows; here each
action is attributed to its region by the NVTX range name it carries (never by position) and merged with the
worker's host-side records, and the device facts become the environment.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from nsightx.columns import MEASURED_SM_CLOCK
from nsightx.ext import CollectorValue, Record, RegionId, RegionRun, RunRecords, Scalar
from nsightx_ncu._command import parse_range_name
from nsightx_ncu._reader import Action

SM_CLOCK_METRIC = "gpc__cycles_elapsed.avg.per_second"
"""When collected, its mean over each run's kernels becomes that run's ``MeasuredSMClockMHz`` value, and its mean
over all kernels the environment's ``MeasuredComputeClock`` (kHz)."""

MEASURED_SM_CLOCK_COLUMN = MEASURED_SM_CLOCK
"""The RUN-scope column the core shows as the measured SM clock (the nvml plugin writes it too)."""

UNIT_ALIASES: Mapping[str, str] = {"nsecond": "ns", "usecond": "us", "msecond": "ms", "second": "s"}
"""Time units renamed to the short forms the other backends use; every other ncu unit is kept as is."""

_PER_UNIT_HZ: Mapping[str, float] = {"second": 1.0, "msecond": 1e3, "usecond": 1e6, "nsecond": 1e9}
_HZ_UNITS: Mapping[str, float] = {"hz": 1.0, "khz": 1e3, "mhz": 1e6, "ghz": 1e9}


def region_of(action: Action) -> RegionId | None:
    """The region identity carried by an action's NVTX ranges (the innermost one that parses)."""
    for name in reversed(action.ranges):
        region = parse_range_name(name)
        if region is not None:
            return region
    return None


@dataclass
class MergeResult:
    """What :func:`merge_runs` produced, plus what it could not place."""

    runs: list[RunRecords]
    """The worker's runs, completed with metric records and ``kernel_count`` region attributes."""
    profiled: int = 0
    """Actions attributed to a completed run."""
    unattributed: int = 0
    """Actions whose NVTX identity names no completed run (a run that crashed, or no identity at all)."""


def _unit(unit: str) -> str | None:
    return UNIT_ALIASES.get(unit, unit) if unit else None


def _numeric(value: Scalar) -> float:
    if isinstance(value, bool) or value is None:
        return math.nan
    if isinstance(value, int | float):
        return float(value)
    try:
        return float(value)
    except ValueError:
        return math.nan


def _deep_names(action: Action, requested: Sequence[str]) -> list[str]:
    return sorted(
        m
        for m, (v, _u) in action.metrics.items()
        if m not in requested and not m.startswith("device__attribute_") and not isinstance(v, str)
    )


def merge_runs(
    actions: Iterable[Action], worker_runs: Iterable[RunRecords], metrics: Sequence[str], *, deep: bool = False
) -> MergeResult:
    """Attach each action's metric values to the worker run and region its NVTX identity names.

    Args:
        actions: Actions read from the report.
        worker_runs: What the worker's sink wrote (host times, collectors), in order.
        metrics: The requested metrics; a metric missing from an action gets NaN.
        deep: Also emit every other numeric metric of each action (sets and sections).

    Returns:
        The completed runs, in the worker's order, and counts of placed and unplaced actions.
    """
    by_run: dict[tuple[int, int], list[Action]] = {}
    unattributed = 0
    for action in actions:
        region = region_of(action)
        if region is None:
            unattributed += 1
            continue
        by_run.setdefault((region.config, region.run), []).append(action)
    out: list[RunRecords] = []
    profiled = 0
    for run in worker_runs:
        if run.config < 0:
            out.append(run)
            continue
        placed = by_run.pop((run.config, run.run), [])
        profiled += len(placed)
        out.append(_merge_run(run, placed, metrics, deep))
    unattributed += sum(len(v) for v in by_run.values())
    return MergeResult(runs=out, profiled=profiled, unattributed=unattributed)


def _merge_run(run: RunRecords, placed: Sequence[Action], metrics: Sequence[str], deep: bool) -> RunRecords:
    """One worker run with the records of its actions, its regions' kernel counts and its measured clock."""
    failed = {reg.annotation for reg in run.regions if reg.failed}
    counts: dict[str, int] = {}
    records: list[Record] = []
    for action in placed:
        region = region_of(action)
        assert region is not None  # grouped by merge_runs
        ann = region.annotation
        if ann in failed:  # the core reports a failed region as NaN from its RegionRun
            continue
        seq = counts.get(ann, 0)
        counts[ann] = seq + 1
        kernel = "range" if action.workload == "range" else action.kernel
        names = list(metrics) + (_deep_names(action, metrics) if deep else [])
        for name in names:
            value, unit = action.metrics.get(name, (math.nan, ""))
            records.append(
                Record(
                    annotation=ann,
                    config=run.config,
                    run=run.run,
                    kernel=kernel,
                    metric=name,
                    value=_numeric(value),
                    unit=_unit(unit),
                    seq=seq,
                )
            )
    regions = tuple(
        RegionRun.model_validate(
            {**reg.model_dump(), "attributes": {**reg.attributes, "kernel_count": counts.get(reg.annotation, 0)}}
        )
        for reg in run.regions
    )
    collectors = (*run.collectors, *_measured_clock(run, placed))
    return run.model_copy(update={"records": (*run.records, *records), "regions": regions, "collectors": collectors})


def _measured_clock(run: RunRecords, placed: Sequence[Action]) -> list[CollectorValue]:
    """The run's mean measured SM clock (MHz) as the RUN-scope value the core shows next to ``ComputeClock``.

    Added only when ``gpc__cycles_elapsed.avg.per_second`` was collected and no collector (e.g. the nvml plugin)
    already wrote that value for the run.
    """
    if any(cv.name == MEASURED_SM_CLOCK_COLUMN for cv in run.collectors):
        return []
    clocks = [
        _to_khz(_numeric(a.metrics[SM_CLOCK_METRIC][0]), a.metrics[SM_CLOCK_METRIC][1])
        for a in placed
        if SM_CLOCK_METRIC in a.metrics
    ]
    clocks = [c for c in clocks if math.isfinite(c)]  # NaN or inf (a zero-length interval) measured nothing
    if not clocks:
        return []
    mhz = round(sum(clocks) / len(clocks) / 1e3, 1)
    return [CollectorValue(name=MEASURED_SM_CLOCK_COLUMN, scope="run", config=run.config, run=run.run, value=mhz)]


def _to_khz(value: float, unit: str) -> float:
    """A clock in kHz; NaN for a unit not known here (a guessed scale would be a silently wrong clock)."""
    u = unit.strip().lower()
    if not u:
        return value  # CUDA device attributes are in kHz when no unit says otherwise
    if u in _HZ_UNITS:
        return value * _HZ_UNITS[u] / 1e3
    count, _, per = u.partition("/")
    if count == "cycle" and per in _PER_UNIT_HZ:
        return value * _PER_UNIT_HZ[per] / 1e3
    return math.nan


def environment(actions: Sequence[Action]) -> dict[str, Scalar]:
    """Device facts from the report.

    ``ComputeClock`` and ``MemoryClock`` are the device's rated clocks (kHz, static attributes, as in
    nsight-python). ``MeasuredComputeClock`` (kHz) is the mean SM clock measured while the kernels ran, present
    only when ``gpc__cycles_elapsed.avg.per_second`` was collected.
    """
    env: dict[str, Scalar] = {}
    for action in actions:
        name = action.metrics.get("device__attribute_display_name")
        if name is not None:
            env["GPU"] = str(name[0])
            for key, metric in (
                ("ComputeClock", "device__attribute_clock_rate"),
                ("MemoryClock", "device__attribute_memory_clock_rate"),
            ):
                if metric in action.metrics:
                    value, unit = action.metrics[metric]
                    khz = _to_khz(_numeric(value), unit)
                    if math.isfinite(khz):
                        env[key] = round(khz)
            break
    clocks = [
        _to_khz(_numeric(a.metrics[SM_CLOCK_METRIC][0]), a.metrics[SM_CLOCK_METRIC][1])
        for a in actions
        if SM_CLOCK_METRIC in a.metrics
    ]
    clocks = [c for c in clocks if math.isfinite(c)]
    if clocks:
        env["MeasuredComputeClock"] = round(sum(clocks) / len(clocks))
    return env
