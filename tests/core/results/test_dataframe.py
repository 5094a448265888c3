"""Aggregation: columns, statistics against an independent reference, normalisation, geomean."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from nsightx import ConfigError
from nsightx._results.dataframe import aggregate, runs_frame
from nsightx._results.flags import FEW_RUNS
from nsightx._results.records import RegionRun, RunRecords
from nsightx._results.schema import PlanInfo, ResultData
from nsightx._results.transform import RunValue

SAMPLES = {  # (annotation, config) -> values
    ("base", 0): [100.0, 102.0, 98.0, 101.0],
    ("fast", 0): [50.0, 52.0, 49.0, 51.0],
    ("base", 1): [200.0, 210.0, 190.0, 205.0],
    ("fast", 1): [80.0, 81.0, 79.0, 90.0],
}


def make_data(samples=SAMPLES, normalize=None, params=("n",), configs=((1024,), (2048,))):
    runs, values = [], []
    for (ann, cfg), vals in samples.items():
        for r, v in enumerate(vals):
            values.append(RunValue(annotation=ann, config=cfg, run=r, metric="t", value=v, unit="ns", kernel="k"))
            runs.append(
                RunRecords(config=cfg, run=r, regions=(RegionRun(annotation=ann, config=cfg, run=r, host_ns=1),))
            )
    plan = PlanInfo(
        function="f",
        params=params,
        configs=configs,
        runs=4,
        warmup=0,
        metrics=("t",),
        backend="host",
        cache_control="none",
        clock_control="none",
        replay_mode="kernel",
        normalize_against=normalize,
    )
    return ResultData(
        nsightx_version="0",
        created="now",
        plan=plan,
        environment={"GPU": "X", "Host": "h"},
        runs=tuple(runs),
        values=tuple(values),
    )


def test_columns_in_nsight_python_order_plus_ours():
    df = aggregate(make_data())
    assert list(df.columns) == [
        "Annotation",
        "Metric",
        "n",
        "AvgValue",
        "MedianValue",
        "StdDev",
        "MinValue",
        "MaxValue",
        "NumRuns",
        "Kernel",
        "GPU",
        "Host",
        "ComputeClock",
        "MemoryClock",
        "Unit",
        "CI95_Lower",
        "CI95_Upper",
        "RelativeStdDevPct",
        "StableMeasurement",
        "Flags",
        "Normalized",
        "Geomean",
        "Tool",
    ]
    assert df["Annotation"].tolist() == ["base", "fast", "base", "fast"]  # first-occurrence order


def test_statistics_match_scipy():
    df = aggregate(make_data())
    for (ann, cfg), vals in SAMPLES.items():
        row = df[(df["Annotation"] == ann) & (df["n"] == (1024, 2048)[cfg])].iloc[0]
        x = np.array(vals)
        lo, hi = _interval(x)
        assert row["AvgValue"] == pytest.approx(x.mean())
        assert row["MedianValue"] == pytest.approx(np.median(x))
        assert row["StdDev"] == pytest.approx(x.std(ddof=1))
        assert (row["MinValue"], row["MaxValue"], row["NumRuns"]) == (x.min(), x.max(), 4)
        assert row["CI95_Lower"] == pytest.approx(lo) and row["CI95_Upper"] == pytest.approx(hi)
        assert row["RelativeStdDevPct"] == pytest.approx(100 * x.std(ddof=1) / x.mean())
        assert bool(row["StableMeasurement"]) == (100 * x.std(ddof=1) / x.mean() < 2.0 and len(x) >= FEW_RUNS)


def _interval(x: np.ndarray) -> tuple[float, float]:
    """The documented interval of the mean of positive values, from SciPy: the Student-t interval joined by the
    lognormal (modified Cox) one from 5 runs on, the lower end at least ``min * 0.025 ** (1 / n)``."""
    n = len(x)
    t = stats.t.ppf(0.975, n - 1)
    lo, hi = stats.t.interval(0.95, n - 1, loc=x.mean(), scale=stats.sem(x))
    if n < 5:
        return max(lo, x.min() * 0.025 ** (1 / n)), hi
    logs = np.log(x)
    v = logs.var(ddof=1)
    h = t * math.sqrt(v / n + v * v / (2 * (n - 1)))
    centre = logs.mean() + v / 2
    return max(min(lo, math.exp(centre - h)), x.min() * 0.025 ** (1 / n)), max(hi, math.exp(centre + h))


def test_geomean_per_annotation_and_metric():
    df = aggregate(make_data())
    base = df[df["Annotation"] == "base"]
    assert base["Geomean"].iloc[0] == pytest.approx(math.sqrt(100.25 * 201.25))


def test_normalisation_scales_every_value_and_spread_column():
    raw = aggregate(make_data())
    norm = aggregate(make_data(normalize="base"))
    for cfg_n in (1024, 2048):
        b = raw[(raw["Annotation"] == "base") & (raw["n"] == cfg_n)].iloc[0]["AvgValue"]
        r = raw[(raw["Annotation"] == "fast") & (raw["n"] == cfg_n)].iloc[0]
        m = norm[(norm["Annotation"] == "fast") & (norm["n"] == cfg_n)].iloc[0]
        for col in ("AvgValue", "MedianValue", "StdDev", "MinValue", "MaxValue", "CI95_Lower", "CI95_Upper"):
            assert m[col] == pytest.approx(r[col] / b), col
        assert m["RelativeStdDevPct"] == pytest.approx(r["RelativeStdDevPct"])
        assert m["Unit"] == "ratio" and m["Normalized"] == "base" and m["NormalizationValue"] == pytest.approx(b)
    assert norm[norm["Annotation"] == "base"]["AvgValue"].tolist() == [1.0, 1.0]


def test_config_without_baseline_is_error_not_dropped_row():
    samples = dict(SAMPLES)
    del samples[("base", 1)]
    with pytest.raises(ConfigError, match="no baseline value for config 1"):
        aggregate(make_data(samples, normalize="base"))


def test_single_run_gives_nan_spread_and_na_stable():
    df = aggregate(make_data({("a", 0): [5.0]}, configs=((1,),)))
    row = df.iloc[0]
    assert math.isnan(row["StdDev"]) and math.isnan(row["CI95_Lower"])
    assert row["StableMeasurement"] is pd.NA


def test_unhashable_params_are_kept_as_objects():
    cfgs = (({"tile": 64},), ({"tile": 128},))
    data = make_data({("a", 0): [1.0, 2.0], ("a", 1): [3.0, 4.0]}, params=("opts",), configs=cfgs)
    df = aggregate(data, configs=cfgs)
    assert df["opts"].tolist() == [{"tile": 64}, {"tile": 128}]


def test_runs_frame_has_params_last():
    frame = runs_frame(make_data())
    assert frame.columns[-1] == "n" and len(frame) == 16
    assert frame["Value"].dtype == np.float64


def _quiet_aggregate(samples: dict[tuple[str, int], list[float]]) -> pd.DataFrame:
    """``aggregate`` normalised against "base", with every warning an error (none may reach the user)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return aggregate(make_data(samples, normalize="base"))


