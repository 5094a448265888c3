"""The runs a long profiled call keeps are frozen out of the garbage collector's rescans, and only during the call.

Issue 35: the collector walked every kept run again at each full collection (17% of a 10,000-run call, 33% of a
300,000-run one). These tests check what the freezing does to the process, on the real host backend; the time it
saves is measured by ``benchmarks/run_loop_cost.py``.
"""

from __future__ import annotations

import gc
import itertools
import weakref
from typing import Any

import pytest

import nsightx

SILENT = nsightx.VerbosityLevel.SILENT
FREEZE_EVERY = 1000
"""``nsightx._run.heap.FREEZE_EVERY`` (checked by the first test; imported there, so this file loads anywhere)."""
RUNS = FREEZE_EVERY + 200


class Node:
    """A reference cycle the profiled function drops at the end of each run."""

    def __init__(self) -> None:
        self.me = self


NOTED = frozenset({0, 1, FREEZE_EVERY - 1, FREEZE_EVERY, FREEZE_EVERY + 1, RUNS - 1})
"""The runs after which the tests that freeze the whole test process first note the freeze count: the first ones,
those around the checkpoint, and the last. ``gc.get_freeze_count()`` walks every frozen object, there the whole
heap of the test process, so noting it after each of :data:`RUNS` runs took about a minute a test."""


def profiled(seen: list[int], noted: frozenset[int] | None = None):
    """A profiled function of :data:`RUNS` runs that notes how many objects are frozen at the end of each run
    (of each run in ``noted``, when given)."""
    done = itertools.count()

    @nsightx.analyze.kernel(runs=RUNS, warmup=0, backend="host", verbosity=SILENT, thermal_mode="off")
    def f() -> None:
        with nsightx.annotate("a"):
            pass
        if noted is None or next(done) in noted:
            seen.append(gc.get_freeze_count())

    return f


@pytest.fixture
def collector_as_found():
    """The collector enabled and nothing frozen, as in a fresh process; restored after the test."""
    was_enabled = gc.isenabled()
    gc.unfreeze()
    gc.enable()
    yield
    gc.unfreeze()
    if was_enabled:  # as found, also after a test that disabled it
        gc.enable()
    else:
        gc.disable()


def test_a_long_call_freezes_what_it_keeps_and_unfreezes_everything_at_the_end(collector_as_found):
    seen: list[int] = []
    result = profiled(seen)()
    assert len(result.data.runs) == RUNS
    assert seen[:FREEZE_EVERY] == [0] * FREEZE_EVERY  # nothing before the first checkpoint
    assert min(seen[FREEZE_EVERY:]) > 0  # the runs written so far (and the rest of the heap) are frozen
    assert gc.get_freeze_count() == 0 and gc.isenabled()
    from nsightx._run import heap

    assert heap.FREEZE_EVERY == FREEZE_EVERY


def _loop_plan(function: Any) -> Any:
    """A plan of RUNS runs of ``function`` on the host backend, for run_loop driven without a profiled call."""
    from nsightx._run.plan import Plan

    return Plan(
        function=function,
        function_name="f",
        params=(),
        configs=((),),
        runs=RUNS,
        warmup=0,
        metrics=("host__time_duration.sum",),
        backend="host",
        needs_gpu=False,
    )


def test_the_run_loop_alone_freezes_too_and_a_profiled_call_around_it_unfreezes_once(collector_as_found):
    # the ncu worker's child drives run_loop without a profiled call around it
    from nsightx_host import HostSession

    from nsightx._results.sink import RunSink
    from nsightx._run.loop import run_loop

    seen: list[int] = []
    runs = itertools.count()
    plan = _loop_plan(lambda: seen.append(gc.get_freeze_count()) if next(runs) % RUNS in NOTED else None)
    run_loop(plan, HostSession(), RunSink())
    assert seen[0] == 0 and seen[-1] > 0 and gc.get_freeze_count() == 0
    from nsightx._run import heap

    with heap.holding():  # as ProfiledFunction holds it around the loop and the result
        seen.clear()
        run_loop(plan, HostSession(), RunSink())
        assert seen[-1] > 0 and gc.get_freeze_count() > 0  # the loop's own holding joined this one
    assert gc.get_freeze_count() == 0


