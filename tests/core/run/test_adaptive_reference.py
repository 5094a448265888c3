"""``runs="auto"`` and ``nsightx.measure`` against a naive reference written from docs/api.md.

The stopping rule is fed scripted region times through the real host backend (``region_clock``: the region's
time is exactly what the script says), over random configs, regions, failed and missing regions, run limits and
targets. The reference follows docs/api.md (``runs``, ``min_runs``, ``max_runs``, ``target_ci_pct``, the
``StopReason`` paragraph and "The interval of the mean", with SciPy's t quantile) run by run: after which
measured run each config stops, why, and that the interval the rule judged by is the one the frame then shows.
The time budget is judged through a fake clock on the stopper itself (docs: "a config stops when one more run
(at the mean duration so far) would exceed it"). ``nsightx.measure`` is checked for its numbers, ``NumRuns``,
unit, names, the number of calls and its refusals.
"""

from __future__ import annotations

import math
import os
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import region_clock
import scipy.stats
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from nsightx_host import HostBackend, HostSession

import nsightx
from nsightx import ConfigError, ConfigTypeError
from nsightx._results.records import Record
from nsightx._run.adaptive import AdaptiveRuns
from nsightx._run.backend import RunOutput, Session

EXAMPLES = int(os.environ.get("NSIGHTX_REFERENCE_EXAMPLES", "40"))
"""Examples per test (more while hunting: ``NSIGHTX_REFERENCE_EXAMPLES=300``)."""
SILENT = nsightx.VerbosityLevel.SILENT
METRIC = "host__time_duration.sum"
ANNOTATIONS = ("a", "b")
SECONDS = (1e-3, 1.001e-3, 1.003e-3, 1.01e-3, 1.2e-3, 5e-3, 2e-6, 0.0)
EVENT = st.one_of(st.sampled_from(SECONDS), st.sampled_from(["absent", "failed"]))
FUZZ = 1e-7
"""Relative distance from the target under which the reference does not judge (SciPy's and nsightx's t differ)."""


class _Boom(Exception):
    pass


def interval(values: list[float]) -> tuple[float, float]:
    """docs/api.md, "The interval of the mean", for values >= 0 (NaN under 2 values)."""
    n = len(values)
    if n < 2:
        return math.nan, math.nan
    mean = sum(values) / n
    std = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    if std == 0.0:
        return mean, mean
    t = scipy.stats.t.ppf(0.975, n - 1)
    low, high = mean - t * std / math.sqrt(n), mean + t * std / math.sqrt(n)
    if min(values) == 0.0:
        return max(low, 0.0), high
    if n >= 5:
        logs = [math.log(v) for v in values]
        m = sum(logs) / n
        v = sum((x - m) ** 2 for x in logs) / (n - 1)
        spread = t * math.sqrt(v / n + v * v / (2 * (n - 1)))
        low, high = min(low, math.exp(m + v / 2 - spread)), max(high, math.exp(m + v / 2 + spread))
    return max(low, min(values) * 0.025 ** (1 / n)), high


def reach_pct(values: list[float]) -> float:
    """The interval's farther end from the mean, in percent of the mean (docs: what the target reads)."""
    if len(values) < 2:
        return math.inf
    mean = sum(values) / len(values)
    if mean == 0.0:
        return 0.0  # values >= 0 with a zero mean: all zero, the interval is the mean itself
    low, high = interval(values)
    return 100.0 * max(high - mean, mean - low) / abs(mean)


def expected_stop(runs: list[dict[str, Any]], min_runs: int, max_runs: int, target: float) -> tuple[int, str] | None:
    """After which measured run the config stops and why; None where a reach is too near the target to judge."""
    for n in range(1, len(runs) + 1):
        if n < min_runs:
            continue
        seen = measured(runs[:n])
        if not seen:
            return n, "no_values"
        reaches = [reach_pct(v) for v in seen.values()]
        if any(abs(r - target) <= FUZZ * target for r in reaches):
            return None
        if all(r <= target for r in reaches):
            return n, "target"
        if n >= max_runs:
            return n, "max_runs"
    raise AssertionError("the script is shorter than max_runs")


def measured(runs: list[dict[str, Any]]) -> dict[str, list[float]]:
    """Per annotation, the nanoseconds of its runs that measured a value (not failed, not absent)."""
    seen: dict[str, list[float]] = {}
    for run in runs:
        for ann, event in run.items():
            if isinstance(event, float):
                seen.setdefault(ann, []).append(float(round(event * 1e9)))
    return seen


