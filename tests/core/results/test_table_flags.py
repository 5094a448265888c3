"""The vectorised quality flags give every row the flags the Python rules of ``flags.py`` give it.

Random results reach every rule's evidence (failed and infinite values, units, measured clocks and idle reads,
backend attributes of every kind and type, GPU-time records, serialising backends, warm caches); rows built to
sit on a threshold check that a number too close to call is judged by the rule itself.
"""

from __future__ import annotations

import math
import random

import pytest

from nsightx._results.dataframe import aggregate, throttled_runs
from nsightx._results.flags import flags_cell, row_flags
from nsightx._results.profileresults import build_results
from nsightx._results.records import CollectorValue, Record, RegionRun, RunRecords
from nsightx._results.schema import PlanInfo
from nsightx._results.table import table_of
from nsightx._results.table_flags import Groups, flag_cells

TIME = "gpu__time_duration.sum"


def plan(configs: int, runs: int, cache_control: str) -> PlanInfo:
    return PlanInfo(
        function="f",
        params=("n",),
        configs=tuple((c,) for c in range(configs)),
        runs=runs,
        warmup=0,
        metrics=(TIME, "bytes"),
        backend="cupti",
        cache_control=cache_control,
        clock_control="none",
        replay_mode="kernel",
    )


def _attributes(rng: random.Random) -> dict[str, object]:
    pool = {
        "launch_bound": lambda: rng.choice([True, False, "yes", 1]),
        "device_ns": lambda: rng.choice([rng.uniform(500, 9000), 0, -1.0, "x", True]),
        "span_ns": lambda: rng.choice([rng.uniform(500, 9000), 0.0, None]),
        "launch_ns": lambda: rng.choice([rng.randint(100, 9000), 0, math.nan]),
        "kernel_count": lambda: rng.choice([1, 2, 3, 1.0, "2"]),
    }
    return {k: make() for k, make in pool.items() if rng.random() < 0.5}


def _value(rng: random.Random, mean: float, spread: float) -> float:
    roll = rng.random()
    if roll < 0.03:
        return math.inf
    return mean * (1.0 + rng.uniform(-spread, spread))


def random_data(seed: int):
    """A result whose rows fall on both sides of every rule."""
    rng = random.Random(seed)
    configs, runs = rng.randint(1, 3), rng.randint(1, 8)
    names = ["a", "b", "c"][: rng.randint(1, 3)]
    style = {a: (rng.choice([100.0, 4990.0, 5000.0, 5010.0, 1e6]), rng.choice([0.0, 0.001, 0.02, 0.2])) for a in names}
    unit = rng.choice(["ns", None])
    out = []
    for c in range(configs):
        for r in range(runs):
            records, regions = [], []
            for a in names:
                failed = rng.random() < 0.1
                regions.append(
                    RegionRun(
                        annotation=a,
                        config=c,
                        run=r,
                        host_ns=rng.randint(100, 9000),
                        failed=failed,
                        attributes=_attributes(rng) if rng.random() < 0.7 else {},
                    )
                )
                if failed:
                    continue
                records.append(
                    Record(
                        annotation=a,
                        config=c,
                        run=r,
                        kernel=f"k{a}",
                        metric=TIME,
                        value=_value(rng, *style[a]),
                        unit=unit,
                    )
                )
                records.append(
                    Record(
                        annotation=a,
                        config=c,
                        run=r,
                        kernel=f"k{a}",
                        metric="bytes",
                        value=rng.choice([64.0, 0.0, -5.0]),
                        unit="byte",
                    )
                )
            collectors = []
            if rng.random() < 0.8:
                clock = rng.choice([1980.0, 1975.0, 1940.0, 1920.0, 1700.0, "n/a", True, 1980])
                collectors.append(CollectorValue(name="MeasuredSMClockMHz", scope="run", config=c, run=r, value=clock))
            if rng.random() < 0.6:
                reasons = rng.choice(["none", "gpu_idle", "sw_power_cap", "gpu_idle|hw_slowdown", None])
                collectors.append(CollectorValue(name="ClockEventReasons", scope="run", config=c, run=r, value=reasons))
            out.append(
                RunRecords(
                    config=c, run=r, records=tuple(records), regions=tuple(regions), collectors=tuple(collectors)
                )
            )
    env = {"GPU": "X", "SerializesKernels": rng.random() < 0.3}
    return build_results(plan(configs, runs, rng.choice(["none", "all"])), out, env).data


