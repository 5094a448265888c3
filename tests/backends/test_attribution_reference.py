"""The cupti backend's attribution against a naive reference, on random programs (CPU only).

A program is a few runs of regions, each opened on one thread, with launches on several threads and streams
before, inside, between and after them: plain kernels, graph launches (one launch API call, several kernels),
API calls that launch nothing, calls of an API switched off (``api_filter``: no API record, so no external id
either) and, now and then, a kernel whose record never arrives or is incomplete. The simulated CUPTI writes the
records it would (an API record only while API tracing is on, an external-correlation record for a traced call
made while the calling thread has an id pushed, a kernel record per kernel); they reach the real tracer's buffer
callback in a random order, split over random buffers, and the real :class:`CuptiSession` collects them.

The reference knows nothing of ids or bisection. It reads the rules of docs/backends.md ("Which kernels count")
and of :mod:`nsightx_cupti._attribution` straight off the program: a kernel launched by the region's own thread
while the region was open is the region's (``external``); one launched by another thread while it was open is
the region's (``window``) when its launch call was recorded; a kernel whose launch left no record counts nowhere;
everything else was launched outside every region. Each region's kernels are in launch order (then GPU start, for
a graph's kernels), with the attributes of docs/backends.md ("What each region also records"). A failed region
gets no records (its attributes are not compared: the docs do not say). A collection fails with a
``MeasurementError`` when a region placed an incomplete kernel record, or when a region that did not fail made a
kernel launch call and got no kernel record.

``NSIGHTX_CUPTI_REFERENCE_EXAMPLES`` sets how many programs run (default 250; 800 while hunting, none differed).
"""

from __future__ import annotations

import math
import os
import random
import threading
import warnings
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from nsightx_cupti._attribution import METRIC, ActivityBatch, ApiActivity, attribute, incomplete
from nsightx_cupti._names import kernel_base_name
from nsightx_cupti._session import CuptiSession
from nsightx_cupti._tracer import ActivityTracer

from nsightx._errors import MeasurementError
from nsightx.ext import RegionId

EXAMPLES = int(os.environ.get("NSIGHTX_CUPTI_REFERENCE_EXAMPLES", "250"))

KERNEL, RUNTIME, DRIVER, EXTERNAL = 10, 5, 6, 40
CUSTOM2 = 4
LAUNCH_CBID, GRAPH_CBID, NOOP_CBID = 211, 311, 17
NAMES = ("_Z6kernelPf", "ampere_sgemm_128x64_nn", "_ZN2at6native29vectorized_elementwise_kernelIiEEvv", "gemv")


def _rare(n: int) -> st.SearchStrategy[bool]:
    """True about once in ``n`` draws."""
    return st.integers(0, n - 1).map(lambda x: x == 0)


@dataclass(frozen=True)
class LaunchSpec:
    """One API call of the program."""

    thread: int
    """Simulated thread that makes it (1 is the main thread)."""
    kind: str
    """``kernel`` (one kernel), ``graph`` (a graph launch: 0-3 kernels) or ``noop`` (launches nothing)."""
    kernels: int
    """Kernels it launches (graph only)."""
    quiet: bool
    """Its API was switched off: CUPTI writes no API record and so no external-correlation record."""
    lost: bool
    """Its kernel records never arrive (another CUPTI client took them)."""
    broken: bool
    """Its first kernel's record is incomplete."""
    stream: int
    name: int
    durations: tuple[int, ...]


launches = st.builds(
    LaunchSpec,
    thread=st.sampled_from((1, 1, 2, 3)),
    kind=st.sampled_from(("kernel", "kernel", "kernel", "graph", "noop")),
    kernels=st.integers(0, 3),
    quiet=_rare(8),
    lost=_rare(25),
    broken=_rare(30),
    stream=st.integers(1, 3),
    name=st.integers(0, len(NAMES) - 1),
    durations=st.lists(st.integers(1, 40), min_size=3, max_size=3).map(tuple),
)


