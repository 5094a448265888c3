"""Run frame_stages.py alternately on two trees, ROUNDS times each; per result and stage, the median over rounds."""
import json, os, statistics, subprocess, sys, tempfile
trees = {"b8ffe8b": "/tmp/flags9/before", "flags9": "/work/wt-flags9"}
results = ["tests/fixtures/gpu-results/sweep-cupti.parquet", "tests/fixtures/gpu-results/sweep-events.parquet"]
rounds, calls = int(sys.argv[1]), int(sys.argv[2])
out = {t: [] for t in trees}
for r in range(rounds):
    for name, root in (trees.items() if r % 2 == 0 else reversed(list(trees.items()))):
        env = dict(os.environ, PYTHONPATH=f"{root}:{root}/backends:{root}/plugins")
        with tempfile.NamedTemporaryFile(suffix=".json") as f:
            subprocess.run([sys.executable, f"{root}/benchmarks/frame_stages.py", *[f"/work/wt-flags9/{p}" for p in results], "--calls", str(calls), "--json", f.name], env=env, check=True, capture_output=True)
            out[name].append(json.load(open(f.name)))
summary = {}
for name, runs in out.items():
    for i, res in enumerate(results):
        rows = [run[i] for run in runs]
        stages = sorted({k for row in rows for k in row["stages_us"]})
        summary[f"{name} {res.split('/')[-1]}"] = {
            "median_us": round(statistics.median(row["median_us"] for row in rows), 1),
            "stages_us": {k: round(statistics.median(row["stages_us"].get(k, 0.0) for row in rows), 1) for k in stages},
        }
print(json.dumps({"rounds": rounds, "calls": calls, "summary": summary, "raw": out}, indent=1))
