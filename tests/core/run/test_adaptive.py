"""runs="auto": a noisy region takes more runs than a quiet one, the time budget holds, the reason is recorded."""

from __future__ import annotations

import dataclasses
import math
import random
import time

import pytest
import region_clock

import nsightx
from nsightx import ConfigError, ConfigTypeError
from nsightx._results.records import Record
from nsightx._results.stats import mean_interval, t_ppf
from nsightx._run.adaptive import AdaptiveRuns, FixedRuns, build_rule, relative_half_width
from nsightx._spec import makeplan

SILENT = nsightx.VerbosityLevel.SILENT


def test_noisy_region_takes_more_runs_than_quiet_one(plugin_host, monkeypatch):
    rng = random.Random(7)
    clock = region_clock.install(monkeypatch)  # real sleeps beside other jobs made the quiet region noisy

    @nsightx.analyze.kernel(
        configs=["quiet", "noisy"],
        runs="auto",
        min_runs=5,
        max_runs=60,
        target_ci_pct=5.0,
        time_budget_s=20.0,
        backend="host",
        verbosity=SILENT,
    )
    def region(kind):
        # the quiet region lasts 20 ms +-1%, the noisy one 4 ms +-80%
        spread, base = (0.01, 0.02) if kind == "quiet" else (0.8, 0.004)
        duration = base * (1.0 + spread * (2.0 * rng.random() - 1.0))
        with nsightx.annotate("region"):
            clock.advance(duration)

    frame = region().to_dataframe().set_index("kind")
    quiet, noisy = frame.loc["quiet"], frame.loc["noisy"]
    assert quiet["NumRuns"] < noisy["NumRuns"]
    assert quiet["StopReason"] == "target"
    assert noisy["StopReason"] == "max_runs" and noisy["NumRuns"] == 60
    # the target was met where it says so: CI half-width within 5% of the mean
    assert (quiet["CI95_Upper"] - quiet["AvgValue"]) / quiet["AvgValue"] <= 0.05


def test_time_budget_is_respected(plugin_host, monkeypatch):
    budget = 0.25
    rng = random.Random(11)
    clock = region_clock.install(monkeypatch)  # real sleeps beside other jobs stretched the runs unevenly
    real_rule = makeplan.build_rule

    def rule_on_the_region_clock(runs, **options):
        rule = real_rule(runs, **options)
        return dataclasses.replace(rule, clock=lambda: clock.ns / 1e9)

    monkeypatch.setattr(makeplan, "build_rule", rule_on_the_region_clock)
    spent: dict[float, float] = {}

    @nsightx.analyze.kernel(
        configs=[0.01, 0.02],
        runs="auto",
        min_runs=3,
        max_runs=10_000,
        target_ci_pct=1e-6,
        time_budget_s=budget,
        warmup=0,
        backend="host",
        verbosity=SILENT,
    )
    def slow(seconds):
        duration = seconds * rng.uniform(0.5, 1.5)
        spent[seconds] = spent.get(seconds, 0.0) + duration
        with nsightx.annotate("sleep"):
            clock.advance(duration)

    frame = slow().to_dataframe().set_index("seconds")
    assert (frame["StopReason"] == "budget").all()
    # each config stopped before its budget (one run at the mean duration would have overrun it)
    for seconds, row in frame.iterrows():
        assert row["NumRuns"] * seconds * 0.5 <= budget
        assert row["NumRuns"] >= 3
        assert spent[seconds] <= budget + 1.5 * seconds  # at most the run that crossed it: not 10_000 runs
    assert frame.loc[0.01, "NumRuns"] > frame.loc[0.02, "NumRuns"]


def test_the_budget_is_kept_on_the_wall_clock():
    assert AdaptiveRuns().clock is time.monotonic  # the test above swaps it for the regions' clock


def test_fixed_runs_record_no_stop_reason(plugin_host):
    @nsightx.analyze.kernel(configs=[1], runs=3, backend="host", verbosity=SILENT)
    def f(n):
        with nsightx.annotate("a"):
            pass

    frame = f().to_dataframe()
    assert "StopReason" not in frame.columns and frame["NumRuns"].tolist() == [3]


def test_info_summary_mentions_auto(plugin_host, capsys):
    @nsightx.analyze.kernel(configs=[1, 2], runs="auto", min_runs=2, max_runs=3, backend="host")
    def f(n):
        with nsightx.annotate("a"):
            pass

    f()
    err = capsys.readouterr().err
    assert "nsightx: f: 2 config(s)" in err and "auto (2-3 runs, CI +/-1%, 10 s/config)" in err


def test_saved_result_keeps_stop_reason(plugin_host, tmp_path):
    @nsightx.analyze.kernel(configs=[1], runs="auto", min_runs=2, max_runs=2, backend="host", verbosity=SILENT)
    def f(n):
        with nsightx.annotate("a"):
            time.sleep(0.001 * random.random())

    path = f().save(tmp_path / "r.json")
    frame = nsightx.load(path).to_dataframe()
    assert frame["StopReason"].tolist() in (["max_runs"], ["target"])


