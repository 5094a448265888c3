"""The thermal guard's decisions, driven by a scripted NVML double through the real nvml temperature source."""

from __future__ import annotations

import dataclasses
import warnings

import pytest
from nsightx_host import HostSession
from nsightx_nvml._collectors import NvmlTemperatureSource
from nvml_double import GPU_A, GPU_B, FakeClock, FakeCuda, FakeGpu, install

import nsightx
from nsightx import CoolingTimeoutError
from nsightx._enums import VerbosityLevel
from nsightx._pluginhost.plugins import default_host
from nsightx._results.records import CollectorValue
from nsightx._results.sink import RunSink
from nsightx._run.loop import run_loop
from nsightx._run.plan import Plan, ThermalSettings
from nsightx._run.thermal import (
    ADAPT_STEP_C,
    CLOSE_PAUSE_RUNS,
    PAUSE_COLUMN,
    NoGuard,
    ThermalGuard,
    make_guard,
)
from nsightx._spec.makeplan import temperature_source


def guard_over(monkeypatch, temp, mode="auto", device=None, **band):
    """A guard reading one scripted GPU (slowdown 89 °C) through NVML, on a fake clock."""
    clock = FakeClock()
    install(monkeypatch, [FakeGpu(GPU_A, temp_c=temp)], clock=clock)
    log: list[str] = []
    guard = ThermalGuard(
        NvmlTemperatureSource(device), mode=mode, clock=clock.monotonic, sleep=clock.sleep, log=log.append, **band
    )
    return guard, clock, log


def test_no_pause_while_headroom_is_above_wait(monkeypatch):
    guard, clock, _ = guard_over(monkeypatch, temp=78)  # 11 °C of headroom > wait 10
    for _ in range(5):
        guard.before_run()
    assert guard.pauses == [] and clock.sleeps == []
    assert guard.take_values(0, 0) == [(PAUSE_COLUMN, "run", 0, 0, None, 0.0)]  # a collector row


def test_pause_until_cont_then_resume(monkeypatch):
    # 82 °C (7 °C headroom) cooling 2 °C per second: 20 °C of headroom (69 °C) is reached after 6.5 s
    guard, clock, log = guard_over(monkeypatch, temp=lambda t: 82 - 2 * t)
    guard.before_run()
    assert len(guard.pauses) == 1
    pause = guard.pauses[0]
    assert pause.seconds == 7.0 and not pause.timed_out  # polled once a second
    assert pause.start_headroom_c == 7 and pause.end_headroom_c == 21
    assert clock.sleeps == [1.0] * 7
    [value] = guard.take_values(0, 3)
    assert CollectorValue(*value) == CollectorValue(PAUSE_COLUMN, "run", 0, 3, None, 7.0)
    assert guard.take_values(0, 4)[0][-1] == 0.0  # handed out once
    assert "pausing until 20 °C" in log[0] and "resumed after 7.0 s" in log[1]


def test_a_cool_reading_is_trusted_for_a_moment_a_close_one_is_not(monkeypatch):
    reads = []

    def temp(t):
        reads.append(t)
        return 40  # 49 °C of headroom: far above wait 10

    guard, clock, _ = guard_over(monkeypatch, temp=temp)
    for _ in range(5):
        guard.before_run()
    assert len(reads) == 1  # runs starting within RECHECK_S of a cool read are not read again
    clock.advance(0.06)
    guard.before_run()
    assert len(reads) == 2
    close = []

    def warm(t):
        close.append(t)
        return 76  # 13 °C of headroom: above wait, within the margin

    guard, clock, _ = guard_over(monkeypatch, temp=warm)
    for _ in range(5):
        guard.before_run()
    assert len(close) == 5 and guard.pauses == []  # near the threshold every run is read


def test_boundary_pauses_at_exactly_wait(monkeypatch):
    guard, _, _ = guard_over(monkeypatch, temp=[79, 60])  # headroom exactly 10
    guard.before_run()
    assert len(guard.pauses) == 1


def test_manual_raises_cooling_timeout(monkeypatch):
    guard, clock, _ = guard_over(monkeypatch, temp=85, mode="manual", timeout=5)
    with pytest.raises(CoolingTimeoutError) as info:
        guard.before_run()
    assert clock.now == 5.0
    message = str(info.value)
    assert "85 °C" in message and "4 °C below" in message and "thermal_timeout=5" in message
    assert isinstance(info.value, RuntimeError)


