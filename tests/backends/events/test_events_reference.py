"""The events backend's per-region records against a naive reference, on random programs (CPU only).

torch and the CUDA driver are doubles (library boundaries): each stream has its own GPU clock, which the
program's work and the session's L2 flush advance; an event takes the clock of the stream it is recorded on. The
real :class:`EventsSession` (built by :meth:`EventsBackend.session` from the plan) is driven by the real run loop
(:func:`nsightx._run.loop.run_loop`) over a few configs of warm-up and measured runs. Each run is a random program
of work, stream switches, raises of the persisting-L2 set-aside and regions; a region may switch streams inside,
try to open a nested region (refused), reuse a name already used in the run (refused), fail (``ignore_failures``)
or crash the call, and some regions open and close on a thread of their own (started and joined in the run; torch's
current stream is per thread, a new thread's the default one); one region's end event may be unreadable. Some
calls have ``runs="auto"``, which collects after every run.

The reference knows nothing of pairs, pools or batches beyond what docs/backends.md (events) and the module
docstrings say. A region's span is the time between a start event on the stream current when it opens, after
the flush (``cache_control="all"``, queued just before the start event), and an end event on the stream current
when it closes; each region that did not fail gets one record ``region__stream_span_duration`` (ns, kernel
``region``, ``seq`` 0) in closing order, and every region the attribute ``span_ns`` (the span, rounded). Runs
reach the sink in the order they ran. The set-aside is asked before each flush until one is seen, then the reset
is made before every flush. The session collects every ``COLLECT_EVERY`` measured runs (set low here), at config
ends when ``COLLECT_SECONDS`` passed (0 or infinity here: no timing decides), and at the end; a pair that cannot be
read stops that collection with a ``MeasurementError``: the runs read before it keep their records, the others
of that collection are written without them, and the call ends. With ``events_collect="run"`` the run whose pair
cannot be read fails, as a run that raises does (it is not written); so with ``runs="auto"``. The docs do not say
what happens when a crash and an unreadable pair meet; programs here have at most one of the two. A region still
open when its run ends, or closed on another thread, fails the call (``test_events_region_threads.py``); programs
here have neither.

Every event recording is read at most once (no pair is read twice or shared by two regions), and at the end the
pool holds no pair twice. ``NSIGHTX_EVENTS_REFERENCE_EXAMPLES`` sets how many programs run (default 300; 1500
while hunting, none differed).
"""

from __future__ import annotations

import math
import os
import threading
import warnings
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from nsightx_events import _backend
from nsightx_events._backend import METRIC, EventsBackend, EventsSession
from test_events_session import FakeLibcuda, FakeTorch

import nsightx
from nsightx._errors import AnnotationError, MeasurementError
from nsightx._results.sink import RunSink
from nsightx._run import backend as _run_backend
from nsightx._run.adaptive import AdaptiveRuns
from nsightx._run.loop import run_loop
from nsightx._run.plan import Plan
from nsightx.ext import Availability

EXAMPLES = int(os.environ.get("NSIGHTX_EVENTS_REFERENCE_EXAMPLES", "300"))
FLUSH_NS = 977
"""GPU time of one L2 flush on its stream."""
STREAMS = (7, 8, 9)
NAMES = ("a", "b", "c", "d")


class Crash(Exception):
    """A region's exception that nothing swallows: the call ends."""


# --- the doubles: per-stream GPU clocks ---------------------------------------------------------------------


class Gpu:
    """The GPU clock of each stream, and what the events recorded on them were read as."""

    def __init__(self, torch: FakeTorch) -> None:
        self.torch = torch
        self.clock: dict[int, float] = dict.fromkeys(STREAMS, 0.0)
        self.tag: int | None = None
        """Tag of the region whose body just ended (what the end event recorded next carries)."""
        self.bad: int | None = None
        """Tag of the region whose end event cannot be read."""
        self.reads: list[tuple[int, int, int, int]] = []
        """(start id, its recording, end id, its recording) of each pair read."""

    def work(self, ns: float) -> None:
        self.clock[self.torch.current[0]] += ns


class GpuEvent:
    """A CUDA event: takes the clock of the stream it is recorded on; counts its recordings."""

    gpu: Gpu

    def __init__(self, enable_timing: bool = False) -> None:
        assert enable_timing
        self.at: float | None = None
        self.recording = 0
        self.tag: int | None = None

    def record(self, stream: Any) -> None:
        self.at = self.gpu.clock[stream.sid]
        self.recording += 1
        self.tag = self.gpu.tag

    def synchronize(self) -> None:
        if self.tag is not None and self.tag == self.gpu.bad:
            raise RuntimeError("an illegal memory access was encountered")

    def elapsed_time(self, end: GpuEvent) -> float:
        assert self.at is not None and end.at is not None, "an event read before it was recorded"
        self.gpu.reads.append((id(self), self.recording, id(end), end.recording))
        return (end.at - self.at) / 1e6  # ms