def test_a_zero_baseline_gives_infinite_ratios_and_no_numpy_warning():
    """x / 0 is ±inf and 0 / 0 NaN, as IEEE division says; numpy's "divide by zero" warning used to escape."""
    df = _quiet_aggregate({**SAMPLES, ("base", 0): [0.0, 0.0, 0.0, 0.0], ("fast", 0): [-2.0, 1.0, 2.0, 3.0]})
    fast = df[(df["Annotation"] == "fast") & (df["n"] == 1024)].iloc[0]
    base = df[(df["Annotation"] == "base") & (df["n"] == 1024)].iloc[0]
    assert fast["NormalizationValue"] == 0.0 and base["NormalizationValue"] == 0.0
    assert (fast["AvgValue"], fast["MinValue"], fast["MaxValue"], fast["StdDev"]) == (
        math.inf,
        -math.inf,
        math.inf,
        math.inf,
    )
    assert all(math.isnan(base[c]) for c in ("AvgValue", "MedianValue", "StdDev", "MinValue", "MaxValue"))
    other = df[(df["Annotation"] == "fast") & (df["n"] == 2048)].iloc[0]  # the other config's ratio is untouched
    assert other["AvgValue"] == pytest.approx(np.mean(SAMPLES[("fast", 1)]) / np.mean(SAMPLES[("base", 1)]))


def test_a_negative_zero_baseline_keeps_the_ends_in_order():
    """-0.0 reverses the order as a negative mean does: the ends are swapped back, min below max."""
    df = _quiet_aggregate({**SAMPLES, ("base", 0): [-0.0, -0.0, -0.0, -0.0], ("fast", 0): [-1.0, 1.0, 2.0, 3.0]})
    fast = df[(df["Annotation"] == "fast") & (df["n"] == 1024)].iloc[0]
    assert fast["AvgValue"] == -math.inf
    assert (fast["MinValue"], fast["MaxValue"]) == (-math.inf, math.inf)
    assert fast["CI95_Lower"] <= fast["CI95_Upper"]


def test_a_zero_baseline_through_a_call_gives_its_frame_without_a_warning():
    """On the host backend: a derived metric that is 0 for every region, normalised against one of them (0 / 0)."""
    import nsightx

    def zero(t, n):
        return 0.0 * t, "ns"

    @nsightx.analyze.kernel(
        configs=[(1,)],
        runs=2,
        backend="host",
        thermal_mode="off",
        verbosity=nsightx.VerbosityLevel.SILENT,
        derive_metric=zero,
        normalize_against="a",
    )
    def work(n):
        with nsightx.annotate("a"):
            pass
        with nsightx.annotate("b"):
            pass

    result = work()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        df = result.to_dataframe()
    zeros = df[df["Metric"] == "zero"]
    assert len(zeros) == 2 and (zeros["NormalizationValue"] == 0.0).all() and zeros["AvgValue"].isna().all()