@st.composite
def sweeps(draw: st.DrawFn) -> dict[str, Any]:
    min_runs = draw(st.integers(2, 7))
    max_runs = draw(st.integers(min_runs, 14))
    warmup = draw(st.integers(0, 2))
    target = draw(st.sampled_from([0.05, 0.5, 1.0, 5.0, 20.0, 80.0]))
    configs = draw(st.integers(1, 3))
    anns = draw(st.lists(st.sampled_from(ANNOTATIONS), min_size=1, max_size=2, unique=True))
    scripts = []
    for _ in range(configs):
        steady = {a: draw(st.sampled_from(SECONDS)) for a in anns}
        run = st.fixed_dictionaries({a: st.one_of(st.just(steady[a]), EVENT) for a in anns})
        script = draw(st.lists(run, min_size=warmup + max_runs, max_size=warmup + max_runs))
        if script[warmup][anns[0]] == "absent":  # a first measured run that opens no region is refused
            script[warmup][anns[0]] = steady[anns[0]]
        scripts.append(script)
    helper = draw(st.booleans())  # beside a steady ignored helper kernel (ignore_kernel_list): the same stops
    return {
        "min_runs": min_runs,
        "max_runs": max_runs,
        "warmup": warmup,
        "target": target,
        "scripts": scripts,
        "helper": helper,
    }


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sweep=sweeps())
def test_auto_stops_where_the_docs_say_and_the_frame_shows_the_judged_interval(sweep, plugin_host, monkeypatch):
    clock = region_clock.install(monkeypatch)
    scripts, warmup = sweep["scripts"], sweep["warmup"]
    calls = [0] * len(scripts)
    backend: dict[str, Any] = {"backend": "host"}
    if sweep["helper"]:
        if "helper_kernel" not in plugin_host.backend_plugin:
            plugin_host.register(_HelperPlugin(), name="helper_kernel")
        backend = {"backend": "helper_kernel", "ignore_kernel_list": ["memset"]}

    @nsightx.analyze.kernel(
        configs=list(range(len(scripts))),
        runs="auto",
        min_runs=sweep["min_runs"],
        max_runs=sweep["max_runs"],
        target_ci_pct=sweep["target"],
        time_budget_s=1e6,
        warmup=warmup,
        verbosity=SILENT,
        **backend,
    )
    def f(c):
        run = scripts[c][calls[c]]
        calls[c] += 1
        for ann, event in run.items():
            if event == "absent":
                continue
            with nsightx.annotate(ann, ignore_failures=True):
                if event == "failed":
                    raise _Boom
                clock.advance(event)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        frame = f().to_dataframe()
    for c, script in enumerate(scripts):
        stop = expected_stop(script[warmup:], sweep["min_runs"], sweep["max_runs"], sweep["target"])
        if stop is None:
            continue
        done, reason = stop
        assert calls[c] == warmup + done, (c, calls[c], warmup, done, reason)
        rows = frame[frame["c"] == c]
        assert set(rows["StopReason"]) <= {reason}, (c, rows["StopReason"].tolist(), reason)
        seen = measured(script[warmup : warmup + done])
        for _, row in rows.iterrows():
            values = seen.get(row["Annotation"], [])
            assert row["NumRuns"] == len(values), (c, row["Annotation"], row["NumRuns"], values)
            if len(values) < 2:
                assert math.isnan(row["CI95_Lower"]) and math.isnan(row["CI95_Upper"])
                continue
            low, high = interval(values)
            assert row["CI95_Lower"] == pytest.approx(low, rel=1e-9), (c, row["Annotation"], values)
            assert row["CI95_Upper"] == pytest.approx(high, rel=1e-9), (c, row["Annotation"], values)
            if reason == "target":  # the interval it judged by is the frame's: within the target
                mean = row["AvgValue"]
                far = max(row["CI95_Upper"] - mean, mean - row["CI95_Lower"])
                assert far <= sweep["target"] / 100.0 * abs(mean) * (1 + 1e-9), (c, row["Annotation"], values)
                if sweep["target"] <= 2.0:  # docs/flags.md: unstable reaches more than 2% of the mean
                    assert "unstable" not in row["Flags"].split(","), (c, row["Annotation"], row["Flags"])


