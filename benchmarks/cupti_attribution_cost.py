"""CPU cost of the cupti backend's work after the GPU wait, on a synthetic batch shaped like issue 13's sweep.

    PYTHONPATH=.:backends:plugins python benchmarks/cupti_attribution_cost.py [--reps 200] [--json PATH]

On the H200 the sweep (fp32 matmul n = 512, 1024, 2048, 4096; 10 runs + 1 warm-up each) is collected once, at
the end of the call, and everything after ``CudaDevice.synchronize`` is on the critical path: the decode of
every activity record (inside CUPTI's flush), attribution, the launch and completeness checks, and the
conversion to records (benchmarks/results/2026-12-03-s4-cupti-phases.json). No GPU is needed to time the
Python part of that, so this builds the same activity the sweep produces, per run:

* one region ``work`` with one matmul kernel (two for n = 512: cuBLAS splits K), each launched by a runtime
  ``cudaLaunchKernel`` record carrying the region's external id (an EXTERNAL_CORRELATION record per launch);
* nothing else: the APIs that launch nothing (the flush's memset, torch's ``cudaGetDevice``) are switched off
  from the second call of a process on, which leaves the 3.8 records per run the H200 call reported
  (``CuptiPerRun_records``),

as cupti-python hands it over (plain objects with a ``kind`` and fields), and times, in us per call:

* ``decode``: the tracer's buffer-completed callback over those records (what runs inside the forced flush);
* ``attribute`` / ``silent_launches`` / ``to_run_outputs``: the pure functions, on the decoded batch;
* ``collect_runs``: the whole of ``CuptiSession.collect_runs`` through the real tracer (a stand-in for
  ``cupti.cupti`` that delivers the records when flushed, and a device whose synchronise returns at once): the
  decode, the checks, attribution, conversion and the tracer's bookkeeping; the GPU wait and CUPTI's own flush
  cost are what this leaves out.

Each figure is CPU time, the fastest of 7 blocks of ``--reps`` calls, printed and, with ``--json``, written.
"""

from __future__ import annotations

import argparse
import ctypes
import enum
import json
import sys
import time
import timeit
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
for sub in ("plugins", "backends", ""):
    sys.path.insert(0, str(ROOT / sub) if sub else str(ROOT))

from nsightx_cupti._attribution import (  # noqa: E402  (after the path set-up above)
    ActivityBatch,
    RegionWindow,
    attribute,
    silent_launches,
    to_run_outputs,
)
from nsightx_cupti._session import CuptiSession  # noqa: E402
from nsightx_cupti._tracer import ActivityTracer  # noqa: E402

SWEEP = (512, 1024, 2048, 4096)
RUNS = 10
WARMUP = 1
LAUNCH_CBID = 211  # cudaLaunchKernel_v7000
GEMM = "sm90_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize128x128x8_stage3_warpsize2x2x1_ffma_execute_kernel__5x_cublas"
SPLITK = "_ZN8internal5gemvx6kernelIiiffffLb0ELb1ELb1ELb0ELi7ELb0E18cublasGemvParamsExIiPKfS3_PfEEEvT11_"


class Kind(enum.IntEnum):
    """cupti-python's activity kinds (the values do not matter, only that they differ)."""

    CONCURRENT_KERNEL = 10
    RUNTIME = 5
    DRIVER = 6
    EXTERNAL_CORRELATION = 40


class ExtKind(enum.IntEnum):
    """cupti-python's external correlation kinds."""

    CUSTOM2 = 4


class Flag(enum.IntEnum):
    """cupti-python's activity flags."""

    FLUSH_FORCED = 1


class FakeCupti:
    """The few ``cupti.cupti`` calls the tracer makes; ``activity_flush_all`` hands over :attr:`to_deliver`."""

    ActivityKind = Kind
    ExternalCorrelationKind = ExtKind
    ActivityFlag = Flag
    RuntimeApiTraceCbid = enum.IntEnum("RuntimeApiTraceCbid", {"cudaLaunchKernel_v7000": LAUNCH_CBID})
    DriverApiTraceCbid = enum.IntEnum("DriverApiTraceCbid", {"cuLaunchKernel": 307})

    def __init__(self) -> None:
        self.to_deliver: list[Any] = []
        self.completed: Callable[[Any], None] | None = None

    def activity_register_callbacks(self, requested: Any, completed: Callable[[Any], None]) -> None:
        self.completed = completed

    def activity_flush_all(self, flag: int) -> None:
        if self.to_deliver and self.completed is not None:
            self.completed(self.to_deliver)

    def activity_get_num_dropped_records(self, ctx: int, stream: int, address: int) -> None:
        ctypes.c_size_t.from_address(address).value = 0

    def __getattr__(self, name: str) -> Callable[..., int]:
        return lambda *args: 0  # enable, disable, per-API switches, push, pop, timestamps


class InstantDevice:
    """The device side of a session with nothing to wait for."""

    def flush_l2(self) -> None:
        """Nothing to flush."""

    def synchronize(self) -> None:
        """Nothing to wait for."""

    def environment(self) -> dict[str, Any]:
        """No facts."""
        return {}


