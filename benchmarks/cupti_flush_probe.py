"""Issue 13: what CUPTI's flushes cost once the GPU is done, per flush strategy and activity buffer size.

    PYTHONPATH=.:backends:plugins python benchmarks/cupti_flush_probe.py --out OUTDIR [--reps 15]

The CUPTI backend's remaining cost on the matmul sweep (``call_timeline.py``) sits after the final wait for the
GPU: the forced flush of :meth:`ActivityTracer.collect` and whatever the ``wait`` drain thread still does then.
This runs the sweep's kernel sequence (per run: L2 flush, external id pushed, one fp32 matmul, id popped; sizes
512-4096, 11 runs each) under nsightx's own :class:`ActivityTracer` and times each step from the moment the host
has queued everything:

* ``pre_sync_us``   what the strategy does before waiting (a non-forced flush for ``end``);
* ``sync_us``       ``cuCtxSynchronize`` (for ``wait``, the helper thread drains meanwhile);
* ``join_us``       ``wait``: from the synchronise's return until the helper's drain in flight has finished;
* ``plain_us``      ``after``: a non-forced flush after the wait;
* ``forced_us``     the forced flush (``collect``), with the buffers it delivered;
* ``post_us``       everything after the synchronise returned (what adds to a call's wall time);
* ``stop_us``       ``ActivityTracer.stop`` (APIs switched back on, kinds off, a last forced flush), and
  ``start_us``.

Decoders: ``ctypes`` (:mod:`nsightx_cupti._raw`) and ``cupti-python``.
Strategies: ``forced`` (only the forced flush), ``after`` (non-forced, then forced), ``end`` (non-forced before
the wait), ``wait`` (helper thread, the default), ``period`` (CUPTI's own worker flushes every millisecond:
``cuptiActivityFlushPeriod``), ``disable`` (every kind switched off once the last launch is queued, before the
wait: whether kernels still running then get their records, ``kernels`` and ``incomplete``), ``poll`` (non-forced
flushes back to back on the calling thread until the last config's CUDA event completes) and ``evpoll`` (one
non-forced flush after each config's event completes: can a collection take finished configs' records during
the wait; ``timelines`` holds each drain's time, duration and kernels delivered so far); :data:`PLAN`
lists the combinations. Variants rotate every repetition.
Writes OUTDIR/cupti_flush_probe.json.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

SIZES = (512, 1024, 2048, 4096)
RUNS = 11
STRATEGIES = ("forced", "after", "end", "wait", "period", "disable", "poll", "evpoll")
BUFFERS = (8 * 1024, 32 * 1024, 256 * 1024)
DECODERS = ("ctypes", "cupti-python")
PLAN = (
    [(s, b, d) for d in DECODERS for s in ("forced", "end", "wait") for b in BUFFERS]
    + [
        ("after", 8 * 1024, "cupti-python"),
        ("period", 8 * 1024, "cupti-python"),
        ("disable", 256 * 1024, "ctypes"),
    ]
    + [(s, b, "ctypes") for s in ("poll", "evpoll") for b in (2 * 1024, 8 * 1024, 32 * 1024)]
)
"""(strategy, buffer size, decoder) of every variant timed."""


def one(
    torch: Any, tracer: Any, device: Any, inputs: dict[int, Any], strategy: str, nbytes: int, decode: str
) -> dict[str, Any]:
    """One sweep under ``strategy`` with ``nbytes`` buffers read by ``decode``; step times in microseconds."""
    from nsightx_cupti._drain import wait_draining

    c = tracer._cupti
    torch.cuda.synchronize()
    t = time.perf_counter_ns()
    tracer.start(nbytes, decode=decode)
    if strategy == "period":
        c.activity_flush_period(1)
    out: dict[str, Any] = {"start_us": (time.perf_counter_ns() - t) / 1e3}
    ext = 1
    marks: list[Any] = []
    t_loop = time.perf_counter_ns()
    for n in SIZES:
        a, b = inputs[n]
        for _ in range(RUNS):
            device.flush_l2()
            tracer.push(ext)
            a @ b
            tracer.pop()
            ext += 1
        if strategy in ("poll", "evpoll"):
            marks.append(torch.cuda.Event())
            marks[-1].record()
    t0 = time.perf_counter_ns()
    if strategy in ("poll", "evpoll"):
        out["timeline"] = drain_timeline(tracer, marks, strategy, t0)
    out["loop_us"] = (t0 - t_loop) / 1e3
    joined: list[int] = []
    if strategy == "end":
        tracer.drain()
    if strategy == "disable":  # every kind off once the last launch is queued: do in-flight kernels still report?
        for kind in (tracer._k_kernel, tracer._k_external, tracer._k_runtime, tracer._k_driver):
            c.activity_disable(kind)
    t1 = time.perf_counter_ns()
    if strategy == "wait":

        def sync() -> None:
            device.synchronize()
            joined.append(time.perf_counter_ns())

        wait_draining(sync, tracer.drain)
    else:
        device.synchronize()
    t2 = time.perf_counter_ns()
    synced = joined[0] if joined else t2
    if strategy == "after":
        tracer.drain()
    t3 = time.perf_counter_ns()
    before = tracer.stats.get("buffers", 0)
    batch = tracer.collect()
    t4 = time.perf_counter_ns()
    out.update(
        pre_sync_us=(t1 - t0) / 1e3,
        sync_us=(synced - t1) / 1e3,
        join_us=(t2 - synced) / 1e3,
        plain_us=(t3 - t2) / 1e3,
        forced_us=(t4 - t3) / 1e3,
        forced_buffers=tracer.stats.get("buffers", 0) - before,
        post_us=(t4 - synced) / 1e3,
        kernels=len(batch.kernels),
        incomplete=sum(1 for k in batch.kernels if k.start <= 0 or k.end < k.start),
        externals=len(batch.externals),
        drains=tracer.stats.get("drains", 0),
        buffers=tracer.stats.get("buffers", 0),
        decode_us=tracer.stats.get("decode", 0) / 1e3,
        decoder=tracer.decoder,
        names=sorted({k.name for k in batch.kernels}),
        kernel_ns=sorted(k.end - k.start for k in batch.kernels),
    )
    if strategy == "period":
        c.activity_flush_period(0)
    t5 = time.perf_counter_ns()
    tracer.stop()
    out["stop_us"] = (time.perf_counter_ns() - t5) / 1e3
    return out


def drain_timeline(tracer: Any, marks: list[Any], strategy: str, t0: int) -> list[list[float]]:
    """Drains made on the calling thread once everything is queued: [since queued us, drain us, kernels so far].

    ``poll``: drain back to back until the last config's event has completed. ``evpoll``: wait for each
    config's event in turn (the GPU finished that config), then drain once, as a collection that processes
    finished configs during the wait would.
    """
    rows: list[list[float]] = []

    def drain() -> None:
        t = time.perf_counter_ns()
        tracer.drain()
        done = time.perf_counter_ns()
        rows.append([round((t - t0) / 1e3, 1), round((done - t) / 1e3, 1), float(len(tracer._pending.kernels))])

    if strategy == "evpoll":
        for mark in marks[:-1]:
            mark.synchronize()
            drain()
        return rows
    for _ in range(400):
        drain()
        if marks[-1].query():
            break
    return rows


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians of the numeric fields; the decoder and kernel names as seen (the same in every row or listed)."""
    out: dict[str, Any] = {
        key: round(statistics.median(r[key] for r in rows), 1)
        for key, v in rows[0].items()
        if isinstance(v, (int, float))
    }
    if "timeline" in rows[0]:
        out["timelines"] = [r["timeline"] for r in rows[:3]]
    out["kernels_min"] = min(r["kernels"] for r in rows)
    out["incomplete_max"] = max(r["incomplete"] for r in rows)
    out["decoder"] = sorted({r["decoder"] for r in rows})
    out["names"] = sorted({n for r in rows for n in r["names"]})
    per = list(zip(*(r["kernel_ns"] for r in rows), strict=False))
    out["kernel_ns_median"] = [statistics.median(p) for p in per]
    return out