def python_flags(data) -> list[str]:
    """The ``Flags`` cells of the Python rules, in row order (``row_flags`` keeps first-seen order, as groups do)."""
    return [flags_cell(f) for f in row_flags(data, throttled_runs(data)).values()]


def vectorised_flags(data) -> list[str]:
    table = table_of(data)
    return flag_cells(data, table, Groups.of(table), throttled_runs(data))


@pytest.mark.parametrize("seed", range(150))
def test_vectorised_flags_equal_the_python_rules(seed: int):
    data = random_data(seed)
    assert vectorised_flags(data) == python_flags(data)
    assert aggregate(data)["Flags"].tolist() == python_flags(data)  # what the DataFrame shows


def test_every_flag_is_reached_by_the_random_results():
    seen = {f for seed in range(150) for cell in python_flags(random_data(seed)) for f in cell.split(",") if f}
    assert seen == {"clock_varied", "few_runs", "launch_bound", "serialized", "short", "throttled", "unstable", "warm"}


def test_a_mean_too_close_to_the_short_threshold_is_judged_by_the_rule():
    values = [2.0**57, 14996.0, -(2.0**57)]  # 4998.67 on average; a plain sum rounds to 32 ns: 5002.67
    assert math.fsum(values) / 3 < 5000.0 < sum(values) / 3
    runs = [
        RunRecords(
            config=0,
            run=r,
            records=(Record(annotation="a", config=0, run=r, kernel="k", metric=TIME, value=v, unit="ns"),),
            regions=(RegionRun(annotation="a", config=0, run=r, host_ns=1),),
        )
        for r, v in enumerate(values)
    ]
    data = build_results(plan(1, 3, "all"), runs, {"GPU": "X"}).data
    flags = vectorised_flags(data)
    assert flags == python_flags(data) and "short" in flags[0]


def test_clock_varied_is_judged_once_per_class_of_groups_that_share_runs(monkeypatch: pytest.MonkeyPatch):
    """With finite values, groups that see the same runs share one ``clock_varied`` verdict (issue 35).

    The classes are found once for the frame (the collector statistics and the flag share them) and the verdicts
    are the rules' for every row: config 0's clocks vary by 3.5%, config 1's do not, config 2 has one run a clock.
    """
    from nsightx._results import table_flags

    calls: list[int] = []
    real = table_flags.shared_groups
    monkeypatch.setattr(table_flags, "shared_groups", lambda *a: calls.append(1) or real(*a))
    clocks = {0: [1980.0, 1911.0, 1950.0, 1975.0], 1: [1980.0, 1979.0, 1978.0, 1980.0], 2: [1980.0, None, None, None]}
    runs = []
    for c in range(3):
        for r in range(4):
            records = tuple(
                Record(annotation=a, config=c, run=r, kernel="k", metric=TIME, value=1e4 + 10 * r + i, unit="ns")
                for i, a in enumerate("abcd")
            )
            regions = tuple(RegionRun(annotation=a, config=c, run=r, host_ns=1) for a in "abcd")
            clock = clocks[c][r]
            collectors = (
                ()
                if clock is None
                else (CollectorValue(name="MeasuredSMClockMHz", scope="run", config=c, run=r, value=clock),)
            )
            runs.append(RunRecords(config=c, run=r, records=records, regions=regions, collectors=collectors))
    data = build_results(plan(3, 4, "all"), runs, {"GPU": "X"}).data
    frame = aggregate(data)
    assert frame["Flags"].tolist() == python_flags(data)
    varied = ["clock_varied" in cell for cell in frame["Flags"]]
    assert varied == [True] * 4 + [False] * 8
    assert len(calls) == 1  # found for the statistics, reused by the flag