@dataclass(frozen=True)
class RegionSpec:
    opener: int
    failed: bool
    inside: tuple[LaunchSpec, ...]
    after: tuple[LaunchSpec, ...]


regions = st.builds(
    RegionSpec,
    opener=st.sampled_from((1, 1, 1, 2)),
    failed=_rare(6),
    inside=st.lists(launches, max_size=4).map(tuple),
    after=st.lists(launches, max_size=2).map(tuple),
)


@dataclass(frozen=True)
class Program:
    api_tracing: str
    runs: tuple[tuple[tuple[LaunchSpec, ...], tuple[RegionSpec, ...]], ...]
    """Each run: the launches before its first region, then its regions."""
    collect_after: tuple[bool, ...]
    """Whether the run loop collects after each run (it always does after the last)."""


programs = st.builds(
    Program,
    api_tracing=st.sampled_from(("always", "always", "region")),
    runs=st.lists(
        st.tuples(st.lists(launches, max_size=2).map(tuple), st.lists(regions, max_size=3).map(tuple)),
        min_size=1,
        max_size=4,
    ).map(tuple),
    collect_after=st.lists(st.booleans(), min_size=4, max_size=4).map(tuple),
)


@dataclass
class Expected:
    """What the reference says each region of a collection gets."""

    kernels: dict[tuple[int, int, str], list[tuple[int, int, Any, str]]] = field(default_factory=dict)
    """(config, run, annotation) -> (launch order, GPU start, kernel record, rule) of each kernel placed in it."""
    windows: dict[tuple[int, int, str], tuple[int, int, bool, list[str]]] = field(default_factory=dict)
    """(config, run, annotation) -> host enter, exit, failed, and the kinds of its own thread's recorded calls."""
    runs: list[tuple[int, int]] = field(default_factory=list)
    outside: int = 0
    untraced: int = 0


class SimCupti:
    """The program's CUDA calls as CUPTI records them, and the session's tracer over the real buffer decoder.

    Push, pop, timestamps and API switching follow what CUPTI does; :meth:`collect` hands the records written
    since the last collection to the real :class:`ActivityTracer`'s buffer callback, shuffled and split over
    buffers by ``rng``, and returns what it decoded.
    """

    def __init__(self, api_tracing: str, rng: random.Random) -> None:
        self.api_tracing = api_tracing
        self.rng = rng
        self.clock = 1000
        self.gpu = 10**6
        self.corr = 0
        self.thread = 1
        """The simulated thread calling the tracer now."""
        self.stacks: dict[int, list[int]] = {}
        self.apis_on = api_tracing == "always"
        self.records: list[Any] = []
        cupti = SimpleNamespace(
            ActivityKind=SimpleNamespace(
                CONCURRENT_KERNEL=KERNEL, RUNTIME=RUNTIME, DRIVER=DRIVER, EXTERNAL_CORRELATION=EXTERNAL
            ),
            ExternalCorrelationKind=SimpleNamespace(CUSTOM2=CUSTOM2),
        )
        self.decoder = ActivityTracer(cupti, canary=None)

    def tick(self) -> int:
        self.clock += 1
        return self.clock

    # --- the session's Tracer protocol ---------------------------------------------------------------------
    def region_open(self) -> None:
        if self.api_tracing == "region":
            self.apis_on = True

    def region_close(self) -> None:
        if self.api_tracing == "region":
            self.apis_on = False

    def push(self, external_id: int) -> None:
        self.stacks.setdefault(self.thread, []).append(external_id)

    def pop(self) -> int:
        return self.stacks[self.thread].pop()

    def timestamp(self) -> int:
        return self.tick()

    def launches_kernels(self, api: ApiActivity) -> bool:
        return api.cbid == LAUNCH_CBID

    def collect(self) -> ActivityBatch:
        records, self.records = self.records, []
        self.rng.shuffle(records)
        cuts = sorted(self.rng.sample(range(1, len(records)), min(3, len(records) - 1))) if len(records) > 1 else []
        for lo, hi in zip([0, *cuts], [*cuts, len(records)], strict=True):
            self.decoder._buffer_completed(records[lo:hi])
        assert not self.decoder._errors, self.decoder._errors
        batch, self.decoder._pending = self.decoder._pending, ActivityBatch()
        return batch

    # --- the program's launches ----------------------------------------------------------------------------
    def launch(self, spec: LaunchSpec) -> tuple[int, bool, list[Any]]:
        """Make one API call; returns its launch order, whether CUPTI recorded it, and its kernel records."""
        self.corr += 1
        corr, start, end = self.corr, self.tick(), self.tick()
        cbid = {"kernel": LAUNCH_CBID, "graph": GRAPH_CBID, "noop": NOOP_CBID}[spec.kind]
        traced = self.apis_on and not spec.quiet
        if traced:
            self.records.append(
                SimpleNamespace(
                    kind=RUNTIME, correlation_id=corr, start=start, end=end, thread_id=spec.thread, cbid=cbid
                )
            )
            stack = self.stacks.get(spec.thread)
            if stack:
                self.records.append(
                    SimpleNamespace(kind=EXTERNAL, external_kind=CUSTOM2, correlation_id=corr, external_id=stack[-1])
                )
        n = {"kernel": 1, "graph": spec.kernels, "noop": 0}[spec.kind]
        graph = corr if spec.kind == "graph" else 0
        nodes = list(range(1, n + 1))
        self.rng.shuffle(nodes)  # a graph's node ids need not follow its kernels' start order
        kernels = []
        for i in range(n):
            self.gpu += 3
            start = self.gpu
            self.gpu += spec.durations[i]
            k = SimpleNamespace(
                kind=KERNEL,
                name=NAMES[(spec.name + i) % len(NAMES)],
                start=start,
                end=self.gpu,
                correlation_id=corr,
                stream_id=spec.stream,
                device_id=0,
                context_id=1,
                graph_id=graph,
                graph_node_id=nodes[i] if graph else 0,
            )
            if spec.broken and i == 0:
                k.end = start - 1
            kernels.append(k)
        if not spec.lost:
            self.records.extend(kernels)
        return corr, traced, ([] if spec.lost else kernels)


