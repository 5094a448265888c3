"""Session 10 probe: constructing which collector_cost variant makes default calls slow (bisect, H200)."""
import statistics, sys, time
sys.path.insert(0, "benchmarks")
import torch
from backend_overhead import WORKLOADS
import collector_cost as cc
w = WORKLOADS["sweep_once"]
default = cc.make_variant(torch, w, "default")
default()
def timed(n=4):
    out = []
    for _ in range(n):
        torch.cuda.synchronize(); t0 = time.perf_counter(); default(); out.append((time.perf_counter() - t0) * 1e3)
    return round(statistics.median(out), 1)
print("default alone", timed(), flush=True)
keep = []
for v in ("blocked", "thermal_off", "thermal_only", "once_only", "run_only", "run_direct", "fake_sampler", "default_thread"):
    keep.append(cc.make_variant(torch, w, v))
    print("after making", v, timed(), flush=True)
for v, f in zip(("blocked", "thermal_off", "thermal_only", "once_only", "run_only", "run_direct", "fake_sampler", "default_thread"), keep):
    f()
    print("after calling", v, timed(), flush=True)
