#!/usr/bin/env bash
# Every GPU test and benchmark of nsightx, for the GPU machine, in two stages that each fit one 10-minute call.
# Writes under $OUT (default ./gpu-out), each file as soon as its step ends (the device tool brings back at most
# 8 files; the rest is bundled in <stage>.tgz).
#
#   bash benchmarks/run_gpu.sh tests   doctor + demo + show/plot of its result + nsightx.measure (doctor-demo.log,
#                                      demo-plot.png, demo-violin.png), every `pytest -m gpu` test (gpu-tests.log)
#   bash benchmarks/run_gpu.sh bench   backend_overhead.json (+ _before with BEFORE_TREE), the issue-12 tutorial
#                                      script (tests/fixtures/scripts) on ncu and cupti, ncu's metric list,
#                                      ncu_overhead.json; bench.log has each step's output
#   bash benchmarks/run_gpu.sh examples  NVIDIA's nsight-python examples (EXAMPLES=their examples/ folder)
#   bash benchmarks/run_gpu.sh nsptests  NVIDIA's nsight-python unit tests (NSP_TESTS=their tests/ folder), on
#                                      "auto" then on ncu (nsptests.log, nsptests-ncu.log)
#   bash benchmarks/run_gpu.sh overhead  issue 13's benchmark (BEFORE_TREE=older code to compare with) and the
#                                      cupti GPU tests; overhead.log has each step's output
#   bash benchmarks/run_gpu.sh learn   api_tracing="learn" against "always" (issue 13): the cupti GPU tests, then
#                                      PROCESSES (4) processes of backend_overhead with its cupti_api_learn
#                                      variant (backend_overhead_learn<i>.json); learn.log has the ratios
#   bash benchmarks/run_gpu.sh pairs   PAIRS (4) processes of backend_overhead on this tree and on BEFORE_TREE,
#                                      alternating (sweep_once, sweep_randn, tiny); pairs_summary.json, pairs.log
#   bash benchmarks/run_gpu.sh issues  session 14's checks for the open issues: the Triton script on ncu and cupti,
#                                      the tutorial's ncu_report step, torch.profiler -> nsightx -> torch.profiler,
#                                      the whole call against the bare loop (issues.log, *.json), the Range
#                                      Profiler probe when it exists, every `pytest -m gpu` test (gpu-tests.log),
#                                      then CI-gate trials on cupti in what is left of ISSUES_BUDGET_S (570 s)
#   bash benchmarks/run_gpu.sh quick   the shortest useful call (under 4 minutes): profiler sandwich, the Range
#                                      Profiler probe, the measure and Triton GPU tests (quick.log)
#   bash benchmarks/run_gpu.sh wholecall  issue 35: the whole call and the 16 KiB op against the bare loop, this
#                                      tree and BEFORE_TREE alternately (PAIRS processes each), wholecall.log + JSON;
#                                      then, in each process's turn, the whole call alone beside the bare loop
#                                      (USER_REPS, 21: no other variant in the rotation, as a user's loop runs it)
#   bash benchmarks/run_gpu.sh profile  cProfiles of PROFILE_CALLS (10) whole calls of the 16 KiB op and the sweep,
#                                      this tree and BEFORE_TREE, cupti and events (profile.log, *_profiles.txt)
#   bash benchmarks/run_gpu.sh nvmlperiod  the 16 KiB op with the nvml sampler period at each of PERIODS (s)
#   bash benchmarks/run_gpu.sh frames  the sweep's real cupti and events results saved (sweep-*.parquet) and their
#                                      to_dataframe() timed stage by stage, warm and cold (benchmarks/frame_stages.py)
#   bash benchmarks/run_gpu.sh phases  the sweep's call phase by phase (benchmarks/call_phases.py), this tree and
#                                      BEFORE_TREE alternately (FLUSH_PROBE=1: and forced CUPTI flushes timed)
#   bash benchmarks/run_gpu.sh lag     per config of the sweep's cupti call, the host's and the GPU's time per run and
#                                      the GPU's wait for the host (benchmarks/gpu_lag.py; lag.log, lag.json)
#   bash benchmarks/run_gpu.sh flushkind  the launch after a forced and a default CUPTI flush, the whole call with
#                                      cupti_flush complete against forced (benchmarks/cupti_flush_kind.py)
#   bash benchmarks/run_gpu.sh confirm  issue 35's deciding call (~7 min): flushkind, phases and the 16 KiB op per run
#                                      against BEFORE_TREE, lag, every GPU test; a summary in confirm.log
#   bash benchmarks/run_gpu.sh oneshot  a one-shot script's whole call (benchmarks/oneshot.py), fresh processes
#   bash benchmarks/run_gpu.sh short   ~3 minutes: the whole call alone and in the rotation (SKIP_ROTATION=1: not),
#                                      the in-process backends' GPU tests
#   bash benchmarks/run_gpu.sh wheelhouse   run HERE before a call (needs `pip install wheel`): the GPU machine's
#                                      missing wheels in ./.whl, pyarrow slimmed to fit the 64 MiB a call carries
#   bash benchmarks/run_gpu.sh         all three, one after the other (nox -s gpu); several stages may be named
#
# Usage (GPU machine, repository root, nsightx importable). Never changes clocks: nothing here uses
# clock_control="base". Record what comes back in the suite's format with benchmarks/run.py NAME --from FILE
# (benchmarks/README.md).
set -u
OUT=${OUT:-gpu-out}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
ROOT=$(pwd)
WORK=$(mktemp -d)
export PYTHONUNBUFFERED=1
export XDG_CACHE_HOME="$WORK/cache"  # the ncu metric list is asked for afresh and lands in the bundle