def test_manual_never_adapts(monkeypatch):
    # pauses every run, but manual keeps the band it was given
    temps = iter([80, 60] * 10)
    guard, _, _ = guard_over(monkeypatch, temp=lambda t: next(temps), mode="manual")
    for _ in range(5):
        guard.before_run()
    assert len(guard.pauses) == 5 and (guard.wait, guard.cont) == (10, 20)


def test_auto_timeout_lowers_cont_and_goes_on(monkeypatch):
    # the GPU cools to 14 °C of headroom and no further: auto gives up on 20 after the timeout
    guard, clock, _ = guard_over(monkeypatch, temp=lambda t: max(81 - t, 75), timeout=10)
    with pytest.warns(RuntimeWarning, match="thermal_cont 20 -> 17"):
        guard.before_run()
    assert guard.pauses[0].timed_out and clock.now == 10.0
    assert (guard.wait, guard.cont) == (10, 17)
    guard.before_run()  # 14 °C of headroom is above wait: no new pause
    assert len(guard.pauses) == 1


def test_auto_timeout_while_still_hot_lowers_wait(monkeypatch):
    # an idle GPU that cannot get above wait: auto must not spend a full timeout before every run
    guard, clock, _ = guard_over(monkeypatch, temp=84, timeout=10)  # 5 °C of headroom, constant
    with pytest.warns(RuntimeWarning, match="thermal_wait 10 -> 2"):
        guard.before_run()
    assert (guard.wait, guard.cont) == (2, 17)
    for _ in range(3):
        guard.before_run()
    assert len(guard.pauses) == 1 and clock.now == 10.0


def test_auto_widens_band_when_pauses_come_close_together(monkeypatch):
    # each run heats the GPU by 4 °C, each second of pause cools it by 2 °C
    clock = FakeClock()
    state = {"temp": 76.0, "t": 0.0}

    def temp(now):
        state["temp"] -= 2 * (now - state["t"])
        state["t"] = now
        return state["temp"]

    install(monkeypatch, [FakeGpu(GPU_A, temp_c=temp)], clock=clock)
    guard = ThermalGuard(NvmlTemperatureSource(None), clock=clock.monotonic, sleep=clock.sleep)
    conts, runs_between = [], []
    last = 0
    for run in range(60):
        n = len(guard.pauses)
        guard.before_run()
        if len(guard.pauses) > n:
            conts.append(guard.cont)
            runs_between.append(run - last)
            last = run
        state["temp"] += 4
        clock.advance(0.06)  # a run takes longer than RECHECK_S here: every run is read
    assert conts[0] == 20 and conts[1] == 20 + ADAPT_STEP_C  # the 2nd pause came < CLOSE_PAUSE_RUNS runs later
    assert runs_between[1] < CLOSE_PAUSE_RUNS
    assert max(conts) <= 50
    assert runs_between[-1] > runs_between[1]  # a wider band buys more runs per pause


def test_widening_never_goes_back_above_a_value_that_timed_out(monkeypatch):
    guard, _, _ = guard_over(monkeypatch, temp=lambda t: max(81 - t, 71), timeout=10)  # floor: 18 °C headroom
    with pytest.warns(RuntimeWarning):
        guard.before_run()  # times out at 18 < 20: cont -> 17
    assert guard.cont == 17
    guard._runs_since_pause = 0
    guard._widen()
    assert guard.cont == 17


def test_source_failure_warns_once_and_stops_guarding(monkeypatch):
    clock = FakeClock()
    fake = install(monkeypatch, [FakeGpu(GPU_A, temp_c=85, unsupported={"temp_c"})], clock=clock)
    guard = ThermalGuard(NvmlTemperatureSource(None), clock=clock.monotonic, sleep=clock.sleep)
    with pytest.warns(RuntimeWarning, match="reading the temperature failed"):
        guard.before_run()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        guard.before_run()
    assert guard.pauses == [] and fake.calls["nvmlDeviceGetTemperature"] == 1


def test_thermal_device_is_the_one_read(monkeypatch):
    clock = FakeClock()
    install(
        monkeypatch,
        [FakeGpu(GPU_A, temp_c=30), FakeGpu(GPU_B, temp_c=85)],
        clock=clock,
        cuda=FakeCuda({0: GPU_A[4:], 1: GPU_B[4:]}, current=0),
    )
    assert NvmlTemperatureSource(1).read().temperature_c == 85
    assert NvmlTemperatureSource(None).read().temperature_c == 30
    assert NvmlTemperatureSource(GPU_B).read().headroom_c == 4


