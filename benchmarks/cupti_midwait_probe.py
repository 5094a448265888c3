"""Can a cupti call collect its runs while the GPU still works? A probe for issue 35 (GPU only).

A deferred cupti session waits for the device once, then forces one CUPTI flush and attributes every run: ~0.6 ms
of flush, decode and attribution, plus the write of all 44 runs, land after the sweep's last kernel. The events
backend instead hands each run over as its end event fires. Doing the same on cupti needs to know when a run's
kernel records can be taken: this probe asks CUPTI.

It launches the matmul sweep (n = 512..4096, 11 runs each, a 2 x L2 flush before every run, inputs allocated once)
with each run's launches under an external correlation id (as a cupti session pushes them) and a CUDA event after
each run, through nsightx's own tracer (:class:`nsightx_cupti._tracer.ActivityTracer`, 256 KiB buffers, ctypes
decode). Then, per mode:

- ``end``: synchronise, one forced flush (what a session does now);
- ``run``: after each run's event fired, a forced flush; a last one after synchronising;
- ``config``: the same at each config's last run only.

For every flush it notes its time, the kernel records it delivered, how many of them were incomplete (start 0, or
an end before the start) and whether any belongs to a run whose event had not fired yet. At the end it checks every
run's kernels came exactly once and complete (a run's matmul: 2 kernels at n = 512, cuBLAS's split-K; else 1). The
figure that matters: the tail, from the last event's completion to every record in hand, against ``end``'s.

Usage (GPU machine, PYTHONPATH with the repository, backends/ and plugins/):
``python benchmarks/cupti_midwait_probe.py [--reps 5] [--json FILE]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any

SIZES = (512, 1024, 2048, 4096)
RUNS = 11


def take(tracer: Any) -> Any:
    """A forced flush; what it delivered, taken without the session's checks (incomplete records are kept)."""
    from nsightx_cupti._attribution import ActivityBatch

    tracer._forced_flush()
    with tracer._lock:
        batch, tracer._pending = tracer._pending, ActivityBatch()
        errors, tracer._errors = tracer._errors, []
    if errors:
        raise RuntimeError(errors[0])
    return batch


def launch(tracer: Any, torch: Any, mats: dict[int, Any], flush: Any, first_ext: int) -> list[tuple[int, int, Any]]:
    """The sweep's launches: (n, external id, end event) per run."""
    out = []
    ext = first_ext
    for n in SIZES:
        a, b = mats[n]
        for _ in range(RUNS):
            flush.zero_()
            tracer.push(ext)
            torch.mm(a, b)
            tracer.pop()
            ev = torch.cuda.Event()
            ev.record()
            out.append((n, ext, ev))
            ext += 1
    return out


def one(mode: str, tracer: Any, torch: Any, mats: dict[int, Any], flush: Any, first_ext: int) -> dict[str, Any]:
    """One sweep collected in ``mode``; its flushes and the check of its records."""
    t0 = time.perf_counter_ns()
    runs = launch(tracer, torch, mats, flush, first_ext)
    t_launched = time.perf_counter_ns()
    flushes: list[dict[str, Any]] = []
    batches = []
    fired: set[int] = set()
    last = len(runs) - 1
    ends = set() if mode == "end" else set(range(last))  # the last run's records come with the final flush
    if mode == "config":
        ends = {i for i in range(last) if (i + 1) % RUNS == 0}
    for i, (_, _ext, ev) in enumerate(runs):
        if i not in ends:
            continue
        ev.synchronize()
        fired.update(e for _, e, _ in runs[: i + 1])
        f0 = time.perf_counter_ns()
        batch = take(tracer)
        f1 = time.perf_counter_ns()
        batches.append(batch)
        flushes.append(_flush_facts(batch, batches, fired, (f1 - f0) / 1e3))
    runs[last][2].synchronize()
    last_fired_ns = time.perf_counter_ns()
    torch.cuda.synchronize()
    f0 = time.perf_counter_ns()
    final = take(tracer)
    t_end = time.perf_counter_ns()
    batches.append(final)
    flushes.append(_flush_facts(final, batches, fired | {e for _, e, _ in runs}, (t_end - f0) / 1e3))
    check = _check(batches, runs)
    return {
        "mode": mode,
        "launch_us": (t_launched - t0) / 1e3,
        "total_us": (t_end - t0) / 1e3,
        "tail_us": (t_end - last_fired_ns) / 1e3,
        "flushes": len(flushes),
        "flush_us_sum": sum(f["us"] for f in flushes),
        "incomplete": sum(f["incomplete"] for f in flushes),
        "early": sum(f["early"] for f in flushes),
        "per_flush": flushes,
        **check,
    }


