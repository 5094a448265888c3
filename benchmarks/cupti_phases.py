"""Where a CUPTI call's fixed cost goes on the matmul sweep with inputs allocated once (issue 13), on the H200.

    PYTHONPATH=.:backends:plugins python benchmarks/cupti_phases.py --out OUTDIR [--reps 9]

Times, per call, the phases of a default ``backend="cupti"`` call on the ``sweep_once`` workload of
``backend_overhead.py`` (device setup, tracer start, the run loop, collections, tracer stop, result building),
by wrapping the backend's entry points; and times side by side, interleaved, against the bare events loop:

* ``cupti``: ``backend_overhead.py``'s default variant;
* ``cupti_cc``: ``collector_cost.py``'s default variant (the same options; its extra plugin hosts differ);
* ``cupti_stop_noflush``: the tracer's stop without its final forced flush (an experiment: what that flush costs).

Writes OUTDIR/cupti_phases.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from backend_overhead import WORKLOADS, make_bare, make_profiled
from collector_cost import make_variant


def _wrap(spent: dict[str, list[int]], cls: Any, attr: str) -> Callable[[], None]:
    """Time ``cls.attr`` into ``spent``; returns the undo."""
    original = getattr(cls, attr)
    key = f"{cls.__name__}.{attr}"
    spent.setdefault(key, [0, 0])

    def timed(*a: Any, **kw: Any) -> Any:
        t0 = time.perf_counter_ns()
        try:
            return original(*a, **kw)
        finally:
            spent[key][0] += time.perf_counter_ns() - t0
            spent[key][1] += 1

    setattr(cls, attr, timed)
    return lambda: setattr(cls, attr, original)


def phases(torch: Any, calls: int) -> dict[str, Any]:
    """Microseconds per call in each wrapped entry point, over ``calls`` default calls."""
    from nsightx_cupti import _session, _tracer

    from nsightx._api import kernel as _kernel
    from nsightx._run import loop as _runloop

    fn = make_profiled(torch, WORKLOADS["sweep_once"], "cupti", True)
    fn()
    spent: dict[str, list[int]] = {}
    undo = [
        _wrap(spent, _tracer.ActivityTracer, "start"),
        _wrap(spent, _tracer.ActivityTracer, "stop"),
        _wrap(spent, _tracer.ActivityTracer, "collect"),
        _wrap(spent, _session.CudaDevice, "__init__"),
        _wrap(spent, _session.CudaDevice, "synchronize"),
        _wrap(spent, _session.CudaDevice, "close"),
        _wrap(spent, _session.CuptiSession, "collect_runs"),
        _wrap(spent, _session.CuptiSession, "environment"),
        _wrap(spent, _kernel.ProfiledFunction, "_run"),
    ]
    if hasattr(_runloop, "run_loop"):
        undo.append(_wrap(spent, _runloop, "run_loop"))
    try:
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        wall = (time.perf_counter() - t0) * 1e6 / calls
    finally:
        for u in undo:
            u()
    return {"wall_us_per_call": wall, "us_per_call": {k: round(v[0] / 1e3 / calls, 1) for k, v in spent.items()}}


def stop_without_flush() -> Callable[[], None]:
    """Patch the tracer's stop to skip its final forced flush; returns the undo."""
    from nsightx_cupti import _tracer

    original = _tracer.ActivityTracer.stop

    def stop(self: Any) -> None:
        c = self._cupti
        flush = c.activity_flush_all
        c.activity_flush_all = lambda flag: None
        try:
            original(self)
        finally:
            c.activity_flush_all = flush

    _tracer.ActivityTracer.stop = stop  # type: ignore[method-assign]
    return lambda: setattr(_tracer.ActivityTracer, "stop", original)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=Path("nsightx-out/cupti-phases"))
    ap.add_argument("--reps", type=int, default=9)
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    args.out.mkdir(parents=True, exist_ok=True)
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.zeros(1, device="cuda")
    w = WORKLOADS["sweep_once"]
    plain = make_profiled(torch, w, "cupti", True)

    def noflush() -> Any:
        undo = stop_without_flush()
        try:
            return plain()
        finally:
            undo()

    fns: dict[str, Callable[[], Any]] = {
        "bare": make_bare(torch, w),
        "cupti": plain,
        "cupti_cc": make_variant(torch, w, "default"),
        "cupti_stop_noflush": noflush,
    }
    for f in fns.values():
        f()
    names = list(fns)
    walls: dict[str, list[float]] = {k: [] for k in names}
    for rep in range(args.reps):
        for k in names[rep % len(names) :] + names[: rep % len(names)]:
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            fns[k]()
            walls[k].append((time.perf_counter() - t0) * 1e3)
    paired = {k: statistics.median(x / y for x, y in zip(walls[k], walls["bare"], strict=True)) for k in names}
    report = {
        "argv": sys.argv,
        "gpu": torch.cuda.get_device_name(0),
        "median_ms": {k: statistics.median(v) for k, v in walls.items()},
        "ratio_paired_median": paired,
        "all_ms": walls,
        "phases": phases(torch, 9),
    }
    print(json.dumps({k: report[k] for k in ("median_ms", "ratio_paired_median", "phases")}), flush=True)
    (args.out / "cupti_phases.json").write_text(json.dumps(report, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
