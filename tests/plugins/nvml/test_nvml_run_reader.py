"""The nvml RUN collector's per-config reader (``RunConditions.run_reader``): what the deferred run loop calls
before each run instead of ``collect`` (issue 35: no context written, nothing looked up per run).

It must answer exactly as ``collect`` does with a context whose ``run_start_ns`` is the reader's argument, in each
of the cases the tests of ``collect`` pin: a fresh sample (the sample's own mapping and the run's age), a stale
one whose sampler ended (a direct read), and no sampler at all (no reader: the loop calls ``collect``). NVML is
the scripted double of ``nvml_double`` (the library boundary); the sampler thread and the collector are real.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from nsightx_nvml import _collectors, _sampler
from nsightx_nvml._collectors import AGE_COLUMN, RunConditions
from nvml_double import GPU_A, FakeCuda, FakeGpu, install

import nsightx
from nsightx._run.collectors import CollectContext
from nsightx.ext import RunValues

NEVER_STALE_S = 3600.0


@pytest.fixture(autouse=True)
def _no_leftover_samplers() -> Any:
    yield
    for key in list(_sampler._leases):
        _sampler._leases.pop(key).sampler.stop()


def _context(now: int | None = None) -> CollectContext:
    ctx = CollectContext(scope=nsightx.CollectionScope.RUN, function="f", device=0)
    ctx.__dict__["run_start_ns"] = now  # as the run loop sets it in a config's shared context
    return ctx


def _wait_for(predicate: Any, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.001)
    return predicate()


def test_the_reader_answers_as_collect_with_a_fresh_sample_and_after_the_sampler_ended(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    install(monkeypatch, [FakeGpu(GPU_A)], cuda=FakeCuda({0: GPU_A[4:]}))
    monkeypatch.setattr(_sampler, "SAMPLE_PERIOD_S", 3600.0)  # the sample start() reads, then none for an hour
    monkeypatch.setattr(_collectors, "STALE_SAMPLE_S", NEVER_STALE_S)  # that sample is fresh, however late
    run = RunConditions()
    run.start(_context())
    try:
        read = run.run_reader(_context())
        sampler = _sampler.current(run._sweep[0])
        assert read is not None and sampler is not None
        sample = sampler.latest()
        assert sample is not None
        for now in (sample.taken_ns + 1_234_567, sample.taken_ns + 2_000_500, time.perf_counter_ns()):
            answer, expected = read(now), run.collect(_context(now))
            assert type(answer) is RunValues and answer.shared is sample.values  # the sample's own mapping
            assert dict(answer) == dict(expected) and answer[AGE_COLUMN] == expected[AGE_COLUMN]
        assert read(sample.taken_ns + 1_234_567)[AGE_COLUMN] == 1.235
        assert read(sample.taken_ns + 2_000_500)[AGE_COLUMN] == round(2_000_500 / 1e6, 3)  # a tie: as collect
        sampler.stop()  # the sampler ends mid-call (a sampler process that died)
        monkeypatch.setattr(_collectors, "STALE_SAMPLE_S", 0.005)
        assert _wait_for(lambda: time.perf_counter_ns() - sample.taken_ns > 0.005e9)  # nothing newer comes
        direct: list[int] = []
        monkeypatch.setattr(run, "_direct", lambda c, now: direct.append(now) or {AGE_COLUMN: 0.0})
        late = run.run_reader(_context())  # made after the limit changed: it takes the limit when it is made
        assert late is not None and late(123 + sample.taken_ns + 10**8) == {AGE_COLUMN: 0.0}
        assert direct == [123 + sample.taken_ns + 10**8]  # read for that run, at its start
    finally:
        run.stop()


def test_without_a_started_sampler_there_is_no_reader_and_collect_reads_directly(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    install(monkeypatch, [FakeGpu(GPU_A)], cuda=FakeCuda({0: GPU_A[4:]}))
    run = RunConditions()
    assert run.run_reader(_context()) is None  # outside a call: the loop calls collect, which reads NVML
    assert set(run.collect(_context())) >= {AGE_COLUMN}
    run.start(_context())
    run.stop()
    assert run.run_reader(_context()) is None  # the call ended: its sampler is not the collector's any more
