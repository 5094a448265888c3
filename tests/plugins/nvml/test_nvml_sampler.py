"""The nvml plugin's background sampler: its thread, its leases, and its values joined to runs by time.

NVML itself is the scripted double of ``nvml_double`` (the library boundary); the sampler, the collectors, the
run loop and the host backend are the real code, with a real thread.

No test relies on the sampler thread being scheduled within a few milliseconds (CI is a loaded 2-core machine):
it counts as in demand for :data:`IDLE_PERIODS_IN_TESTS` periods after a run starts, not two; tests wait for
the samples they need (with generous timeouts) and make a sample stale by waiting until it is, and a test that
is not about staleness raises the staleness limits so that the measured thread never reads NVML itself.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from typing import Any

import pytest
from nsightx_nvml import _collectors, _fields, _sampler
from nsightx_nvml._collectors import AGE_COLUMN, RUN_COLUMNS, NvmlTemperatureSource, RunConditions
from nsightx_nvml._sampler import Sampler
from nvml_double import GPU_A, FakeCuda, FakeGpu, install

import nsightx
from nsightx._run import loop
from nsightx._run.collectors import CollectContext

SILENT = nsightx.VerbosityLevel.SILENT
THREAD = "nsightx-nvml-sampler"
IDLE_PERIODS_IN_TESTS = 100
"""With 1 ms periods: the thread parks 100 ms after the last run start, not 2 ms (a scheduling delay)."""
NEVER_STALE_S = 3600.0
NEVER_IDLE = 10**9
"""Periods: a sampler the test needs samples from, with no run starting meanwhile, never parks."""


@pytest.fixture(autouse=True)
def _no_leftover_samplers(monkeypatch: pytest.MonkeyPatch) -> Any:
    """Park only after a long wait; stop samplers a failed test left running, so one failure does not fail the
    tests after it."""
    monkeypatch.setattr(_sampler, "IDLE_PERIODS", IDLE_PERIODS_IN_TESTS)
    yield
    for key in list(_sampler._leases):
        lease = _sampler._leases.pop(key)
        lease.sampler.stop()


def _sampler_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == THREAD]


def _wait_for(predicate: Any, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.001)
    return predicate()


def _older_than(sample: Any, seconds: float) -> bool:
    return sample is not None and (time.perf_counter_ns() - sample.taken_ns) / 1e9 > seconds


def test_start_samples_at_once_then_periodically_and_stop_keeps_the_last() -> None:
    counter = iter(range(1_000_000))
    s = Sampler(lambda: {"n": next(counter)}, period_s=0.001)
    assert s.latest() is None and not s.running
    try:
        s.start()
        first = s.latest()  # the first sample is taken before start() returns (the thread may add more at once)
        assert first is not None and first.values["n"] >= 0
        seen = first.values["n"]
        assert _wait_for(lambda: (s.demand(), s.samples >= seen + 4)[1])  # runs keep starting: it keeps sampling
    finally:
        s.stop()
    assert not s.running and not _sampler_threads()
    last = s.latest()
    assert last is not None and last.values["n"] >= seen + 3 and last.taken_ns > first.taken_ns


def test_without_runs_starting_it_parks_and_the_next_run_wakes_it() -> None:
    s = Sampler(lambda: {"n": 1}, period_s=0.001)
    s.start()
    try:
        assert _wait_for(lambda: s.parks >= 1)  # nobody called demand(): parked after IDLE_PERIODS periods
        parked_at = s.samples
        time.sleep(0.02)  # twenty periods
        assert s.samples == parked_at  # no NVML query while parked
        s.demand()
        assert _wait_for(lambda: s.samples > parked_at)
    finally:
        s.stop()
    assert not _sampler_threads()


def test_a_failing_read_keeps_the_previous_sample() -> None:
    calls = {"n": 0}

    def read() -> dict[str, int]:
        calls["n"] += 1
        if calls["n"] > 1:
            raise RuntimeError("GPU fell off the bus")
        return {"n": 1}

    s = Sampler(read, period_s=0.001)
    try:
        s.start()
        assert _wait_for(lambda: (s.demand(), calls["n"] >= 3)[1])
    finally:
        s.stop()
    latest = s.latest()
    assert latest is not None and latest.values == {"n": 1}
    assert s.error is not None and "fell off the bus" in s.error


def test_leases_share_one_sampler_and_the_last_release_stops_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_sampler, "SAMPLE_PERIOD_S", 0.001)
    a = _sampler.acquire("dev", lambda: {"x": 1})
    b = _sampler.acquire("dev", lambda: {"x": 2})
    assert a is b and _sampler.running("dev") is a and len(_sampler_threads()) == 1
    _sampler.release("dev")
    assert _sampler.running("dev") is a
    _sampler.release("dev")
    assert _sampler.running("dev") is None and not a.running and not _sampler_threads()
    _sampler.release("dev")  # an extra release is harmless


def test_period_zero_starts_no_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_sampler, "SAMPLE_PERIOD_S", 0.0)
    _sampler.acquire("dev0", lambda: {"x": 1})
    try:
        assert _sampler.running("dev0") is None and not _sampler_threads()
    finally:
        _sampler.release("dev0")


def test_importing_the_plugin_starts_nothing() -> None:
    import importlib

    import nsightx_nvml

    importlib.reload(nsightx_nvml)
    assert not _sampler_threads()


def _sampled_gpu(reads: list[int], threads: list[str] | None = None) -> FakeGpu:
    """A GPU whose SM clock is the number of the read (so a run's value names the sample it came from)."""

    def sm(_now: float) -> int:
        reads.append(time.perf_counter_ns())
        if threads is not None:
            threads.append(threading.current_thread().name)
        return len(reads)

    return FakeGpu(GPU_A, sm_mhz=sm)


def test_each_run_gets_a_sample_read_before_it_started(plugin_host: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    reads: list[int] = []
    threads: list[str] = []
    install(monkeypatch, [_sampled_gpu(reads, threads)], cuda=FakeCuda({0: GPU_A[4:]}))
    monkeypatch.setattr(_sampler, "SAMPLE_PERIOD_S", 0.001)
    monkeypatch.setattr(_collectors, "STALE_SAMPLE_S", NEVER_STALE_S)  # late samples: the next test's subject
    monkeypatch.setattr(_sampler, "IDLE_PERIODS", NEVER_IDLE)  # the runs below wait for its samples
    started: list[int] = []

    @nsightx.analyze.kernel(runs=8, warmup=0, backend="host", verbosity=SILENT)
    def f() -> None:
        started.append(time.perf_counter_ns())
        n = len(reads)
        with nsightx.annotate("a"):  # two reads begin after the run began: the first is published by then
            assert _wait_for(lambda: len(reads) >= n + 2, timeout=60.0)

    raw = f().runs_dataframe().drop_duplicates(["Config", "Run"])
    assert not _sampler_threads()  # stopped when the call ended
    ids = raw["MeasuredSMClockMHz"].astype(int).tolist()
    ages = raw[AGE_COLUMN].tolist()
    assert all(a < b for a, b in itertools.pairwise(ids))  # each run got a sample newer than the last run's
    for run, (sample, age) in enumerate(zip(ids, ages, strict=True)):
        read_at = reads[sample - 1]
        assert read_at <= started[run], f"run {run} got a sample read after it started"
        assert age > 0.0  # the sample's reads began before collect(), which comes before the run
    # the measured thread read once, when the call started; every later read was the sampler thread's
    assert threads.count(threading.current_thread().name) == 1
    assert set(threads[1:]) == {THREAD}


def test_collect_without_start_reads_directly_and_returns_plain_values(monkeypatch: pytest.MonkeyPatch) -> None:
    # what a parent-side proxy does: one collect() per run, no start(); the answer must be JSON-able
    fake = install(monkeypatch, [FakeGpu(GPU_A, sm_mhz=[1980, 1500])], cuda=FakeCuda({0: GPU_A[4:]}))
    monkeypatch.setattr(_sampler, "SAMPLE_PERIOD_S", 0.001)
    run = RunConditions()
    ctx = CollectContext(scope=nsightx.CollectionScope.RUN, function="f", run=0, device=0)
    first, second = run.collect(ctx), run.collect(ctx)
    assert (first["MeasuredSMClockMHz"], second["MeasuredSMClockMHz"]) == (1980, 1500)
    assert set(first) == set(RUN_COLUMNS) and first[AGE_COLUMN] == 0.0
    assert json.loads(json.dumps(first)) == first
    assert fake.calls["nvmlDeviceGetClockInfo"] == 4 and not _sampler_threads()


def test_started_collector_copies_samples_and_the_thermal_source_shares_them(monkeypatch: pytest.MonkeyPatch) -> None:
    readers: list[str] = []

    def temp(_now: float) -> int:
        readers.append(threading.current_thread().name)
        return 61

    install(monkeypatch, [FakeGpu(GPU_A, temp_c=temp)], cuda=FakeCuda({0: GPU_A[4:]}))
    monkeypatch.setattr(_sampler, "SAMPLE_PERIOD_S", 0.001)
    monkeypatch.setattr(_collectors, "STALE_SAMPLE_S", NEVER_STALE_S)  # however late this thread runs on
    monkeypatch.setattr(_collectors, "TEMPERATURE_MAX_AGE_S", NEVER_STALE_S)
    monkeypatch.setattr(_sampler, "IDLE_PERIODS", NEVER_IDLE)  # it samples, however late it first runs
    me = threading.current_thread().name
    run = RunConditions()
    ctx = CollectContext(scope=nsightx.CollectionScope.RUN, function="f", run=0, device=None)
    run.start(ctx)
    try:
        assert len(_sampler_threads()) == 1 and readers[0] == me  # the first sample, taken by start()
        reading = NvmlTemperatureSource(None).read()
        assert reading.temperature_c == 61 and reading.headroom_c == 89 - 61
        values = run.collect(ctx)
        assert values["GPUTemperatureC"] == 61 and values[AGE_COLUMN] >= 0
        assert _wait_for(lambda: THREAD in readers)
        assert readers.count(me) == 1  # neither the thermal read nor collect() queried NVML
    finally:
        run.stop()
    assert not _sampler_threads()
    NvmlTemperatureSource(None).read()  # no sampler any more: a direct read
    assert readers.count(me) == 2


def test_stale_sample_is_not_used_by_the_thermal_source(monkeypatch: pytest.MonkeyPatch) -> None:
    install(monkeypatch, [FakeGpu(GPU_A, temp_c=[50, 70])], cuda=FakeCuda({0: GPU_A[4:]}))
    monkeypatch.setattr(_sampler, "SAMPLE_PERIOD_S", 3600.0)  # one sample at start, then none for an hour
    monkeypatch.setattr(_collectors, "TEMPERATURE_MAX_AGE_S", 0.0)
    run = RunConditions()
    run.start(CollectContext(scope=nsightx.CollectionScope.ONCE, function="f"))
    try:
        assert NvmlTemperatureSource(None).read().temperature_c == 70  # the sample (50) is too old: read again
    finally:
        run.stop()


def test_a_collector_start_failure_warns_and_the_call_goes_on(plugin_host: Any) -> None:
    events: list[str] = []

    class Broken:
        name = "broken"
        scope = nsightx.CollectionScope.RUN

        def start(self, ctx: CollectContext) -> None:
            raise RuntimeError("no sensor")

        def stop(self) -> None:
            events.append("stop")

        def collect(self, ctx: CollectContext) -> int:
            return 1

    class Counted(Broken):
        name = "counted"

        def start(self, ctx: CollectContext) -> None:
            events.append(f"start {ctx.scope.value}")

    @nsightx.analyze.kernel(runs=2, backend="host", verbosity=SILENT, info_collectors=[Broken(), Counted()])
    def f() -> None:
        with nsightx.annotate("a"):
            pass

    with pytest.warns(RuntimeWarning, match="'broken' \\(in start\\(\\)\\) raised RuntimeError: no sensor"):
        raw = f().runs_dataframe()
    assert events == ["start once", "stop"]  # only the started one is stopped
    # the one that did not start is not asked (session 22): its column is None, the other's is its values
    assert raw["broken"].isna().all() and raw["counted"].tolist() == [1, 1]


def test_stop_runs_when_the_call_fails(plugin_host: Any) -> None:
    events: list[str] = []

    class Tracked:
        name = "tracked"
        scope = nsightx.CollectionScope.RUN

        def start(self, ctx: CollectContext) -> None:
            events.append("start")

        def stop(self) -> None:
            events.append("stop")

        def collect(self, ctx: CollectContext) -> int:
            return 1

    @nsightx.analyze.kernel(runs=2, backend="host", verbosity=SILENT, info_collectors=[Tracked()])
    def f() -> None:
        raise ValueError("user bug")

    with pytest.raises(ValueError, match="user bug"):
        f()
    assert events == ["start", "stop"]


def test_a_run_after_the_sampler_parked_gets_a_read_made_for_it(monkeypatch: pytest.MonkeyPatch) -> None:
    readers: list[str] = []

    def sm(_now: float) -> int:
        readers.append(threading.current_thread().name)
        return 1980

    install(monkeypatch, [FakeGpu(GPU_A, sm_mhz=sm)], cuda=FakeCuda({0: GPU_A[4:]}))
    monkeypatch.setattr(_sampler, "SAMPLE_PERIOD_S", 0.001)
    monkeypatch.setattr(_collectors, "STALE_SAMPLE_S", 0.005)
    me = threading.current_thread().name
    run = RunConditions()
    ctx = CollectContext(scope=nsightx.CollectionScope.RUN, function="f", run=0, device=0)
    run.start(ctx)
    try:
        sampler = _sampler.running(run._sweep[0])
        assert sampler is not None and _wait_for(lambda: sampler.parks >= 1)  # a long run: nobody asks
        assert _wait_for(lambda: _older_than(sampler.latest(), 0.005))  # parked: the sample only ages
        before = readers.count(me)
        called = time.perf_counter_ns()
        values = run.collect(ctx)  # the next run starts after the wait
        returned = time.perf_counter_ns()
        assert readers.count(me) == before + 1  # read for it, on its own thread, before it starts
        assert 0.0 <= values[AGE_COLUMN] <= (returned - called) / 1e6 + 0.0005  # read in the call (age to 1 us)
    finally:
        run.stop()


def test_slow_fields_are_queried_less_often_than_the_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = install(monkeypatch, [FakeGpu(GPU_A)], cuda=FakeCuda({0: GPU_A[4:]}))
    monkeypatch.setattr(_fields, "SLOW_FIELDS_MAX_AGE_S", 3600.0)
    run = RunConditions()
    nvml = _collectors.provider().devices()
    assert nvml is not None
    dev = nvml.resolve(0)
    readings = [run.read(nvml.nvml, dev) for _ in range(5)]
    assert fake.calls["nvmlDeviceGetCurrentClocksEventReasons"] == 5
    assert fake.calls["nvmlDeviceGetTemperature"] == 1 and fake.calls["nvmlDeviceGetPowerUsage"] == 1
    assert fake.calls["nvmlDeviceGetClockInfo"] == 5 + 1  # the SM clock every time, the memory clock once
    assert all(r == readings[0] for r in readings) and set(readings[0]) == set(RUN_COLUMNS) - {AGE_COLUMN}


def test_a_fresh_sample_asks_no_liveness_and_a_sampler_that_ended_falls_back_to_direct_reads(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Before every run the collector copies the sample without asking the sampler whether it is alive (for a
    process that is a ``waitpid``); once the sample is stale and the sampler no longer runs, it reads NVML on
    the calling thread, as it does without a sampler."""
    install(monkeypatch, [FakeGpu(GPU_A)], cuda=FakeCuda({0: GPU_A[4:]}))
    monkeypatch.setattr(_sampler, "SAMPLE_PERIOD_S", 3600.0)  # the sample start() reads, then none for an hour
    monkeypatch.setattr(_collectors, "STALE_SAMPLE_S", NEVER_STALE_S)  # so that sample is fresh, however late
    run = RunConditions()
    ctx = CollectContext(scope=nsightx.CollectionScope.RUN, function="f", run=0, device=0)
    run.start(ctx)
    try:
        sampler = _sampler.current(run._sweep[0])
        assert sampler is not None
        sample = sampler.latest()
        assert sample is not None
        asked: list[bool] = []
        real = type(sampler).running
        monkeypatch.setattr(type(sampler), "running", property(lambda s: asked.append(True) or real.fget(s)))
        called = time.perf_counter_ns()
        age = run.collect(ctx)[AGE_COLUMN]
        assert asked == [] and sampler.latest() is sample  # copied: no liveness asked, no read made
        assert (called - sample.taken_ns) / 1e6 <= age + 0.0005  # the age is rounded to the nearest microsecond
        sampler.stop()  # the sampler ends mid-call (a sampler process that died)
        monkeypatch.setattr(_collectors, "STALE_SAMPLE_S", 0.005)
        assert _wait_for(lambda: _older_than(sample, 0.005))  # stopped: nothing newer comes
        direct: list[int] = []
        monkeypatch.setattr(run, "_direct", lambda c, now: direct.append(now) or {AGE_COLUMN: 0.0})
        assert run.collect(ctx) == {AGE_COLUMN: 0.0} and len(direct) == 1 and asked
    finally:
        run.stop()


def test_the_thermal_source_takes_a_fresh_sample_without_asking_liveness_and_reads_once_it_is_stale(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The guard may read before every run: a fresh sample is taken without asking the sampler whether it is alive
    (for a process, a ``waitpid``); a sampler that ended publishes nothing newer, so its sample goes stale and the
    device is read directly."""
    readers: list[str] = []

    def temp(_now: float) -> int:
        readers.append(threading.current_thread().name)
        return 61

    install(monkeypatch, [FakeGpu(GPU_A, temp_c=temp)], cuda=FakeCuda({0: GPU_A[4:]}))
    monkeypatch.setattr(_sampler, "SAMPLE_PERIOD_S", 3600.0)  # the sample start() reads, then none for an hour
    monkeypatch.setattr(_collectors, "TEMPERATURE_MAX_AGE_S", NEVER_STALE_S)
    run = RunConditions()
    run.start(CollectContext(scope=nsightx.CollectionScope.ONCE, function="f", device=0))
    try:
        sampler = _sampler.current(run._sweep[0])
        assert sampler is not None and len(readers) == 1  # start() read once
        asked: list[bool] = []
        real = type(sampler).running
        monkeypatch.setattr(type(sampler), "running", property(lambda s: asked.append(True) or real.fget(s)))
        source = NvmlTemperatureSource(0)
        assert [source.read().temperature_c for _ in range(3)] == [61.0] * 3
        assert asked == [] and len(readers) == 1  # the sample, three times: no liveness asked, no NVML read
        sample = sampler.latest()
        sampler.stop()  # the sampler ends mid-call (a sampler process that died)
        monkeypatch.setattr(_collectors, "TEMPERATURE_MAX_AGE_S", 0.005)
        assert _wait_for(lambda: _older_than(sample, 0.005))
        assert source.read().temperature_c == 61.0 and len(readers) == 2  # stale: read directly
    finally:
        run.stop()


def test_a_guessed_device_is_kept_for_a_while_and_an_exact_match_for_the_whole_call(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Before CUDA is up the thermal source can only guess its device (NVML calls and a CUDA driver call each
    time); it asks again at most every ``RESOLVE_RECHECK_S``, and once CUDA answers it keeps the exact match."""
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    cuda = FakeCuda(None)  # CUDA not up yet
    fake = install(monkeypatch, [FakeGpu(GPU_A)], cuda=cuda)
    monkeypatch.setattr(_collectors, "RESOLVE_RECHECK_S", NEVER_STALE_S)
    source = NvmlTemperatureSource(None)
    for _ in range(4):
        assert source.read().device == "CUDA device 0"
    assert fake.calls["nvmlDeviceGetHandleByIndex"] == 1  # guessed once, kept
    cuda.uuids = {0: GPU_A[4:]}  # the user's first kernel brought CUDA up
    monkeypatch.setattr(_collectors, "RESOLVE_RECHECK_S", 0.0)
    source.read()
    assert fake.calls["nvmlDeviceGetHandleByUUID"] == 1  # asked again: matched by UUID
    monkeypatch.setattr(cuda, "uuid", lambda ordinal: pytest.fail("asked the CUDA driver again"))
    for _ in range(3):
        source.read()
    assert fake.calls["nvmlDeviceGetHandleByUUID"] == 1 and fake.calls["nvmlDeviceGetHandleByIndex"] == 1


def test_before_each_run_the_collector_shares_the_sample_and_a_call_reads_as_one_without_blocks(
    plugin_host: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    """Issue 35: the sample's values are not copied before a run (a ``RunValues`` of the sample's own mapping and
    the run's age), and a host call with the nvml columns stores its runs in a run block, reading back as a call
    whose runs go line by line to a file (no block) does: the same columns, an age per run."""
    from nsightx.ext import RunValues

    install(monkeypatch, [FakeGpu(GPU_A)], cuda=FakeCuda({0: GPU_A[4:]}))
    monkeypatch.setattr(_sampler, "SAMPLE_PERIOD_S", 3600.0)  # the sample start() reads, then none for an hour
    monkeypatch.setattr(_collectors, "STALE_SAMPLE_S", NEVER_STALE_S)
    monkeypatch.setattr(loop, "BLOCK_MIN_RUNS", 1)  # a block for every config, whatever its run count
    run = RunConditions()
    ctx = CollectContext(scope=nsightx.CollectionScope.RUN, function="f", run=0, device=0)
    run.start(ctx)
    try:
        sampler = _sampler.current(run._sweep[0])
        assert sampler is not None
        first, second = run.collect(ctx), run.collect(ctx)
        sample = sampler.latest()
        assert type(first) is RunValues and type(second) is RunValues and sample is not None
        assert first.shared is sample.values and second.shared is sample.values  # not copied
        assert list(first) == list(RUN_COLUMNS) and 0 <= first[AGE_COLUMN] <= second[AGE_COLUMN]
    finally:
        run.stop()

    def f(n: int) -> None:
        with nsightx.annotate("a"):
            pass

    def call(**kwargs: Any) -> Any:
        decorated = nsightx.analyze.kernel(configs=[(1,), (2,)], runs=6, backend="host", verbosity=SILENT, **kwargs)
        return decorated(f)()

    from nsightx._results.sink import RunSink

    opened: list[Any] = []
    real = RunSink.open_block
    monkeypatch.setattr(RunSink, "open_block", lambda self, *a: opened.append(real(self, *a)) or opened[-1])
    in_memory, on_file = call(), call(output_prefix=str(tmp_path / "out-"))
    blocks = [b for b in opened if b is not None]  # runs 1-5 of each config of the call in memory
    assert len(blocks) == 2 and all(len(b.value_names) == 5 * len(RUN_COLUMNS) for b in blocks)
    a, b = in_memory.runs_dataframe(), on_file.runs_dataframe()
    assert list(a.columns) == list(b.columns) and AGE_COLUMN in a.columns and len(a) == len(b) == 12
    same = [c for c in a.columns if c not in (AGE_COLUMN, "Value", "HostNs")]
    assert a[same].astype(str).equals(b[same].astype(str))
    assert a[AGE_COLUMN].notna().all() and a[AGE_COLUMN].nunique() > 1  # one age per run
