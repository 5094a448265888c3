"""Kernel combining and filtering by identity, with records shaped like a real multi-kernel region."""

from __future__ import annotations

import functools
import math
import operator

import pytest

import nsightx
from nsightx import KernelCountError
from nsightx._results.records import Record, RegionRun, RunRecords
from nsightx._results.transform import FAILED_KERNEL as FAILED
from nsightx._results.transform import combine_records, derive


def run(cfg, r, kernels, failed=False):
    recs = tuple(
        Record(annotation="mm", config=cfg, run=r, kernel=k, metric="t", value=v, unit="ns", seq=i)
        for i, (k, v) in enumerate(kernels)
    )
    return RunRecords(
        config=cfg,
        run=r,
        records=recs,
        regions=(RegionRun(annotation="mm", config=cfg, run=r, host_ns=1, failed=failed),),
    )


# run 0 launches a split-K pair, run 1 a single kernel (autotuning changed its mind): attribution is by
# identity, so both runs land on the right row.
VARYING = [run(0, 0, [("gemm", 6.0), ("reduce", 2.0)]), run(0, 1, [("gemm_big", 7.5)])]


@pytest.mark.parametrize("reducer", [operator.add, functools.partial(operator.add), lambda a, b: a + b])
def test_combine_with_any_callable_and_varying_kernel_counts(reducer):
    values = combine_records(VARYING, ["t"], combine=reducer)
    assert [(v.run, v.value, v.kernel) for v in values] == [(0, 8.0, "gemm|reduce"), (1, 7.5, "gemm_big")]


def test_builtin_max_reducer():
    values = combine_records(VARYING, ["t"], combine=max)
    assert values[0].value == 6.0


def test_several_kernels_without_reducer_is_clear_error():
    with pytest.raises(KernelCountError, match=r"More than one \(total=2\) kernel is launched within the ") as info:
        combine_records(VARYING, ["t"])
    assert "combine_kernel_metrics" in str(info.value) and "reduce" in str(info.value)


def test_ignore_kernel_list_drops_exact_names():
    values = combine_records(VARYING, ["t"], ignore_kernels=["reduce"])
    assert [v.value for v in values] == [6.0, 7.5]


def test_kernels_are_combined_in_launch_order():
    shuffled = [RunRecords(config=0, run=0, records=tuple(reversed(VARYING[0].records)), regions=VARYING[0].regions)]
    assert combine_records(shuffled, ["t"], combine=operator.add)[0].kernel == "gemm|reduce"


def test_failed_region_gives_nan_per_metric():
    values = combine_records([run(0, 0, [], failed=True)], ["t", "u"])
    assert [v.metric for v in values] == ["t", "u"] and all(math.isnan(v.value) for v in values)


def test_derive_uses_config_args():
    values = combine_records([run(0, 0, [("k", 10.0)])], ["t"])
    out = derive(values, lambda t, n: (n / t, "items/ns"), ["t"], [(40,)])
    assert out[-1].value == 4.0 and out[-1].unit == "items/ns" and out[-1].metric == "<lambda>"


def test_a_failed_regions_derived_metrics_carry_the_names_the_function_gives():
    """hunt20c: a failed region's derived values were one NaN row named after the function, not one per key."""
    values = combine_records([run(0, 0, [("k", 10.0)]), run(0, 1, [], failed=True)], ["t"])

    def rates(t, n):
        return {"per_ns": (n / t, "1/ns"), "twice": 2 * t}

    out = derive(values, rates, ["t"], [(40,)], warn=False)
    got = [(v.run, v.metric, v.kernel, v.unit) for v in out if v.metric != "t"]
    assert got == [
        (0, "per_ns", "k", "1/ns"),
        (0, "twice", "k", None),
        (1, "per_ns", FAILED, None),
        (1, "twice", FAILED, None),
    ]
    assert all(math.isnan(v.value) for v in out if v.run == 1)


