"""Walking an ``.ncu-rep`` with ``ncu_report`` into plain :class:`Action` rows.

The backend runs this module in a short-lived child process (``python -m nsightx_ncu._reader '<json>'``), so the
user's process never maps an Nsight Compute library. It imports neither pydantic nor the rest of nsightx, to
keep that child quick. The reader is the install's ``extras/python/ncu_report.py`` when there is one, else the
``ncu-report`` package (which also reads reports of older ncu versions, e.g. 2025.3.1).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

DOMAIN = "nsightx"
"""NVTX domain that carries the identity of each measured region."""

DEVICE_METRICS: tuple[str, ...] = (
    "device__attribute_display_name",
    "device__attribute_clock_rate",
    "device__attribute_memory_clock_rate",
)
"""Device attributes every report holds; they fill the environment, not the records."""

Value = float | int | str | bool | None


@dataclass
class Action:
    """One profiled result (a kernel, or a whole range under range replay), reduced to plain data."""

    kernel: str
    """The kernel's name in ncu's default name base (``NameBase_FUNCTION``), the name nsight-python's ``Kernel``
    column shows and its ``ignore_kernel_list`` matches (the demangled name when that one is empty)."""
    workload: str
    """``kernel``, ``range``, ``graph`` or ``other``."""
    ranges: list[str] = field(default_factory=list)
    """Names of the ``nsightx``-domain NVTX ranges open around it (push/pop innermost last, then start/end)."""
    metrics: dict[str, tuple[Value, str]] = field(default_factory=dict)
    """Metric name -> (value, unit) for the metrics read."""

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready form."""
        return {
            "kernel": self.kernel,
            "workload": self.workload,
            "ranges": self.ranges,
            "metrics": {k: list(v) for k, v in self.metrics.items()},
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Action:
        """Inverse of :meth:`to_json`."""
        return cls(
            kernel=data["kernel"],
            workload=data["workload"],
            ranges=list(data["ranges"]),
            metrics={k: (v[0], v[1]) for k, v in data["metrics"].items()},
        )


def import_reader(reader_dir: str | None) -> Any:
    """Import ``ncu_report`` from ``reader_dir`` (an install's ``extras/python``) or from the installed package."""
    if reader_dir and reader_dir not in sys.path:
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


def _metric(action: Any, name: str, string_kind: int) -> tuple[Value, str] | None:
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
        deep: Also read every other metric (sets and sections were collected).
        reader_dir: Folder holding ``ncu_report.py`` (an install's ``extras/python``); ``None`` imports the
            ``ncu-report`` package.

    Returns:
        The actions in report order (launch order).
    """
    ncu_report = import_reader(reader_dir)
    string_kind = ncu_report.IMetric.ValueKind_STRING
    kinds = {
        ncu_report.IAction.WorkloadType_KERNEL: "kernel",
        ncu_report.IAction.WorkloadType_RANGE: "range",
        ncu_report.IAction.WorkloadType_GRAPH: "graph",
    }
    context = ncu_report.load_report(path)
    wanted = list(dict.fromkeys([*metrics, *DEVICE_METRICS]))
    actions: list[Action] = []
    for r in range(context.num_ranges()):
        report_range = context.range_by_idx(r)
        for a in range(report_range.num_actions()):
            action = report_range.action_by_idx(a)
            names = wanted + [m for m in action.metric_names() if m not in wanted] if deep else wanted
            values: dict[str, tuple[Value, str]] = {}
            for metric_name in names:
                got = _metric(action, metric_name, string_kind)
                if got is not None:
                    values[metric_name] = got
            actions.append(
                Action(
                    kernel=action.name() or action.name(ncu_report.IAction.NameBase_DEMANGLED),
                    workload=kinds.get(action.workload_type(), "other"),
                    ranges=_nvtx_ranges(action),
                    metrics=values,
                )
            )
    return actions


def main(argv: list[str] | None = None) -> int:
    """Child-process entry; writes the actions of one report as JSON.

    ``python -m nsightx_ncu._reader '<json arguments>'`` reads at once. ``python -m nsightx_ncu._reader --stdin
    '{"reader_dir": ...}'`` imports the reader first and then waits for one line of JSON arguments on its
    standard input (:class:`nsightx_ncu._readchild.ReaderChild`); an empty input (the sweep made no report)
    ends it with nothing written.
    """
    argv = sys.argv if argv is None else argv
    if argv[1] == "--stdin":
        reader_dir = json.loads(argv[2])["reader_dir"]
        import_reader(reader_dir)
        line = sys.stdin.readline()
        if not line.strip():
            return 0
        args = {"reader_dir": reader_dir, **json.loads(line)}
    else:
        args = json.loads(argv[1])
    actions = read_report(args["report"], args["metrics"], deep=args["deep"], reader_dir=args["reader_dir"])
    with open(args["out"], "w", encoding="utf-8") as fh:
        json.dump([a.to_json() for a in actions], fh)
    return 0


if __name__ == "__main__":
    sys.exit(main())