step() { echo; echo "=== $* ($(date -u +%T)) ==="; }

stage_tests() {
  {
    date -u; nvidia-smi --query-gpu=name,driver_version,temperature.gpu,clocks.sm --format=csv
    python3 -m nsightx.cli doctor
    step "nsightx demo"
    (cd "$WORK" && python3 -m nsightx.cli demo --output demo-out)
    step "nsightx show and nsightx plot of the demo's result (issue 38)"
    (cd "$WORK" && python3 -m nsightx.cli show demo-out && python3 -m nsightx.cli plot demo-out/result-matmul-0.parquet \
      "$OUT/demo-plot.png" && python3 -m nsightx.cli plot demo-out/result-matmul-0.parquet "$OUT/demo-violin.png" \
      --type violin)
    step "nsightx.measure(lambda: a @ b, runs=50) (issue 38)"
    python3 -c "import torch, nsightx; a = torch.randn(4096, 4096, device='cuda'); \
r = nsightx.measure(lambda: a @ a, runs=50); print(r); \
print(r.to_dataframe()[['Metric', 'AvgValue', 'CI95_Lower', 'CI95_Upper', 'NumRuns', 'Tool']].to_string())"
  } > "$OUT/doctor-demo.log" 2>&1
  # pytest-timeout is on the GPU image: one hung test must not eat the call
  timeout "${TESTS_TIMEOUT:-480}" python3 -m pytest -m gpu -q -p no:cacheprovider -rA --durations=15 \
    -p timeout --timeout 150 tests > "$OUT/gpu-tests.log" 2>&1
  echo "pytest -m gpu rc=$?" >> "$OUT/gpu-tests.log"
  tail -4 "$OUT/gpu-tests.log"
}

stage_bench() {
  {
    step "benchmarks/backend_overhead.py (issue 13)"
    timeout 150 python3 benchmarks/backend_overhead.py --out "$WORK/overhead" --reps 9
    cp "$WORK/overhead/backend_overhead.json" "$OUT/" 2>/dev/null
    if [ -n "${BEFORE_TREE:-}" ]; then
      timeout 150 python3 benchmarks/backend_overhead.py --out "$WORK/overhead" --reps 9 --tree "$BEFORE_TREE" \
        --tag before
      cp "$WORK/overhead"/backend_overhead*before*.json "$OUT/" 2>/dev/null
    fi
    step "issue 12's tutorial script, ncu then cupti"
    for b in ncu cupti; do
      timeout 120 python3 tests/fixtures/scripts/ncu_tutorial_script.py "$b" "$WORK/tutorial-$b/heat_"
      echo "tutorial script on $b: rc=$?"
    done
    step "ncu --query-metrics format and the cached list"
    /usr/local/cuda/bin/ncu --query-metrics --query-metrics-mode all --devices 0 2>&1 | head -12
    find "$XDG_CACHE_HOME" -type f -exec ls -la {} + 2>/dev/null
    step "benchmarks/ncu_overhead.py"
    timeout 150 python3 benchmarks/ncu_overhead.py --repeats 1 --json "$OUT/ncu_overhead.json"
    date -u
  } > "$OUT/bench.log" 2>&1
  grep -E "paired|ratio" "$OUT/bench.log" | head -20
  grep -E "rc=" "$OUT/bench.log" | tail -12
}

stage_examples() {
  # NVIDIA's nsight-python examples (EXAMPLES=their examples/ folder, not kept in this repository)
  [ -n "${EXAMPLES:-}" ] || { echo "examples: set EXAMPLES=path/to/nsight-python/examples" >&2; return 2; }
  EXAMPLES_TIMEOUT=${EXAMPLES_TIMEOUT:-420} bash "$ROOT/benchmarks/nsight_python_examples.sh" "$EXAMPLES" \
    "$OUT/examples.log" > /dev/null 2>&1
  grep -E "PASSED|FAILED|ERROR|SKIPPED|rc=" "$OUT/examples.log" | tail -20
}