class GpuBuffer:
    """The flush buffer: a fill is work on the current stream."""

    def __init__(self, gpu: Gpu, n: int) -> None:
        self.gpu = gpu
        self.n = n

    def fill_(self, value: int) -> None:
        self.gpu.work(FLUSH_NS)

    def numel(self) -> int:
        return self.n


class ThreadTorch(FakeTorch):
    """torch's current stream is per thread: a new thread starts on the default stream (7 on device 0)."""

    def __init__(self) -> None:
        self._local = threading.local()
        super().__init__()

    @property
    def current(self) -> dict[int, int]:
        if not hasattr(self._local, "current"):
            self._local.current = {0: 7, 1: 70}
        current: dict[int, int] = self._local.current
        return current

    @current.setter
    def current(self, value: dict[int, int]) -> None:
        self._local.current = value


# --- programs ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Step:
    """``work`` (ns on the current stream), ``switch`` (to a stream), ``aside`` (set-aside bytes), ``nested``."""

    kind: str
    value: float = 0
    """ns for ``work`` (in quarters: a span need not be whole ns), else a stream or a number of bytes."""


steps = st.one_of(
    st.builds(Step, st.just("work"), st.integers(1, 20000).map(lambda quarters: quarters / 4)),
    st.builds(Step, st.just("switch"), st.sampled_from(STREAMS)),
    st.builds(Step, st.just("aside"), st.sampled_from((0, 1 << 16))),
)
inner_steps = st.one_of(steps, st.builds(Step, st.just("nested")))
"""A region's steps: those of a run, and a try to open a region inside it."""


@dataclass(frozen=True)
class RegionSpec:
    name: str
    inside: tuple[Step, ...]
    end: str
    """``ok``, ``failed`` (raises, swallowed) or ``crash`` (raises, the call ends)."""
    thread: bool
    """Opened and closed on a thread of its own (started and joined inside the run)."""


regions = st.builds(
    RegionSpec,
    st.sampled_from(NAMES),
    st.lists(inner_steps, max_size=4).map(tuple),
    st.sampled_from(("ok",) * 8 + ("failed", "failed", "crash")),
    st.sampled_from((False, False, False, True)),
)


@dataclass(frozen=True)
class Program:
    configs: int
    runs: int
    warmup: int
    flush: bool
    deferred: bool
    auto: bool
    """``runs="auto"`` (min_runs = max_runs = ``runs``, at least 2): the session is collected after every run."""
    every: int
    seconds: float
    max_persisting: int | None
    """None: no driver."""
    aside: int
    """The context's persisting-L2 set-aside when the call starts."""
    scripts: tuple[tuple[Step | RegionSpec, ...], ...]
    """What each call of the function does (call i runs ``scripts[i % len]``)."""
    bad: int | None
    """Ordinal (in opening order) of the region whose end event cannot be read."""


programs = st.builds(
    Program,
    configs=st.integers(1, 3),
    runs=st.integers(1, 4),
    warmup=st.integers(0, 1),
    flush=st.booleans(),
    deferred=st.sampled_from((True, True, False)),
    auto=st.sampled_from((False, False, True)),
    every=st.sampled_from((1, 2, 3, 64)),
    seconds=st.sampled_from((0.0, math.inf)),
    max_persisting=st.sampled_from((None, 0, 1 << 20)),
    aside=st.sampled_from((0, 0, 1 << 16)),
    scripts=st.lists(
        st.lists(st.one_of(steps, regions, regions), min_size=1, max_size=5).map(tuple), min_size=1, max_size=6
    ).map(tuple),
    bad=st.one_of(st.none(), st.integers(0, 6)),
)


# --- the reference ----------------------------------------------------------------------------------------------


@dataclass
class Ref:
    """What the reference expects, built as the program runs (from its own clocks, never the doubles')."""

    flush: bool
    max_persisting: int | None
    clock: dict[int, float] = field(default_factory=lambda: dict.fromkeys(STREAMS, 0.0))
    stream: int = 7
    aside: int = 0
    seen: bool = False
    queries: int = 0
    resets: int = 0
    opened: int = 0
    runs: list[tuple[int, int, list[tuple[str, bool, float, bool]]]] = field(default_factory=list)
    """(config, run, regions) of each run that returned: (name, failed, span ns, holds the bad pair)."""
    crashed: bool = False

    def flush_before_start(self) -> None:
        if not self.flush:
            return
        if self.max_persisting:  # asked until a set-aside is seen, then reset before every flush
            if not self.seen:
                self.queries += 1
                self.seen = self.aside > 0
            if self.seen:
                self.resets += 1
        self.clock[self.stream] += FLUSH_NS


