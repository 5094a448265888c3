"""What building a result costs when every region launched several kernels (``combine_kernel_metrics``).

    PYTHONPATH=TREE:TREE/backends:TREE/plugins python benchmarks/combine_cost.py [CxRxGxK]

C configs x R runs x G regions x K kernels per region (default 10x100x100x2), one metric, every region's kernels
combined by ``operator.add`` out of the run objects (as ``nsightx.load_raw`` or a spread sweep hands them over).
Prints the best of 5 ``build_results`` and one ``build_results`` plus ``to_dataframe()``, in ms. Run it once per
tree to compare them (the machine is shared: alternate the trees and repeat).
"""

from __future__ import annotations

import operator
import sys
import time

from nsightx._results.records import Record, RegionRun, RunRecords
from nsightx._results.results import build_results
from nsightx._results.schema import PlanInfo

METRIC = "gpu__time_duration.sum"


def main() -> None:
    """Build the runs, then time the builder."""
    shape = sys.argv[1] if len(sys.argv) > 1 else "10x100x100x2"
    c_n, r_n, g_n, k_n = (int(x) for x in shape.split("x"))
    runs = [
        RunRecords(
            c,
            r,
            tuple(
                Record(f"g{g}", c, r, f"k{k}", METRIC, 1.0 + k + 0.1 * r, "ns", k)
                for g in range(g_n)
                for k in range(k_n)
            ),
            tuple(RegionRun(f"g{g}", c, r, 5) for g in range(g_n)),
        )
        for c in range(c_n)
        for r in range(r_n)
    ]
    plan = PlanInfo(
        function="f",
        params=("n",),
        configs=tuple((c,) for c in range(c_n)),
        runs=r_n,
        warmup=0,
        metrics=(METRIC,),
        backend="host",
        cache_control="all",
        clock_control="none",
        replay_mode="kernel",
    )
    times = []
    for _ in range(5):
        start = time.perf_counter()
        build_results(plan, runs, {}, combine=operator.add, created="x")
        times.append(time.perf_counter() - start)
    start = time.perf_counter()
    build_results(plan, runs, {}, combine=operator.add, created="x").to_dataframe()
    both = time.perf_counter() - start
    print(f"{shape}: build_results {min(times) * 1e3:.1f} ms, build + to_dataframe {both * 1e3:.1f} ms")


if __name__ == "__main__":
    main()
