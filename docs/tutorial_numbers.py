"""Regenerate every number and figure of docs/tutorial.md (and the example in docs/ci.md) on a GPU.

Run on the H200 machine (torch, cupti-python, nvidia-ml-py and ncu present)::

    PYTHONPATH=$PWD:$PWD/backends:$PWD/plugins python3 docs/tutorial_numbers.py OUT_DIR [--only=a,b]

``--only`` runs the named sections (``machine``, ``one_kernel``, ``how_many_runs``, ``cache_and_clocks``,
``size_sweep``, ``counters``, ``fusion``, ``collectors``, ``ci_example``).

Each section is independent: one that fails records its error in the JSON and the others still run. Written
to OUT_DIR: ``tutorial_numbers.json`` (every number the tutorial quotes, by section), the figures
``tutorial_sweep.png``, ``tutorial_speedup.png`` and ``tutorial_cache.png``, and two saved results for the CI
example (``ci_baseline.json``, ``ci_new.json``). Everything else (``.ncu-rep`` files, raw runs) stays under
``$TMPDIR/nsightx-tutorial``.

``NSIGHTX_TUTORIAL_BACKEND=host`` replaces every backend by the host clock (a smoke test of the script itself
on a machine without a GPU; its numbers mean nothing).
"""

from __future__ import annotations

import contextlib
import io
import json
import operator
import os
import shutil
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import nsightx

SILENT = nsightx.VerbosityLevel.SILENT
SMOKE = os.environ.get("NSIGHTX_TUTORIAL_BACKEND")
WORK = Path(tempfile.gettempdir()) / "nsightx-tutorial"
_tensors: dict[Any, Any] = {}


def backend(name: str) -> str:
    return SMOKE or name


def metrics(names: list[str]) -> list[str] | None:
    return None if SMOKE else names


def tensors(key: Any, make: Callable[[], Any]) -> Any:
    """Inputs made once per key and reused by every run (allocation stays out of the measured region)."""
    if key not in _tensors:
        _tensors.clear()  # one size at a time in memory
        _tensors[key] = make()
    return _tensors[key]


def rows(frame: Any, columns: list[str]) -> list[dict[str, Any]]:
    keep = [c for c in columns if c in frame.columns]
    return json.loads(frame[keep].to_json(orient="records"))


# --- 1. profile one kernel ------------------------------------------------------------------------------------


def one_kernel() -> dict[str, Any]:
    import torch

    @nsightx.analyze.kernel(configs=[4096], runs=20, backend=backend("cupti"), verbosity=SILENT)
    def matmul(n: int) -> None:
        a, b = tensors(("f32", n), lambda: (torch.randn(n, n, device="cuda"), torch.randn(n, n, device="cuda")))
        with nsightx.annotate("matmul"):
            torch.matmul(a, b)

    res = matmul()
    frame = res.to_dataframe()
    return {
        "rows": rows(
            frame,
            [
                "Annotation",
                "n",
                "Metric",
                "Kernel",
                "AvgValue",
                "MedianValue",
                "StdDev",
                "MinValue",
                "MaxValue",
                "NumRuns",
                "CI95_Lower",
                "CI95_Upper",
                "RelativeStdDevPct",
                "StableMeasurement",
                "MeasuredSMClockMHz_Avg",
                "MeasuredSMClockMHz_Min",
                "MeasuredSMClockMHz_Max",
                "MeasuredMemClockMHz_Avg",
                "GPUTemperatureC_Avg",
                "GPUPowerW_Avg",
                "ThrottledRuns",
                "ThermalPauseS_Avg",
                "GPU",
                "ComputeClock",
                "MemoryClock",
                "Tool",
            ],
        ),
        "columns": list(frame.columns),
        "environment": dict(res.environment),
    }


# --- 2. how many runs -----------------------------------------------------------------------------------------


def how_many_runs() -> dict[str, Any]:
    import torch

    def matmul(n: int) -> None:
        a, b = tensors(("f32", n), lambda: (torch.randn(n, n, device="cuda"), torch.randn(n, n, device="cuda")))
        with nsightx.annotate("matmul"):
            torch.matmul(a, b)

    sizes = [512, 1024, 2048, 4096]
    fixed = nsightx.analyze.kernel(
        configs=sizes, runs=10, backend=backend("cupti"), verbosity=SILENT, combine_kernel_metrics=operator.add
    )(matmul)
    auto = nsightx.analyze.kernel(
        configs=sizes,
        runs="auto",
        min_runs=5,
        max_runs=200,
        target_ci_pct=0.5,
        time_budget_s=3.0,
        backend=backend("cupti"),
        verbosity=SILENT,
        combine_kernel_metrics=operator.add,
    )(matmul)
    t0 = time.perf_counter()
    f = fixed().to_dataframe()
    t1 = time.perf_counter()
    a = auto().to_dataframe()
    t2 = time.perf_counter()
    cols = ["n", "Kernel", "AvgValue", "NumRuns", "CI95_Lower", "CI95_Upper", "RelativeStdDevPct", "StopReason"]
    return {"fixed_10": rows(f, cols), "auto": rows(a, cols), "fixed_wall_s": t1 - t0, "auto_wall_s": t2 - t1}


