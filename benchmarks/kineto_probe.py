"""Does torch.profiler leave CUPTI's host clock switched to the TSC, and which step undoes it?

Hypothesis: Kineto (libkineto/src/CuptiTimestamp.cpp, configureCuptiTimestampSource, called from
CuptiActivityProfiler::enableGpuTracing) calls cuptiActivityRegisterTimestampCallback with a function returning
__rdtsc() ticks. The registration is process-wide and never undone, so afterwards every CUPTI activity timestamp,
including kernel start/end (GPU time normalised onto the host clock), is in TSC ticks, not ns: durations read as
ns are inflated by the TSC frequency in GHz (~2.1 on the H200 host).

Each step prints one JSON line:
  kernel_us        median duration per kernel name of `a @ a` (n=512, fp32), raw CUPTI units / 1000
  kernel_sum_us    their sum
  events_us        median CUDA-events span of the same matmul (true-time reference)
  api_in_realtime  the start of a traced cuCtxGetCurrent lies inside time.time_ns() taken around it
  api_in_monotonic the same against time.monotonic_ns()
  clock_rate       CUPTI clock ticks per real ns, from two traced calls ~30 ms apart (1.0 = ns; ~2.1 = TSC)
  kernel_sum_us_corrected  kernel_sum_us / clock_rate
  get_timestamp_in_realtime  cupti.get_timestamp() lies inside time.time_ns() around it
  loop_ms          host wall time of the timed launch loop (cost of a Python timestamp callback shows here)

Usage (never changes GPU clocks; whole default run ~20-40 s on an H200):
  python3 /tmp/kineto_probe.py                       # fresh, profiler, each undo in turn
  python3 /tmp/kineto_probe.py --steps fresh,selftest_x2   # no torch.profiler: own callback doubling the clock
Steps: fresh | measure | profiler | py_realtime_cb | null_cb | finalize | selftest_x2
"""

from __future__ import annotations

import argparse
import ctypes
import faulthandler
import json
import statistics
import sys
import time

import torch
from cupti import cupti

N = 512
RUNS = 30
K_KERNEL = int(cupti.ActivityKind.CONCURRENT_KERNEL)
K_DRIVER = int(cupti.ActivityKind.DRIVER)
CB_CTX_GET_CURRENT = int(cupti.DriverApiTraceCbid.cuCtxGetCurrent)

_kernels: list[tuple[str, int, int]] = []
_apis: list[tuple[int, int, int]] = []  # (cbid, start, end)
_libcuda = ctypes.CDLL("libcuda.so.1")
_keep: list = []  # callbacks handed to CUPTI stay referenced


def _requested() -> tuple[int, int]:
    return 1 << 20, 0


def _completed(activities) -> None:  # type: ignore[no-untyped-def]
    for a in activities:
        if a.kind == K_KERNEL:
            _kernels.append((a.name, a.start, a.end))
        elif a.kind == K_DRIVER:
            _apis.append((a.cbid, a.start, a.end))


def _ctx_get_current() -> None:
    ctx = ctypes.c_void_p()
    _libcuda.cuCtxGetCurrent(ctypes.byref(ctx))


def _marker() -> dict[str, int]:
    """One traced cuCtxGetCurrent with realtime and monotonic clocks read around it."""
    rt0, mo0 = time.time_ns(), time.monotonic_ns()
    _ctx_get_current()
    mo1, rt1 = time.monotonic_ns(), time.time_ns()
    return {"rt0": rt0, "rt1": rt1, "mo0": mo0, "mo1": mo1}


