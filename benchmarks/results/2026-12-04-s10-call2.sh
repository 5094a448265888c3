python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site || exit;
R=$OUT/r; mkdir -p $R; BP=$PWD/.before:$PWD/.before/backends:$PWD/.before/plugins:/tmp/site
{ timeout 90 python3 benchmarks/cupti_flush_probe.py --out $R --reps 6 --only-ctypes --only forced,wait --tag _stop_after | grep -E "^(forced|wait)_|stop parts"
PYTHONPATH=$BP timeout 90 python3 benchmarks/cupti_flush_probe.py --out $R --reps 6 --only-ctypes --only forced,wait --tag _stop_before | grep -E "^(forced|wait)_|stop parts"
for i in 1 2 3; do for t in after before; do tr=(); [ $t = before ] && tr=(--tree .before)
timeout 120 python3 benchmarks/backend_overhead.py --out $R --reps 15 --only sweep_once,sweep_randn --no-profile --cupti-variants none --tag ${t}$i "${tr[@]}" > $R/bo_${t}$i.log 2>&1; done; done
timeout 200 python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_cupti_gpu.py tests/test_cupti_other_clients_gpu.py tests/test_events_gpu.py tests/test_ncu_after_cupti_gpu.py 2>&1 | tail -4
} > $OUT/log.txt 2>&1
python3 - <<'PY' >> $OUT/log.txt
import json,glob,os
for f in sorted(glob.glob(os.environ['OUT']+'/r/backend_overhead_*.json')):
    d=json.load(open(f))
    print(os.path.basename(f), {w: {k: round(v,4) for k,v in d['workloads'][w]['ratio_paired_median'].items()} for w in d['workloads']})
PY
tar czf $OUT/r.tgz -C $OUT r; rm -rf $R; cat $OUT/log.txt | tail -40
