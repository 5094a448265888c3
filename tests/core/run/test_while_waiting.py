"""Work a call does not need the measurements for runs while a deferred session's GPU works (issue 35).

After a deferred session's last run was launched, the run loop does the caller's ``while_waiting`` work before it
waits for the runs' outputs; a decorated call asks its environment's facts (host, versions, CPU, git commit) there.
These tests drive the real run loop, sink and host session (made deferred, as the GPU sessions are) and a decorated
call on a deferred backend: the work runs once, after every run was launched and before the first collection; a
session that is not deferred never runs it; the result's environment is what it was (same keys, same order); an
error while asking is raised by the call as before.
"""

from __future__ import annotations

import gc
import platform
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, ClassVar

import pandas as pd
import pytest
from _sessions import DeferredHost
from nsightx_host import HostSession
from test_runloop_deferred import plan
from test_runloop_deferred import work as _work

import nsightx
from nsightx._results.sink import RunSink
from nsightx._run import provenance
from nsightx._run.loop import run_loop
from nsightx._run.plan import Plan
from nsightx.ext import Availability, Backend, Capabilities, Session


def _plan(**kw: Any) -> Plan:
    """test_runloop_deferred's plan of 3 configs x 5 runs (warm-up 1) of one empty region."""
    return plan(_work, **kw)


class _Stopped:
    """A collector with a start/stop pair that notes what the session had done when it was stopped."""

    name = "stopped"
    scope = "run"

    def __init__(self, session: DeferredHost) -> None:
        self.session = session
        self.seen: list[tuple[int, int]] = []

    def start(self, ctx: Any) -> bool:
        return True

    def collect(self, ctx: Any) -> int:
        return 1

    def stop(self) -> None:
        self.seen.append((self.session.collects, len(self.session.done)))


def test_the_work_runs_once_after_the_last_launch_and_before_the_wait() -> None:
    session, sink = DeferredHost(), RunSink()
    collector = _Stopped(session)
    seen: list[tuple[int, int, int]] = []

    def work() -> None:  # how many collections, runs launched and runs written so far
        seen.append((session.collects, len(session.done), len(sink.runs)))

    run_loop(_plan(collectors=(collector,)), session, sink, while_waiting=(work, work))
    assert seen == [(0, 18, 0), (0, 18, 0)]  # each given once, in order: 3 x (1 + 5) runs launched, none read
    assert collector.seen == [(1, 0)]  # stopped once, after the wait (its runs read), as documented
    assert session.collects == 1 and len(sink.runs) == 15
    assert all(len(run.collectors) == 1 for run in sink.runs)  # the values asked before each run are all there


def test_in_several_batches_the_work_runs_in_the_last_one(monkeypatch: pytest.MonkeyPatch) -> None:
    from nsightx._run import backend as _backend

    monkeypatch.setattr(_backend, "COLLECT_SECONDS", 0.0)  # collected at each config's end
    session, sink = DeferredHost(), RunSink()
    seen: list[tuple[int, int]] = []
    run_loop(_plan(), session, sink, while_waiting=(lambda: seen.append((session.collects, len(sink.runs))),))
    assert seen == [(2, 10)] and session.collects == 3 and len(sink.runs) == 15


@pytest.mark.parametrize("session", [HostSession, DeferredHost], ids=["not-deferred", "collected-each-run"])
def test_a_session_that_never_waits_so_does_not_run_the_work(session: type[HostSession]) -> None:
    from nsightx._run.adaptive import build_rule

    rule = build_rule("auto", min_runs=3, max_runs=4, target_ci_pct=1e-9, time_budget_s=None)
    extra = {} if session is HostSession else {"stop_rule": rule}
    seen: list[int] = []
    sink = RunSink()
    run_loop(_plan(**extra), session(), sink, while_waiting=(lambda: seen.append(1),))
    assert seen == [] and len(sink.runs) >= 12


class _Deferred(DeferredHost):
    """The deferred host session as a backend's; notes the collections made by any instance."""

    collected: ClassVar[list[int]] = []

    def collect_runs(self) -> Any:
        _Deferred.collected.append(1)
        return super().collect_runs()


class _Backend(Backend):
    name = "sim_waiting"
    capabilities = Capabilities(
        metrics=frozenset({"host__time_duration.sum"}), default_metrics=("host__time_duration.sum",), needs_gpu=False
    )

    @classmethod
    def availability(cls) -> Availability:
        return Availability(available=True)

    @contextmanager
    def session(self, plan: Any) -> Iterator[Session]:
        yield _Deferred()


class _Plugin:
    @nsightx.hookimpl
    def nsightx_register_backends(self, register: Any) -> None:
        register(_Backend)


@pytest.fixture
def deferred_backend(plugin_host: Any) -> Iterator[None]:
    nsightx.register_plugin(_Plugin(), name="sim_waiting")
    try:
        yield
    finally:
        nsightx.unregister_plugin("sim_waiting")