def test_a_dict_derive_with_a_failing_region_normalises_end_to_end():
    """hunt20c: the failed region's derived row named after the function left the baseline without that metric
    for its config, so ``to_dataframe()`` raised ``ConfigError`` ("no baseline value") for a valid call."""
    import warnings

    import nsightx

    def scaled(t, n):
        return {"per_n": (t / n, "ns")}

    @nsightx.analyze.kernel(
        configs=[1, 2],
        runs=2,
        warmup=0,
        backend="host",
        thermal_mode="off",
        verbosity=0,
        derive_metric=scaled,
        normalize_against="a",
    )
    def f(n):
        with nsightx.annotate("a"):
            pass
        with nsightx.annotate("b", ignore_failures=True):
            if n == 2:
                raise ValueError("b fails at n=2")

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        frame = f().to_dataframe()
    rows = sorted(zip(frame["Annotation"], frame["Metric"], frame["n"], frame["NumRuns"], strict=True))
    assert [r for r in rows if r[1] != "host__time_duration.sum"] == [
        ("a", "per_n", 1, 2),
        ("a", "per_n", 2, 2),
        ("b", "per_n", 1, 2),
        ("b", "per_n", 2, 0),
    ]


def test_derive_accepts_any_number_type():
    import decimal
    import fractions

    import numpy as np

    values = combine_records([run(0, 0, [("k", 10.0)])], ["t"])
    for number in (3, 3.0, np.float32(3.0), np.int64(3), np.array(3.0), decimal.Decimal(3), fractions.Fraction(3)):
        out = derive(values, lambda t, n, v=number: (v, "x"), ["t"], [(40,)])
        assert out[-1].value == 3.0 and type(out[-1].value) is float


def test_derive_refuses_a_numeric_str():
    """float("1.5") would parse it: a str is refused even when it looks like a number."""
    from nsightx import TransformError

    values = combine_records([run(0, 0, [("k", 10.0)])], ["t"])
    with pytest.raises(TransformError, match=r"returned '1\.5' \(str\)"):
        derive(values, lambda t, n: "1.5", ["t"], [(40,)])


# --- nsight-python's sentence when the number of kernels differs (issue 36) ------------------------------------


def test_kernel_counts_differing_between_configs_start_with_nsight_pythons_sentence():
    """nsight-python's ``inconsistent_kernel_counts`` scenario: n=1024 launches a matmul, n=2048 a matmul and an add."""
    runs = [run(0, 0, [("gemm", 5.0)]), run(1, 0, [("gemm", 9.0), ("add", 1.0)])]
    with pytest.raises(KernelCountError) as info:
        combine_records(runs, ["t"])
    text = str(info.value)
    assert text.startswith("Expect same number of kernels per run. Got average of 1.5 per run\n")
    assert "1 kernel in 1 run(s) (first in config 0, run 0); 2 kernels in 1 run(s) (first in config 1, run 0)" in text
    assert "More than one (total=2) kernel is launched within the mm annotation.\nWe expect one kernel per" in text
    assert "config 1, run 0" in text and "  1: add" in text


def test_kernel_counts_differing_between_runs_start_with_nsight_pythons_sentence():
    with pytest.raises(KernelCountError, match=r"^Expect same number of kernels per run. Got average of 1.5 per run"):
        combine_records(VARYING, ["t"])


def test_same_kernel_count_everywhere_keeps_the_more_than_one_sentence_first():
    runs = [run(0, 0, [("gemm", 6.0), ("reduce", 2.0)]), run(0, 1, [("gemm", 6.5), ("reduce", 2.5)])]
    with pytest.raises(KernelCountError, match=r"^More than one \(total=2\) kernel is launched within the mm"):
        combine_records(runs, ["t"])


def test_normalising_by_a_negative_baseline_keeps_every_spread_and_interval_in_order():
    """Dividing by a negative mean used to give a negative StdDev, MinValue above MaxValue and CI95_Lower above
    CI95_Upper: each end is the other's once the order reverses."""
    import numpy as np

    calls = iter(range(1000))

    @nsightx.analyze.kernel(
        configs=[(1,)],
        runs=6,
        backend="host",
        normalize_against="base",
        derive_metric=lambda t, n: {"d": (-1.0 - next(calls) % 3, "x")},
        verbosity=nsightx.VerbosityLevel.SILENT,
    )
    def f(n):
        with nsightx.annotate("base"):
            pass

    # the derived metric's baseline mean is negative; its ratio to itself is 1 with a spread
    df = f().to_dataframe()
    row = df[df["Metric"] == "d"].iloc[0]
    assert row["NormalizationValue"] < 0
    assert row["StdDev"] > 0
    assert row["MinValue"] <= row["AvgValue"] <= row["MaxValue"]
    assert row["CI95_Lower"] <= row["AvgValue"] <= row["CI95_Upper"]
    assert np.isclose(row["AvgValue"], 1.0)