stage_nsptests() {
  # NVIDIA's nsight-python unit tests (NSP_TESTS=their tests/ folder, not kept in this repository), each file in its
  # own process, first with "auto" then with ncu activated (nsight-python always runs ncu)
  [ -n "${NSP_TESTS:-}" ] || { echo "nsptests: set NSP_TESTS=path/to/nsight-python/tests" >&2; return 2; }
  # both logs also go into nsptests.tgz after each run: the device tool brings back 8 files at most
  NSP_TESTS_TIMEOUT=${NSP_TESTS_TIMEOUT:-240} bash "$ROOT/benchmarks/nsight_python_tests.sh" "$NSP_TESTS" \
    "$OUT/nsptests.log" > /dev/null 2>&1
  tar czf "$OUT/nsptests.tgz" -C "$OUT" nsptests.log
  NSP_TESTS_ACTIVATE=ncu NSP_TESTS_TIMEOUT=${NSP_TESTS_TIMEOUT:-240} bash "$ROOT/benchmarks/nsight_python_tests.sh" \
    "$NSP_TESTS" "$OUT/nsptests-ncu.log" > /dev/null 2>&1
  tar czf "$OUT/nsptests.tgz" -C "$OUT" nsptests.log nsptests-ncu.log
  grep -hE "^pytest .* rc=|passed|failed" "$OUT/nsptests.log" "$OUT/nsptests-ncu.log" | tail -40
}

stage_overhead() {
  # issue 13: the cupti and events cost, paired against BEFORE_TREE (a copy of older code) when given, and the cupti
  # GPU tests (the step-by-step probes this stage ran before are in git history, at 98c9cf0)
  {
    for tag in before after; do
      tree=(); [ "$tag" = before ] && { [ -n "${BEFORE_TREE:-}" ] || continue; tree=(--tree "$BEFORE_TREE"); }
      step "benchmarks/backend_overhead.py $tag"
      timeout 170 python3 benchmarks/backend_overhead.py --out "$OUT" --reps "${REPS:-21}" \
        --only sweep_once,sweep_randn,tiny --no-profile --tag "_$tag" "${tree[@]}"
    done
    step "pytest -m gpu: cupti, other clients, events"
    timeout 150 python3 -m pytest -m gpu -q -p no:cacheprovider tests/backends/cupti/test_cupti_gpu.py \
      tests/backends/cupti/test_cupti_other_clients_gpu.py tests/backends/events/test_events_gpu.py 2>&1 | tail -5
  } > "$OUT/overhead.log" 2>&1
  grep -E "paired|ratio|passed|failed" "$OUT/overhead.log" | head -30
}

stage_learn() {
  # api_tracing="learn" against the default "always": the cupti GPU tests (its own among them), then
  # PROCESSES processes of backend_overhead with the cupti_api_learn variant, paired with "cupti" in each process
  {
    step "pytest -m gpu: cupti and other CUPTI clients"
    timeout 180 python3 -m pytest -m gpu -q -p no:cacheprovider tests/backends/cupti/test_cupti_gpu.py \
      tests/backends/cupti/test_cupti_other_clients_gpu.py 2>&1 | tail -5
    for i in $(seq "${PROCESSES:-4}"); do
      step "benchmarks/backend_overhead.py process $i"
      timeout 120 python3 benchmarks/backend_overhead.py --out "$OUT" --reps "${REPS:-15}" \
        --only sweep_once,sweep_randn --no-profile --cupti-variants cupti_api_learn --tag "learn$i"
    done
    step "paired ratios to bare: median over processes (range)"
    python3 benchmarks/overhead_summary.py "$OUT" --json "$OUT/learn_summary.json"
  } > "$OUT/learn.log" 2>&1
  grep -E "passed|failed|processes\]" "$OUT/learn.log" | tail -12
}

stage_pairs() {
  # issue 13's closing record: PAIRS (4) pairs of processes of backend_overhead, this tree then BEFORE_TREE (a copy
  # of older code) alternately, on the matmul sweep in both input patterns and the tiny op, default cupti options
  [ -n "${BEFORE_TREE:-}" ] || { echo "pairs: set BEFORE_TREE=path/to/a/copy/of/older/nsightx" >&2; return 2; }
  {
    for i in $(seq "${PAIRS:-4}"); do
      for tag in after before; do
        tree=(); [ "$tag" = before ] && tree=(--tree "$BEFORE_TREE")
        step "benchmarks/backend_overhead.py $tag, process $i"
        timeout 150 python3 benchmarks/backend_overhead.py --out "$WORK/pairs" --reps "${REPS:-15}" \
          --only sweep_once,sweep_randn,tiny --no-profile --cupti-variants none --tag "$tag$i" "${tree[@]}"
      done
    done
    step "paired ratios to bare: median over processes (range)"
    python3 benchmarks/overhead_summary.py "$WORK/pairs" --json "$OUT/pairs_summary.json"
  } > "$OUT/pairs.log" 2>&1
  grep -E "processes\]" "$OUT/pairs.log"
}