# --- 3. cache control and measured clocks ---------------------------------------------------------------------


def cache_and_clocks(out: Path) -> dict[str, Any]:
    import torch

    def add(mib: int) -> None:
        n = mib * (1 << 20) // 4
        x, y = tensors(("add", mib), lambda: (torch.randn(n, device="cuda"), torch.empty(n, device="cuda")))
        with nsightx.annotate("add"):
            torch.add(x, 1.0, out=y)

    def gbps(t_ns: float, mib: int) -> tuple[float, str]:
        return 2 * mib * (1 << 20) / t_ns, "GB/s"  # bytes read + written per ns = GB/s

    sizes = [8, 16, 64, 256, 1024]
    result: dict[str, Any] = {}
    frames = []
    for cache in ("none", "all"):
        res = nsightx.analyze.kernel(
            configs=sizes,
            runs=20,
            cache_control=None if SMOKE else cache,
            backend=backend("cupti"),
            verbosity=SILENT,
            derive_metric=gbps,
        )(add)()
        frame = res.to_dataframe()
        result[cache] = rows(
            frame,
            [
                "mib",
                "Metric",
                "AvgValue",
                "Unit",
                "CI95_Lower",
                "CI95_Upper",
                "RelativeStdDevPct",
                "MeasuredSMClockMHz_Avg",
                "MeasuredSMClockMHz_Min",
                "MeasuredMemClockMHz_Avg",
            ],
        )
        frame = frame.copy()
        frame["Annotation"] = f"cache_control={cache!r}"
        frames.append(frame)
    import pandas as pd

    both = pd.concat(frames, ignore_index=True)
    nsightx._plot.render.plot_frame(
        both,
        out / "tutorial_cache.png",
        metric="gbps",
        plot_type="bar",
        title="torch.add(x, 1) on the H200: warm vs flushed L2 (CUPTI)",
        ylabel="effective bandwidth (GB/s, read + write)",
        annotate_points=True,
    )
    return result


# --- 4. size sweep, derived TFLOP/s, normalisation ------------------------------------------------------------


def sweep_fn(torch: Any) -> Callable[[int], None]:
    def sweep(n: int) -> None:
        a, b, a16, b16 = tensors(
            ("sweep", n),
            lambda: (
                torch.randn(n, n, device="cuda"),
                torch.randn(n, n, device="cuda"),
                torch.randn(n, n, device="cuda", dtype=torch.bfloat16),
                torch.randn(n, n, device="cuda", dtype=torch.bfloat16),
            ),
        )
        torch.set_float32_matmul_precision("highest")
        with nsightx.annotate("fp32"):
            torch.matmul(a, b)
        torch.set_float32_matmul_precision("high")  # TF32 tensor cores
        with nsightx.annotate("tf32"):
            torch.matmul(a, b)
        torch.set_float32_matmul_precision("highest")
        with nsightx.annotate("bf16"):
            torch.matmul(a16, b16)

    return sweep


def tflops(t_ns: float, n: int) -> tuple[float, str]:
    return 2.0 * n**3 / t_ns / 1e3, "TFLOP/s"


def size_sweep(out: Path) -> dict[str, Any]:
    import torch

    sizes = [1024, 2048, 4096, 8192]
    opts: dict[str, Any] = {
        "configs": sizes,
        "runs": 10,
        "backend": backend("cupti"),
        "verbosity": SILENT,
        "combine_kernel_metrics": operator.add,
        "derive_metric": tflops,
    }
    plain = nsightx.analyze.plot(
        str(out / "tutorial_sweep.png"),
        metric="tflops",
        annotate_points=True,
        title="matmul on the H200 (CUPTI kernel time)",
        ylabel="TFLOP/s",
    )(nsightx.analyze.kernel(**opts)(sweep_fn(torch)))
    normalized = nsightx.analyze.plot(
        str(out / "tutorial_speedup.png"),
        metric="gpu__time_duration.sum" if not SMOKE else "host__time_duration.sum",
        plot_type="bar",
        annotate_points=True,
        title="matmul time relative to fp32 (lower is faster)",
    )(nsightx.analyze.kernel(normalize_against="fp32", **opts)(sweep_fn(torch)))
    a = plain().to_dataframe()
    b = normalized().to_dataframe()
    cols = [
        "Annotation",
        "n",
        "Metric",
        "Kernel",
        "AvgValue",
        "Unit",
        "CI95_Lower",
        "CI95_Upper",
        "NumRuns",
        "RelativeStdDevPct",
        "Normalized",
        "NormalizationValue",
        "Geomean",
    ]
    return {"plain": rows(a, cols), "normalized": rows(b, cols)}


