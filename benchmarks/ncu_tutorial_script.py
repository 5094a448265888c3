"""The script of issue 12, written the way NVIDIA's nsight-python tutorial writes it: no ``__main__`` guard, an NVML
handle opened at module level, three ``@collect`` collectors that use it, a torch matmul sweep.

Under ncu the sweep runs in a worker process, but the collectors (and the thermal guard) run here, so the NVML
handle never has to be pickled. Run it on a GPU machine, once per backend::

    PYTHONPATH=.:backends:plugins python3 benchmarks/ncu_tutorial_script.py ncu   out/tutorial-ncu/heat_
    PYTHONPATH=.:backends:plugins python3 benchmarks/ncu_tutorial_script.py cupti out/tutorial-cupti/heat_

It prints the DataFrame's collector columns, then every file written under the ``output_prefix`` folder (the
``profiled_data-*.csv`` holds the per-run SM clock and temperature; the ``.ncu-rep`` only with ncu), then one
JSON line to record.
"""

import json
import operator
import sys
from pathlib import Path

import pandas as pd
import pynvml
import torch

import nsightx

backend = sys.argv[1] if len(sys.argv) > 1 else "ncu"
prefix = sys.argv[2] if len(sys.argv) > 2 else f"tutorial-{backend}/heat_"

pynvml.nvmlInit()
handle = pynvml.nvmlDeviceGetHandleByIndex(0)


@nsightx.experimental.collect(scope="once")
def driver_version():
    return pynvml.nvmlSystemGetDriverVersion()


@nsightx.experimental.collect(scope="run")
def sm_clock_mhz():
    return pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM)


@nsightx.experimental.collect(scope="run")
def temperature_c():
    return pynvml.nvmlDeviceGetTemperature(handle, pynvml.NVML_TEMPERATURE_GPU)


@nsightx.analyze.kernel(
    configs=[(1024,), (2048,), (4096,)],
    runs=5,
    backend=backend,
    thermal_mode="auto",
    output_prefix=prefix,
    output_csv=True,
    info_collectors=[driver_version, sm_clock_mhz, temperature_c],
    combine_kernel_metrics=operator.add,  # cuBLAS may split a matmul into two kernels
)
def heat(n):
    a = torch.randn(n, n, device="cuda")
    b = torch.randn(n, n, device="cuda")
    with nsightx.annotate("matmul"):
        a @ b


results = heat()
df = results.to_dataframe()
ours = [c for c in df.columns if c.startswith(("driver_version", "sm_clock_mhz", "temperature_c"))]
pd.set_option("display.width", 200)
print(df[["Annotation", "n", "AvgValue", "NumRuns", *ours]].to_string())
folder = Path(prefix).parent
written = sorted(str(p) for p in folder.iterdir())
print("files written:")
for name in written:
    print(f"  {name}")
raw = sorted(folder.glob("*profiled_data-*.csv"))
per_run = pd.read_csv(raw[0]) if raw else None
print(
    json.dumps(
        {
            "backend": backend,
            "collector_columns": ours,
            "rows": len(df),
            "files": written,
            "ncu_report": results.environment.get("ncu_report"),
            "per_run_columns": [
                c
                for c in (per_run.columns if per_run is not None else ())
                if c in ("sm_clock_mhz", "temperature_c", "driver_version")
            ],
            "per_run_sm_clock_mhz": per_run["sm_clock_mhz"].tolist()[:6] if per_run is not None else None,
        }
    )
)