stage_issues() {
  START=$(date +%s)
  {
    date -u; nvidia-smi --query-gpu=name,driver_version,temperature.gpu,clocks.sm --format=csv
    python3 -c "import pyarrow, nsightx; print('pyarrow', pyarrow.__version__, 'nsightx', nsightx.__file__)"
    step "the whole call (decorated call + .to_dataframe()) against the bare events loop (issue 35, the one open issue: first)"
    timeout 240 python3 benchmarks/backend_overhead.py --out "$OUT" --reps 7 --only sweep_once,tiny --no-profile \
      --cupti-variants none --whole-call --tag _wholecall
    echo "backend_overhead rc=$?"
    step "what one process of a gate trial costs before it measures: python, torch, a CUDA context"
    /usr/bin/time -f "torch: %e s wall" python3 -c "import torch; torch.zeros(1, device='cuda')"
    /usr/bin/time -f "cupy: %e s wall" python3 -c "import cupy; cupy.ones((8, 8)) @ cupy.ones((8, 8))"
    step "the Triton script with a module-level kernel, ncu then cupti (issue 36)"
    for b in ncu cupti; do
      timeout 150 python3 tests/fixtures/scripts/triton_ncu_script.py "$b" "$WORK/triton-$b/triton_"
      echo "triton script on $b: rc=$?"
    done
    step "the tutorial's report step: import ncu_report, open the kept report, count its launches (issue 36)"
    PYTHONPATH="${PYTHONPATH:-}:/opt/nvidia/nsight-compute/2025.3.1/extras/python" python3 -c "
import glob, ncu_report
for path in sorted(glob.glob('$WORK/triton-ncu/*.ncu-rep')):
    ctx = ncu_report.load_report(path)
    launches = [ctx.range_by_idx(i).action_by_idx(j) for i in range(ctx.num_ranges())
                for j in range(ctx.range_by_idx(i).num_actions())]
    print(path, ncu_report.__file__, 'launches:', len(launches), sorted({a.name() for a in launches}))
"
    echo "ncu_report step rc=$?"
    step "torch.profiler, then an nsightx cupti sweep, then torch.profiler (issue 36)"
    timeout 240 python3 benchmarks/profiler_sandwich.py --json "$OUT/profiler_sandwich.json"
    echo "profiler_sandwich rc=$?"
  } > "$OUT/issues.log" 2>&1
  grep -E "rc=|ratio|fresh|paired" "$OUT/issues.log" | head -30
  if [ -f benchmarks/range_profiler_probe.py ]; then
    timeout 240 python3 benchmarks/range_profiler_probe.py --json "$OUT/range_profiler_probe.json" \
      > "$OUT/range_profiler_probe.log" 2>&1
    echo "range_profiler_probe rc=$?" | tee -a "$OUT/range_profiler_probe.log"
  fi
  # every GPU test, the open issues' files first (-v: a run cut by the timeout still shows each result)
  left=$(( ${ISSUES_BUDGET_S:-570} - ($(date +%s) - START) ))
  timeout "$(( left > 60 ? left - 30 : 30 ))" python3 -m pytest -m gpu -v -p no:cacheprovider -rfE --durations=10 \
    -p timeout --timeout 150 tests/backends/ncu/test_triton_gpu.py tests/core/api/test_measure.py \
    tests/backends/cupti/test_cupti_other_clients_gpu.py tests/backends/ncu/test_ncu_gpu.py tests > "$OUT/gpu-tests.log" 2>&1
  echo "pytest -m gpu rc=$?" >> "$OUT/gpu-tests.log"
  tail -3 "$OUT/gpu-tests.log"
  left=$(( ${ISSUES_BUDGET_S:-570} - ($(date +%s) - START) ))
  if [ "$left" -gt 60 ]; then
    timeout "$left" python3 benchmarks/gate_rates.py --backend cupti --library "${GATE_LIBRARY:-cupy}" --pairs 100 \
      --minutes "$(( (left - 40) / 60 ))" --json "$OUT/gate_rates.json" > "$OUT/gate_rates.log" 2>&1
    echo "gate_rates rc=$?" >> "$OUT/gate_rates.log"
    tail -3 "$OUT/gate_rates.log"
  fi
}

