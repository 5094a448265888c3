"""fp16 matmul sweep with the nvml plugin: per-run clocks and temperatures, thermal mode off and auto.

Usage: python benchmarks/nvml_sweep.py --out DIR [--runs 30] [--sizes 1024 2048 4096 8192] [--backend NAME]

Runs the sweep twice, ``thermal_mode="off"`` then ``"auto"`` (default band: pause at 10 °C of headroom to the
slowdown temperature, resume at 20), with ``output_csv=True``, and copies each call's per-run
(``profiled_data``) and aggregated (``processed_data``) CSV into DIR as ``profiled_data-<mode>.csv`` and
``processed_data-<mode>.csv``. Then it forces the guard to act on real hardware without touching the GPU's
settings: just before each of two calls, ``thermal_wait`` is set 20 °C above the headroom the GPU has then (out
of reach of a few seconds of cooling), with ``thermal_timeout=3``: ``auto`` must pause 3 s, lower its band and
go on (``profiled_data-forced.csv``); ``manual`` must raise CoolingTimeoutError.

The backend is the first of cupti, events, host that is available and runs; under host the region
synchronises, so it times the kernel plus launch.
"""

from __future__ import annotations

import argparse
import glob
import shutil
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

import nsightx

PER_RUN = [
    "Config",
    "Run",
    "n",
    "Value",
    "MeasuredSMClockMHz",
    "MeasuredMemClockMHz",
    "GPUTemperatureC",
    "GPUPowerW",
    "ClockEventReasons",
    "Throttled",
    "ThermalPauseS",
]
SUMMARY = [
    "n",
    "AvgValue",
    "RelativeStdDevPct",
    "NumRuns",
    "MeasuredSMClockMHz_Avg",
    "MeasuredSMClockMHz_Min",
    "GPUTemperatureC_Max",
    "GPUPowerW_Max",
    "ClockEventReasons",
    "ThrottledRuns",
    "StableMeasurement",
    "ThermalPauseS_Max",
    "Unit",
]


def make(backend: str, sizes: list[int], runs: int, prefix: str, **thermal: Any) -> Any:
    """The decorated sweep for one backend and thermal setting."""
    import torch

    sync = backend == "host"

    @nsightx.analyze.kernel(
        configs=[(n,) for n in sizes],
        runs=runs,
        backend=backend,
        output_prefix=prefix,
        output_csv=True,
        verbosity=nsightx.VerbosityLevel.INFO,
        **thermal,
    )
    def matmul(n: int) -> None:
        a = torch.randn(n, n, device="cuda", dtype=torch.float16)
        b = torch.randn(n, n, device="cuda", dtype=torch.float16)
        if sync:
            torch.cuda.synchronize()
        with nsightx.annotate("matmul"):
            a @ b
            if sync:
                torch.cuda.synchronize()

    return matmul


def copy_csvs(prefix: str, out: Path, tag: str) -> None:
    """Copy the call's CSVs into ``out`` with the mode in their names."""
    for kind in ("profiled_data", "processed_data"):
        found = sorted(glob.glob(f"{prefix}/**/{kind}-*.csv", recursive=True))
        if found:
            shutil.copy(found[-1], out / f"{kind}-{tag}.csv")


def show(res: Any, label: str) -> None:
    """Print the per-run and aggregated columns that matter here."""
    import pandas as pd

    pd.set_option("display.width", 250)
    pd.set_option("display.max_columns", 30)
    raw = res.runs_dataframe()
    df = res.to_dataframe()
    print(f"\n=== {label}: per-run (first 5 rows per size) ===")
    print(raw[[c for c in PER_RUN if c in raw.columns]].groupby("Config").head(5).to_string(index=False))
    print(f"\n=== {label}: aggregated ===")
    print(df[[c for c in SUMMARY if c in df.columns]].to_string(index=False))
    once = [
        c
        for c in ("GPUName", "GPUUUID", "DriverVersion", "PowerLimitW", "ECCEnabled", "SlowdownTempC")
        if c in df.columns
    ]
    print(df[once].iloc[:1].to_string(index=False))


def main() -> int:
    """Run the sweeps; return a non-zero exit code when a check failed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1024, 2048, 4096, 8192])
    parser.add_argument("--backend", default=None)
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    work = tempfile.mkdtemp(prefix="nsx-sweep-")

    import torch

    torch.zeros(1, device="cuda")
    failures = 0
    backends = [args.backend] if args.backend else ["cupti", "events", "host"]
    chosen = None
    for mode in ("off", "auto"):
        for name in list(backends):
            prefix = f"{work}/{mode}-{name}/"
            try:
                t = time.perf_counter()
                res = make(name, args.sizes, args.runs, prefix, thermal_mode=mode)()
            except Exception:
                print(f"backend {name} failed (thermal_mode={mode}):", file=sys.stderr)
                traceback.print_exc()
                backends.remove(name)
                continue
            chosen = name
            print(f"\nthermal_mode={mode}, backend={name}: {time.perf_counter() - t:.2f} s")
            show(res, f"thermal_mode={mode} on {name}")
            copy_csvs(prefix, out, mode)
            break
        else:
            print(f"no backend ran thermal_mode={mode}", file=sys.stderr)
            failures += 1
    if chosen is None:
        return 1

    from nsightx_nvml._collectors import NvmlTemperatureSource

    def band() -> tuple[int, int]:
        # the headroom changes by several °C within seconds after load (seen on the H200): read it just before
        headroom = int(NvmlTemperatureSource(None).read().headroom_c)
        wait, cont = headroom + 20, headroom + 25
        print(
            f"\n=== forced pause: headroom now {headroom} °C; thermal_wait={wait}, thermal_cont={cont}, timeout 3 s ==="
        )
        return wait, cont

    prefix = f"{work}/forced/"
    wait, cont = band()
    t = time.perf_counter()
    res = make(
        chosen, [4096], 5, prefix, thermal_mode="auto", thermal_wait=wait, thermal_cont=cont, thermal_timeout=3
    )()
    print(f"auto: {time.perf_counter() - t:.2f} s")
    show(res, "forced auto")
    copy_csvs(prefix, out, "forced")
    pauses = res.runs_dataframe().drop_duplicates("Run")["ThermalPauseS"].tolist()
    if not (pauses[0] >= 2.9 and max(pauses[1:]) < 1.0):
        print(f"CHECK FAILED: expected one ~3 s pause on run 0, got {pauses}")
        failures += 1
    wait, cont = band()
    t = time.perf_counter()
    try:
        make(
            chosen,
            [4096],
            5,
            f"{work}/manual/",
            thermal_mode="manual",
            thermal_wait=wait,
            thermal_cont=cont,
            thermal_timeout=3,
        )()
        print("CHECK FAILED: manual did not raise")
        failures += 1
    except nsightx.CoolingTimeoutError as e:
        print(f"manual raised after {time.perf_counter() - t:.2f} s: CoolingTimeoutError: {e}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
