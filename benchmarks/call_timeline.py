"""Issue 13: the timeline of one profiled call on the matmul sweep: what the host does before the first launch,
between runs, while the GPU still works, and after the last synchronisation.

    PYTHONPATH=.:backends:plugins python benchmarks/call_timeline.py --out OUTDIR [--calls 9] [--tree PATH]

For ``backend_overhead.py``'s ``sweep_once`` and ``sweep_randn`` workloads and each in-process backend (default
options and collectors), times ``--calls`` calls after a warm-up with timers wrapped around the entry points of
every stage (:data:`TARGETS`) and stamps taken when the user's function first starts, when its last work ends, and when
the session's final wait for the GPU begins and ends. Per backend and workload it reports medians over calls:

* ``phases_us``: ``pre`` (call start to the first run of the function: planning, ONCE collectors, session
  start), ``loop`` (first run to the last return), ``tail`` (the last return to the final wait: host work the
  queued GPU work can hide), ``wait`` (the final wait), ``post`` (after it: decoding, validation, results);
* ``spent_us``: microseconds per call inside each wrapped function, and its call count;
* ``median_call_spans_us``: the median call's spans of the wrapped functions called at most 16 times in it;
* the bare loop's wall time beside it (``bare_ms``), so ``pre + post`` can be read against the 5% budget.

The timers cost about a microsecond per wrapped call; the run loop's per-run functions are wrapped too, so
``loop`` reads a few tens of microseconds high. Writes OUTDIR/call_timeline.json.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import json
import statistics
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from backend_overhead import WORKLOADS, make_bare, make_profiled, use_tree

TARGETS: tuple[str, ...] = (
    "nsightx._api.kernel:ProfiledFunction._run",
    "nsightx._api.kernel:ProfiledFunction._measure",
    "nsightx._api.kernel:build_plan",
    "nsightx._api.kernel:plan_info",
    "nsightx._api.kernel:build_results",
    "nsightx._api.kernel:choose",
    "nsightx._results.results:combine_records",
    "nsightx._api.kernel:ProfiledFunction._collectors",
    "nsightx._api.kernel:ProfiledFunction._resolve_configs",
    "nsightx._api.kernel:FirstRunCheck.__call__",
    "nsightx._run.loop:use_device",
    "nsightx._run.loop:_Sweep.__init__",
    "nsightx._run.loop:run_loop",
    "nsightx._run.loop:_write_pending",
    "nsightx._run.loop:_Collectors.start",
    "nsightx._run.loop:_Collectors.stop",
    "nsightx._run.loop:_Collectors.materialize",
    "nsightx._run.loop:_Collectors.gather",
    "nsightx._run.loop:_Runner.run",
    "nsightx_nvml._collectors:DeviceInfo.collect",
    "nsightx_nvml._collectors:RunConditions.collect",
    "nsightx_nvml._collectors:RunConditions.start",
    "nsightx_nvml._collectors:RunConditions.stop",
    "nsightx_nvml._collectors:NvmlTemperatureSource.read",
    "nsightx_nvml._sampler:acquire",
    "nsightx_nvml._sampler:release",
    "nsightx_nvml._sampler:ProcessSampler.start",
    "nsightx_nvml._sampler:ProcessSampler.sample",
    "nsightx_nvml._sampler:ProcessSampler.demand",
    "nsightx_nvml._sampler:ProcessSampler.latest",
    "nsightx_nvml._lib:Nvml.uuid",
    "nsightx_nvml._lib:Nvml.power_limit_w",
    "nsightx._run.thermal:ThermalGuard.before_run",
    "nsightx._run.thermal:ThermalGuard.take_values",
    "nsightx_cupti._session:CudaDevice.__init__",
    "nsightx_cupti._session:CudaDevice.synchronize",
    "nsightx_cupti._session:CudaDevice.close",
    "nsightx_cupti._session:CuptiSession.collect_runs",
    "nsightx_cupti._session:CuptiSession.environment",
    "nsightx_cupti._session:CuptiSession._drain",
    "nsightx_cupti._session:attribute",
    "nsightx_cupti._session:to_run_outputs",
    "nsightx_cupti._session:CuptiSession._check_silent",
    "nsightx_cupti._session:CuptiSession._attribute",
    "nsightx_cupti._session:CuptiSession._wait",
    "nsightx_cupti._session:wait_draining",
    "nsightx_cupti._tracer:ActivityTracer.drain",
    "nsightx_cupti._tracer:ActivityTracer._buffer_completed",
    "nsightx_cupti._tracer:ActivityTracer._sing",
    "nsightx_cupti._tracer:ActivityTracer._switch",
    "nsightx_cupti._tracer:ActivityTracer._silence",
    "nsightx_cupti._tracer:ActivityTracer._check_canary",
    "nsightx_cupti._tracer:ActivityTracer.dropped",
    "nsightx_cupti._tracer:check_clock",
    "nsightx_cupti._backend:CuptiBackend.validate",
    "nsightx_cupti._tracer:ActivityTracer.start",
    "nsightx_cupti._tracer:ActivityTracer.stop",
    "nsightx_cupti._tracer:ActivityTracer.collect",
    "nsightx_events._backend:EventsSession.__init__",
    "nsightx_events._backend:EventsSession.collect_runs",
    "nsightx_events._backend:EventsSession._read",
    "nsightx_events._backend:EventsSession.environment",
)
"""``module:attribute`` (a module-level name as the module looks it up, or ``Class.method``) to time."""

WAITS = {"cupti": "CudaDevice.synchronize", "events": "EventsSession._read"}
"""Per backend, the wrapped call whose last occurrence in a call is the final wait for the GPU."""


class Clock:
    """Wrapped calls' durations and the stamps of one call (nanoseconds since the call began)."""

    def __init__(self) -> None:
        self.t0 = 0
        self.spent: dict[str, list[int]] = {}
        self.spans: dict[str, list[tuple[int, int]]] = {}
        self.user: list[tuple[int, int]] = []

    def reset(self) -> None:
        self.t0 = time.perf_counter_ns()
        self.spent, self.spans, self.user = {}, {}, []

    def wrap(self, target: str) -> Callable[[], None] | None:
        """Time ``target``; returns the undo (``None`` when the module or attribute is not there)."""
        mod_name, attr = target.split(":")
        try:
            owner: Any = importlib.import_module(mod_name)
        except ImportError:
            return None
        *path, leaf = attr.split(".")
        for part in path:
            owner = getattr(owner, part, None)
            if owner is None:
                return None
        original = owner.__dict__.get(leaf) if isinstance(owner, type) else getattr(owner, leaf, None)
        if original is None:
            return None
        clock = self

        @functools.wraps(original)
        def timed(*a: Any, **kw: Any) -> Any:
            start = time.perf_counter_ns()
            try:
                return original(*a, **kw)
            finally:
                end = time.perf_counter_ns()
                clock.spent.setdefault(attr, []).append(end - start)
                clock.spans.setdefault(attr, []).append((start - clock.t0, end - clock.t0))

        setattr(owner, leaf, timed)
        return lambda: setattr(owner, leaf, original)