class FakeClock:
    """Seconds that move only when told."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@settings(max_examples=EXAMPLES * 5, deadline=None)
@given(
    min_runs=st.integers(2, 6),
    extra=st.integers(0, 10),
    budget=st.sampled_from([0.5, 1.0, 3.0, 10.0]),
    durations=st.lists(st.sampled_from([0.0, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0]), min_size=20, max_size=20),
)
def test_budget_stops_when_one_more_run_at_the_mean_would_overrun(min_runs, extra, budget, durations):
    clock = FakeClock()
    rule = AdaptiveRuns(min_runs=min_runs, max_runs=min_runs + extra, target_ci_pct=1e-9, time_budget_s=budget)
    rule = AdaptiveRuns(**{**rule.__dict__, "clock": clock})
    stopper = rule.start_config()
    value = 1.0
    for done, seconds in enumerate(durations, start=1):
        clock.now += seconds
        value = value * 1.5  # never within the target
        stopper.observe([Record(annotation="a", config=0, run=done, kernel="k", metric=METRIC, value=value, unit="ns")])
        got = stopper.stop_reason(done)
        elapsed = sum(durations[:done])
        mean = elapsed / done
        if done < min_runs:
            expected = None  # docs: min_runs runs are always made, even past the budget
        elif done >= rule.max_runs:
            expected = "max_runs"
        elif abs(elapsed + mean - budget) <= 1e-9:
            continue  # exactly at the budget: docs say "would exceed", the sum's rounding decides
        elif elapsed + mean > budget:
            expected = "budget"
        else:
            expected = None
        assert got == expected, (done, elapsed, budget, got, expected)
        if got is not None:
            break


@st.composite
def measures(draw: st.DrawFn) -> dict[str, Any]:
    runs = draw(st.one_of(st.integers(1, 12), st.just("auto")))
    warmup = draw(st.integers(0, 3))
    seconds = draw(st.lists(st.sampled_from(SECONDS[:-2]), min_size=warmup + 100, max_size=warmup + 100))
    name = draw(st.one_of(st.none(), st.sampled_from(["gemm", "x y", "é"])))
    return {"runs": runs, "warmup": warmup, "seconds": seconds, "name": name}


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=measures())
def test_measure_reports_the_calls_it_made(case, plugin_host, monkeypatch):
    clock = region_clock.install(monkeypatch)
    seconds, warmup, runs = case["seconds"], case["warmup"], case["runs"]
    calls: list[int] = []

    def body() -> None:
        clock.advance(seconds[len(calls)])
        calls.append(1)

    options: dict[str, Any] = {"runs": runs, "warmup": warmup, "backend": "host"}
    if runs == "auto":
        options.update(min_runs=3, max_runs=12, target_ci_pct=0.5, time_budget_s=1e6)
    result = nsightx.measure(body, name=case["name"], **options)
    frame = result.to_dataframe()
    assert len(frame) == 1
    row = frame.iloc[0]
    done = len(calls) - warmup
    if runs != "auto":
        assert done == runs
    else:
        assert 3 <= done <= 12 and row["StopReason"] in ("target", "max_runs")
    values = [float(round(s * 1e9)) for s in seconds[warmup : warmup + done]]
    assert row["Annotation"] == (case["name"] or "body")
    assert row["Metric"] == METRIC and row["Unit"] == "ns"
    assert row["NumRuns"] == done
    assert row["AvgValue"] == pytest.approx(sum(values) / done, rel=1e-12)
    assert row["MinValue"] == min(values) and row["MaxValue"] == max(values)


def _needs(x: int) -> None:
    pass


@pytest.mark.parametrize(
    ("fn", "options", "error"),
    [
        (_needs, {}, ConfigError),
        (42, {}, ConfigTypeError),
        (lambda: None, {"configs": [1]}, ConfigError),
        (lambda: None, {"parallel_devices": [0]}, ConfigError),
        (lambda: None, {"runs": 0}, ConfigError),
        (lambda: None, {"runs": "auto", "max_runs": 1}, ConfigError),
        (lambda: None, {"runs": 3, "min_runs": 2}, ConfigError),
    ],
)
def test_measure_refuses_before_any_call(fn, options, error, plugin_host):
    called: list[int] = []
    target = (lambda: called.append(1)) if fn is not _needs and callable(fn) else fn
    with pytest.raises(error):
        nsightx.measure(target, backend="host", **options)
    assert not called


class _HelperKernel(HostSession):
    """The host session, where every region also launched a steady 1 s ``memset`` (a helper kernel)."""

    def finish_run(self, config: int, run: int) -> RunOutput:
        rows = list(super().finish_run(config, run).record_rows)
        return RunOutput([], {}, [*rows, *((*r[:3], "memset", r[4], 1e9, r[6], 1) for r in rows)])


class _HelperBackend(HostBackend):
    name = "helper_kernel"

    @contextmanager
    def session(self, plan: Any) -> Iterator[Session]:
        yield _HelperKernel()


class _HelperPlugin:
    @nsightx.hookimpl
    def nsightx_register_backends(self, register: Any) -> None:
        register(_HelperBackend)


def test_auto_judges_without_the_ignored_kernels(plugin_host, monkeypatch):
    """A noisy region beside a steady kernel in ``ignore_kernel_list``: the rule judged the sum of both (the 1 s
    kernel made the interval look tight) and stopped on ``target`` at ``min_runs`` while the row it reports, without
    that kernel, reached +-30% of its mean. The docs' target reads the row's interval: it is never met here."""
    plugin_host.register(_HelperPlugin(), name="helper_kernel")
    clock = region_clock.install(monkeypatch)
    times = iter([5e-4, 1.5e-3] * 20)

    @nsightx.analyze.kernel(
        runs="auto", min_runs=5, max_runs=12, target_ci_pct=1.0, time_budget_s=1e6, warmup=0,
        backend="helper_kernel", ignore_kernel_list=["memset"], verbosity=SILENT,
    )  # fmt: skip
    def f():
        with nsightx.annotate("a"):
            clock.advance(next(times))

    row = f().to_dataframe().iloc[0]
    assert (row["Kernel"], row["StopReason"], row["NumRuns"]) == ("region", "max_runs", 12)
    assert row["CI95_Upper"] - row["AvgValue"] > 0.01 * row["AvgValue"]