stage_quick() {
  # the shortest useful call (under 4 minutes): issue 36's profiler sandwich and module-level Triton kernel
  # under ncu, issue 40's probe, issue 38's one-call form on the GPU
  {
    date -u; nvidia-smi --query-gpu=name,driver_version,temperature.gpu,clocks.sm --format=csv
    step "torch.profiler, then an nsightx cupti sweep, then torch.profiler (issue 36)"
    timeout 60 python3 benchmarks/profiler_sandwich.py --json "$OUT/profiler_sandwich.json"
    echo "profiler_sandwich rc=$?"
  } > "$OUT/quick.log" 2>&1
  timeout 145 python3 benchmarks/range_profiler_probe.py --json "$OUT/range_profiler_probe.json" --deadline 140 \
    > "$OUT/range_profiler_probe.log" 2>&1
  echo "range_profiler_probe rc=$?" | tee -a "$OUT/range_profiler_probe.log"
  timeout 50 python3 -m pytest -m gpu -v -p no:cacheprovider -rfE tests/core/api/test_measure.py tests/backends/ncu/test_triton_gpu.py \
    >> "$OUT/quick.log" 2>&1
  echo "pytest rc=$?" >> "$OUT/quick.log"
  grep -E "rc=|ratio|PASSED|FAILED" "$OUT/quick.log" | head -20
}

stage_wholecall() {
  # issue 35's GPU targets: the whole call (decorated call + .to_dataframe()) and the 16 KiB op against the bare
  # events loop, this tree then BEFORE_TREE (when given: a copy of older code) in alternating processes, PAIRS (2)
  # times; one cProfile of the tiny call on this tree
  {
    date -u; nvidia-smi --query-gpu=name,driver_version,temperature.gpu,clocks.sm --format=csv
    python3 -c "from nsightx._commands.clockcost import clock_line; print(clock_line())"  # hosts differ (session 17)
    for i in $(seq "${PAIRS:-2}"); do
      for tag in after before; do
        tree=(); prof=(--no-profile); floor=""
        [ "$tag" = after ] && floor=",bare_cupti,bare_cupti_api"  # raw CUPTI's own cost beside ours (session 21)
        [ "$tag" = before ] && { [ -n "${BEFORE_TREE:-}" ] || continue; tree=(--tree "$BEFORE_TREE"); }
        [ "$tag$i" = after1 ] && prof=()
        step "benchmarks/backend_overhead.py --whole-call, $tag, process $i"
        timeout 200 python3 benchmarks/backend_overhead.py --out "$OUT" --reps "${REPS:-9}" --only sweep_once,tiny \
          --cupti-variants none --whole-call --tag "_wholecall_$tag$i" "${prof[@]}" "${tree[@]}" ${SPLIT_NVML:+--split-nvml}
        echo "backend_overhead $tag $i rc=$?"
        step "benchmarks/backend_overhead.py, the whole call alone beside the bare loop, $tag, process $i"
        timeout 120 python3 benchmarks/backend_overhead.py --out "$OUT" --reps "${USER_REPS:-21}" --only sweep_once \
          --cupti-variants none --whole-call --variants "cupti_dataframe,events_dataframe$floor" --no-profile \
          --tag "_usercall_$tag$i" "${tree[@]}" ${floor:+--cupti-floor}
        echo "backend_overhead $tag $i rc=$?"
      done
    done
  } > "$OUT/wholecall.log" 2>&1
  grep -E "rc=|paired" "$OUT/wholecall.log"
}

stage_profile() {
  # cProfiles of PROFILE_CALLS (10) warm whole calls per workload (tiny: the 16 KiB op, 200 runs; sweep_once),
  # this tree and BEFORE_TREE, cupti and events; backend_overhead_prof_<workload>_<tag>_profiles.txt
  {
    for wl in tiny sweep_once; do
      for tag in after before; do
        tree=()
        [ "$tag" = before ] && { [ -n "${BEFORE_TREE:-}" ] || continue; tree=(--tree "$BEFORE_TREE"); }
        step "cProfile of $wl, $tag"
        timeout 200 python3 benchmarks/backend_overhead.py --out "$OUT" --reps 1 --only "$wl" --cupti-variants none \
          --profile-workload "$wl" --profile-calls "${PROFILE_CALLS:-10}" --tag "prof_${wl}_$tag" "${tree[@]}"
        echo "profile $wl $tag rc=$?"
      done
    done
  } > "$OUT/profile.log" 2>&1
  grep -E "rc=" "$OUT/profile.log"
}

stage_nvmlperiod() {
  # what the nvml sampler's period costs the 16 KiB op (issue 35): backend_overhead --only tiny on this tree with
  # the sampler period at each of PERIODS (seconds, repeats allowed); NVML_WORKLOADS (tiny): other workloads too
  # (comma-separated); nvmlperiod.log, backend_overhead_period_<p>_<i>.json
  local n=0
  {
    for p in ${PERIODS:-0.005 0.02 0.1 1}; do
      step "backend_overhead.py --only ${NVML_WORKLOADS:-tiny} --nvml-period $p"
      timeout 120 python3 benchmarks/backend_overhead.py --out "$OUT" --reps "${REPS:-9}" --only "${NVML_WORKLOADS:-tiny}" \
        --cupti-variants none --no-profile --nvml-period "$p" --tag "period_${p}_$((++n))"
      echo "nvmlperiod $p rc=$?"
    done
  } > "$OUT/nvmlperiod.log" 2>&1
  grep -E "rc=|paired" "$OUT/nvmlperiod.log"
}