def _simulate(program: Program, seed: int) -> tuple[list[Any], list[Expected]]:
    """Run ``program`` through a :class:`CuptiSession`; returns each collection's outputs (or the error) and the
    reference's expectations for it."""
    sim = SimCupti(program.api_tracing, random.Random(seed))
    session = CuptiSession(
        sim,
        SimpleNamespace(synchronize=lambda: None, flush_l2=lambda: None),
        deferred=True,
        flush_at="none",
        keep_batches=True,
    )
    results: list[Any] = []
    expectations: list[Expected] = []
    exp = Expected()

    def call(spec: LaunchSpec, open_region: tuple[int, int, str, int] | None) -> None:
        order, traced, kernels = sim.launch(spec)
        if open_region is not None and traced and spec.thread == open_region[3]:
            exp.windows[open_region[:3]][3].append(spec.kind)
        for k in kernels:
            if not traced:
                exp.untraced += 1
            elif open_region is None:
                exp.outside += 1
            else:
                rule = "external" if spec.thread == open_region[3] else "window"
                exp.kernels[open_region[:3]].append((order, k.start, k, rule))

    last = len(program.runs) - 1
    for index, (before, regs) in enumerate(program.runs):
        config, run = divmod(index, 2)
        session.start_run(config, run)
        exp.runs.append((config, run))
        for spec in before:
            call(spec, None)
        for r, reg in enumerate(regs):
            name = f"r{r}"
            region = RegionId.model_construct(annotation=name, config=config, run=run)
            sim.thread = reg.opener
            session.region_enter(region)
            enter = sim.clock
            exp.windows[(config, run, name)] = (enter, 0, reg.failed, [])
            exp.kernels[(config, run, name)] = []
            for spec in reg.inside:
                call(spec, (config, run, name, reg.opener))
            sim.thread = reg.opener
            session.region_exit(region, reg.failed)
            exp.windows[(config, run, name)] = (enter, sim.clock, *exp.windows[(config, run, name)][2:])
            for spec in reg.after:
                call(spec, None)
        sim.thread = 1
        session.finish_run(config, run)
        if index == last or program.collect_after[index]:
            expectations.append(exp)
            exp = Expected()
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", RuntimeWarning)  # kernels of quiet APIs: said once
                    results.append(session.collect_runs())
            except MeasurementError as e:
                results.append(e)
                break
    assert len(session.batches) == len(results)
    for (batch, windows), ex in zip(session.batches, expectations, strict=False):
        attribution = attribute(batch, windows)
        assert (attribution.outside, len(attribution.untraced)) == (ex.outside, ex.untraced)
        placed = [k for ks in ex.kernels.values() for *_, k, _ in ks]
        bad = incomplete(attribution, batch)
        assert (bad is None) == all(k.end >= k.start > 0 for k in placed)
    return results, expectations


