#!/usr/bin/env bash
# Every GPU test and benchmark of nsightx in one go, for one call on the GPU machine. Writes under $OUT
# (default ./gpu-out), each file as soon as its step ends: doctor-demo.log, gpu-tests.log (pytest -m gpu),
# cupti_overhead.json + backend_overhead.json + benchmarks.log, tutorial_numbers_sweeps.json, ncu_overhead.json; all.tgz
# bundles the rest (cupti_timeline.json, backend_overhead_before.json, profiles; the device tool brings back at most
# 8 files).
# Usage (GPU machine, repository root, nsightx importable):  bash benchmarks/run_gpu.sh
# With BEFORE_TREE=PATH (a source copy of an older nsightx, e.g. main at 137bee0), backend_overhead.py also measures
# that tree in a process of its own, for a before/after comparison of the same benchmark.
set -u
OUT=${OUT:-gpu-out}
mkdir -p "$OUT"
WORK=$(mktemp -d)
export PYTHONUNBUFFERED=1
{
  date -u; nvidia-smi --query-gpu=name,driver_version,temperature.gpu,clocks.sm --format=csv
  python3 -m nsightx.cli doctor
  echo "=== nsightx demo ==="
  (cd "$WORK" && python3 -m nsightx.cli demo --output demo-out/)
} > "$OUT/doctor-demo.log" 2>&1
python3 -m pytest -m gpu -q -p no:cacheprovider -rs tests > "$OUT/gpu-tests.log" 2>&1
echo "pytest -m gpu rc=$?" >> "$OUT/gpu-tests.log"
{
  echo "=== benchmarks/cupti_overhead.py ==="; date -u
  python3 benchmarks/cupti_overhead.py --out "$WORK/cupti" --reps 9
  cp "$WORK/cupti/cupti_overhead.json" "$OUT/" 2>/dev/null
  echo "=== benchmarks/backend_overhead.py (issue 13: both input patterns, tiny kernel, with/without collectors) ==="; date -u
  python3 benchmarks/backend_overhead.py --out "$WORK/overhead" --reps 9
  cp "$WORK/overhead/backend_overhead.json" "$OUT/" 2>/dev/null
  if [ -n "${BEFORE_TREE:-}" ]; then
    python3 benchmarks/backend_overhead.py --out "$WORK/overhead" --reps 9 --tree "$BEFORE_TREE" --tag before
  fi
  echo "=== benchmarks/cupti_breakdown.py --timeline-only ==="; date -u
  python3 benchmarks/cupti_breakdown.py --out "$WORK/breakdown" --timeline-only
  cp "$WORK/breakdown/cupti_breakdown.json" "$WORK/cupti_timeline.json" 2>/dev/null  # in all.tgz
  echo "=== docs/tutorial_numbers.py (cache and size sweeps) ==="; date -u
  python3 docs/tutorial_numbers.py "$WORK/tutorial" --only=cache_and_clocks,size_sweep
  cp "$WORK/tutorial/tutorial_numbers.json" "$OUT/tutorial_numbers_sweeps.json" 2>/dev/null
  echo "=== benchmarks/ncu_overhead.py ==="; date -u
  python3 benchmarks/ncu_overhead.py --repeats 1 --json "$OUT/ncu_overhead.json"
  date -u
} > "$OUT/benchmarks.log" 2>&1
tar czf "$OUT/all.tgz" -C "$WORK" . 2>/dev/null
tail -3 "$OUT/gpu-tests.log"; grep -A10 '"ratio_to_bare_paired_median"' "$OUT/cupti_overhead.json"; tail -12 "$OUT/benchmarks.log"
