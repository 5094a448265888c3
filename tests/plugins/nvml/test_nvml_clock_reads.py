"""How often a GPU backend's run reads the host clock, with the nvml plugin's guard and RUN collector (issue 35).

On one H100 host the nvml plugin cost 20-38 us a run of a 16 KiB op, against ~7 us on another, for the same
non-blocking Python; a clock source that makes every read a system call is the suspect. Each run read the host
clock for its region (enter and exit, which time it), and once more each for the thermal guard, the
temperature source's freshness check and the RUN collector's sample age and sampler demand. The run loop now
reads it once as a run starts and hands that read to all three.

The real host backend and run loop, its session made deferred (``DeferredHost``: a GPU backend's path), the nvml
plugin over the NVML double with a sampler thread; every clock of :mod:`time` the code can reach is replaced by
one that counts its calls on the measuring thread. The count per run is the difference between a call of 30
runs and one of 10, so what a call does once (start, stop, the end of a config) drops out.
"""

from __future__ import annotations

import dataclasses
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from _sessions import DeferredHost
from nsightx_nvml import _collectors, _sampler
from nsightx_nvml._collectors import AGE_COLUMN, RunConditions
from nsightx_nvml._sampler import Sample
from nvml_double import GPU_A, FakeCuda, FakeGpu, install

import nsightx
from nsightx._enums import VerbosityLevel
from nsightx._pluginhost.plugins import default_host
from nsightx._results.sink import RunSink
from nsightx._run import thermal
from nsightx._run.collectors import CollectContext
from nsightx._run.loop import run_loop
from nsightx._run.plan import Plan, ThermalSettings
from nsightx._spec.makeplan import temperature_source

CLOCKS = ("perf_counter_ns", "perf_counter", "monotonic", "monotonic_ns", "time", "time_ns")
NEVER_STALE_S = 3600.0

REGION_READS = 4
"""A run's region: the run state's enter and exit, and the deferred host session's own pair (it times it)."""


class CountingClocks:
    """Stands in for every clock of :mod:`time`, and for each module attribute bound to one, counting calls.

    Only calls from the thread that made it count (the sampler thread's reads are not the run's).
    """

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.reads = 0
        me = threading.get_ident()
        counters: dict[int, Callable[[], Any]] = {}
        for name in CLOCKS:
            real = getattr(time, name)
            counters[id(real)] = counter = self._counting(real, me)
            monkeypatch.setattr(time, name, counter)
        for module in list(sys.modules.values()):  # names bound at import (e.g. ``_clock = time.perf_counter_ns``)
            if not getattr(module, "__name__", "").startswith("nsightx"):
                continue
            for attr, value in list(vars(module).items()):
                if callable(value) and id(value) in counters:
                    monkeypatch.setattr(module, attr, counters[id(value)])

    def _counting(self, real: Callable[[], Any], me: int) -> Callable[[], Any]:
        def read() -> Any:
            if threading.get_ident() == me:
                self.reads += 1
            return real()

        return read


def guarded_plan(runs: int) -> Plan:
    """A GPU call's plan on the host backend: guarded by the nvml temperature source, with the nvml collectors."""

    def fn(n: int) -> None:
        with nsightx.annotate("a"):
            pass

    settings = ThermalSettings(mode="auto", device=0)
    host = default_host()
    return Plan(
        function=fn,
        function_name="fn",
        params=("n",),
        configs=((1,),),
        runs=runs,
        warmup=0,
        metrics=("host__time_duration.sum",),
        backend="host",
        verbosity=VerbosityLevel.SILENT,
        device=0,
        needs_gpu=True,
        collectors=tuple(host.collectors("nvml")),
        thermal=dataclasses.replace(settings, source=temperature_source(host, settings, 0, True)),
    )


@pytest.fixture
def nvml_sampled(plugin_host: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The NVML double with a sampler thread whose one sample never goes stale; the guard reads before every run."""
    install(monkeypatch, [FakeGpu(GPU_A, temp_c=50)], cuda=FakeCuda({0: GPU_A[4:]}))
    monkeypatch.setattr(_sampler, "SAMPLE_PERIOD_S", NEVER_STALE_S)  # sampled at start, then not again
    monkeypatch.setattr(_collectors, "STALE_SAMPLE_S", NEVER_STALE_S)
    monkeypatch.setattr(_collectors, "TEMPERATURE_MAX_AGE_S", NEVER_STALE_S)
    monkeypatch.setattr(thermal, "RECHECK_S", 0.0)  # every run's check reads the temperature (none is skipped)
    yield
    for key in list(_sampler._leases):  # a failed test leaves no sampler running
        _sampler._leases.pop(key).sampler.stop()


def reads_per_run(monkeypatch: pytest.MonkeyPatch) -> float:
    """Host-clock reads on the measuring thread per run of a deferred, guarded call with the nvml collectors."""
    run_loop(guarded_plan(3), DeferredHost(), RunSink())  # plugins loaded, caches filled
    clocks = CountingClocks(monkeypatch)
    counts = []
    for runs in (10, 30):
        sink, before = RunSink(), clocks.reads
        run_loop(guarded_plan(runs), DeferredHost(), sink)
        counts.append(clocks.reads - before)
        assert len([r for r in sink.runs if r.run >= 0]) == runs  # the measured runs (and the ONCE values)
    return (counts[1] - counts[0]) / 20


def test_a_guarded_run_with_the_nvml_collector_reads_the_host_clock_once_beside_its_region(
    nvml_sampled: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # before: the region's four, then the guard, the temperature's freshness and the collector's age: 7
    assert reads_per_run(monkeypatch) == REGION_READS + 1


def test_the_runs_values_are_taken_at_the_one_read(nvml_sampled: None, monkeypatch: pytest.MonkeyPatch) -> None:
    sink = RunSink()
    run_loop(guarded_plan(5), DeferredHost(), sink)
    measured = [r for r in sink.runs if r.run >= 0]
    assert len(measured) == 5
    for run in measured:
        values = {v.name: v.value for v in run.collectors}
        assert values["GPUTemperatureC"] == 50 and values["ThermalPauseS"] == 0.0
        assert isinstance(values["NvmlSampleAgeMs"], float) and values["NvmlSampleAgeMs"] >= 0.0


class OneSample:
    """A sampler that always has ``sample`` (the collector's view of a running sampler)."""

    running = True

    def __init__(self, sample: Sample) -> None:
        self.latest = sample

    def demand_latest(self, now_ns: int) -> Sample:
        return self.latest


@pytest.mark.parametrize("taken", [0, 10**12])
def test_the_sample_age_is_the_samples_age_ms_at_the_runs_start(taken: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_collectors, "STALE_SAMPLE_S", 10 * NEVER_STALE_S)  # the oldest age here is an hour
    sample = Sample(taken, {"GPUTemperatureC": 50})
    run = RunConditions()
    run._samplers[0] = OneSample(sample)  # type: ignore[assignment]  # the sampler's part the collector reads
    ages = [0, 1, 499, 500, 501, 1500, 2500, 4500, 999_999, 1_000_500, 12_345_678, 49_999_500, 3_600 * 10**9 + 500]
    for ns in [*ages, *(-a for a in ages if a)]:
        ctx = CollectContext(scope=nsightx.CollectionScope.RUN, function="f", device=0, run_start_ns=taken + ns)
        age = run.collect(ctx)[AGE_COLUMN]
        assert repr(age) == repr(sample.age_ms(taken + ns)), ns  # the same float, -0.0 included