def plan(mode="auto", needs_gpu=True, device=None, thermal_device=None, runs=3, warmup=1, timeout=None, collectors=()):
    def fn(n):
        with nsightx.annotate("a"):
            sum(range(n))

    # the source as the API layer resolves it for a call: from the plugin host (the test's plugin_host)
    settings = ThermalSettings(mode=mode, timeout=timeout, device=thermal_device)
    source = temperature_source(default_host(), settings, device, needs_gpu)
    return Plan(
        function=fn,
        function_name="fn",
        params=("n",),
        configs=((10,), (20,)),
        runs=runs,
        warmup=warmup,
        metrics=("host__time_duration.sum",),
        backend="host",
        verbosity=VerbosityLevel.SILENT,
        device=device,
        needs_gpu=needs_gpu,
        collectors=tuple(collectors),
        thermal=dataclasses.replace(settings, source=source),
    )


def test_make_guard_off_and_cpu_plans_are_unguarded(plugin_host, monkeypatch):
    install(monkeypatch, [FakeGpu(GPU_A)])
    assert isinstance(make_guard(plan(mode="off")), NoGuard)
    assert isinstance(make_guard(plan(needs_gpu=False)), NoGuard)
    guard = make_guard(plan())
    assert isinstance(guard, ThermalGuard) and (guard.mode, guard.wait, guard.cont, guard.timeout) == (
        "auto",
        10,
        20,
        180,
    )


def test_make_guard_watches_thermal_device_else_profiled_device(plugin_host, monkeypatch):
    install(
        monkeypatch,
        [FakeGpu(GPU_A, temp_c=30), FakeGpu(GPU_B, temp_c=85)],
        cuda=FakeCuda({0: GPU_A[4:], 1: GPU_B[4:]}, current=0),
    )
    assert make_guard(plan(device=1)).source.read().temperature_c == 85
    assert make_guard(plan(device=1, thermal_device=0)).source.read().temperature_c == 30


def test_make_guard_without_a_source_warns_once(plugin_host, monkeypatch):
    from nsightx_nvml import _collectors

    from nsightx._spec import makeplan as _makeplan

    def missing():
        raise ImportError("No module named 'pynvml'")

    monkeypatch.setattr(_collectors, "_provider", _collectors.Provider(load=missing))
    monkeypatch.setattr(_makeplan, "_warned_no_source", set())
    with pytest.warns(RuntimeWarning, match="no plugin offers a temperature source"):
        assert isinstance(make_guard(plan()), NoGuard)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert isinstance(make_guard(plan()), NoGuard)


class FakeTime:
    def __init__(self, clock):
        self.monotonic, self.sleep = clock.monotonic, clock.sleep


def test_run_loop_records_pauses_per_measured_run(plugin_host, monkeypatch):
    """Through the real run loop and host session: the pause before warm-up and run 0 lands on run 0."""
    from nsightx._run import thermal as _thermal

    clock = FakeClock()
    # hot at the first check (before the warm-up run), cool after 3 s, then cool for good
    install(monkeypatch, [FakeGpu(GPU_A, temp_c=lambda t: 82 if t < 3 else 60)], clock=clock)
    monkeypatch.setattr(_thermal, "time", FakeTime(clock))
    sink = RunSink()
    run_loop(plan(collectors=plugin_host.collectors("nvml")), HostSession(), sink)
    pauses = {(r.config, r.run): cv.value for r in sink.runs for cv in r.collectors if cv.name == PAUSE_COLUMN}
    assert pauses == {(0, 0): 3.0, (0, 1): 0.0, (0, 2): 0.0, (1, 0): 0.0, (1, 1): 0.0, (1, 2): 0.0}
    temps = [cv.value for r in sink.runs for cv in r.collectors if cv.name == "GPUTemperatureC"]
    assert temps == [60] * 6


def test_run_loop_manual_timeout_stops_the_call(plugin_host, monkeypatch):
    from nsightx._run import thermal as _thermal

    clock = FakeClock()
    install(monkeypatch, [FakeGpu(GPU_A, temp_c=88)], clock=clock)
    monkeypatch.setattr(_thermal, "time", FakeTime(clock))
    with pytest.raises(CoolingTimeoutError):
        run_loop(plan(mode="manual", timeout=30), HostSession(), RunSink())
    assert clock.now == 30.0