# --- 5 + 8 + 9. compute- vs memory-bound from ncu counters; CUPTI vs events vs ncu; the .ncu-rep ---------------

BOUND_METRICS = [
    "gpu__time_duration.sum",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
    "dram__bytes_read.sum",
    "dram__bytes_write.sum",
]


def bound_fn(torch: Any) -> Callable[[], None]:
    def bound() -> None:
        a, b, x, y = tensors(
            "bound",
            lambda: (
                torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16),
                torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16),
                torch.randn(1 << 26, device="cuda"),
                torch.empty(1 << 26, device="cuda"),
            ),
        )
        with nsightx.annotate("matmul_bf16_4096"):
            torch.matmul(a, b)
        with nsightx.annotate("add_256MiB"):
            torch.add(x, 1.0, out=y)

    return bound


def counters() -> dict[str, Any]:
    import torch

    _tensors.clear()  # the worker gets the function by value: send no CUDA tensors along

    ncu_dir = WORK / "ncu"
    res = nsightx.analyze.kernel(
        runs=3,
        backend=backend("ncu"),
        metrics=metrics(BOUND_METRICS),
        cache_control=None if SMOKE else "all",
        clock_control=None if SMOKE else "none",
        output_prefix=str(ncu_dir) + "/",
        verbosity=SILENT,
    )(bound_fn(torch))()
    frame = res.to_dataframe()
    out: dict[str, Any] = {
        "ncu": rows(
            frame,
            [
                "Annotation",
                "Metric",
                "Kernel",
                "AvgValue",
                "Unit",
                "NumRuns",
                "CI95_Lower",
                "CI95_Upper",
                "RelativeStdDevPct",
            ],
        )
    }
    env = dict(res.environment)
    out["environment"] = {k: v for k, v in env.items() if k.startswith("ncu") or k in ("GPU", "ComputeClock")}
    report = env.get("ncu_report")
    if isinstance(report, str) and Path(report).exists():
        out["ncu_report_bytes"] = Path(report).stat().st_size
        out["ncu_report_name"] = Path(report).name
    out["files"] = sorted(p.name for p in ncu_dir.iterdir()) if ncu_dir.exists() else []
    for name, cache in (("cupti_cold", "all"), ("cupti_warm", "none"), ("events_cold", "all")):
        tool = "events" if name.startswith("events") else "cupti"
        r = nsightx.analyze.kernel(
            runs=20,
            backend=backend(tool),
            cache_control=None if SMOKE else cache,
            verbosity=SILENT,
            combine_kernel_metrics=operator.add,
        )(bound_fn(torch))()
        out[name] = rows(
            r.to_dataframe(),
            ["Annotation", "Metric", "Kernel", "AvgValue", "CI95_Lower", "CI95_Upper", "RelativeStdDevPct", "NumRuns"],
        )
    return out


# --- 6. kernel fusion measured in bytes -----------------------------------------------------------------------


def fusion() -> dict[str, Any]:
    import torch

    _tensors.clear()

    def silu() -> None:
        x = tensors("silu", lambda: torch.randn(1 << 26, device="cuda"))
        with nsightx.annotate("unfused: x * sigmoid(x)"):
            x * torch.sigmoid(x)
        with nsightx.annotate("fused: F.silu(x)"):
            torch.nn.functional.silu(x)

    res = nsightx.analyze.kernel(
        runs=3,
        backend=backend("ncu"),
        combine_kernel_metrics=operator.add,
        cache_control=None if SMOKE else "all",
        clock_control=None if SMOKE else "none",
        verbosity=SILENT,
        metrics=metrics(["gpu__time_duration.sum", "dram__bytes_read.sum", "dram__bytes_write.sum"]),
    )(silu)()
    return {
        "ncu": rows(
            res.to_dataframe(), ["Annotation", "Metric", "Kernel", "AvgValue", "Unit", "NumRuns", "RelativeStdDevPct"]
        )
    }


# --- 7. collectors and thermal mode ---------------------------------------------------------------------------