stage_frames() {
  # where to_dataframe() of the sweep's real results spends its time (issue 35): benchmarks/frame_stages.py --sweep
  # saves the cupti and events results of backend_overhead's matmul sweep (sweep-<backend>.parquet, fixtures to
  # bring back) and times their frames warm, then cold; frames.log, frame_stages*.json
  {
    timeout 200 python3 benchmarks/frame_stages.py --sweep "$OUT" --calls 300 --json "$OUT/frame_stages.json"
    echo "frame_stages rc=$?"
    timeout 100 python3 benchmarks/frame_stages.py "$OUT"/sweep-*.parquet --calls 300 --cold \
      --json "$OUT/frame_stages_cold.json"
    echo "frame_stages cold rc=$?"
    timeout 200 python3 benchmarks/frame_stages.py --insitu 30 --json "$OUT/frame_insitu.json"
    echo "frame_stages insitu rc=$?"
  } > "$OUT/frames.log" 2>&1
  cat "$OUT/frames.log"
}

stage_lag() {
  # issue 35: per config of the sweep's deferred cupti call, the host's and the GPU's time per run and how long the
  # GPU waited for the host (benchmarks/gpu_lag.py); lag.log, lag.json
  timeout 120 python3 benchmarks/gpu_lag.py --workload "${WORKLOAD:-sweep_once}" --json "$OUT/lag.json" \
    > "$OUT/lag.log" 2>&1
  echo "gpu_lag rc=$?" >> "$OUT/lag.log"
  cat "$OUT/lag.log"
}

stage_flushkind() {
  # issue 35: the launch after each kind of CUPTI flush, and the whole call with cupti_flush complete against
  # forced (benchmarks/cupti_flush_kind.py); PAIRS (2) processes; flushkind.log, flushkind<i>.json
  for i in $(seq "${PAIRS:-2}"); do
    timeout 150 python3 benchmarks/cupti_flush_kind.py --json "$OUT/flushkind$i.json"
    echo "cupti_flush_kind $i rc=$?"
  done > "$OUT/flushkind.log" 2>&1
  cat "$OUT/flushkind.log"
}

stage_confirm() {
  # issue 35's deciding call (~7 minutes, one machine): flushkind (PAIRS 3), the sweep's phases and the 16 KiB op per
  # run against BEFORE_TREE (PAIRS 2 and 1), lag, then every GPU test (TESTS_TIMEOUT, 250); each part in a folder of
  # its own under $OUT, a summary of the ratios at the end (confirm.log)
  local base=$OUT
  (OUT=$base/flushkind && mkdir -p "$OUT" && PAIRS=3 stage_flushkind > /dev/null)
  (OUT=$base/phases && mkdir -p "$OUT" && PAIRS=2 stage_phases > /dev/null)
  (OUT=$base/tiny && mkdir -p "$OUT" && PER_RUN=1 WORKLOAD=tiny PAIRS=1 stage_phases > /dev/null)
  (OUT=$base/lag && mkdir -p "$OUT" && stage_lag > /dev/null)
  (OUT=$base/tests && mkdir -p "$OUT" && TESTS_TIMEOUT=${TESTS_TIMEOUT:-250} stage_tests > /dev/null)
  grep -h -E "^call|bare loop|total / bare|^per run|^frame per run|GPU idle|passed|failed|rc=" \
    "$base"/flushkind/flushkind.log "$base"/phases/phases.log "$base"/tiny/phases.log "$base"/lag/lag.log \
    "$base"/tests/gpu-tests.log 2>/dev/null | sed 's/launch [0-9].*total \([0-9]*\).*total/total \1, total/' \
    | tee "$base/confirm.log"
}

