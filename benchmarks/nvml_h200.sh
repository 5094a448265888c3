#!/usr/bin/env bash
# The issue-5 run on the H200: GPU tests of the nvml plugin, its per-run cost, and the fp16 matmul sweep with
# thermal mode off / auto / forced. Writes everything under $1 (default ./nvml-h200-out).
# Expects PYTHONPATH to reach nsightx, backends/ and plugins/ (see benchmarks/results/*nvml*.md).
set -u
OUTDIR=${1:-nvml-h200-out}
mkdir -p "$OUTDIR"
LOG="$OUTDIR/gpu_log.txt"
export PYTHONUNBUFFERED=1
{
  date -u
  nvidia-smi --query-gpu=name,driver_version,temperature.gpu,clocks.sm,clocks.mem,power.draw,power.limit --format=csv
  python3 -c "import pynvml, importlib.metadata as m; print('nvidia-ml-py', m.version('nvidia-ml-py'))"
  python3 -m nsightx.cli backends
  python3 -m nsightx.cli plugins
  echo "=== pytest (GPU tests + CPU tests of issue 5) ==="
  python3 -m pytest -q -p no:cacheprovider tests/test_nvml_gpu.py tests/test_nvml.py tests/test_thermal.py \
    tests/test_collectors.py tests/test_env_plugin.py
  echo "pytest rc=$?"
  echo "=== benchmarks/nvml_cost.py ==="
  python3 benchmarks/nvml_cost.py --json "$OUTDIR/nvml_cost.json"
  echo "nvml_cost rc=$?"
  echo "=== benchmarks/nvml_sweep.py ==="
  python3 benchmarks/nvml_sweep.py --out "$OUTDIR"
  echo "nvml_sweep rc=$?"
  nvidia-smi --query-gpu=temperature.gpu,clocks.sm,power.draw --format=csv
  date -u
} >>"$LOG" 2>&1