def _nan(value: float) -> Any:
    return "nan" if math.isnan(value) else value


def _reference(exp: Expected) -> dict[tuple[int, int], tuple[list[tuple[Any, ...]], dict[str, dict[str, Any]]]] | str:
    """The records and attributes of each run of a collection, or ``error`` when the collection must fail."""
    for key, kernels in exp.kernels.items():
        enter, exit_, failed, own_calls = exp.windows[key]
        if any(k.start <= 0 or k.end < k.start for _, _, k, _ in kernels):
            return "error"  # an incomplete record of a kernel placed in a region
        if not failed and not kernels and "kernel" in own_calls:
            return "error"  # a kernel launch call recorded, and no kernel record for it
    out: dict[tuple[int, int], tuple[list[tuple[Any, ...]], dict[str, dict[str, Any]]]] = {
        k: ([], {}) for k in exp.runs
    }
    for (config, run, name), placed in exp.kernels.items():
        enter, exit_, failed, _ = exp.windows[(config, run, name)]
        placed = sorted(placed, key=lambda p: (p[0], p[1]))
        records, attributes = out[(config, run)]
        if not failed:
            for seq, (_, _, k, _) in enumerate(placed):
                value = float(k.end - k.start)
                records.append((name, config, run, kernel_base_name(k.name), METRIC, value, "ns", seq))
            device = sum(k.end - k.start for _, _, k, _ in placed)
            attributes[name] = {
                "kernel_count": len(placed),
                "device_ns": device,
                "span_ns": max((k.end for _, _, k, _ in placed), default=0)
                - min((k.start for _, _, k, _ in placed), default=0),
                "launch_ns": exit_ - enter,
                "launch_bound": bool(placed) and exit_ - enter > device,
                "streams": len({k.stream_id for _, _, k, _ in placed}),
                "graph_kernels": sum(1 for _, _, k, _ in placed if k.graph_id),
                "other_thread_kernels": sum(1 for *_, rule in placed if rule == "window"),
            }
    return out


def _got(
    result: Any, exp: Expected
) -> dict[tuple[int, int], tuple[list[tuple[Any, ...]], dict[str, dict[str, Any]]]] | str:
    if isinstance(result, MeasurementError):
        return "error"
    failed = {(c, r, n) for (c, r, n), w in exp.windows.items() if w[2]}
    return {
        key: (
            [(*row[:5], _nan(row[5]), *row[6:]) for row in out.record_rows],
            {n: a for n, a in out.region_attributes.items() if (*key, n) not in failed},
        )
        for key, out in result.items()
    }