class Stamped:
    """A ``backend_overhead.py`` workload whose runs stamp when the user's function starts and ends (into ``clock``)."""

    def __init__(self, w: Any, clock: Clock) -> None:
        self.w, self.clock = w, clock
        self.name, self.sizes, self.runs, self.randn, self.tiny = w.name, w.sizes, w.runs, w.randn, w.tiny

    def inputs(self, torch: Any) -> Any:
        return self.w.inputs(torch)

    def prepare(self, torch: Any, inputs: Any, n: int) -> Any:
        self._start = time.perf_counter_ns() - self.clock.t0  # the function's first line
        return self.w.prepare(torch, inputs, n)

    def work(self, a: Any, b: Any) -> None:
        self.w.work(a, b)
        self.clock.user.append((self._start, time.perf_counter_ns() - self.clock.t0))


def timeline(torch: Any, w: Any, backend: str, calls: int) -> dict[str, Any]:
    """Medians over ``calls`` calls of the phases and of the time inside each wrapped function."""
    clock = Clock()
    fn = make_profiled(torch, Stamped(w, clock), backend, collectors=True)  # the same default variant
    fn()  # warm-up, unwrapped
    undo = [u for t in TARGETS if (u := clock.wrap(t)) is not None]
    per_call: list[dict[str, float]] = []
    call_spans: list[dict[str, list[tuple[float, float]]]] = []
    spent: dict[str, list[float]] = {}
    counts: dict[str, int] = {}
    try:
        for _ in range(calls):
            torch.cuda.synchronize()
            clock.reset()
            fn()
            total = time.perf_counter_ns() - clock.t0
            wait = clock.spans.get(WAITS[backend], [(total, total)])[-1]
            first, last = clock.user[0][0], clock.user[-1][1]
            per_call.append(
                {
                    "total": total / 1e3,
                    "pre": first / 1e3,
                    "loop": (last - first) / 1e3,
                    "tail": (wait[0] - last) / 1e3,
                    "wait": (wait[1] - wait[0]) / 1e3,
                    "post": (total - wait[1]) / 1e3,
                }
            )
            call_spans.append({k: [(a / 1e3, b / 1e3) for a, b in v] for k, v in clock.spans.items()})
            for name, times in clock.spent.items():
                spent.setdefault(name, []).append(sum(times) / 1e3)
                counts[name] = len(times)
    finally:
        for u in reversed(undo):
            u()
    return {
        "phases_us": {k: round(statistics.median(c[k] for c in per_call), 1) for k in per_call[0]},
        "spent_us": {k: round(statistics.median(v), 1) for k, v in sorted(spent.items(), key=lambda kv: -max(kv[1]))},
        "calls_per_call": counts,
        "all_phases_us": per_call,
        "median_call_spans_us": median_spans(per_call, call_spans),
    }


