"""frame_stages.py (warm) alternately on two trees, ROUNDS times each, under each pandas (PREFIX first on the path).

Usage: python frame-stages-frame9-interleave.py ROUNDS CALLS [PREFIX ...]   ("" = the venv's pandas)
Per pandas, tree and result: the median over rounds of the median call and of each stage's mean.
"""
import json, os, statistics, subprocess, sys, tempfile
trees = {"ce84348": "/tmp/frame9/before", "frame9": "/work/wt-frame9"}
results = ["tests/fixtures/gpu-results/sweep-cupti.parquet", "tests/fixtures/gpu-results/sweep-events.parquet"]
rounds, calls, prefixes = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3:] or [""]
out = {}
for prefix in prefixes:
    for r in range(rounds):
        for name, root in (trees.items() if r % 2 == 0 else reversed(list(trees.items()))):
            path = ([prefix] if prefix else []) + [root, f"{root}/backends", f"{root}/plugins"]
            env = dict(os.environ, PYTHONPATH=":".join(path))
            with tempfile.NamedTemporaryFile(suffix=".json") as f:
                subprocess.run([sys.executable, f"{root}/benchmarks/frame_stages.py", *[f"/work/wt-frame9/{p}" for p in results], "--calls", str(calls), "--json", f.name], env=env, check=True, capture_output=True)
                version = subprocess.run([sys.executable, "-c", "import pandas; print(pandas.__version__)"], env=env, capture_output=True, text=True).stdout.strip()
                out.setdefault(f"pandas {version}", {}).setdefault(name, []).append(json.load(open(f.name)))
summary = {}
for version, by_tree in out.items():
    for name, runs in by_tree.items():
        for i, res in enumerate(results):
            rows = [run[i] for run in runs]
            stages = sorted({k for row in rows for k in row["stages_us"]})
            summary[f"{version} {name} {res.split('/')[-1]}"] = {
                "median_us": round(statistics.median(row["median_us"] for row in rows), 1),
                "stages_us": {k: round(statistics.median(row["stages_us"].get(k, 0.0) for row in rows), 1) for k in stages},
            }
print(json.dumps({"rounds": rounds, "calls": calls, "summary": summary, "raw": out}, indent=1))