def collectors() -> dict[str, Any]:
    import torch

    @nsightx.experimental.collect(scope="config")
    def input_mib(n: int) -> float:
        return 2 * n * n * 4 / (1 << 20)

    @nsightx.analyze.kernel(
        configs=[2048, 8192],
        runs=10,
        backend=backend("cupti"),
        verbosity=SILENT,
        info_collectors=[input_mib, "env"],
        thermal_mode="auto",
    )
    def matmul(n: int) -> None:
        a, b = tensors(("f32", n), lambda: (torch.randn(n, n, device="cuda"), torch.randn(n, n, device="cuda")))
        with nsightx.annotate("matmul"):
            torch.matmul(a, b)

    frame = matmul().to_dataframe()
    return {
        "columns": list(frame.columns),
        "rows": rows(
            frame,
            [
                "n",
                "AvgValue",
                "input_mib",
                "MeasuredSMClockMHz_Avg",
                "MeasuredSMClockMHz_Min",
                "MeasuredMemClockMHz_Avg",
                "GPUTemperatureC_Max",
                "GPUPowerW_Avg",
                "ClockEventReasons",
                "ThrottledRuns",
                "ThermalPauseS_Avg",
                "StableMeasurement",
                "DriverVersion",
                "SlowdownTempC",
                "PowerLimitW",
            ],
        ),
    }


# --- the CI example (docs/ci.md) ------------------------------------------------------------------------------


def ci_example(out: Path) -> dict[str, Any]:
    import torch

    from nsightx.cli import main

    def make(precision: str) -> Any:
        def gemm(n: int) -> None:
            a, b = tensors(("f32", n), lambda: (torch.randn(n, n, device="cuda"), torch.randn(n, n, device="cuda")))
            torch.set_float32_matmul_precision(precision)
            with nsightx.annotate("gemm"):
                torch.matmul(a, b)
            torch.set_float32_matmul_precision("highest")

        return nsightx.analyze.kernel(
            configs=[1024, 2048, 4096],
            runs=20,
            backend=backend("cupti"),
            combine_kernel_metrics=operator.add,
            verbosity=SILENT,
        )(gemm)

    base = make("high")().save(WORK / "ci" / "baseline.json")
    again = make("high")().save(WORK / "ci" / "rerun.json")
    slow = make("highest")().save(WORK / "ci" / "slow.json")
    shutil.copy(base, out / "ci_baseline.json")
    shutil.copy(slow, out / "ci_new.json")
    result: dict[str, Any] = {}
    for name, new, fmt in (
        ("rerun", again, "text"),
        ("slow", slow, "text"),
        ("slow_markdown", slow, "markdown"),
        ("identical", base, "text"),
    ):
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            code = main(["compare", str(base), str(new), "--threshold", "5", "--format", fmt])
        result[name] = {"exit": code, "output": buf.getvalue()}
    return result


def machine() -> dict[str, Any]:
    from nsightx._commands.doctor import report
    from nsightx._pluginhost.plugins import default_host

    return {"doctor": report(default_host())}


def main(out: Path, only: set[str] | None = None) -> int:
    out.mkdir(parents=True, exist_ok=True)
    WORK.mkdir(parents=True, exist_ok=True)
    numbers: dict[str, Any] = {"started": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "smoke_backend": SMOKE}
    sections: list[tuple[str, Callable[[], dict[str, Any]]]] = [
        ("machine", machine),
        ("one_kernel", one_kernel),
        ("how_many_runs", how_many_runs),
        ("cache_and_clocks", lambda: cache_and_clocks(out)),
        ("size_sweep", lambda: size_sweep(out)),
        ("counters", counters),
        ("fusion", fusion),
        ("collectors", collectors),
        ("ci_example", lambda: ci_example(out)),
    ]
    for name, fn in sections:
        if only and name not in only:
            continue
        t0 = time.perf_counter()
        try:
            numbers[name] = fn()
            status = "ok"
        except Exception as e:
            numbers[name] = {"error": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc()}
            status = f"FAILED: {type(e).__name__}: {e}"
        numbers[name + "_wall_s"] = time.perf_counter() - t0
        print(f"[{name}] {status} ({numbers[name + '_wall_s']:.1f} s)", flush=True)
        (out / "tutorial_numbers.json").write_text(json.dumps(numbers, indent=1, default=str), encoding="utf-8")
    return 0


if __name__ == "__main__":
    args = sys.argv[1:]
    picked = {s for a in args if a.startswith("--only=") for s in a.removeprefix("--only=").split(",")}
    paths = [a for a in args if not a.startswith("--")]
    sys.exit(main(Path(paths[0] if paths else "tutorial-out"), picked or None))
