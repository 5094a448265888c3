python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site || exit;
R=$OUT/r; mkdir -p $R
{ timeout 200 python3 benchmarks/collector_cost.py --out $R --reps 9 2>&1 | tail -30
timeout 120 python3 benchmarks/call_timeline.py --out $R --calls 9 --backends cupti --tag _s10 2>&1 | tail -5
} > $OUT/log.txt 2>&1
python3 - <<'PY' >> $OUT/log.txt
import json,os
d=json.load(open(os.environ['OUT']+'/r/call_timeline_s10.json'))
for w,v in d['workloads'].items():
    c=v['cupti']; print(w, 'bare', v['bare_ms'], c['phases_us'])
    print({k:(x, c['calls_per_call'].get(k)) for k,x in c['spent_us'].items() if any(s in k for s in ('Collectors','Runner','Nvml','Sampler','acquire','release','Conditions','Device','Thermal','Guard'))})
PY
tar czf $OUT/r.tgz -C $OUT r; rm -rf $R; tail -45 $OUT/log.txt
