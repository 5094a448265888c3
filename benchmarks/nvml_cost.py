"""What the nvml plugin costs per measured run, on the machine it runs on.

Usage: python benchmarks/nvml_cost.py [--reads 5000] [--runs 2000] [--json out.json] [--no-cuda]

Measures, each as a median over many repetitions (p90 beside it):
1. each NVML query the per-run collector makes (SM clock, memory clock, temperature, power, clock-event
   reasons), timed one by one through the plugin's wrapper;
2. one ``nvml.run`` collection, with ``device=None`` (the current CUDA device is looked up through libcuda
   each time) and with ``device=0``;
3. one ``nvml.device`` (ONCE) collection and one thermal-guard temperature read;
4. end to end: a profiled call on the host backend whose region is empty, ``runs=N``, with the nvml set on and
   blocked; the difference in wall time per run is what the plugin adds to a sweep (collection, storing the
   values, building the result), all of it outside the measured regions.

CUDA is brought up with torch first (unless ``--no-cuda``), so the device map takes the UUID path it takes in a
real GPU sweep.
"""

from __future__ import annotations

import argparse
import functools
import json
import platform
import statistics
import time
from collections.abc import Callable
from typing import Any

import nsightx
from nsightx._enums import CollectionScope
from nsightx._host import plugins as _plugins
from nsightx._run.collectors import CollectContext


def timed_us(fn: Callable[[], Any], n: int) -> dict[str, float]:
    """Median and p90 of ``n`` calls of ``fn``, in µs (each call timed on its own)."""
    samples = []
    for _ in range(n):
        t = time.perf_counter_ns()
        fn()
        samples.append((time.perf_counter_ns() - t) / 1e3)
    samples.sort()
    return {"median_us": round(statistics.median(samples), 3), "p90_us": round(samples[int(0.9 * n)], 3)}


def per_call_costs(reads: int) -> dict[str, Any]:
    """Items 1 to 3 of the module docstring."""
    from nsightx_nvml._collectors import DeviceInfo, NvmlTemperatureSource, RunConditions, provider

    t = time.perf_counter_ns()
    devices = provider().devices()
    init_ms = (time.perf_counter_ns() - t) / 1e6
    if devices is None:
        return {"error": provider().error}
    nvml = devices.nvml
    dev = devices.resolve(0)
    h = dev.sensors
    out: dict[str, Any] = {
        "nvml_init_ms": round(init_ms, 2),
        "matched_by": dev.how,
        "gpu": nvml.name(dev.handle),
        "uuid": nvml.uuid(dev.handle),
        "driver": nvml.driver_version(),
    }
    for name, call in (
        ("sm_clock", nvml.sm_clock_mhz),
        ("mem_clock", nvml.mem_clock_mhz),
        ("temperature", nvml.temperature_c),
        ("power", nvml.power_w),
        ("clock_event_reasons", nvml.event_reasons),
    ):
        out[f"query_{name}"] = timed_us(functools.partial(call, h), reads)
    run = RunConditions()
    for device in (None, 0):
        ctx = CollectContext(scope=CollectionScope.RUN, function="f", config=0, run=0, device=device)
        out[f"run_collect_device_{device}"] = timed_us(functools.partial(run.collect, ctx), reads)
    out["run_collect_sample"] = run.collect(CollectContext(scope=CollectionScope.RUN, function="f", run=0))
    once = DeviceInfo()
    ctx = CollectContext(scope=CollectionScope.ONCE, function="f")
    out["once_collect"] = timed_us(lambda: once.collect(ctx), 50)
    out["once_sample"] = once.collect(ctx)
    source = NvmlTemperatureSource(None)
    out["thermal_read"] = timed_us(source.read, reads)
    reading = source.read()
    out["thermal_sample"] = {
        "temperature_c": reading.temperature_c,
        "slowdown_c": reading.slowdown_c,
        "headroom_c": reading.headroom_c,
    }
    return out


def end_to_end(runs: int, repeats: int = 5) -> dict[str, Any]:
    """Item 4: µs per run of a profiled empty region, nvml on versus blocked (median of ``repeats`` calls)."""

    def per_run_us(blocked: tuple[str, ...]) -> float:
        host = _plugins.PluginHost(_plugins.LoaderSettings(blocked=blocked)).load()
        _plugins.set_default_host(host)

        @nsightx.analyze.kernel(
            runs=runs, warmup=0, backend="host", verbosity=nsightx.VerbosityLevel.SILENT, thermal_mode="off"
        )
        def empty() -> None:
            with nsightx.annotate("r"):
                pass

        walls = []
        for _ in range(repeats):
            t = time.perf_counter_ns()
            empty()
            walls.append((time.perf_counter_ns() - t) / 1e3 / runs)
        return statistics.median(walls)

    off = per_run_us(("nvml",))
    on = per_run_us(())
    _plugins.set_default_host(None)
    return {
        "runs": runs,
        "per_run_us_nvml_blocked": round(off, 2),
        "per_run_us_nvml_on": round(on, 2),
        "added_per_run_us": round(on - off, 2),
    }


def main() -> None:
    """Run the measurements and print (and optionally save) them as JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reads", type=int, default=5000)
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--json", default=None)
    parser.add_argument("--no-cuda", action="store_true")
    args = parser.parse_args()
    result: dict[str, Any] = {
        "machine": platform.node(),
        "python": platform.python_version(),
        "nsightx": nsightx.__version__,
        "cuda_up": False,
    }
    if not args.no_cuda:
        try:
            import torch

            torch.zeros(1, device="cuda")
            result["cuda_up"] = True
        except Exception as e:
            result["cuda_error"] = f"{type(e).__name__}: {e}"
    result["per_call"] = per_call_costs(args.reads)
    result["end_to_end"] = end_to_end(args.runs)
    text = json.dumps(result, indent=2, default=str)
    print(text)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            fh.write(text + "\n")


if __name__ == "__main__":
    main()
