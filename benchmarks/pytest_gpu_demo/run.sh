#!/usr/bin/env bash
# The nsightx pytest plugin on a GPU: save baselines, compare the same code (expect exit 0), compare with a planted
# slowdown (NSX_DEMO_SCALE=1.07, expect exit 1). Run from the repository root on the GPU machine, nsightx[cupti]
# and torch installed. Writes $OUT/pytest-plugin-gpu.log (default OUT=./gpu-out) and the results under $OUT.
set -u
OUT=${OUT:-gpu-out}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
DEMO=benchmarks/pytest_gpu_demo
BASE="$OUT/pytest-demo-baseline"
rm -rf "$BASE" "$OUT/pytest-demo-new"
{
  date -u; nvidia-smi --query-gpu=name,driver_version,temperature.gpu,clocks.sm --format=csv
  echo; echo "=== 1. save (main) ==="
  python -m pytest "$DEMO" -p no:cacheprovider --nsightx-backend=cupti --nsightx-save="$BASE"; echo "exit $?"
  echo; echo "=== 2. compare, the same code (expect exit 0) ==="
  python -m pytest "$DEMO" -p no:cacheprovider -v --nsightx-backend=cupti --nsightx-compare="$BASE" \
    --nsightx-threshold=5 --nsightx-save="$OUT/pytest-demo-new" --nsightx-markdown="$OUT/pytest-demo-summary.md"
  echo "exit $?"
  echo; echo "=== 3. compare, planted slowdown NSX_DEMO_SCALE=1.07 (expect exit 1) ==="
  NSX_DEMO_SCALE=1.07 python -m pytest "$DEMO" -p no:cacheprovider --nsightx-backend=cupti \
    --nsightx-compare="$BASE" --nsightx-threshold=5 --nsightx-markdown="$OUT/pytest-demo-summary.md"
  echo "exit $?"
} 2>&1 | tee "$OUT/pytest-plugin-gpu.log"