def _externals(batches: list[Any]) -> dict[int, int]:
    out: dict[int, int] = {}
    for b in batches:
        out.update(b.externals)
    return out


def _flush_facts(batch: Any, batches: list[Any], fired: set[int], us: float) -> dict[str, Any]:
    """What one flush delivered: kernels, incomplete ones, ones of runs whose event had not fired."""
    ext_of = _externals(batches)
    bad = [k for k in batch.kernels if k.start <= 0 or k.end < k.start]
    early = [k for k in batch.kernels if ext_of.get(k.correlation_id) not in fired and k.correlation_id in ext_of]
    return {"us": round(us, 1), "kernels": len(batch.kernels), "incomplete": len(bad), "early": len(early)}


def _check(batches: list[Any], runs: list[tuple[int, int, Any]]) -> dict[str, Any]:
    """Every run's kernels exactly once and complete?"""
    ext_of = _externals(batches)
    seen: dict[int, int] = {}
    per_run: dict[int, list[Any]] = {}
    for b in batches:
        for k in b.kernels:
            seen[k.correlation_id] = seen.get(k.correlation_id, 0) + 1
            ext = ext_of.get(k.correlation_id)
            if ext is not None:
                per_run.setdefault(ext, []).append(k)
    want = {ext: 2 if n == 512 else 1 for n, ext, _ in runs}
    wrong = {ext: len(per_run.get(ext, [])) for ext in want if len(per_run.get(ext, [])) != want[ext]}
    incomplete = sum(1 for ks in per_run.values() for k in ks if k.start <= 0 or k.end < k.start)
    return {
        "runs_ok": not wrong and not incomplete,
        "runs_wrong": {str(k): v for k, v in list(wrong.items())[:8]},
        "run_kernels_incomplete": incomplete,
        "duplicates": sum(1 for v in seen.values() if v > 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    import torch
    from nsightx_cupti._tracer import ActivityTracer

    dev = torch.device("cuda")
    mats = {n: (torch.randn(n, n, device=dev), torch.randn(n, n, device=dev)) for n in SIZES}
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    flush = torch.empty(2 * l2 // 4, device=dev)
    tracer = ActivityTracer.get()
    modes = ("end", "run", "config")
    rows: list[dict[str, Any]] = []
    ext = 1_000_000
    for rep in range(args.reps + 1):  # the first round warms up (cuBLAS handles, CUPTI's first flush)
        for mode in modes if rep % 2 == 0 else modes[::-1]:
            torch.cuda.synchronize()
            tracer.start()
            take(tracer)  # the canary and anything before
            try:
                row = one(mode, tracer, torch, mats, flush, ext)
            finally:
                tracer.stop()
            ext += 100
            if rep:
                rows.append(row)
                print(json.dumps({k: v for k, v in row.items() if k != "per_flush"}), flush=True)
    for mode in modes:
        mine = [r for r in rows if r["mode"] == mode]
        med = {k: statistics.median(r[k] for r in mine) for k in ("total_us", "tail_us", "flush_us_sum", "launch_us")}
        ok = all(r["runs_ok"] for r in mine)
        print(f"{mode}: median {json.dumps({k: round(v, 1) for k, v in med.items()})} every run whole: {ok}")
    print("per-flush of the last 'run' rep:", json.dumps([r for r in rows if r["mode"] == "run"][-1]["per_flush"]))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump({"device": torch.cuda.get_device_name(0), "rows": rows}, fh, indent=1)


if __name__ == "__main__":
    main()
