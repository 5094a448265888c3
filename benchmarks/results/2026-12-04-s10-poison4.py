"""Session 10 probe: the warnings a default cupti sweep call raises (collector_cost prints them; backend_overhead ignores them)."""
import collections, sys, time, warnings
sys.path.insert(0, "benchmarks")
import torch
from backend_overhead import WORKLOADS, make_profiled
w = WORKLOADS["sweep_once"]
fn = make_profiled(torch, w, "cupti", True)
fn()
for _ in range(3):
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        torch.cuda.synchronize(); t0 = time.perf_counter(); fn(); wall = (time.perf_counter() - t0) * 1e3
    c = collections.Counter(f"{x.category.__name__} {x.filename.split('/')[-1]}:{x.lineno}: {str(x.message)[:160]}" for x in got)
    print(f"wall {wall:.1f} ms, {len(got)} warnings, {len(c)} distinct")
    for k, n in c.most_common(6): print(f"  {n} x {k}")