def test_cycles_the_function_drops_are_still_freed_during_the_call(collector_as_found):
    cycles: list[weakref.ref[Node]] = []
    alive_later: list[int] = []

    @nsightx.analyze.kernel(runs=RUNS, warmup=0, backend="host", verbosity=SILENT, thermal_mode="off")
    def f() -> None:
        with nsightx.annotate("a"):
            cycles.append(weakref.ref(Node()))
        if len(cycles) == RUNS:  # the last run: what is left of the cycles dropped before the first checkpoint
            alive_later.append(sum(ref() is not None for ref in cycles[:FREEZE_EVERY]))

    f()
    # a young collection may promote a cycle still in use to the oldest generation, where one dropped before a
    # checkpoint waits for the call's end: a few may, not the cycles of every run
    assert alive_later[0] <= FREEZE_EVERY // 100
    gc.collect()
    assert all(ref() is None for ref in cycles)  # unfrozen at the end: a full collection frees every one


def test_a_process_that_froze_objects_itself_is_left_as_it_was(collector_as_found):
    gc.freeze()
    frozen = gc.get_freeze_count()
    seen: list[int] = []
    profiled(seen, NOTED)()
    assert len(seen) == len(NOTED)
    # neither frozen further nor unfrozen (gc.unfreeze() empties the permanent generation); a frozen object that is
    # freed meanwhile (an earlier call's cached plan description, say) leaves it, so the count may only drop a little
    after = gc.get_freeze_count()
    assert all(frozen - 1000 < n <= frozen for n in seen), (seen, frozen)
    assert frozen - 1000 < after <= frozen, (after, frozen)


def test_with_the_collector_disabled_nothing_is_frozen_and_it_stays_disabled(collector_as_found):
    gc.disable()
    seen: list[int] = []
    profiled(seen)()
    assert set(seen) == {0} and not gc.isenabled() and gc.get_freeze_count() == 0


def test_the_run_objects_made_when_the_call_reads_its_runs_are_frozen_before_the_collector_resumes(
    collector_as_found,
):
    """The loop hands the sink rows; the objects are made in one burst after it, and no collection walks them."""
    from nsightx._results.records import RunRecords

    young: list[int] = []

    def derive(t: float) -> tuple[float, str]:
        young.append(sum(1 for o in gc.get_objects() if type(o) is RunRecords) if len(young) < 2 else 0)
        return t, "ns"  # called once by the first-run check, then once per run while the result is built

    @nsightx.analyze.kernel(
        runs=RUNS, warmup=0, backend="host", verbosity=SILENT, thermal_mode="off", derive_metric=derive
    )
    def f() -> None:
        with nsightx.annotate("a"):
            pass

    assert len(f().data.runs) == RUNS
    assert young[1] == 0  # every run's object is frozen (base: the runs after the last checkpoint were not)
    assert gc.get_freeze_count() == 0 and gc.isenabled()


# A process that froze objects before the call (the GPU machine's Python starts with 375 frozen): the pause mode.


@pytest.fixture
def frozen_first(collector_as_found):
    """Objects frozen before the call, as the GPU machine's Python has them; how many (unfrozen after the test)."""
    gc.freeze()
    return gc.get_freeze_count()