def measure(step: str, a: torch.Tensor) -> dict:
    """Trace RUNS matmuls and two marker calls with a minimal CUPTI client; summarise."""
    _kernels.clear()
    _apis.clear()
    cupti.activity_register_callbacks(_requested, _completed)
    cupti.activity_enable(K_DRIVER)
    # Kineto switches cuCtxGetCurrent's records off for the rest of the process (CuptiActivityApi.cpp:402): on again
    cupti.activity_enable_driver_api(CB_CTX_GET_CURRENT, 1)
    cupti.activity_enable(K_KERNEL)
    g0 = time.time_ns()
    gts = cupti.get_timestamp()
    g1 = time.time_ns()
    m1 = _marker()
    spans = []
    t0 = time.perf_counter()
    for _ in range(RUNS):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        a @ a
        e.record()
        e.synchronize()
        spans.append(s.elapsed_time(e) * 1e3)
    loop_ms = (time.perf_counter() - t0) * 1e3
    torch.cuda.synchronize()
    time.sleep(0.03)
    m2 = _marker()  # last CUDA call before the flush, so it is the latest cuCtxGetCurrent record
    cupti.activity_flush_all(int(cupti.ActivityFlag.FLUSH_FORCED))
    cupti.activity_disable(K_KERNEL)
    cupti.activity_disable(K_DRIVER)
    marks = [s for cbid, s, _ in _apis if cbid == CB_CTX_GET_CURRENT]
    by: dict[str, list[float]] = {}
    for name, s, e in _kernels:
        by.setdefault(name, []).append((e - s) / 1e3)
    per_kernel = {k: round(statistics.median(v), 3) for k, v in by.items() if len(v) >= RUNS // 2}
    ksum = round(sum(per_kernel.values()), 3)
    row: dict = {
        "step": step,
        "kernel_us": per_kernel,
        "kernel_sum_us": ksum,
        "events_us": round(statistics.median(spans[1:]), 3),
        "loop_ms": round(loop_ms, 2),
        "n_kernel_records": len(_kernels),
        "get_timestamp_in_realtime": g0 - 1000 <= gts <= g1 + 1000,
        "get_timestamp_minus_realtime_s": round((gts - g0) / 1e9, 3),
    }
    if len(marks) >= 2:
        c1, c2 = min(marks), max(marks)
        row["api_first_start"] = c1
        row["api_in_realtime"] = m1["rt0"] - 1000 <= c1 <= m1["rt1"] + 1000
        row["api_in_monotonic"] = m1["mo0"] - 1000 <= c1 <= m1["mo1"] + 1000
        real = ((m2["rt0"] + m2["rt1"]) - (m1["rt0"] + m1["rt1"])) / 2
        rate = (c2 - c1) / real
        row["clock_rate"] = round(rate, 4)
        row["kernel_sum_us_corrected"] = round(ksum / rate, 3) if rate > 0 else None
    else:
        row["api_markers_found"] = len(marks)
    return row


def run_profiler(a: torch.Tensor) -> dict:
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(5):
            a @ a
        torch.cuda.synchronize()
    row: dict = {"step": "profiler"}
    try:  # Kineto's own (converted) kernel durations, for comparison; best effort across torch versions
        ev = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
        row["cuda_events"] = len(ev)
        row["kineto_kernel_us"] = [round(float(e.device_time_total), 3) for e in ev[:4]]
    except Exception as e:
        row["kineto_events_error"] = f"{type(e).__name__}: {e}"
    return row


def _libcupti() -> ctypes.CDLL:
    with open("/proc/self/maps") as fh:
        for line in fh:
            if "libcupti" in line:
                return ctypes.CDLL(line.split()[-1])
    raise RuntimeError("no libcupti mapped")


def _cpu_model() -> str:
    """CPU model name: its TSC rate in GHz should match clock_rate after torch.profiler."""
    try:
        with open("/proc/cpuinfo") as fh:
            return next((ln.split(":", 1)[1].strip() for ln in fh if ln.startswith("model name")), "?")
    except OSError:
        return "?"


def undo(step: str, a: torch.Tensor) -> dict:
    """Apply one candidate undo, then measure."""
    info: dict = {}
    if step == "py_realtime_cb":  # our own callback returning CLOCK_REALTIME ns (a Python call per timestamp)
        info["rc"] = str(cupti.activity_register_timestamp_callback(time.time_ns))
    elif step == "selftest_x2":  # proves the mechanism without Kineto: a clock running 2x fast doubles kernels
        _keep.append(lambda: time.time_ns() * 2)
        info["rc"] = str(cupti.activity_register_timestamp_callback(_keep[-1]))
    elif step == "null_cb":  # reset to CUPTI's own clock by registering NULL (C API, through ctypes)
        fn = _libcupti().cuptiActivityRegisterTimestampCallback
        fn.argtypes, fn.restype = [ctypes.c_void_p], ctypes.c_int
        info["rc"] = fn(None)
    elif step == "finalize":  # tear CUPTI down; measure() re-registers and re-enables (re-initialises CUPTI)
        cupti.activity_flush_all(int(cupti.ActivityFlag.FLUSH_FORCED))
        try:
            cupti.finalize()
            info["rc"] = 0
        except Exception as e:  # CUPTI refuses: report and still measure
            info["rc"] = f"{type(e).__name__}: {e}"
    row = measure(step, a)
    row.update(info)
    return row


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument(
        "--steps",
        default="fresh,profiler,measure,py_realtime_cb,profiler,measure,null_cb,profiler,measure,finalize,measure",
    )
    args = ap.parse_args()
    faulthandler.enable()
    faulthandler.dump_traceback_later(55, exit=True)  # a deadlocked callback still leaves a trace
    torch.backends.cuda.matmul.allow_tf32 = False
    a = torch.randn(N, N, device="cuda")
    for _ in range(20):
        a @ a
    torch.cuda.synchronize()
    lib = _libcupti()
    ver = ctypes.c_uint32()
    lib.cuptiGetVersion(ctypes.byref(ver))
    print(
        json.dumps(
            {
                "step": "env",
                "torch": torch.__version__,
                "cupti_api_version": ver.value,
                "libcupti": lib._name,
                "cpu": _cpu_model(),
            }
        ),
        flush=True,
    )
    for step in args.steps.split(","):
        t0 = time.perf_counter()
        if step == "profiler":
            row = run_profiler(a)
        elif step in ("fresh", "measure"):
            row = measure(step, a)
        else:
            row = undo(step, a)
        row["step_s"] = round(time.perf_counter() - t0, 2)
        print(json.dumps(row), flush=True)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
