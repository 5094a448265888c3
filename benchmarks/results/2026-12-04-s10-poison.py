"""Which collector_cost variant makes later default calls slow (session 10 probe, H200)."""
import statistics, subprocess, sys, time, os
sys.path.insert(0, "benchmarks")
import torch
from backend_overhead import WORKLOADS
import collector_cost as cc
from nsightx_nvml import _collectors, _sampler
w = WORKLOADS["sweep_once"]
fns = {v: cc.make_variant(torch, w, v) for v in ("default", "default_thread", "run_direct", "fake_sampler", "run_only", "once_only", "thermal_only", "blocked")}
def calls(name, n=5):
    out = []
    for _ in range(n):
        torch.cuda.synchronize(); t0 = time.perf_counter(); fns[name](); out.append((time.perf_counter() - t0) * 1e3)
    kids = subprocess.run(["pgrep", "-f", "nsightx_nvml._sampler_child"], capture_output=True, text=True).stdout.split()
    dm = _collectors.provider().devices()
    print(f"{name:14s} median {statistics.median(out):7.2f} ms  all {[round(x,1) for x in out]}  children {len(kids)} leases {len(_sampler._leases)} parked {len(_sampler._parked)} devmap {id(dm)}", flush=True)
for name in ("default", "blocked", "default", "run_only", "default", "once_only", "default", "thermal_only", "default", "run_direct", "default", "fake_sampler", "default", "default_thread", "default"):
    calls(name)