def _call() -> Any:
    @nsightx.analyze.kernel(
        configs=[(1,), (2,)], runs=3, backend="sim_waiting", verbosity=nsightx.VerbosityLevel.SILENT
    )
    def sweep(n: int) -> None:
        _work(n)

    return sweep()


def test_a_deferred_call_asks_its_facts_during_the_wait_and_its_environment_is_unchanged(
    deferred_backend: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked: list[int] = []
    real = provenance.host_facts

    def noted() -> Any:
        asked.append(len(_Deferred.collected))
        return real()

    monkeypatch.setattr("nsightx._api.callfacts.host_facts", noted)
    _Deferred.collected.clear()
    result = _call()
    assert asked == [0] and _Deferred.collected == [1]  # asked once, before the session's one collection
    expected: dict[str, Any] = dict(HostSession().environment())  # what the call added after its run stage before
    expected.setdefault("Host", socket.gethostname())
    expected.setdefault("python", platform.python_version())
    expected.setdefault("nsightx", nsightx.__version__)
    provenance.add_provenance(expected)
    assert list(result.data.environment.items()) == list(expected.items())


def test_an_error_while_asking_is_raised_by_the_call_after_its_run_stage(
    deferred_backend: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken() -> Any:
        raise RuntimeError("no facts")

    monkeypatch.setattr("nsightx._api.callfacts.host_facts", broken)
    _Deferred.collected.clear()
    with pytest.raises(RuntimeError, match="no facts"):
        _call()
    assert _Deferred.collected == [1]  # the run stage went on and collected its runs: raised after, as before


class _Frozen(DeferredHost):
    """The deferred host session, noting how many objects the collector holds frozen when it is collected."""

    seen: ClassVar[list[int]] = []

    def collect_runs(self) -> Any:
        _Frozen.seen.append(gc.get_freeze_count())
        return super().collect_runs()


@pytest.mark.parametrize("enabled", [True, False], ids=["collector-on", "collector-off"])
def test_a_deferred_call_collects_and_freezes_before_the_wait_and_unfreezes_at_its_end(
    deferred_backend: None, monkeypatch: pytest.MonkeyPatch, enabled: bool
) -> None:
    """The call's young objects are collected and frozen while the GPU works (not after the wait); the call ends
    with nothing frozen. A collector the user disabled is left alone."""
    assert gc.get_freeze_count() == 0
    monkeypatch.setattr(_Backend, "session", contextmanager(lambda self, plan: iter([_Frozen()])))
    _Frozen.seen.clear()
    was = gc.isenabled()
    if not enabled:
        gc.disable()
    try:
        _call()
    finally:
        if was:
            gc.enable()
    assert len(_Frozen.seen) == 1
    assert (_Frozen.seen[0] > 0) is enabled
    assert gc.get_freeze_count() == 0


def test_where_objects_were_frozen_before_the_call_the_young_generations_are_still_collected_before_the_wait(
    deferred_backend: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A process that froze objects before the call (the GPU machine's Python does at start-up): the call does not
    freeze (it could not unfreeze only its own), and still collects its young objects before the wait."""
    passes: list[tuple[int, int]] = []  # (generation, collections made by the session so far)
    monkeypatch.setattr(_Backend, "session", contextmanager(lambda self, plan: iter([_Frozen()])))

    def note(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            passes.append((info["generation"], len(_Frozen.seen)))

    _Frozen.seen.clear()
    gc.freeze()  # the process's own frozen objects
    before = gc.get_freeze_count()
    thresholds = gc.get_threshold()
    gc.set_threshold(10**9)  # no automatic collection: a young one seen here is the call's
    gc.callbacks.append(note)
    try:
        _call()
    finally:
        gc.callbacks.remove(note)
        gc.set_threshold(*thresholds)
        gc.unfreeze()
    assert len(_Frozen.seen) == 1
    assert 0 < _Frozen.seen[0] <= before  # nothing more frozen during the wait, nothing unfrozen (some freed)
    assert (1, 0) in passes  # a collection of the young generations before the session's one collection


class _Prepared(DeferredHost):
    """The deferred host session, noting how many dtype probes of the frame were cached when it is collected."""

    seen: ClassVar[list[int]] = []

    def collect_runs(self) -> Any:
        from nsightx._results.dataframe import _scalar_dtype

        _Prepared.seen.append(_scalar_dtype.cache_info().currsize)
        return super().collect_runs()


def test_a_deferred_call_sets_up_the_frame_during_the_wait(
    deferred_backend: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What a process's first to_dataframe() did before reading its result is done while the GPU works."""
    from nsightx._results.dataframe import _SAMPLES, _scalar_dtype

    monkeypatch.setattr(_Backend, "session", contextmanager(lambda self, plan: iter([_Prepared()])))
    _scalar_dtype.cache_clear()
    _Prepared.seen.clear()
    result = _call()
    assert _Prepared.seen == [len(_SAMPLES)]  # every probe asked before the session's one collection
    assert len(result.to_dataframe()) == 2


class _Noting(_Deferred):
    """The deferred host session; notes at its collection whether the sink's pieces were computed already."""

    computed: ClassVar[list[int]] = []
    made: ClassVar[list[Any]] = []

    def collect_runs(self) -> Any:
        _Noting.computed.append(len(_Noting.made))
        return super().collect_runs()


def test_a_deferred_call_computes_the_pieces_during_its_wait(
    deferred_backend: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sink's frame pieces are computed once, before the session's one collection, and the frame takes them."""
    from nsightx._results import frameahead
    from nsightx._results.profileresults import ProfileResults

    monkeypatch.setattr(_Backend, "session", contextmanager(lambda self, plan: iter([_Noting()])))
    of = frameahead.FrameAhead.of

    def noted(cls: Any, sources: Any, parts: Any) -> Any:
        made = of(sources, parts)
        _Noting.made.append(made)
        return made

    monkeypatch.setattr(frameahead.FrameAhead, "of", classmethod(noted))
    _Noting.computed.clear()
    _Noting.made.clear()
    power = nsightx.InfoCollector("GPUPowerW", lambda ctx: 100.0 + 10 * ctx.config + ctx.run / 3, "run")

    @nsightx.analyze.kernel(
        configs=[(1,), (2,), (3,)],
        runs=5,
        backend="sim_waiting",
        info_collectors=[power],
        verbosity=nsightx.VerbosityLevel.SILENT,
    )
    def sweep(n: int) -> None:
        _work(n)

    result = sweep()
    assert _Noting.computed == [1] and _Noting.made[0] is not None  # computed once, before the one collection
    ahead = result._frame_ahead
    assert ahead is not None and ahead.take(result._table()) is not None  # bound to the result, fit for its table
    result._frame_ahead = _Noting.made[0] = None
    assert sweep._ahead.cost_ns > 0  # what the pieces cost was measured (the simulated GPU's wait hides nothing)
    sweep._ahead.enabled = True  # as if the wait had hidden them (see test_pieces_are_computed_while_waits_hide_them)
    again = sweep()  # the same call again: its frame with the pieces against one without them
    assert again._frame_ahead is not None
    got = again.to_dataframe()
    want = ProfileResults.from_columns(again._shell, again.columns, again._configs).to_dataframe()
    assert list(got.columns) == list(want.columns) and "GPUPowerW_Avg" in got.columns
    for name in want.columns:
        pd.testing.assert_series_equal(got[name], want[name], check_exact=True)


def test_pieces_are_computed_while_waits_hide_them(deferred_backend: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """A call whose wait did not hide the pieces' work (this simulated GPU has none) makes the next call skip it;
    the skipped call's frame is the same, and a long enough wait turns the work on again."""
    from nsightx._api.aheadpolicy import KEEP_FACTOR, RESUME_FACTOR, AheadPolicy
    from nsightx._results.profileresults import ProfileResults

    monkeypatch.setattr(_Backend, "session", contextmanager(lambda self, plan: iter([_Noting()])))
    power = nsightx.InfoCollector("GPUPowerW", lambda ctx: 100.0 + ctx.run, "run")

    @nsightx.analyze.kernel(
        configs=[(1,), (2,)],
        runs=3,
        backend="sim_waiting",
        info_collectors=[power],
        verbosity=nsightx.VerbosityLevel.SILENT,
    )
    def sweep(n: int) -> None:
        _work(n)

    first = sweep()
    assert first._frame_ahead is not None and sweep._ahead.cost_ns > 0
    blocked = sweep._ahead  # the loop blocked for a few microseconds on outputs ready at once
    if blocked.enabled:  # only if the machine stalled the loop for twice the pieces' cost: nothing to check
        return
    skipped = sweep()
    assert skipped._frame_ahead is None
    want = ProfileResults.from_columns(skipped._shell, skipped.columns, skipped._configs).to_dataframe()
    pd.testing.assert_frame_equal(skipped.to_dataframe(), want, check_exact=True)
    policy = AheadPolicy()
    policy.update(1000, KEEP_FACTOR * 1000 - 1)
    assert not policy.enabled
    policy.update(None, RESUME_FACTOR * 1000 - 1)
    assert not policy.enabled
    policy.update(None, RESUME_FACTOR * 1000)
    assert policy.enabled
    policy.update(1000, KEEP_FACTOR * 1000)
    assert policy.enabled
    policy.update(5000, None)  # a call without a wait teaches nothing
    assert policy.enabled and policy.cost_ns == 1000