def sweep_activity() -> tuple[list[Any], list[RegionWindow], list[tuple[int, int]]]:
    """The records cupti-python delivers for one sweep call, its region windows, and its (config, run) keys."""
    records: list[Any] = []
    windows: list[RegionWindow] = []
    keys: list[tuple[int, int]] = []
    corr, t, ext = 1000, 10**18, 0
    for ci, n in enumerate(SWEEP):
        for r in range(-WARMUP, RUNS):
            ext += 1
            enter = t + 1_000
            names = (GEMM, SPLITK) if n == 512 else (GEMM,)
            for i, name in enumerate(names):
                corr += 1
                launch = enter + 5_000 * (i + 1)
                records.append(_api(corr, launch, Kind.RUNTIME, LAUNCH_CBID))
                records.append(SimpleNamespace(kind=Kind.EXTERNAL_CORRELATION, correlation_id=corr, external_id=ext))
                records.append(_kernel(name, corr, launch + 50_000, launch + 50_000 + n * 100))
            windows.append(RegionWindow(ext, "work", ci, r, enter, enter + 20_000, 1, False))
            keys.append((ci, r))
            t += 200_000
    records.sort(key=lambda a: a.kind != Kind.CONCURRENT_KERNEL)  # CUPTI writes kernels to their own buffers
    for a in records:
        if a.kind == Kind.EXTERNAL_CORRELATION:
            a.external_kind = ExtKind.CUSTOM2
    return records, windows, keys


def _api(corr: int, start: int, kind: Kind, cbid: int) -> Any:
    return SimpleNamespace(kind=kind, correlation_id=corr, start=start, end=start + 3_000, thread_id=11, cbid=cbid)


def _kernel(name: str, corr: int, start: int, end: int) -> Any:
    return SimpleNamespace(
        kind=Kind.CONCURRENT_KERNEL,
        name=name,
        start=start,
        end=end,
        correlation_id=corr,
        stream_id=7,
        device_id=0,
        context_id=1,
        graph_id=0,
        graph_node_id=0,
    )


def timed(fn: Callable[[], object], reps: int) -> float:
    """Cost of one call of ``fn``, us of this process's CPU time: the fastest of 7 blocks of ``reps`` calls.

    CPU time and the fastest block, not wall time and the median call: on a shared 2-core machine other
    processes only ever add time (descheduling, cold caches), and the least-disturbed block is the best estimate
    of the code's own cost.
    """
    fn()
    return min(timeit.repeat(fn, number=reps, repeat=7, timer=time.process_time)) / reps * 1e6


def measure(reps: int) -> dict[str, Any]:
    """Every part's median cost, us per call."""
    records, windows, keys = sweep_activity()
    fake = FakeCupti()
    tracer = ActivityTracer(fake, canary=None)
    tracer.start()  # the defaults: API filter "learn" (its bookkeeping runs in every collection)
    by_run: dict[Any, list[RegionWindow]] = {key: [] for key in keys}
    for w in windows:
        by_run[(w.config, w.run)].append(w)

    def decode() -> ActivityBatch:
        tracer._pending = ActivityBatch()
        tracer._buffer_completed(records)
        return tracer._pending

    batch = decode()
    tracer._pending = ActivityBatch()
    attribution = attribute(batch, windows)

    def session_collect() -> object:
        session = CuptiSession(tracer, InstantDevice(), deferred=True)
        session._windows = list(windows)
        session._finished = list(keys)
        fake.to_deliver = records
        try:
            return session.collect_runs()
        finally:
            fake.to_deliver = []

    outputs = session_collect()
    assert len(outputs) == len(keys)
    assert sum(len(o.records) for o in outputs.values()) == len(batch.kernels)  # type: ignore[attr-defined]
    assert len(batch.kernels) == sum(2 if n == 512 else 1 for n in SWEEP) * (RUNS + WARMUP)
    costs = {
        "decode": timed(decode, reps),
        "attribute": timed(lambda: attribute(batch, windows), reps),
        "silent_launches": timed(lambda: silent_launches(batch, windows, attribution, tracer.launches_kernels), reps),
        "to_run_outputs": timed(lambda: to_run_outputs(attribution, by_run), reps),
        "collect_runs": timed(session_collect, reps),
    }
    tracer.stop()
    return {"records": len(records), "runs": len(keys), "kernels": len(batch.kernels), "us_per_call": costs}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=100, help="calls per timed block (default 100)")
    ap.add_argument("--json", type=Path, help="also write the result here")
    args = ap.parse_args()
    result = measure(args.reps)
    result["reps"] = args.reps
    result["python"] = sys.version.split()[0]
    for key, us in result["us_per_call"].items():
        print(f"{key:>16}: {us:8.1f} us per call")
    print(f"({result['records']} records, {result['kernels']} kernels, {result['runs']} runs)")
    if args.json:
        args.json.write_text(json.dumps(result, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
