"""What a cupti call's last flush costs the next one: ``cupti_flush="complete"`` (default) against ``"forced"``.

After a forced CUPTI flush (``cuptiActivityFlushAll(FORCED)``), the next kernel launched while CUPTI's kernel kind
is on costs the host more than after a default flush. A profiled call launches its first region's kernels while the
GPU idles, so that cost is on the whole call's critical path. Two parts, one process, interleaved:

- ``launch``: a bare :class:`~nsightx_cupti._tracer.ActivityTracer` started, a 512 matmul launched (host time),
  a flush of the kind named, then another matmul (host time): the launch after each kind of flush;
- ``call``: the sweep's whole call (``f().to_dataframe()``, ``benchmarks/backend_overhead.py``'s ``sweep_once``)
  with each ``cupti_flush``, each measured right after a call of its own kind (as in a user's loop of calls, where
  a call pays for the flush of the one before), then the bare events loop.

Prints the medians (us). Usage (GPU machine): ``python benchmarks/cupti_flush_kind.py [--reps 12] [--json FILE]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import backend_overhead as bo

KINDS = ("complete", "forced")


def host_us(fn: Callable[[], Any]) -> float:
    """Host time of ``fn()``, us."""
    t0 = time.perf_counter_ns()
    fn()
    return (time.perf_counter_ns() - t0) / 1e3


def launch_after_flush(torch: Any, reps: int) -> dict[str, dict[str, float]]:
    """Per flush kind, medians of a bare tracer's first launch and of the launch right after that flush."""
    from nsightx_cupti._tracer import ActivityTracer

    x = torch.ones(512, 512, device="cuda")
    tracer = ActivityTracer.get()
    out: dict[str, dict[str, list[float]]] = {k: {"first": [], "after_flush": []} for k in KINDS}
    for _ in range(reps):
        for kind in KINDS:
            torch.cuda.synchronize()
            tracer.start(api_tracing="learn", flush_flag=kind)
            out[kind]["first"].append(host_us(lambda: x @ x))
            torch.cuda.synchronize()
            tracer.collect()
            out[kind]["after_flush"].append(host_us(lambda: x @ x))
            torch.cuda.synchronize()
            tracer.collect()
            tracer.stop()
    return {k: {m: statistics.median(v) for m, v in parts.items()} for k, parts in out.items()}


def calls(torch: Any, reps: int) -> dict[str, float]:
    """Medians of the sweep's whole call per flush kind (after a call of its own kind) and of the bare loop."""
    w = bo.WORKLOADS["sweep_once"]
    bare = bo.make_bare(torch, w)
    fns = {k: bo.make_profiled(torch, w, "cupti", True, {"cupti_flush": k}) for k in KINDS}

    def whole(fn: Callable[[], Any]) -> float:
        torch.cuda.synchronize()
        return host_us(lambda: fn().to_dataframe())

    for fn in fns.values():
        fn().to_dataframe()
    times: dict[str, list[float]] = {k: [] for k in (*KINDS, "bare")}
    for _ in range(reps):
        for kind, fn in fns.items():
            fn().to_dataframe()  # the call before is of the same kind
            times[kind].append(whole(fn))
        torch.cuda.synchronize()
        times["bare"].append(host_us(bare))
    return {k: statistics.median(v) for k, v in times.items()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=12)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    import torch

    if not torch.cuda.is_available():
        raise SystemExit("cupti_flush_kind.py needs a CUDA device; torch sees none here (run it on the GPU machine)")
    launch = launch_after_flush(torch, args.reps)
    for kind, row in launch.items():
        print(f"launch, {kind:>8}: first {row['first']:.1f} us, after the flush {row['after_flush']:.1f} us")
    whole = calls(torch, args.reps)
    bare = whole["bare"]
    for kind in KINDS:
        print(f"call, {kind:>8}: {whole[kind]:.0f} us, / bare {whole[kind] / bare:.3f}")
    gain = whole["complete"] - whole["forced"]
    print(f"bare loop: {bare:.0f} us (median of {args.reps}); complete - forced: {gain:.0f} us")
    if args.json:
        args.json.write_text(json.dumps({"launch": launch, "call": whole, "reps": args.reps}, indent=1), "utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
