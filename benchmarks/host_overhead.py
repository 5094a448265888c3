"""Host backend overhead per annotated region, and the time to aggregate 100,000 raw records.

Usage: python benchmarks/host_overhead.py [--regions 20000] [--records 100000]

Overhead: the same loop of N empty regions timed (a) bare, with nothing around each iteration, and (b) inside
a profiled call on the host backend, where each iteration opens and closes an annotation (enter + exit +
record). The difference per region is the framework's cost. Aggregation: a ResultData holding 100,000
per-run values is turned into the aggregated DataFrame; the target is under 1 s on a 2-core machine.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time

import nsightx
from nsightx._results.dataframe import aggregate
from nsightx._results.records import RegionRun, RunRecords
from nsightx._results.schema import PlanInfo, ResultData
from nsightx._results.transform import RunValue

NAMES = [f"r{i}" for i in range(100_000)]


def region_overhead_us(n_regions: int) -> tuple[float, float]:
    """(µs per region inside a profiled call, µs per iteration of the bare loop)."""
    names = NAMES[:n_regions]

    def bare() -> float:
        t = time.perf_counter_ns()
        for _name in names:
            pass
        return (time.perf_counter_ns() - t) / n_regions / 1e3

    timings: list[float] = []

    @nsightx.analyze.kernel(runs=20, warmup=2, backend="host", verbosity=nsightx.VerbosityLevel.SILENT)
    def annotated() -> None:
        t = time.perf_counter_ns()
        for name in names:
            with nsightx.annotate(name):
                pass
        timings.append((time.perf_counter_ns() - t) / n_regions / 1e3)

    annotated()
    base = statistics.median(bare() for _ in range(5))
    return statistics.median(timings[1:]), base


def aggregation_seconds(n_records: int) -> float:
    """Seconds to build the aggregated DataFrame from ``n_records`` per-run values (median of 3)."""
    n_ann, n_cfg = 10, 100
    runs = n_records // (n_ann * n_cfg)
    values = tuple(
        RunValue.model_construct(
            annotation=f"a{a}", config=c, run=r, metric="t", value=float(1000 + r % 7), unit="ns", kernel="k"
        )
        for c in range(n_cfg)
        for r in range(runs)
        for a in range(n_ann)
    )
    regions = tuple(
        RunRecords.model_construct(
            config=c,
            run=r,
            records=(),
            collectors=(),
            regions=(
                RegionRun.model_construct(annotation="a0", config=c, run=r, host_ns=1, failed=False, attributes={}),
            ),
        )
        for c in range(n_cfg)
        for r in range(runs)
    )
    plan = PlanInfo(
        function="f",
        params=("n",),
        configs=tuple((c,) for c in range(n_cfg)),
        runs=runs,
        warmup=0,
        metrics=("t",),
        backend="host",
        cache_control="none",
        clock_control="none",
        replay_mode="kernel",
    )
    data = ResultData.model_construct(
        schema_version=1, nsightx_version="bench", created="now", plan=plan, environment={}, runs=regions, values=values
    )
    times = []
    for _ in range(3):
        t = time.perf_counter()
        frame = aggregate(data)
        times.append(time.perf_counter() - t)
    assert len(frame) == n_ann * n_cfg
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--regions", type=int, default=2_000)
    parser.add_argument("--records", type=int, default=100_000)
    args = parser.parse_args()
    per_region, bare = region_overhead_us(args.regions)
    agg = aggregation_seconds(args.records)
    cpu = platform.processor() or platform.machine()
    print(f"machine: {platform.node()} {cpu}, Python {platform.python_version()}")
    print(
        f"host backend, {args.regions} regions x 20 runs: {per_region:.2f} us per annotated region "
        f"(bare loop iteration {bare:.3f} us) -> overhead {per_region - bare:.2f} us (enter + exit + record)"
    )
    print(f"aggregate {args.records} raw values into the DataFrame: {agg:.3f} s (target < 1 s)")


if __name__ == "__main__":
    main()
