"""Issue 3's benchmark: CUPTI (and events) backend overhead, accuracy against ncu, and stability.

    PYTHONPATH=.:backends:plugins python benchmarks/cupti_overhead.py --out OUTDIR [--reps 7] [--ncu PATH]

Workload: fp32 matmul n = 512, 1024, 2048, 4096, 10 measured runs (plus 1 warm-up run) per size, inputs drawn with
torch.randn in every run outside the region, one annotation "matmul", combine_kernel_metrics=operator.add
(n = 512 launches two cuBLAS kernels).

1. Overhead: wall time of the whole profiled call (``f()``, session start and result building included) over the
   wall time of the same loop timed with one pair of bare CUDA events per run, in the same process, with the same
   cache policy (no flush, or a 2 x L2 overwrite before every run in both). All variants are interleaved
   ``--reps`` times after a warm-up of each; medians are compared.
2. Accuracy: per-size median of CUPTI's ``gpu__time_duration.sum`` (sum of the region's kernels) against the raw
   ``ncu --metrics gpu__time_duration.sum`` command line on the same loop marked with NVTX ranges, for the same
   cache policy (``--cache-control all`` vs. flush, ``none`` vs. no flush), clocks not locked.
3. Stability: relative standard deviation of the 10 CUPTI runs at n = 2048.
4. The events backend's span next to CUPTI's kernel sum.
"""

from __future__ import annotations

import argparse
import json
import operator
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

SIZES = (512, 1024, 2048, 4096)
RUNS = 10
WARMUP = 1
NVTX_DOMAIN = "nsightx"


def _torch() -> Any:
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    return torch


# --- the ncu worker ---------------------------------------------------------------------------------------


def ncu_target(flush: bool) -> None:
    """Run the loop with each matmul inside an NVTX range ``mm_n<n>_r<run>`` (run < 0: warm-up)."""
    import nvtx

    torch = _torch()
    buf = _flush_buffer(torch) if flush else None  # ncu flushes itself; keep the same work outside ranges
    for n in SIZES:
        for r in range(-WARMUP, RUNS):
            a = torch.randn(n, n, device="cuda")
            b = torch.randn(n, n, device="cuda")
            if buf is not None:
                buf.fill_(r & 0x7F)
            nvtx.push_range(f"mm_n{n}_r{r}", domain=NVTX_DOMAIN)
            a @ b
            nvtx.pop_range(domain=NVTX_DOMAIN)
    torch.cuda.synchronize()


def run_ncu(ncu: str, cache: str, outdir: Path) -> dict[int, list[float]]:
    """Profile the loop under ncu; returns n -> per-run sums of gpu__time_duration.sum (ns)."""
    rep = Path("/tmp") / f"nsightx_bench_ncu_{cache}"
    cmd = [
        ncu,
        "--clock-control",
        "none",
        "--cache-control",
        cache,
        "--nvtx",
        "--nvtx-include",
        f"regex:{NVTX_DOMAIN}@mm_.*/",
        "--metrics",
        "gpu__time_duration.sum",
        "-f",
        "-o",
        str(rep),
        sys.executable,
        __file__,
        "--ncu-target",
        "--flush" if cache == "all" else "--no-flush",
    ]
    print("$ " + " ".join(cmd), flush=True)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    print(f"ncu exit {proc.returncode} after {time.perf_counter() - t0:.1f} s", flush=True)
    if proc.returncode != 0:
        print(proc.stdout[-3000:], proc.stderr[-3000:], sep="\n")
        return {}
    parsed = subprocess.run(
        [sys.executable, __file__, "--parse-ncu", str(rep) + ".ncu-rep"], capture_output=True, text=True, check=False
    )  # ncu_report in its own process: it clashes with CUPTI here
    if parsed.returncode != 0:
        print("ncu report parse failed:", parsed.stdout[-2000:], parsed.stderr[-2000:], sep="\n")
        return {}
    doc = json.loads(parsed.stdout.strip().splitlines()[-1])
    unit = doc["unit"]
    sums = {tuple(int(x) for x in k.split(",")): v for k, v in doc["sums"].items()}
    print(f"ncu metric unit: {unit}; {len(sums)} (n, run) ranges", flush=True)
    scale = 1e3 if unit in ("usecond", "us") else 1.0
    out: dict[int, list[float]] = {}
    for (n, r), v in sorted(sums.items()):
        if r >= 0:
            out.setdefault(n, []).append(v * scale)
    return out


