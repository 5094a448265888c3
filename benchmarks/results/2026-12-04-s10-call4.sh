# Session 10, H200 call 4: before (8ac4e15, session 9's end, in .before) / after pairs of backend_overhead, the fixed
# collector_cost, the call timeline, the host path on both trees, and the GPU tests of the backends touched.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site || exit;
R=$OUT/r; mkdir -p $R
{ for i in 1 2 3 4; do for t in after before; do tr=(); [ $t = before ] && tr=(--tree .before)
timeout 120 python3 benchmarks/backend_overhead.py --out $R --reps 15 --only sweep_once,sweep_randn --no-profile --cupti-variants none --tag ${t}$i "${tr[@]}" > $R/bo_${t}$i.log 2>&1; done; done
timeout 150 python3 benchmarks/collector_cost.py --out $R --reps 7 2>&1 | grep -E "paired|us/run" 
timeout 120 python3 benchmarks/call_timeline.py --out $R --calls 9 --backends cupti --tag s10 2>&1 | tail -3
timeout 60 python3 benchmarks/cupti_host_path.py --calls 150 --json $R/host_path_after.json | head -4
cp benchmarks/cupti_host_path.py benchmarks/cupti_attribution_cost.py benchmarks/call_timeline.py benchmarks/backend_overhead.py .before/benchmarks/
(cd .before && timeout 60 python3 benchmarks/cupti_host_path.py --calls 150 --json $R/host_path_before.json | head -4)
timeout 240 python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_cupti_gpu.py tests/test_cupti_other_clients_gpu.py tests/test_events_gpu.py tests/test_nvml_gpu.py tests/test_ncu_after_cupti_gpu.py 2>&1 | tail -4
} > $OUT/log.txt 2>&1
python3 - <<'PY' >> $OUT/log.txt
import json,glob,os
for f in sorted(glob.glob(os.environ['OUT']+'/r/backend_overhead_*.json')):
    d=json.load(open(f))
    print(os.path.basename(f), {w: {k: round(v,4) for k,v in d['workloads'][w]['ratio_paired_median'].items()} for w in d['workloads']})
PY
tar czf $OUT/r.tgz -C $OUT r; rm -rf $R; tail -42 $OUT/log.txt