def median_spans(
    per_call: list[dict[str, float]], call_spans: list[dict[str, list[tuple[float, float]]]]
) -> list[tuple[str, float, float]]:
    """The median call's wrapped spans (start, end in us since the call began), ordered by start; the per-run
    ones (more than 16 calls) left out."""
    totals = sorted(range(len(per_call)), key=lambda i: per_call[i]["total"])
    spans = call_spans[totals[len(totals) // 2]]
    flat = [(k, round(a, 1), round(b, 1)) for k, v in spans.items() if len(v) <= 16 for a, b in v]
    return sorted(flat, key=lambda x: x[1])


def bare_ms(torch: Any, w: Any, calls: int) -> float:
    """Median wall time of the bare events loop, ms."""
    loop = make_bare(torch, w)
    loop()
    walls = []
    for _ in range(calls):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        loop()
        walls.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(walls)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=Path("nsightx-out/call-timeline"))
    ap.add_argument("--calls", type=int, default=9)
    ap.add_argument("--tree", help="source tree of the nsightx to measure (default: the importable one)")
    ap.add_argument("--tag", default="", help="suffix of the output file name")
    ap.add_argument("--backends", default="cupti,events")
    ap.add_argument("--only", default="sweep_once,sweep_randn")
    args = ap.parse_args()
    info = use_tree(args.tree)
    warnings.simplefilter("ignore")
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.zeros(1, device="cuda")
    args.out.mkdir(parents=True, exist_ok=True)
    report: dict[str, Any] = {"argv": sys.argv, "gpu": torch.cuda.get_device_name(0), **info, "workloads": {}}
    tag = f"_{args.tag}" if args.tag else ""
    for name in args.only.split(","):
        w = WORKLOADS[name]
        entry: dict[str, Any] = {"bare_ms": round(bare_ms(torch, w, args.calls), 3)}
        for backend in args.backends.split(","):
            entry[backend] = timeline(torch, w, backend, args.calls)
            print(name, backend, json.dumps(entry[backend]["phases_us"]), "bare", entry["bare_ms"], "ms", flush=True)
            top = list(entry[backend]["spent_us"].items())[:14]
            print("   ", ", ".join(f"{k} {v}" for k, v in top), flush=True)
        report["workloads"][name] = entry
        (args.out / f"call_timeline{tag}.json").write_text(json.dumps(report, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
