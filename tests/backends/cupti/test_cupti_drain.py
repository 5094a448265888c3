"""Draining completed CUPTI buffers before the forced flush (``cupti_drain``), on CPU.

The stand-in for ``cupti.cupti`` here models what a drain depends on: records go into buffers of a fixed number
of records, a kernel's record is incomplete until the stand-in GPU has run it, a non-forced flush hands over
only the buffers whose records are all complete, a forced one every buffer. The GPU lags behind the host (each
region entry runs one queued kernel, the wait for the device runs the rest in steps), as on the H200 sweep of
issue 13. Every mode must give the records of ``off`` exactly, and the drain modes must decode part of the
activity outside the forced flush.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from _paths import ROOT
from nsightx_cupti._drain import DEFAULT_DRAIN, DRAIN_MODES, wait_draining
from nsightx_cupti._options import CuptiOptions
from nsightx_cupti._session import CuptiSession
from nsightx_cupti._tracer import ActivityTracer
from test_cupti_tracer import FakeCupti, Flag, Kind, api, ext, kernel

import nsightx
from nsightx._errors import ConfigError
from nsightx._results.sink import RunSink
from nsightx._run.loop import run_loop
from nsightx._run.plan import Plan, ThermalSettings

SIZES = (0, 1, 2, 3)
RUNS = 10


class GpuCupti(FakeCupti):
    """CUPTI's activity buffers and a GPU that runs the launched kernels in order, when told to.

    Args:
        capacity: Records per buffer.
        partial: Whether a non-forced flush also hands over the buffer being filled when its records are all
            complete (CUPTI's documentation: the buffers need not be full).
    """

    def __init__(self, capacity: int, partial: bool = True) -> None:
        super().__init__()
        self.capacity = capacity
        self.partial = partial
        self.buffers: list[list[Any]] = []
        self.queue: list[tuple[Any, int]] = []
        self.clock = 1_000_000
        self.launches = 0
        self.lock = threading.Lock()
        self.period_ms = 0
        """``cuptiActivityFlushPeriod``: when positive, full buffers whose records are all complete are handed
        over as the GPU completes them (CUPTI's worker thread; here synchronously, in :meth:`run_gpu`)."""
        self.periods: list[int] = []

    def activity_flush_period(self, ms: int) -> None:
        self.period_ms = ms
        self.periods.append(ms)

    def _record(self, record: Any) -> None:
        if not self.buffers or len(self.buffers[-1]) >= self.capacity:
            size, _ = self.requested()
            assert size >= 4096
            self.buffers.append([])
        self.buffers[-1].append(record)

    def launch(self, name: str) -> None:
        """A kernel launch of the process: its API record, its external id's record, its (incomplete) kernel."""
        with self.lock:
            self.next_corr += 1
            self.launches += 1
            corr = self.next_corr
            self._record(api(corr, 10 * corr))
            if self.stack:
                self._record(ext(corr, self.stack[-1]))
            record = kernel(name, corr, 0, 0)
            self._record(record)
            self.queue.append((record, 100 + self.launches))  # every kernel's duration differs

    def run_gpu(self, n: int) -> None:
        """The GPU runs the next ``n`` queued kernels (their records become complete)."""
        with self.lock:
            for record, duration in self.queue[:n]:
                record.start, record.end = self.clock, self.clock + duration
                self.clock += duration + 10
            del self.queue[:n]
        if self.period_ms:
            self._hand_over(forced=False, partial=False)

    def activity_flush_all(self, flag: int) -> None:
        self._hand_over(forced=flag == Flag.FLUSH_FORCED, partial=self.partial)

    def _hand_over(self, forced: bool, partial: bool) -> None:
        with self.lock:
            ready, kept = [], []
            for i, buf in enumerate(self.buffers):
                complete = all(r.end for r in buf if r.kind == Kind.CONCURRENT_KERNEL)
                filling = i == len(self.buffers) - 1
                (ready if forced or (complete and (partial or not filling)) else kept).append(buf)
            self.buffers = kept
        for buf in ready:
            self.completed(buf)


class LaggingDevice:
    """The device side: each L2 flush lets the GPU run one queued kernel; the wait runs the rest in steps.

    With ``drains`` (the tracer's drain count; ``cupti_drain="wait"``), each step waits until the helper thread
    has made a drain that began after it, however late that thread is scheduled: a fixed pause per step let a
    loaded machine finish the wait before the helper drained at all.
    """

    def __init__(self, gpu: GpuCupti, drains: Callable[[], int] | None = None) -> None:
        self.gpu = gpu
        self.drains = drains

    def flush_l2(self) -> None:
        self.gpu.run_gpu(1)

    def synchronize(self) -> None:
        while self.gpu.queue:
            self.gpu.run_gpu(4)
            if self.drains is not None:
                _wait_for_drains(self.drains, self.drains() + 2)  # one in flight may have begun before the step

    def environment(self) -> dict[str, Any]:
        return {}


def _wait_for_drains(drains: Callable[[], int], count: int) -> None:
    deadline = time.monotonic() + 60
    while drains() < count:
        assert time.monotonic() < deadline, f"the drain thread made {drains()} drain(s) in 60 s, expected {count}"
        time.sleep(0.0005)


def _sweep(drain: str, capacity: int = 12, partial: bool = True) -> tuple[Any, ActivityTracer]:
    """The sweep's shape through the real run loop, session and tracer: 4 configs x (1 warm-up + 10 runs)."""
    gpu = GpuCupti(capacity, partial)
    tracer = ActivityTracer(gpu, canary=None)
    tracer.start(buffer_bytes=8192, api_filter="off", flush_period_ms=1 if drain == "period" else 0)

    def user(n: int) -> None:
        with nsightx.annotate("work"):
            gpu.launch(f"gemm{n}")
            if n == 0:
                gpu.launch("splitk")  # two kernels for the smallest size, as cuBLAS does at n = 512

    plan = Plan(
        function=user,
        function_name="f",
        params=("n",),
        configs=tuple((n,) for n in SIZES),
        runs=RUNS,
        warmup=1,
        metrics=("gpu__time_duration.sum",),
        backend="cupti",
        thermal=ThermalSettings(mode="off"),
    )
    sink = RunSink()
    drains = (lambda: tracer.stats.get("drains", 0)) if drain == "wait" else None
    session = CuptiSession(tracer, LaggingDevice(gpu, drains), deferred=True, drain=drain)  # type: ignore[arg-type]
    try:
        run_loop(plan, session, sink)
    finally:
        tracer.stop()
    assert gpu.buffers == [] and gpu.queue == []
    return sink, tracer


def _records(sink: Any) -> list[tuple[int, int, str, int, float, str]]:
    return [(r.config, r.run, r.kernel, r.seq, r.value, r.annotation) for run in sink.runs for r in run.records]


EXPECTED = _records(_sweep("off")[0])


def test_the_reference_has_every_kernel_of_every_measured_run_once() -> None:
    assert len(EXPECTED) == RUNS * (len(SIZES) + 1)  # size 0 launches two kernels
    assert [(c, r) for c, r, *_ in EXPECTED] == sorted((c, r) for c, r, *_ in EXPECTED)
    assert len({v for *_, v, _ in EXPECTED}) == len(EXPECTED)  # every kernel has its own duration


@pytest.mark.parametrize("partial", [True, False])
@pytest.mark.parametrize("drain", DRAIN_MODES)
def test_every_drain_mode_gives_the_same_records(drain: str, partial: bool) -> None:
    sink, tracer = _sweep(drain, partial=partial)
    assert _records(sink) == EXPECTED
    stats = tracer.stats
    if drain == "off":
        assert stats.get("drains", 0) == 0 and stats["decode"] == stats["flush_decode"]
    elif drain == "period":  # CUPTI's own worker handed buffers over; the session made no flush of its own
        assert stats.get("drains", 0) == 0 and stats["decode"] > stats["flush_decode"]
    else:  # part of the activity was decoded before the forced flush, and none of it lost or doubled
        assert stats["drains"] >= 1 and stats["decode"] > stats["flush_decode"]


def test_period_mode_sets_cuptis_flush_period_for_the_session_only() -> None:
    gpu = GpuCupti(capacity=12)
    tracer = ActivityTracer(gpu, canary=None)
    tracer.start(api_filter="off", flush_period_ms=1)
    assert gpu.period_ms == 1
    tracer.stop()
    assert gpu.periods == [1, 0]  # set back to CUPTI's default (none): the next session or client gets none
    tracer.start(api_filter="off")
    tracer.stop()
    assert gpu.periods == [1, 0]


def test_config_mode_drains_at_each_new_config_and_before_the_wait() -> None:
    _, tracer = _sweep("config")
    assert tracer.stats["drains"] == len(SIZES)  # configs 1, 2, 3 start with runs pending; then the wait


def test_a_drain_delivers_only_complete_buffers() -> None:
    gpu = GpuCupti(capacity=3, partial=False)
    tracer = ActivityTracer(gpu, canary=None)
    tracer.start(api_filter="off")
    gpu.stack.append(1)
    gpu.launch("a")  # one full buffer: api, ext, kernel
    gpu.launch("b")
    tracer.drain()
    assert tracer.stats.get("buffers", 0) == 0  # the first kernel has not run: nothing comes out
    gpu.run_gpu(1)
    tracer.drain()
    assert tracer.stats["buffers"] == 1  # "a"'s buffer; "b"'s is incomplete
    gpu.run_gpu(1)
    batch = tracer.collect()
    assert [k.name for k in batch.kernels] == ["a", "b"] and batch.externals == {1001: 1, 1002: 1}
    tracer.stop()


def test_a_failing_drain_is_counted_and_the_forced_flush_still_delivers() -> None:
    """The collection's default flush is refused too: it falls back to the forced one, which delivers."""

    class Refusing(GpuCupti):
        def activity_flush_all(self, flag: int) -> None:
            if flag != Flag.FLUSH_FORCED:
                raise RuntimeError("CUPTI_ERROR_UNKNOWN")
            super().activity_flush_all(flag)

    gpu = Refusing(capacity=3)
    tracer = ActivityTracer(gpu, canary=None)
    tracer.start(api_filter="off")
    gpu.launch("a")
    gpu.run_gpu(1)
    tracer.drain()
    assert tracer.stats["drain_errors"] == 1
    assert [k.name for k in tracer.collect().kernels] == ["a"]
    tracer.stop()
    tracer.drain()  # stopped: nothing to do, nothing raised
    assert tracer.stats["drains"] == 1


def test_wait_draining_makes_no_drain_after_the_wait_even_when_it_raises() -> None:
    calls: list[str] = []
    threads: set[str] = set()
    second = threading.Event()

    def wait() -> None:
        assert second.wait(60), "the helper thread made no second drain in 60 s"
        raise OSError("device lost")  # while the second drain is (most likely) in flight

    def drain() -> None:
        threads.add(threading.current_thread().name)
        calls.append("start")
        if calls.count("start") == 2:
            second.set()
        time.sleep(0.002)
        calls.append("end")

    with pytest.raises(OSError, match="device lost"):
        wait_draining(wait, drain, period_s=0.001)
    seen = list(calls)
    assert seen.count("start") == seen.count("end") >= 2  # a drain in flight was waited for
    time.sleep(0.01)
    assert calls == seen and threads == {"nsightx-cupti-drain"}  # and none started after


def test_a_session_collected_after_every_run_does_not_drain() -> None:
    gpu = GpuCupti(capacity=12)
    tracer = ActivityTracer(gpu, canary=None)
    session = CuptiSession(tracer, LaggingDevice(gpu), deferred=False, drain="wait")
    assert session.drain == "off"


def test_drain_options_are_checked() -> None:
    assert CuptiOptions.parse({}, "cupti").cupti_drain == "off"
    assert CuptiOptions.parse({"cupti_drain": "config", "buffer_bytes": 4096}, "cupti").buffer_bytes == 4096
    with pytest.raises(ConfigError, match=r"cupti_drain.*'sometimes'.*'off', 'end', 'config', 'wait' or 'period'"):
        CuptiOptions.parse({"cupti_drain": "sometimes"}, "cupti")
    with pytest.raises(ConfigError, match=r"buffer_bytes.*at least 4096"):
        CuptiOptions.parse({"buffer_bytes": 1024}, "cupti")


def test_the_overhead_benchmarks_cupti_variants_are_valid_options() -> None:
    import sys

    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import backend_overhead
    finally:
        sys.path.pop(0)
    modes = set()
    for name, options in backend_overhead.CUPTI_VARIANTS.items():
        parsed = CuptiOptions.parse(options, "cupti")
        if name.startswith("cupti_api_"):  # the api_tracing variants, with the default drain
            assert name == f"cupti_api_{parsed.api_tracing}" and parsed.cupti_drain == DEFAULT_DRAIN
            continue
        assert name.startswith(f"cupti_drain_{parsed.cupti_drain}")
        assert name.endswith("_pydecode") == (parsed.cupti_decode == "cupti-python")
        modes.add(parsed.cupti_drain)
    assert modes == set(DRAIN_MODES)  # one H200 call measures every mode