def parse_ncu(path: str) -> None:
    """Print {"unit", "sums": {"n,run": summed gpu__time_duration.sum}} of an ncu report as one JSON line."""
    sys.path.insert(0, "/opt/nvidia/nsight-compute/2025.3.1/extras/python")
    import ncu_report

    ctx = ncu_report.load_report(path)
    sums: dict[str, float] = {}
    unit = None
    for ri in range(ctx.num_ranges()):
        rng = ctx.range_by_idx(ri)
        for ai in range(rng.num_actions()):
            act = rng.action_by_idx(ai)
            state = act.nvtx_state()
            names: list[str] = []
            for d in state.domains() if state is not None else ():
                dom = state.domain_by_id(d)
                if dom.name() == NVTX_DOMAIN:
                    names += list(dom.push_pop_ranges())
            label = next((x for x in names if x.startswith("mm_n")), None)
            if label is None:
                continue
            n_s, r_s = label[4:].split("_r")
            metric = act.metric_by_name("gpu__time_duration.sum")
            unit = metric.unit()
            key = f"{int(n_s)},{int(r_s)}"
            sums[key] = sums.get(key, 0.0) + float(metric.value())
    print(json.dumps({"unit": unit, "sums": sums}))


# --- in-process variants ----------------------------------------------------------------------------------


