"""Session 10 probe: where collector_cost's 'default' spends its extra ~15 ms against backend_overhead's cupti."""
import statistics, sys, time
sys.path.insert(0, "benchmarks")
import torch
from backend_overhead import WORKLOADS, make_profiled
import collector_cost as cc
from call_timeline import TARGETS, Clock
w = WORKLOADS["sweep_once"]
fns = {"cc_default": cc.make_variant(torch, w, "default"), "bo_cupti": make_profiled(torch, w, "cupti", True)}
for f in fns.values(): f()
clock = Clock(); undo = [u for t in TARGETS if (u := clock.wrap(t)) is not None]
for name, fn in list(fns.items()) * 2:
    per = {}
    walls = []
    for _ in range(3):
        torch.cuda.synchronize(); clock.reset(); t0 = time.perf_counter(); r = fn(); walls.append((time.perf_counter() - t0) * 1e3)
        for k, v in clock.spent.items(): per.setdefault(k, []).append(sum(v) / 1e3)
    top = sorted(((statistics.median(v), k) for k, v in per.items()), reverse=True)[:22]
    print(name, [round(x, 1) for x in walls], "cols", len(r.to_dataframe().columns))
    print("   ", ", ".join(f"{k} {v:.0f}" for v, k in top), flush=True)