@pytest.mark.parametrize(
    ("options", "error", "match"),
    [
        ({"runs": "forever"}, ConfigTypeError, "runs must be an int >= 1 or 'auto', got str 'forever'"),
        ({"runs": 0}, ConfigError, "runs must be >= 1 or 'auto', got 0"),
        ({"runs": 10, "min_runs": 3}, ConfigError, "min_runs applies only with runs='auto', but runs=10"),
        ({"runs": "auto", "min_runs": 1}, ConfigError, "min_runs must be >= 2, got 1"),
        ({"runs": "auto", "min_runs": 8, "max_runs": 4}, ConfigError, r"max_runs \(4\) must be >= min_runs \(8\)"),
        ({"runs": "auto", "target_ci_pct": 0}, ConfigError, "target_ci_pct must be a finite number > 0, got 0"),
        ({"runs": "auto", "time_budget_s": "1s"}, ConfigTypeError, "time_budget_s must be a number > 0"),
    ],
)
def test_options_are_checked_when_decorating(options, error, match):
    with pytest.raises(error, match=match):
        nsightx.analyze.kernel(configs=[1], backend="host", **options)


# --- the rule itself, on a fake clock -------------------------------------------------------------------


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def rec(value: float, metric: str = "t", annotation: str = "a", kernel: str = "k") -> Record:
    return Record(annotation=annotation, config=0, run=0, kernel=kernel, metric=metric, value=value, unit="ns")


def test_rule_stops_on_target_then_max_then_budget():
    clock = FakeClock()
    rule = AdaptiveRuns(min_runs=3, max_runs=5, target_ci_pct=1.0, time_budget_s=100.0, clock=clock)
    s = rule.start_config()
    for i, v in enumerate([100.0, 100.1, 99.9]):
        assert s.stop_reason(i) is None
        s.observe([rec(v)])
    assert s.stop_reason(3) == "target"

    s = rule.start_config()
    for v in [100.0, 150.0, 50.0, 120.0, 80.0]:
        s.observe([rec(v)])
    assert s.stop_reason(4) is None and s.stop_reason(5) == "max_runs"

    clock.now = 0.0
    s = AdaptiveRuns(min_runs=2, max_runs=100, target_ci_pct=1.0, time_budget_s=10.0, clock=clock).start_config()
    for v in [100.0, 150.0, 50.0]:
        s.observe([rec(v)])
        clock.now += 3.0
    # 3 runs took 9 s; a 4th (3 s on average) would end at 12 s > 10 s
    assert s.stop_reason(3) == "budget"


def test_rule_sums_kernels_of_a_region_and_needs_every_region_to_converge():
    s = AdaptiveRuns(min_runs=2, max_runs=50, target_ci_pct=1.0, time_budget_s=1e9).start_config()
    s.observe([rec(50.0, kernel="k1"), rec(50.0, kernel="k2"), rec(10.0, annotation="b")])
    s.observe([rec(49.0, kernel="k1"), rec(51.0, kernel="k2"), rec(30.0, annotation="b")])
    assert s.stop_reason(2) is None, "region b is still far from its target"
    assert relative_half_width([100.0, 100.0]) == 0.0


def test_rule_without_values_stops_at_min_runs():
    s = AdaptiveRuns(min_runs=4, max_runs=50).start_config()
    for i in range(4):
        assert s.stop_reason(i) is None
        s.observe([rec(math.nan)])
    assert s.stop_reason(4) == "no_values"


def test_relative_half_width_is_the_farther_end_of_the_frames_interval():
    """The stop rule reads the interval the DataFrame shows (and the ``unstable`` flag reads): its farther end."""
    values = [10.0, 11.0, 9.0, 10.5]
    mean = sum(values) / len(values)
    lower, upper = mean_interval(values)
    assert relative_half_width(values) == pytest.approx(100 * max(upper - mean, mean - lower) / mean)
    near = [100.0, 100.1, 99.9, 100.05, 99.95]  # nearly symmetric: the Student-t half-width, to a small fraction
    n, m = len(near), sum(near) / len(near)
    sd = math.sqrt(sum((v - m) ** 2 for v in near) / (n - 1))
    assert relative_half_width(near) == pytest.approx(100 * t_ppf(0.975, n - 1) * sd / math.sqrt(n) / m, rel=1e-3)
    assert relative_half_width([1.0]) == math.inf


def test_build_rule_defaults():
    assert build_rule(7) == FixedRuns(7)
    rule = build_rule("auto")
    assert isinstance(rule, AdaptiveRuns)
    assert (rule.min_runs, rule.max_runs, rule.target_ci_pct, rule.time_budget_s) == (5, 100, 1.0, 10.0)
