"""Reading an ``.ncu-rep`` back into nsightx records.

Two layers. :func:`read_report` walks the report with ``ncu_report`` (the module in the ncu install's
``extras/python``, or the ``ncu-report`` package) and returns plain :class:`Action` rows. The backend runs it in a
short-lived child process (``python -m nsightx_ncu._report``), so the user's process never maps an Nsight Compute
library. :func:`merge_runs` and :func:`environment` are pure: they attribute each action to its region by the
NVTX range name it carries (never by position) and merge it with the worker's host-side records.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from nsightx._records import Record, RegionId, RegionRun, RunRecords, Scalar
from nsightx_ncu._command import DOMAIN, parse_range_name

DEVICE_METRICS: tuple[str, ...] = (
    "device__attribute_display_name",
    "device__attribute_clock_rate",
    "device__attribute_memory_clock_rate",
)
"""Device attributes every report holds; they fill the environment, not the records."""

SM_CLOCK_METRIC = "gpc__cycles_elapsed.avg.per_second"
"""When collected, its mean over the profiled kernels is recorded as ``MeasuredComputeClock`` (kHz)."""

UNIT_ALIASES: Mapping[str, str] = {"nsecond": "ns", "usecond": "us", "msecond": "ms", "second": "s"}
"""Time units renamed to the short forms the other backends use; every other ncu unit is kept as is."""

_PER_UNIT_HZ: Mapping[str, float] = {"second": 1.0, "msecond": 1e3, "usecond": 1e6, "nsecond": 1e9}
_HZ_UNITS: Mapping[str, float] = {"hz": 1.0, "khz": 1e3, "mhz": 1e6, "ghz": 1e9}


@dataclass
class Action:
    """One profiled result (a kernel, or a whole range under range replay), reduced to plain data."""

    kernel: str
    """Demangled kernel name (the action's name under range replay)."""
    workload: str
    """``kernel``, ``range``, ``graph`` or ``other``."""
    ranges: list[str] = field(default_factory=list)
    """Names of the ``nsightx``-domain NVTX ranges open around it (innermost last)."""
    metrics: dict[str, tuple[Scalar, str]] = field(default_factory=dict)
    """Metric name -> (value, unit) for the metrics read."""

    @property
    def region(self) -> RegionId | None:
        """The region identity carried by its NVTX range (the innermost one that parses)."""
        for name in reversed(self.ranges):
            region = parse_range_name(name)
            if region is not None:
                return region
        return None

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready form."""
        return {"kernel": self.kernel, "workload": self.workload, "ranges": self.ranges,
                "metrics": {k: list(v) for k, v in self.metrics.items()}}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Action:
        """Inverse of :meth:`to_json`."""
        return cls(kernel=data["kernel"], workload=data["workload"], ranges=list(data["ranges"]),
                   metrics={k: (v[0], v[1]) for k, v in data["metrics"].items()})


def _import_reader(reader_dir: str | None) -> Any:
    if reader_dir:
        sys.path.insert(0, reader_dir)
    import ncu_report

    return ncu_report


def _nvtx_ranges(action: Any) -> list[str]:
    state = action.nvtx_state()
    if state is None:
        return []
    names: list[str] = []
    for domain_id in state.domains():
        domain = state.domain_by_id(domain_id)
        if domain is None or domain.name() != DOMAIN:
            continue
        names += list(domain.push_pop_ranges() or ())
        names += list(domain.start_end_ranges() or ())
    return names


def _metric(action: Any, name: str, string_kind: int) -> tuple[Scalar, str] | None:
    metric = action.metric_by_name(name)
    if metric is None or not metric.has_value():
        return None
    if metric.kind() == string_kind:
        return metric.as_string(), metric.unit() or ""
    return float(metric.as_double()), metric.unit() or ""


def read_report(
    path: str, metrics: Sequence[str], *, deep: bool = False, reader_dir: str | None = None
) -> list[Action]:
    """Read every action of a report.

    Args:
        path: The ``.ncu-rep`` file.
        metrics: Metric names to read (device attributes are always read).
        deep: Also read every other numeric metric (sets and sections were collected).
        reader_dir: Folder holding ``ncu_report.py`` (the install's ``extras/python``); ``None`` imports the
            ``ncu-report`` package.

    Returns:
        The actions, in report order (launch order within each range).
    """
    ncu_report = _import_reader(reader_dir)
    string_kind = ncu_report.IMetric.ValueKind_STRING
    kinds = {
        ncu_report.IAction.WorkloadType_KERNEL: "kernel",
        ncu_report.IAction.WorkloadType_RANGE: "range",
        ncu_report.IAction.WorkloadType_GRAPH: "graph",
    }
    context = ncu_report.load_report(path)
    actions: list[Action] = []
    for r in range(context.num_ranges()):
        report_range = context.range_by_idx(r)
        for a in range(report_range.num_actions()):
            action = report_range.action_by_idx(a)
            workload = kinds.get(action.workload_type(), "other")
            name = action.name(ncu_report.IAction.NameBase_DEMANGLED) or action.name()
            wanted = list(dict.fromkeys([*metrics, *DEVICE_METRICS]))
            if deep:
                wanted += [m for m in action.metric_names() if m not in wanted]
            values: dict[str, tuple[Scalar, str]] = {}
            for metric_name in wanted:
                got = _metric(action, metric_name, string_kind)
                if got is not None:
                    values[metric_name] = got
            actions.append(Action(kernel=name, workload=workload, ranges=_nvtx_ranges(action), metrics=values))
    return actions


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
        m for m, (v, _u) in action.metrics.items()
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
        region = action.region
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
        failed = {reg.annotation for reg in run.regions if reg.failed}
        counts: dict[str, int] = {}
        records: list[Record] = []
        for action in placed:
            region = action.region
            assert region is not None  # grouped above
            ann = region.annotation
            if ann in failed:  # the core reports a failed region as NaN from its RegionRun
                continue
            seq = counts.get(ann, 0)
            counts[ann] = seq + 1
            kernel = "range" if action.workload == "range" else action.kernel
            names = list(metrics) + (_deep_names(action, metrics) if deep else [])
            for name in names:
                value, unit = action.metrics.get(name, (math.nan, ""))
                records.append(Record(annotation=ann, config=run.config, run=run.run, kernel=kernel,
                                      metric=name, value=_numeric(value), unit=_unit(unit), seq=seq))
        regions = tuple(
            RegionRun.model_validate({**reg.model_dump(), "attributes": {
                **reg.attributes, "kernel_count": counts.get(reg.annotation, 0)}})
            for reg in run.regions
        )
        out.append(run.model_copy(update={"records": (*run.records, *records), "regions": regions}))
    unattributed += sum(len(v) for v in by_run.values())
    return MergeResult(runs=out, profiled=profiled, unattributed=unattributed)


def _to_khz(value: float, unit: str) -> float:
    u = unit.strip().lower()
    if u in _HZ_UNITS:
        return value * _HZ_UNITS[u] / 1e3
    if "/" in u:
        per = u.split("/", 1)[1]
        if per in _PER_UNIT_HZ:
            return value * _PER_UNIT_HZ[per] / 1e3
    return value  # CUDA device attributes are in kHz when no unit says otherwise


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
            for key, metric in (("ComputeClock", "device__attribute_clock_rate"),
                                ("MemoryClock", "device__attribute_memory_clock_rate")):
                if metric in action.metrics:
                    value, unit = action.metrics[metric]
                    env[key] = round(_to_khz(_numeric(value), unit))
            break
    clocks = [_to_khz(_numeric(a.metrics[SM_CLOCK_METRIC][0]), a.metrics[SM_CLOCK_METRIC][1])
              for a in actions if SM_CLOCK_METRIC in a.metrics]
    clocks = [c for c in clocks if not math.isnan(c)]
    if clocks:
        env["MeasuredComputeClock"] = round(sum(clocks) / len(clocks))
    return env


def main(argv: list[str] | None = None) -> int:
    """Child-process entry: ``python -m nsightx_ncu._report '<json arguments>'``; writes the actions as JSON."""
    args = json.loads((sys.argv if argv is None else argv)[1])
    actions = read_report(args["report"], args["metrics"], deep=args["deep"], reader_dir=args["reader_dir"])
    with open(args["out"], "w", encoding="utf-8") as fh:
        json.dump([a.to_json() for a in actions], fh)
    return 0


if __name__ == "__main__":
    sys.exit(main())