stage_phases() {
  # issue 35: where the sweep's decorated call spends its wall time (launch, wait, collect, after, frame), this
  # tree and BEFORE_TREE alternately, PAIRS (2) processes each (benchmarks/call_phases.py); phases.log, JSON.
  # FLUSH_PROBE=1: each process also times forced CUPTI flushes after 0, 1, 10 and 100 tiny kernels (--flush-probe);
  # CUPTI_VARIANTS=a,b: the cupti session with backend_overhead.py's other backend_options too (its drain modes);
  # GC_OFF=1: this tree's calls also with the garbage collector disabled during the call (--gc-off); CKPT_AB=1:
  # also without the young collection before the wait (--checkpoint-ab); WORKLOAD=tiny: the 16 KiB op's call;
  # PER_RUN=1: also what one more run costs (--per-run: each call at its runs and at twice them); CYCLES=1: also
  # what each call leaves in reference cycles (--cycles); UNFREEZE=1: no object frozen before the calls (--unfreeze:
  # the heap module's freeze mode, as in a user's Python, where the image's starts with objects frozen: pause mode)
  {
    for i in $(seq "${PAIRS:-2}"); do
      for tag in after before; do
        tree=()
        [ "$tag" = before ] && { [ -n "${BEFORE_TREE:-}" ] || continue; tree=(--tree "$BEFORE_TREE"); }
        step "benchmarks/call_phases.py, $tag, process $i"
        prof=()
        [ "$i" = 1 ] && prof=(--profile "$OUT/call_phases_${tag}_profiles.txt")
        [ -n "${FLUSH_PROBE:-}" ] && prof+=(--flush-probe)
        [ -n "${CUPTI_VARIANTS:-}" ] && prof+=(--cupti-variants "$CUPTI_VARIANTS")
        [ -n "${GC_OFF:-}" ] && [ "$tag" = after ] && prof+=(--gc-off)
        [ -n "${CKPT_AB:-}" ] && [ "$tag" = after ] && prof+=(--checkpoint-ab)
        [ -n "${WORKLOAD:-}" ] && prof+=(--workload "$WORKLOAD")
        [ -n "${PER_RUN:-}" ] && prof+=(--per-run)
        [ -n "${CYCLES:-}" ] && prof+=(--cycles)
        [ -n "${UNFREEZE:-}" ] && prof+=(--unfreeze)
        timeout 120 python3 benchmarks/call_phases.py --reps "${REPS:-15}" --json "$OUT/call_phases_$tag$i.json" \
          "${tree[@]}" "${prof[@]}"
        echo "call_phases $tag $i rc=$?"
      done
    done
  } > "$OUT/phases.log" 2>&1
  cat "$OUT/phases.log"
}

stage_oneshot() {
  # issue 35: a one-shot script's whole call (benchmarks/oneshot.py): fresh processes, each timing the first
  # f().to_dataframe() and the bare loop's first call, ONESHOT (3) processes per backend and order, this tree and
  # BEFORE_TREE alternately; oneshot.jsonl, oneshot.log. ONESHOT_PROFILE=1: then the first call of each backend
  # under cProfile and under -X importtime. ONESHOT_PANDAS=1: every process imports pandas before timing
  # (--import-pandas: what is left is nsightx's own first-call cost) (oneshot_<backend>_profile.txt, oneshot_<backend>_importtime.txt)
  {
    # a user's pip install has .pyc files; the GPU machine sets PYTHONDONTWRITEBYTECODE=1 and installs the wheels
    # with --no-compile, so without this every process would compile nsightx and pyarrow from source
    # (0.2-0.4 s under cProfile, session 19). One untimed process per tree writes them.
    unset PYTHONDONTWRITEBYTECODE
    python3 benchmarks/oneshot.py --backend cupti --first user > /dev/null 2>&1
    [ -n "${BEFORE_TREE:-}" ] && python3 benchmarks/oneshot.py --backend cupti --first user --tree "$BEFORE_TREE" \
      > /dev/null 2>&1
    for i in $(seq "${ONESHOT:-3}"); do
      for backend in events cupti; do
        for first in user bare; do
          pandas=()
          [ -n "${ONESHOT_PANDAS:-}" ] && pandas=(--import-pandas)
          for tag in after before; do
            tree=()
            [ "$tag" = before ] && { [ -n "${BEFORE_TREE:-}" ] || continue; tree=(--tree "$BEFORE_TREE"); }
            step "benchmarks/oneshot.py $backend first=$first $tag $i"
            timeout 60 python3 benchmarks/oneshot.py --backend "$backend" --first "$first" "${tree[@]}" "${pandas[@]}" \
              | sed "s/^{/{\"tag\": \"$tag\", /" | tee -a "$OUT/oneshot.jsonl"
          done
        done
      done
    done
    if [ -n "${ONESHOT_PROFILE:-}" ]; then
      for backend in events cupti; do
        step "oneshot.py $backend, the first call under cProfile, then under -X importtime"
        python3 benchmarks/oneshot.py --backend "$backend" --first user --profile "$OUT/oneshot_${backend}_profile.txt"
        python3 -X importtime benchmarks/oneshot.py --backend "$backend" --first user 2> "$WORK/importtime_$backend.txt"
        sort -t'|' -k2 -n -r "$WORK/importtime_$backend.txt" | head -60 > "$OUT/oneshot_${backend}_importtime.txt"
      done
    fi
  } > "$OUT/oneshot.log" 2>&1
  tail -3 "$OUT/oneshot.log"
}