def switch_cost(tracer: Any, reps: int = 50) -> dict[str, float]:
    """Microseconds per ``cuptiActivityEnableRuntimeApi`` call and per empty forced flush, tracer running."""
    c = tracer._cupti
    tracer.start()
    keys = sorted(tracer.quiet.off) or [("runtime", 1)]
    t = time.perf_counter_ns()
    for _ in range(reps):
        for key in keys:
            tracer._switch(key, False)
    per_switch = (time.perf_counter_ns() - t) / 1e3 / (reps * len(keys))
    for key in keys:
        tracer._switch(key, key not in tracer.quiet.off)
    tracer.collect()
    t = time.perf_counter_ns()
    for _ in range(reps):
        c.activity_flush_all(int(c.ActivityFlag.FLUSH_FORCED))
    empty = (time.perf_counter_ns() - t) / 1e3 / reps
    tracer.stop()
    return {
        "switch_us": round(per_switch, 2),
        "quiet_apis": len(tracer.quiet.off),
        "empty_forced_flush_us": round(empty, 1),
    }


ATTRS = {"pinned": ((8, ctypes.c_uint8, 1),), "small": ((0, ctypes.c_size_t, 256 * 1024),)}
"""``--attr`` settings: ``CUPTI_ACTIVITY_ATTR_MEM_ALLOCATION_TYPE_HOST_PINNED`` = 1 (CUPTI's kernel timestamps in
pinned host memory instead of device memory), ``CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_SIZE`` = 256 KiB (default
3.2 MB)."""


