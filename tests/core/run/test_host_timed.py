"""The host backend's regions are timed once, by the run state, and the plain run loop tells per batch.

Issue 35 (the run loop at 3 us a run beside an empty region): the run state and the host session both read the
clock around every region, and the run loop told the heap's checkpoints and the progress counter of every run
with a call. These tests check what replaced that on the real host backend and run loop; the time it saves is
measured by ``benchmarks/run_loop_cost.py``.
"""

from __future__ import annotations

import gc
import threading

import pytest
from nsightx_host import METRIC, HostSession

import nsightx
from nsightx._results.sink import RunSink
from nsightx._run import context, heap
from nsightx._run.loop import run_loop
from nsightx._run.plan import Plan

TIMEOUT_S = 60.0
"""Generous: the threads below wait on each other, never on the clock."""


def plan(function: object, runs: int) -> Plan:
    """A plan of one config on the host backend, without collectors."""
    return Plan(
        function=function,  # type: ignore[arg-type]
        function_name="f",
        params=(),
        configs=((),),
        runs=runs,
        warmup=1,
        metrics=(METRIC,),
        backend="host",
        needs_gpu=False,
    )


def one_region() -> None:
    with nsightx.annotate("a"):
        pass


class CountingHost(HostSession):
    """The host session, counting the region calls the run loop makes (it should make none)."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def region_enter(self, region: object) -> None:  # type: ignore[override]
        self.calls += 1
        super().region_enter(region)  # type: ignore[arg-type]

    def region_exit(self, region: object, failed: bool) -> None:  # type: ignore[override]
        self.calls += 1
        super().region_exit(region, failed)  # type: ignore[arg-type]


def test_a_host_region_is_timed_once_and_its_record_is_the_region_time() -> None:
    session, sink = CountingHost(), RunSink()
    run_loop(plan(one_region, runs=20), session, sink)
    assert session.calls == 0  # host_timed: the run state hands the time over through region_timed
    runs = sink.runs
    assert len(runs) == 20
    for run in runs:
        (record,), (region,) = run.records, run.regions
        assert (record.annotation, record.config, record.run, record.metric) == ("a", 0, run.run, METRIC)
        assert record.value == float(region.host_ns)  # the same clock pair, not a second one


def test_a_session_that_is_not_host_timed_still_gets_region_enter_and_exit() -> None:
    class Untimed(CountingHost):
        host_timed = False

    session, sink = Untimed(), RunSink()
    run_loop(plan(one_region, runs=3), session, sink)
    assert session.calls == 2 * 4  # warm-up run included
    assert [r.records[0].metric for r in sink.runs] == [METRIC] * 3


def test_a_region_from_another_thread_is_refused_while_one_is_open_and_opens_once_it_closed() -> None:
    state = context.RunState(HostSession(), 0, 0)
    opened, tried = threading.Event(), threading.Event()
    errors: list[BaseException] = []

    def other() -> None:
        assert opened.wait(TIMEOUT_S)
        try:
            state.enter("b")
        except nsightx.AnnotationError as e:
            errors.append(e)
        tried.set()

    thread = threading.Thread(target=other)
    thread.start()
    region = state.enter("a")
    opened.set()
    assert tried.wait(TIMEOUT_S)
    state.exit(region, False)
    thread.join(TIMEOUT_S)
    assert len(errors) == 1 and "'a' is open" in str(errors[0])
    state.exit(state.enter("b"), False)  # the token is back: "b" was never opened, so it may open now
    with pytest.raises(nsightx.AnnotationError, match="already been used"):
        state.enter("a")
    state.exit(state.enter("c"), False)  # a refused repeated name gives the token back
    assert [name for name, _, _ in state.regions] == ["a", "b", "c"]


def test_the_plain_loop_tells_the_heap_once_per_checkpoint_and_checkpoints_after_the_same_runs(monkeypatch):
    if not gc.isenabled():
        pytest.skip("the heap freezes only with the collector enabled")
    gc.unfreeze()  # what earlier tests' results left frozen (heap.settle): the heap freezes only from nothing frozen
    sink = RunSink()
    told: list[int] = []
    at_checkpoint: list[int] = []
    kept, checkpoint = heap.kept, heap.checkpoint

    def counting_kept(runs: int) -> None:
        told.append(runs)
        kept(runs)

    def noting_checkpoint() -> None:
        at_checkpoint.append(sink.measured)
        checkpoint()

    monkeypatch.setattr(heap, "kept", counting_kept)
    monkeypatch.setattr(heap, "checkpoint", noting_checkpoint)
    runs = 2 * heap.FREEZE_EVERY + 500
    try:
        run_loop(plan(one_region, runs=runs), HostSession(), sink)
    finally:
        gc.unfreeze()
    assert sink.measured == runs and sum(told) == runs
    assert at_checkpoint == [heap.FREEZE_EVERY, 2 * heap.FREEZE_EVERY]
    assert len(told) <= 4  # run 0 on its own, then one call per checkpoint and one for the rest
    assert heap.until_checkpoint() == 1 << 62  # outside a call: no count reaches it