def _interpret(script: tuple[Step | RegionSpec, ...], gpu: Gpu, torch: FakeTorch, ref: Ref, lib: FakeLibcuda) -> None:
    """Run one call's script against the doubles (through nsightx.annotate), noting what the reference expects."""
    used: set[str] = set()
    for item in script:
        if isinstance(item, Step):
            _step(item, gpu, torch, ref, lib)
        elif item.thread:
            _in_thread(item, used, gpu, torch, ref, lib)
        else:
            _region(item, used, gpu, torch, ref, lib)


def _in_thread(item: RegionSpec, used: set[str], gpu: Gpu, torch: FakeTorch, ref: Ref, lib: FakeLibcuda) -> None:
    """The region on a new thread, whose current stream is the default one (7), while this thread waits for it."""
    raised: list[BaseException] = []

    def body() -> None:
        try:
            _region(item, used, gpu, torch, ref, lib)
        except BaseException as e:
            raised.append(e)

    stream, ref.stream = ref.stream, 7
    worker = threading.Thread(target=body)
    worker.start()
    worker.join(timeout=60)
    assert not worker.is_alive()
    ref.stream = stream
    if raised:
        raise raised[0]


def _region(item: RegionSpec, used: set[str], gpu: Gpu, torch: FakeTorch, ref: Ref, lib: FakeLibcuda) -> None:
    if item.name in used:
        with pytest.raises(AnnotationError, match="already been used"):
            with nsightx.annotate(item.name):
                raise AssertionError("a repeated name opened a region")
        return
    used.add(item.name)
    ordinal = ref.opened
    ref.opened += 1
    ref.flush_before_start()
    start = ref.clock[ref.stream]
    try:
        with nsightx.annotate(item.name, ignore_failures=item.end == "failed"):
            for s in item.inside:
                _step(s, gpu, torch, ref, lib)
            gpu.tag = ordinal
            if item.end != "ok":
                raise (Crash if item.end == "crash" else ValueError)(f"region {item.name} fails")
    finally:
        gpu.tag = None
        span = ref.clock[ref.stream] - start
        ref.runs[-1][2].append((item.name, item.end == "failed", span, ordinal == gpu.bad))


def _step(step: Step, gpu: Gpu, torch: FakeTorch, ref: Ref, lib: FakeLibcuda) -> None:
    if step.kind == "work":
        gpu.work(step.value)
        ref.clock[ref.stream] += step.value
    elif step.kind == "switch":
        torch.current[0] = ref.stream = int(step.value)
    elif step.kind == "aside":
        lib.set_aside = ref.aside = int(step.value)
    else:  # a nested region is refused before the session hears of it
        with pytest.raises(AnnotationError, match="Nested annotations"):
            with nsightx.annotate("nested"):
                raise AssertionError("a nested region opened")


def _expected(program: Program, ref: Ref) -> tuple[list[tuple[Any, ...]], str | None]:
    """The runs the sink must get (each: config, run, records, regions) and the error the call must end with."""
    measured = [(c, r, regs) for c, r, regs in ref.runs]
    error = "crash" if ref.crashed else None
    if ref.crashed:
        measured = measured[:-1]  # the crashed run is not written; the others are collected at the end
    bad_at = next((i for i, (_, _, regs) in enumerate(measured) if any(b for *_, b in regs)), None)
    if bad_at is not None:
        error = "measurement"
        if not program.deferred or (program.auto and program.runs > 1):
            measured = measured[:bad_at]  # that run failed (read at its end): the call ends there
            bad_at = None
    written: list[tuple[Any, ...]] = []
    unread_from = None
    if bad_at is not None:  # the collection holding that run: its runs from it on are written without outputs
        batch_start, batch_end = _collection(program, measured, bad_at)
        unread_from = bad_at
        measured = measured[:batch_end]
        del batch_start
    for i, (c, r, regs) in enumerate(measured):
        if r < 0:
            continue
        read = unread_from is None or i < unread_from
        records = [
            (name, c, r, "region", METRIC, (span / 1e6) * 1e6, "ns", 0) for name, failed, span, _ in regs if not failed
        ]
        regions = [
            (name, failed, {"span_ns": round((span / 1e6) * 1e6)} if read else {}) for name, failed, span, _ in regs
        ]
        written.append((c, r, records if read else [], regions))
    return written, error