def noting_collections(passes: list[tuple[int, int]], done: list[int]):
    """A ``gc.callbacks`` entry noting (generation, runs done) as each collection starts."""

    def note(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            passes.append((info["generation"], len(done)))

    return note


def test_where_objects_were_frozen_first_a_long_call_pauses_the_collector_and_collects_only_at_checkpoints(
    frozen_first,
):
    done: list[int] = []
    enabled: list[bool] = []
    frozen: list[int] = []
    passes: list[tuple[int, int]] = []

    @nsightx.analyze.kernel(runs=RUNS, warmup=0, backend="host", verbosity=SILENT, thermal_mode="off")
    def f() -> None:
        with nsightx.annotate("a"):
            pass
        enabled.append(gc.isenabled())
        if len(done) in NOTED:  # not after every run: see NOTED
            frozen.append(gc.get_freeze_count())
        done.append(1)

    note = noting_collections(passes, done)
    gc.callbacks.append(note)
    try:
        result = f()
    finally:
        gc.callbacks.remove(note)
    assert len(result.data.runs) == RUNS
    assert not any(enabled)  # the collector is disabled through the runs
    # one young collection at the checkpoint, between runs, and one as the call ends; no automatic one
    assert passes == [(1, FREEZE_EVERY), (1, RUNS)]
    assert gc.isenabled()
    # nothing frozen or unfrozen (a frozen object freed meanwhile leaves the count: it may only drop a little)
    assert all(frozen_first - 1000 < n <= frozen_first for n in frozen), (frozen, frozen_first)
    assert frozen_first - 1000 < gc.get_freeze_count() <= frozen_first


def test_where_objects_were_frozen_first_a_dropped_cycle_is_freed_by_the_next_checkpoint(frozen_first):
    cycles: list[weakref.ref[Node]] = []
    alive: list[int] = []

    @nsightx.analyze.kernel(runs=RUNS, warmup=0, backend="host", verbosity=SILENT, thermal_mode="off")
    def f() -> None:
        if len(cycles) == FREEZE_EVERY:  # the first run after the checkpoint: what is left of the cycles before it
            alive.append(sum(ref() is not None for ref in cycles))
        with nsightx.annotate("a"):
            cycles.append(weakref.ref(Node()))
        if len(cycles) == FREEZE_EVERY - 1:  # before the checkpoint: the collector is off, none was freed
            alive.append(sum(ref() is not None for ref in cycles))

    f()
    assert alive == [FREEZE_EVERY - 1, 0]
    gc.collect()
    assert all(ref() is None for ref in cycles)


def test_where_objects_were_frozen_first_a_call_that_raises_enables_the_collector_again(frozen_first):
    done: list[int] = []
    enabled: list[bool] = []

    @nsightx.analyze.kernel(runs=RUNS, warmup=0, backend="host", verbosity=SILENT, thermal_mode="off")
    def f() -> None:
        with nsightx.annotate("a"):
            pass
        enabled.append(gc.isenabled())
        done.append(1)
        if len(done) == FREEZE_EVERY + 50:
            raise RuntimeError("stop here")

    with pytest.raises(RuntimeError, match="stop here"):
        f()
    assert len(done) == FREEZE_EVERY + 50 and not any(enabled)
    assert gc.isenabled()
    assert frozen_first - 1000 < gc.get_freeze_count() <= frozen_first


def test_where_objects_were_frozen_first_a_short_call_pauses_the_collector_and_only_enables_it_at_the_end(
    frozen_first,
):
    done: list[int] = []
    enabled: list[bool] = []
    passes: list[tuple[int, int]] = []

    @nsightx.analyze.kernel(runs=50, warmup=0, backend="host", verbosity=SILENT, thermal_mode="off")
    def f() -> None:
        with nsightx.annotate("a"):
            pass
        enabled.append(gc.isenabled())
        done.append(1)

    note = noting_collections(passes, done)
    gc.callbacks.append(note)
    try:
        f()
    finally:
        gc.callbacks.remove(note)
    assert len(done) == 50 and not any(enabled)
    assert passes == []  # no checkpoint, and no collection of its own at the end
    assert gc.isenabled()


def test_where_objects_were_frozen_first_the_run_loop_alone_pauses_too_and_joins_a_holding_around_it(frozen_first):
    from nsightx_host import HostSession

    from nsightx._results.sink import RunSink
    from nsightx._run import heap
    from nsightx._run.loop import run_loop

    enabled: list[bool] = []
    plan = _loop_plan(lambda: enabled.append(gc.isenabled()))
    run_loop(plan, HostSession(), RunSink())
    assert len(enabled) == RUNS and not any(enabled) and gc.isenabled()
    with heap.holding():
        enabled.clear()
        run_loop(plan, HostSession(), RunSink())
        assert not any(enabled) and not gc.isenabled()  # the loop's own holding joined this one
    assert gc.isenabled()