@settings(
    max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
@given(programs, st.integers(0, 2**32 - 1))
def test_the_session_attributes_every_kernel_as_the_reference_does(program: Program, seed: int) -> None:
    """Each collection's records and attributes per run, or its error, are the reference's."""
    results, expectations = _simulate(program, seed)
    for result, exp in zip(results, expectations, strict=False):
        assert _got(result, exp) == _reference(exp)


@settings(
    max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
@given(programs, st.integers(0, 2**32 - 1), st.integers(0, 2**32 - 1))
def test_record_order_and_buffer_splits_never_change_the_result(program: Program, seed: int, other: int) -> None:
    """The same program, its records delivered in another order over other buffers: the same outputs."""
    a, _ = _simulate(program, seed)
    b, _ = _simulate(program, other)
    assert [repr(x) if isinstance(x, Exception) else _comparable(x) for x in a] == [
        repr(x) if isinstance(x, Exception) else _comparable(x) for x in b
    ]


def _comparable(outputs: dict[Any, Any]) -> dict[Any, Any]:
    return {
        key: ([(*r[:5], _nan(r[5]), *r[6:]) for r in out.record_rows], out.region_attributes)
        for key, out in outputs.items()
    }


def test_a_region_closed_on_another_thread_does_not_take_its_opening_threads_later_kernels() -> None:
    """The session cannot pop the id on the opening thread (CUPTI's stack is per thread), so it stays there; a
    kernel that thread launches after the region closed carries it and was counted in the closed region. The
    region is attributed by launch time instead (found by this file's programs, extended)."""
    sim = SimCupti("always", random.Random(0))
    session = CuptiSession(sim, SimpleNamespace(synchronize=lambda: None), deferred=True, flush_at="none")
    one = LaunchSpec(1, "kernel", 0, False, False, False, 1, 0, (5, 5, 5))
    region = RegionId.model_construct(annotation="r", config=0, run=0)
    session.start_run(0, 0)
    session.region_enter(region)
    sim.launch(one)  # the region's own kernel
    closer = threading.Thread(target=session.region_exit, args=(region, False))
    closer.start()  # the run loop refuses such a close (AnnotationError) but still closes the region here
    closer.join(timeout=60)
    assert not closer.is_alive()
    sim.launch(one)  # launched by the opening thread after the region closed: outside every region
    later = RegionId.model_construct(annotation="later", config=0, run=0)
    session.region_enter(later)  # the opening thread's next region pops the leftover id first
    session.region_exit(later, False)
    assert sim.stacks[sim.thread] == []
    session.finish_run(0, 0)
    out = session.collect_runs()[(0, 0)]
    assert len(out.record_rows) == 1 and out.region_attributes["r"]["kernel_count"] == 1


def test_an_id_left_by_a_region_closed_on_another_thread_never_takes_a_later_calls_kernels() -> None:
    """The opening thread keeps the id of a region closed on another thread (only it can pop it). Each session
    counted its ids from 1, so the next call's first region had the leftover's id, and a kernel that thread
    launched outside every region was counted in it. Now ids are unique in the process and the opening thread pops
    the leftover at its next region: its stack is balanced and the later region gets exactly its own kernel."""
    sim = SimCupti("always", random.Random(0))
    device = SimpleNamespace(synchronize=lambda: None)
    one = LaunchSpec(1, "kernel", 0, False, False, False, 1, 0, (5, 5, 5))
    first = CuptiSession(sim, device, deferred=True, flush_at="none")  # type: ignore[arg-type]
    crossing = RegionId.model_construct(annotation="crossing", config=0, run=0)
    first.start_run(0, 0)
    first.region_enter(crossing)
    closer = threading.Thread(target=first.region_exit, args=(crossing, True))
    closer.start()
    closer.join(timeout=60)
    assert not closer.is_alive()
    first.finish_run(0, 0)
    first.collect_runs()
    second = CuptiSession(sim, device, deferred=True, flush_at="none")  # type: ignore[arg-type]  # the next call
    later = RegionId.model_construct(annotation="later", config=0, run=0)
    second.start_run(0, 0)
    second.region_enter(later)
    sim.launch(one)  # the region's own kernel
    second.region_exit(later, False)
    sim.launch(one)  # the same thread, outside every region
    second.finish_run(0, 0)
    out = second.collect_runs()[(0, 0)]
    assert out.region_attributes["later"]["kernel_count"] == 1
    assert sim.stacks[sim.thread] == []