stage_short() {
  # the shortest check of a tree for issue 35 (~3 minutes): the whole call alone beside the bare loop
  # (USER_REPS, 21), the nine-variant rotation of the sweep and the 16 KiB op, then the GPU tests of the in-process
  # backends, the nvml plugin and the run loop; short.log, backend_overhead_{usercall,wholecall}_short.json
  {
    date -u; nvidia-smi --query-gpu=name,driver_version,temperature.gpu,clocks.sm --format=csv
    python3 -c "from nsightx._commands.clockcost import clock_line; print(clock_line())"
    step "the whole call alone beside the bare loop"
    timeout 120 python3 benchmarks/backend_overhead.py --out "$OUT" --reps "${USER_REPS:-21}" --only sweep_once \
      --cupti-variants none --whole-call --variants cupti_dataframe,events_dataframe --no-profile --tag _usercall_short
    echo "usercall rc=$?"
    step "the nine-variant rotation"
    [ -n "${SKIP_ROTATION:-}" ] || timeout 150 python3 benchmarks/backend_overhead.py --out "$OUT" --reps "${REPS:-9}" --only sweep_once,tiny \
      --cupti-variants none --whole-call --split-nvml --no-profile --tag _wholecall_short
    echo "wholecall rc=$?"
    step "pytest -m gpu: events, cupti, nvml, the run loop"
    timeout 240 python3 -m pytest -m gpu -q -p no:cacheprovider -rs tests/backends/events tests/backends/cupti \
      tests/backends/test_attribution_gpu.py \
      tests/plugins/nvml tests/core/run
    echo "pytest -m gpu (short) rc=$?"
  } > "$OUT/short.log" 2>&1
  grep -E "rc=|paired|passed|failed" "$OUT/short.log"
}

stage_wheelhouse() {
  # HERE, not on the GPU machine: ../shared/gpu/wheelhouse.sh plus pyarrow (a dependency since session 13, absent
  # there), slimmed to fit the 64 MiB a call may carry (its 55 MB wheel alone would not): Flight, S3, ORC, the C++
  # headers and tests are dropped (nsightx reads and writes Parquet through pyarrow.parquet and pyarrow.compute).
  local ver slim
  ver=$(python3 -c "import pyarrow; print(pyarrow.__version__)")
  bash ../shared/gpu/wheelhouse.sh "pyarrow==$ver" > /dev/null
  slim=$(mktemp -d)
  python3 -m wheel unpack -d "$slim" .whl/pyarrow-*.whl > /dev/null
  (cd "$slim"/pyarrow-* && rm -rf pyarrow/include pyarrow/src pyarrow/tests pyarrow/libarrow_flight.so* \
    pyarrow/_flight*.so pyarrow/libarrow_python_flight.so* pyarrow/libarrow_s3.so* pyarrow/_s3fs*.so \
    pyarrow/_orc*.so pyarrow/_gcsfs*.so pyarrow/_azurefs*.so pyarrow/_hdfs*.so pyarrow/_pyarrow_cpp_tests*.so \
    pyarrow/libarrow_python.so pyarrow/libarrow_python.so.*.*.* && find . -name "*.pyx" -o -name "*.pxd" \
    -o -name "*.pxi" | xargs rm -f)
  rm .whl/pyarrow-*.whl && python3 -m wheel pack -d .whl "$slim"/pyarrow-* > /dev/null && rm -rf "$slim"
  du -sh .whl
}

[ $# -gt 0 ] || set -- tests bench examples
for stage in "$@"; do
  case "$stage" in
    tests) stage_tests ;;
    bench) stage_bench ;;
    examples) stage_examples ;;
    nsptests) stage_nsptests ;;
    overhead) stage_overhead ;;
    learn) stage_learn ;;
    pairs) stage_pairs ;;
    issues) stage_issues ;;
    quick) stage_quick ;;
    wholecall) stage_wholecall ;;
    profile) stage_profile ;;
    nvmlperiod) stage_nvmlperiod ;;
    frames) stage_frames ;;
    short) stage_short ;;
    phases) stage_phases ;;
    lag) stage_lag ;;
    flushkind) stage_flushkind ;;
    confirm) stage_confirm ;;
    oneshot) stage_oneshot ;;
    wheelhouse) stage_wheelhouse ;;
    *) echo "usage: bash benchmarks/run_gpu.sh [tests] [bench] [examples] [nsptests] [overhead] [learn] [pairs] [issues] [quick] [wholecall] [profile] [nvmlperiod] [frames] [short] [phases] [lag] [flushkind] [confirm] [oneshot]" >&2; exit 2 ;;
  esac
done
tar czf "$OUT/bundle-$(IFS=-; echo "$*").tgz" -C "$WORK" . 2>/dev/null
# the device tool brings back at most 8 files: everything under $OUT goes into one more archive as well
(cd "$OUT" && tar czf "00-all-$(IFS=-; echo "$*").tgz" --exclude='*.tgz' . 2>/dev/null)