def set_attrs(names: str) -> dict[str, Any]:
    """Set the ``--attr`` attributes through libcupti (before CUDA starts, with ``--attr-early``); read them back."""
    from nsightx_cupti._tracer import cupti_module, loaded_libcupti

    cupti_module().get_timestamp()
    lib = ctypes.CDLL(loaded_libcupti() or "libcupti.so")
    out: dict[str, Any] = {}
    for name in filter(None, names.split(",")):
        for attr, ctype, value in ATTRS[name]:
            v = ctype(value)
            size = ctypes.c_size_t(ctypes.sizeof(v))
            out[f"set_{attr}"] = lib.cuptiActivitySetAttribute(attr, ctypes.byref(size), ctypes.byref(v))
    for attr, ctype in ((0, ctypes.c_size_t), (2, ctypes.c_size_t), (6, ctypes.c_size_t), (8, ctypes.c_uint8)):
        v = ctype(0)
        size = ctypes.c_size_t(ctypes.sizeof(v))
        rc = lib.cuptiActivityGetAttribute(attr, ctypes.byref(size), ctypes.byref(v))
        out[f"attr_{attr}"] = v.value if rc == 0 else f"rc={rc}"
    return out


def stop_parts(torch: Any, tracer: Any, device: Any, inputs: dict[int, Any]) -> dict[str, float]:
    """After one sweep and its collection: what each step of ``ActivityTracer.stop`` costs, us."""
    c = tracer._cupti
    one(torch, tracer, device, inputs, "forced", 8 * 1024, "ctypes")  # warm
    tracer.start(8 * 1024)
    a, b = inputs[4096]
    for _ in range(10):
        device.flush_l2()
        a @ b
    device.synchronize()
    tracer.collect()
    out: dict[str, float] = {}
    t = time.perf_counter_ns()
    for key in sorted(tracer.quiet.off):
        tracer._switch(key, True)
    out["switch_on_us"] = (time.perf_counter_ns() - t) / 1e3
    for name, kind in (("kernel", tracer._k_kernel), ("external", tracer._k_external)):
        t = time.perf_counter_ns()
        c.activity_disable(kind)
        out[f"disable_{name}_us"] = (time.perf_counter_ns() - t) / 1e3
    t = time.perf_counter_ns()
    tracer._apis(False)
    out["disable_apis_us"] = (time.perf_counter_ns() - t) / 1e3
    t = time.perf_counter_ns()
    c.activity_flush_all(int(c.ActivityFlag.FLUSH_FORCED))
    out["flush_us"] = (time.perf_counter_ns() - t) / 1e3
    tracer._discard()
    tracer.active = False
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--reps", type=int, default=15)
    parser.add_argument("--attr", default="", help="comma-separated ATTRS to set: pinned, small")
    parser.add_argument("--attr-early", action="store_true", help="set them before CUDA is initialised")
    parser.add_argument("--tag", default="")
    parser.add_argument("--only", default="", help="comma-separated strategies to time (default: all)")
    parser.add_argument("--only-ctypes", action="store_true", help="time only the ctypes decoder's variants")
    args = parser.parse_args()
    attrs = set_attrs(args.attr) if args.attr_early else {}
    import torch
    from nsightx_cupti._session import CudaDevice
    from nsightx_cupti._tracer import ActivityTracer

    torch.cuda.init()
    inputs = {n: (torch.randn(n, n, device="cuda"), torch.randn(n, n, device="cuda")) for n in SIZES}
    tracer = ActivityTracer.get()
    device = CudaDevice(None, flush=True)
    if not args.attr_early:
        attrs = set_attrs(args.attr)
    names = [v for v in PLAN if v[2] == "ctypes"] if args.only_ctypes else PLAN
    if args.only:
        names = [v for v in names if v[0] in args.only.split(",")]
    for s, b, d in names:  # warm-up (cuBLAS, CUPTI, the quiet APIs learned)
        one(torch, tracer, device, inputs, s, b, d)
    label = {v: f"{v[0]}_{v[1] // 1024}k_{v[2]}" for v in names}
    rows: dict[str, list[dict[str, Any]]] = {label[v]: [] for v in names}
    for rep in range(args.reps):
        k = rep % len(names)
        for v in names[k:] + names[:k]:
            rows[label[v]].append(one(torch, tracer, device, inputs, *v))
    summary = {name: summarise(rs) for name, rs in rows.items()}
    result = {
        "argv": sys.argv,
        "gpu": torch.cuda.get_device_name(0),
        "threads": threading.active_count(),
        "median": summary,
        "costs": switch_cost(tracer),
        "stop_parts": [stop_parts(torch, tracer, device, inputs) for _ in range(5)],
        "attrs": attrs,
        "all": rows,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"cupti_flush_probe{args.tag}.json").write_text(json.dumps(result, indent=1), encoding="utf-8")
    keys = (
        "kernels_min",
        "incomplete_max",
        "post_us",
        "join_us",
        "plain_us",
        "forced_us",
        "forced_buffers",
        "sync_us",
        "stop_us",
        "start_us",
    )
    print("variant".ljust(26), *(k.ljust(10) for k in keys), "decoder")
    for name, row in summary.items():
        print(name.ljust(26), *(str(row[k]).ljust(10) for k in keys), row["decoder"])
    ref = summary[label[names[-3]]]
    for name, row in summary.items():
        same = row["names"] == ref["names"] and len(row["kernel_ns_median"]) == len(ref["kernel_ns_median"])
        worst = max(
            (abs(a - b) / b for a, b in zip(row["kernel_ns_median"], ref["kernel_ns_median"], strict=False) if b),
            default=0.0,
        )
        print(f"{name}: same kernels as {label[names[-3]]}: {same}, worst sorted-duration gap {worst:.3%}")
    for name, row in summary.items():
        if "timelines" in row:
            print(f"{name} drains [since queued us, drain us, kernels so far]:", row["timelines"][0])
    print("ctypes decoder unavailable:", tracer._raw_failed)
    print(result["costs"], result["attrs"])
    print("stop parts:", result["stop_parts"][-1])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
