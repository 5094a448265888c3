"""Where the time goes on the allocated-once benchmark shape (issue 13's diagnosis, run on the GPU machine).

    PYTHONPATH=.:backends:plugins python benchmarks/diag_alloc_once.py OUTDIR

Shape: inputs allocated once outside the function, per run an L2 flush (the backend's cache_control="all") and one
fp32 matmul inside the region. Prints and writes OUTDIR/diag_alloc_once.json with:

1. wall time of bare events loop vs nsightx cupti/events, with and without the nvml plugin (median of 5);
2. a cProfile of one call per variant (top functions by total time), for the host-bound size n=512 x 40 runs;
3. the cost of each NVML query the nvml plugin makes, with the GPU idle and while it runs a long kernel;
4. what a CUPTI call returns after a torch.profiler session in the same process.
"""

from __future__ import annotations

import cProfile
import io
import json
import operator
import pstats
import statistics
import sys
import time
from pathlib import Path
from typing import Any

SIZES = (512, 1024, 2048, 4096)


def _blocked_host() -> Any:
    from nsightx._host.plugins import LoaderSettings, PluginHost

    return PluginHost(LoaderSettings(blocked=("nvml",))).load()


def profiled(torch: Any, backend: str, sizes: tuple[int, ...], runs: int, nvml: bool) -> Any:
    import nsightx
    from nsightx._host import plugins as _plugins

    inputs = {n: (torch.randn(n, n, device="cuda"), torch.randn(n, n, device="cuda")) for n in sizes}

    @nsightx.analyze.kernel(
        configs=[(n,) for n in sizes],
        runs=runs,
        warmup=1,
        backend=backend,
        combine_kernel_metrics=operator.add,
        thermal_mode="off",
        verbosity=nsightx.VerbosityLevel.SILENT,
    )
    def matmul(n: int) -> None:
        a, b = inputs[n]
        with nsightx.annotate("matmul"):
            a @ b

    if nvml:
        return matmul
    host = _blocked_host()

    def call() -> Any:
        previous = _plugins.default_host()  # loaded: restoring None would reload it every call
        _plugins.set_default_host(host)
        try:
            return matmul()
        finally:
            _plugins.set_default_host(previous)

    return call


def bare(torch: Any, sizes: tuple[int, ...], runs: int) -> Any:
    import ctypes

    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    buf = torch.empty(2 * l2 // 4, dtype=torch.int32, device="cuda")
    reset = ctypes.CDLL("libcuda.so.1").cuCtxResetPersistingL2Cache
    inputs = {n: (torch.randn(n, n, device="cuda"), torch.randn(n, n, device="cuda")) for n in sizes}
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

    def loop() -> list[float]:
        out = []
        for n in sizes:
            a, b = inputs[n]
            for r in range(-1, runs):
                reset()
                buf.fill_(r & 0x7F)
                e0.record()
                a @ b
                e1.record()
                e1.synchronize()
                if r >= 0:
                    out.append(e0.elapsed_time(e1))
        return out

    return loop


def walls(torch: Any, variants: dict[str, Any], reps: int) -> dict[str, Any]:
    for fn in variants.values():
        fn()
    times: dict[str, list[float]] = {k: [] for k in variants}
    for _ in range(reps):
        for k, fn in variants.items():
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            fn()
            times[k].append((time.perf_counter() - t0) * 1e3)
    med = {k: statistics.median(v) for k, v in times.items()}
    return {"median_ms": med, "ratio": {k: v / med["bare"] for k, v in med.items()}, "all_ms": times}


def profile_one(fn: Any) -> str:
    prof = cProfile.Profile()
    prof.enable()
    fn()
    prof.disable()
    s = io.StringIO()
    st = pstats.Stats(prof, stream=s)
    st.sort_stats("tottime").print_stats(30)
    st.sort_stats("cumulative").print_stats(40)
    return s.getvalue()


def nvml_costs(torch: Any) -> dict[str, Any]:
    import pynvml

    pynvml.nvmlInit()
    h = pynvml.nvmlDeviceGetHandleByIndex(0)
    calls = {
        "sm_clock": lambda: pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM),
        "mem_clock": lambda: pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_MEM),
        "temperature": lambda: pynvml.nvmlDeviceGetTemperature(h, pynvml.NVML_TEMPERATURE_GPU),
        "power": lambda: pynvml.nvmlDeviceGetPowerUsage(h),
        "reasons": lambda: pynvml.nvmlDeviceGetCurrentClocksEventReasons(h),
    }
    out: dict[str, Any] = {}
    a = torch.randn(8192, 8192, device="cuda")
    for state in ("idle", "busy"):
        res = {}
        for name, call in calls.items():
            samples = []
            for _ in range(30):
                if state == "busy":
                    for _ in range(3):
                        a @ a
                t0 = time.perf_counter_ns()
                call()
                samples.append((time.perf_counter_ns() - t0) / 1e3)
                if state == "busy":
                    torch.cuda.synchronize()
            res[name] = {"median_us": statistics.median(samples), "max_us": max(samples)}
        out[state] = res
    return out


def after_profiler(torch: Any) -> dict[str, Any]:
    import nsightx

    x = torch.ones(1 << 12, device="cuda")

    @nsightx.analyze.kernel(runs=3, backend="cupti", thermal_mode="off", verbosity=nsightx.VerbosityLevel.SILENT)
    def add() -> None:
        with nsightx.annotate("add"):
            x.add_(1)

    out: dict[str, Any] = {}
    first = add()
    out["before"] = len(first.records)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(3):
            x.mul_(2)
        torch.cuda.synchronize()
    out["profiler_events"] = len(prof.events())
    for attempt in ("after_1", "after_2"):
        try:
            res = add()
            out[attempt] = len(res.records)
        except Exception as e:
            out[attempt] = f"{type(e).__name__}: {e}"
    return out


def main() -> int:
    outdir = Path(sys.argv[1] if len(sys.argv) > 1 else "diag-out")
    outdir.mkdir(parents=True, exist_ok=True)
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.zeros(1, device="cuda")
    report: dict[str, Any] = {"gpu": torch.cuda.get_device_name(0)}
    variants = {
        "bare": bare(torch, SIZES, 10),
        "cupti": profiled(torch, "cupti", SIZES, 10, True),
        "cupti_nonvml": profiled(torch, "cupti", SIZES, 10, False),
        "events": profiled(torch, "events", SIZES, 10, True),
        "events_nonvml": profiled(torch, "events", SIZES, 10, False),
    }
    report["sweep"] = walls(torch, variants, 5)
    print(json.dumps(report["sweep"]["ratio"], indent=1), flush=True)
    small = {
        "bare": bare(torch, (512,), 40),
        "cupti": profiled(torch, "cupti", (512,), 40, True),
        "cupti_nonvml": profiled(torch, "cupti", (512,), 40, False),
        "events_nonvml": profiled(torch, "events", (512,), 40, False),
    }
    report["small"] = walls(torch, small, 5)
    print(json.dumps(report["small"]["ratio"], indent=1), flush=True)
    profiles = {k: profile_one(fn) for k, fn in small.items() if k != "bare"}
    (outdir / "diag_profiles.txt").write_text("\n\n".join(f"##### {k}\n{v}" for k, v in profiles.items()))
    report["nvml_us"] = nvml_costs(torch)
    print(json.dumps(report["nvml_us"], indent=1), flush=True)
    report["after_profiler"] = after_profiler(torch)
    print(json.dumps(report["after_profiler"], indent=1), flush=True)
    (outdir / "diag_alloc_once.json").write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