def _collection(program: Program, runs: list[tuple[int, int, Any]], at: int) -> tuple[int, int]:
    """[start, end) in ``runs`` (warm-ups included, in the order they ran) of the collection holding run ``at``."""
    ends: list[int] = []
    count = 0
    for i, (_, r, _) in enumerate(runs):
        if r < 0:
            continue
        count += 1
        config_end = r == program.runs - 1
        if count % program.every == 0 or (config_end and program.seconds == 0.0) or i == len(runs) - 1:
            ends.append(i + 1)
            count = 0
    if not ends or ends[-1] != len(runs):
        ends.append(len(runs))
    start = 0
    for end in ends:
        if at < end:
            return start, end
        start = end
    raise AssertionError("no collection holds the run")


# --- the call ---------------------------------------------------------------------------------------------------


def _simulate(program: Program, monkeypatch: pytest.MonkeyPatch) -> None:
    torch = ThreadTorch()
    gpu = Gpu(torch)
    GpuEvent.gpu = gpu
    torch.cuda.Event = GpuEvent
    torch.empty = lambda n, dtype, device: GpuBuffer(gpu, n)
    lib = FakeLibcuda()
    monkeypatch.setitem(__import__("sys").modules, "torch", torch)
    monkeypatch.setattr(_backend, "_probe", lambda: Availability(available=True))
    monkeypatch.setattr(_backend, "load_libcuda", lambda: None if program.max_persisting is None else lib)
    monkeypatch.setattr(_backend, "_libcuda", lambda: lib)
    monkeypatch.setattr(_backend, "device_attribute", lambda attribute, index: program.max_persisting)
    monkeypatch.setattr(_run_backend, "COLLECT_EVERY", program.every)
    monkeypatch.setattr(_run_backend, "COLLECT_SECONDS", program.seconds)
    ref = Ref(flush=program.flush, max_persisting=program.max_persisting, aside=program.aside)
    lib.set_aside = program.aside
    crashes = [i for s in program.scripts for i in s if isinstance(i, RegionSpec) and i.end == "crash"]
    gpu.bad = None if crashes else program.bad
    order = [(c, r) for c in range(program.configs) for r in range(-program.warmup, program.runs)]

    def function(n: int) -> None:
        c, r = order[len(ref.runs)]
        assert c == n
        ref.runs.append((c, r, []))
        try:
            _interpret(program.scripts[(len(ref.runs) - 1) % len(program.scripts)], gpu, torch, ref, lib)
        except Crash:
            ref.crashed = True
            raise

    plan = Plan(
        function=function,
        function_name="f",
        params=("n",),
        configs=tuple((c,) for c in range(program.configs)),
        runs=program.runs,
        warmup=program.warmup,
        metrics=(METRIC,),
        backend="events",
        cache_control="all" if program.flush else "none",
        backend_options={"events_collect": "batch" if program.deferred else "run"},
        needs_gpu=False,
        stop_rule=AdaptiveRuns(min_runs=program.runs, max_runs=program.runs)
        if program.auto and program.runs > 1
        else None,
    )
    sink, error = RunSink(), None
    with EventsBackend().session(plan) as session, warnings.catch_warnings():
        assert isinstance(session, EventsSession)
        warnings.simplefilter("ignore", RuntimeWarning)  # the failed regions' warnings
        try:
            run_loop(plan, session, sink)
        except Crash:
            error = "crash"
        except MeasurementError as e:
            assert "could not be read" in str(e)
            error = "measurement"
        pool = [id(e) for pair in session._pool for e in pair]
        events = (session.resets, lib.queries)
    expected, expected_error = _expected(program, ref)
    got = [
        (
            run.config,
            run.run,
            [(r.annotation, r.config, r.run, r.kernel, r.metric, r.value, r.unit, r.seq) for r in run.records],
            [(g.annotation, g.failed, dict(g.attributes)) for g in run.regions],
        )
        for run in sink.runs
    ]
    assert (got, error) == (expected, expected_error)
    assert len(gpu.reads) == len(set(gpu.reads)), "an event recording was read twice"
    ends = {(s, sr) for s, sr, _, _ in gpu.reads} | {(e, er) for _, _, e, er in gpu.reads}
    assert len(ends) == 2 * len(gpu.reads), "one event recording was read as two regions' events"
    assert len(pool) == len(set(pool)), "the pool holds an event twice"
    if expected_error is None:
        assert events == (ref.resets, ref.queries if program.max_persisting is not None else 0)


@settings(
    max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
@given(programs)
def test_every_region_gets_the_references_records_spans_and_flags(program: Program) -> None:
    """What the sink gets per (config, run, region), and how the call ends, are the reference's."""
    with pytest.MonkeyPatch.context() as mp:
        _simulate(program, mp)