def _flush_buffer(torch: Any) -> Any:
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    return torch.empty(2 * l2 // 4, dtype=torch.int32, device="cuda")


def make_bare(torch: Any, flush: bool, reset: bool = False) -> Any:
    """The reference loop: one pair of CUDA events per run, synchronised every run.

    ``flush`` overwrites a 2 x L2 buffer before each run; ``reset`` also resets persisting L2 lines first, which
    is the whole of ``cache_control="all"`` as the issue defines it (and as the cupti and events backends do).
    """
    import ctypes

    buf = _flush_buffer(torch) if flush else None
    reset_l2 = ctypes.CDLL("libcuda.so.1").cuCtxResetPersistingL2Cache if reset else None
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

    def bare() -> dict[int, list[float]]:
        out: dict[int, list[float]] = {}
        for n in SIZES:
            for r in range(-WARMUP, RUNS):
                a = torch.randn(n, n, device="cuda")
                b = torch.randn(n, n, device="cuda")
                if reset_l2 is not None:
                    reset_l2()
                if buf is not None:
                    buf.fill_(r & 0x7F)
                e0.record()
                a @ b
                e1.record()
                e1.synchronize()
                if r >= 0:
                    out.setdefault(n, []).append(e0.elapsed_time(e1) * 1e6)
        return out

    return bare


def make_profiled(torch: Any, backend: str, cache: str, **options: Any) -> Any:
    """The same loop as a decorated function measured by ``backend``."""
    import nsightx

    options.setdefault("thermal_mode", "off")
    if options.pop("no_defaults", False):
        from nsightx._host.plugins import LoaderSettings, PluginHost, default_host

        host = default_host()
        blocked = PluginHost(LoaderSettings(blocked=("nvml",))).load()
        profiled = _kernel_with_host(nsightx, torch, backend, cache, blocked, options)
        del host
        return profiled

    @nsightx.analyze.kernel(
        configs=[(n,) for n in SIZES],
        runs=RUNS,
        warmup=WARMUP,
        backend=backend,
        cache_control=cache,
        combine_kernel_metrics=operator.add,
        verbosity=nsightx.VerbosityLevel.SILENT,
        **options,
    )
    def matmul(n: int) -> None:
        a = torch.randn(n, n, device="cuda")
        b = torch.randn(n, n, device="cuda")
        with nsightx.annotate("matmul"):
            a @ b

    return matmul


def _kernel_with_host(nsightx: Any, torch: Any, backend: str, cache: str, host: Any, options: dict[str, Any]) -> Any:
    """The profiled loop, run under ``host`` (a plugin host without the default nvml collectors)."""
    from nsightx._host import plugins as _plugins

    inner = make_profiled(torch, backend, cache, **options)

    def call() -> Any:
        previous = _plugins.default_host()  # loaded: restoring None would reload it every call
        _plugins.set_default_host(host)
        try:
            return inner()
        finally:
            _plugins.set_default_host(previous)

    return call


def per_size(result: Any) -> dict[int, list[float]]:
    """n -> per-run values of the region (kernels summed)."""
    by_run: dict[tuple[int, int], float] = {}
    for rec in result.records:
        key = (SIZES[rec.config], rec.run)
        by_run[key] = by_run.get(key, 0.0) + rec.value
    out: dict[int, list[float]] = {}
    for (n, _r), v in sorted(by_run.items()):
        out.setdefault(n, []).append(v)
    return out


def session_cost() -> dict[str, float]:
    """Median wall time of opening and closing an empty CUPTI session (enable, filter, flush buffer, disable)."""
    from nsightx_cupti._backend import CuptiBackend

    from nsightx._run.plan import Plan

    out = {}
    for label, cache, opts in (
        ("always/all", "all", {}),
        ("always/none", "none", {}),
        ("region/all", "all", {"api_tracing": "region"}),
    ):
        plan = Plan(
            function=lambda: None,
            function_name="f",
            params=(),
            configs=((),),
            runs=1,
            warmup=0,
            metrics=("gpu__time_duration.sum",),
            backend="cupti",
            cache_control=cache,
            backend_options=opts,
        )
        times = []
        for _ in range(5):
            t0 = time.perf_counter()
            with CuptiBackend().session(plan):
                pass
            times.append((time.perf_counter() - t0) * 1e3)
        out[label] = statistics.median(times)
    return out


def probe(torch: Any) -> dict[str, float]:
    """Median host cost (us) of the tracer's per-run steps in isolation (4 tiny kernels per iteration)."""
    from nsightx_cupti import _driver
    from nsightx_cupti._tracer import ActivityTracer

    x = torch.ones(1024, device="cuda")
    tracer = ActivityTracer.get()
    samples: dict[str, list[int]] = {}

    def timed(label: str, fn: Any, reps: int = 40) -> None:
        for _ in range(reps):
            t0 = time.perf_counter_ns()
            fn()
            samples.setdefault(label, []).append(time.perf_counter_ns() - t0)

    def launch4() -> None:
        for _ in range(4):
            x.add_(1)

    def launch4_sync() -> None:
        launch4()
        _driver.synchronize()

    def open_close() -> None:
        tracer.region_open()
        tracer.region_close()

    for flag, nbytes in (("forced", 256 << 10), ("forced", 8 << 20), ("plain", 256 << 10)):
        tag = f"{flag}/{nbytes >> 10}KiB"
        tracer.start(nbytes, api_tracing="region", flush_flag=flag)
        try:
            launch4()
            _driver.synchronize()
            tracer.collect()
            timed(f"collect_nothing_new/{tag}", tracer.collect)
            for _ in range(40):
                launch4()
                _driver.synchronize()
                t0 = time.perf_counter_ns()
                tracer.collect()
                samples.setdefault(f"collect_after_4_kernels/{tag}", []).append(time.perf_counter_ns() - t0)
            if flag == "forced" and nbytes == 256 << 10:
                timed("region_open_close", open_close)
                timed("launch4_sync_traced", launch4_sync)
                timed("dropped_query", tracer.dropped)
        finally:
            tracer.stop()
    timed("launch4_sync_untraced", launch4_sync)
    return {k: statistics.median(v) / 1e3 for k, v in samples.items()}


def rsd(values: list[float]) -> float:
    """Relative standard deviation (sample), percent."""
    return 100.0 * statistics.stdev(values) / statistics.fmean(values)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=Path("nsightx-out/bench"))
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--ncu", default="/usr/local/cuda/bin/ncu")
    ap.add_argument("--skip-ncu", action="store_true")
    ap.add_argument("--only", help="comma-separated variants to time (the bare loops are always timed)")
    ap.add_argument("--ncu-target", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--parse-ncu", help=argparse.SUPPRESS)
    ap.add_argument("--flush", dest="flush", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--no-flush", dest="flush", action="store_false", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.ncu_target:
        ncu_target(args.flush)
        return 0
    if args.parse_ncu:
        parse_ncu(args.parse_ncu)
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    torch = _torch()
    torch.zeros(1, device="cuda")
    print(f"GPU {torch.cuda.get_device_name(0)}, torch {torch.__version__}", flush=True)
    variants: dict[str, Any] = {}
    for cache, flush in (("none", False), ("all", True)):
        variants[f"bare/{cache}"] = make_bare(torch, flush)
        if flush:
            variants["bare_reset/all"] = make_bare(torch, flush, reset=True)
        variants[f"cupti/{cache}"] = make_profiled(torch, "cupti", cache)
        variants[f"events/{cache}"] = make_profiled(torch, "events", cache)
    # The default collects CUPTI's records in batches (here once per call) and traces launch APIs for the whole
    # session minus the APIs it has seen launch nothing; "perrun" collects after every run; "region" switches API
    # tracing on and off around each region instead; "nocollectors" leaves out the default nvml collectors.
    variants["cupti_perrun/all"] = make_profiled(torch, "cupti", "all", backend_options={"cupti_collect": "run"})
    variants["cupti_region/all"] = make_profiled(torch, "cupti", "all", backend_options={"api_tracing": "region"})
    variants["cupti_nocollectors/all"] = make_profiled(torch, "cupti", "all", info_collectors=[], no_defaults=True)
    variants["cupti_nocollectors/none"] = make_profiled(torch, "cupti", "none", info_collectors=[], no_defaults=True)
    if args.only:
        keep = set(args.only.split(",")) | {"bare/none", "bare/all", "bare_reset/all"}
        variants = {k: v for k, v in variants.items() if k in keep}
    walls: dict[str, list[float]] = {k: [] for k in variants}
    last: dict[str, Any] = {}
    for name, fn in variants.items():  # warm-up: cuBLAS handles, CUPTI load, allocator
        last[name] = fn()
    for _ in range(args.reps):
        for name, fn in variants.items():
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            last[name] = fn()
            walls[name].append(time.perf_counter() - t0)
    med = {k: statistics.median(v) * 1e3 for k, v in walls.items()}
    report: dict[str, Any] = {
        "gpu": torch.cuda.get_device_name(0),
        "torch": torch.__version__,
        "reps": args.reps,
        "wall_ms_median": med,
        "wall_ms_all": {k: [x * 1e3 for x in v] for k, v in walls.items()},
    }
    ratios = {k: v / med["bare/" + k.split("/")[1]] for k, v in med.items() if not k.startswith("bare/")}
    report["ratio_to_bare"] = ratios
    # each repetition times every variant back to back, so the per-repetition ratio cancels slow drifts of the
    # shared machine; its median is the steadier figure
    if "bare_reset/all" in walls:  # the reference with the whole of cache_control="all" (persisting reset too)
        report["ratio_to_bare_reset_all"] = {
            k: med[k] / med["bare_reset/all"] for k in med if k.endswith("/all") and not k.startswith("bare")
        }
        report["ratio_to_bare_reset_all_paired_median"] = {
            k: statistics.median(x / y for x, y in zip(v, walls["bare_reset/all"], strict=True))
            for k, v in walls.items()
            if k.endswith("/all") and not k.startswith("bare")
        }
    report["ratio_to_bare_paired_median"] = {
        k: statistics.median(x / y for x, y in zip(v, walls["bare/" + k.split("/")[1]], strict=True))
        for k, v in walls.items()
        if not k.startswith("bare/")
    }
    values = {k: (v if k.startswith("bare") else per_size(v)) for k, v in last.items()}
    report["per_size_median_ns"] = {k: {n: statistics.median(x) for n, x in v.items()} for k, v in values.items()}
    report["rsd_pct"] = {k: {n: rsd(x) for n, x in v.items()} for k, v in values.items()}
    report["session_open_close_ms"] = session_cost()
    report["cupti_step_costs"] = {
        k: {key: val for key, val in v.environment.items() if key.startswith("CuptiPer") or key.startswith("CuptiUs")}
        for k, v in last.items()
        if k.startswith("cupti")
    }
    report["probe_us"] = probe(torch)
    cupti_res = last.get("cupti/all") or next(v for k, v in last.items() if k.startswith("cupti"))
    report["cupti_environment"] = dict(cupti_res.environment)
    report["kernels_per_run_cupti"] = {
        n: sorted(
            {
                reg.attributes.get("kernel_count")
                for run in cupti_res.data.runs
                for reg in run.regions
                if SIZES[reg.config] == n
            }
        )
        for n in SIZES
    }
    report["launch_bound_runs_cupti"] = {
        n: sum(
            1
            for run in cupti_res.data.runs
            for reg in run.regions
            if SIZES[reg.config] == n and reg.attributes.get("launch_bound")
        )
        for n in SIZES
    }
    out_json = args.out / "cupti_overhead.json"
    out_json.write_text(json.dumps(report, indent=1, default=str), encoding="utf-8")  # before ncu, in case it fails
    if not args.skip_ncu and os.path.exists(args.ncu):
        report["ncu_median_ns"] = {}
        report["cupti_vs_ncu_pct"] = {}
        for cache in ("all", "none"):
            got = run_ncu(args.ncu, cache, args.out)
            if not got:
                continue
            report["ncu_median_ns"][cache] = {n: statistics.median(v) for n, v in got.items()}
            report["ncu_rsd_pct_" + cache] = {n: rsd(v) for n, v in got.items() if len(v) > 1}
            cup = report["per_size_median_ns"][f"cupti/{cache}"]
            report["cupti_vs_ncu_pct"][cache] = {
                n: 100.0 * (cup[n] - m) / m for n, m in report["ncu_median_ns"][cache].items()
            }
    out_json.write_text(json.dumps(report, indent=1, default=str), encoding="utf-8")
    print(json.dumps(report, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
