"""Measured runs a deferred session never hands back are told once per call, and the result's environment says so.

Such a run is written with what ``finish_run`` gave, for a deferred session nothing: its regions have no row in
the frames and ``NumRuns`` counts it out. Before, nothing said so. Now one ``IncompleteResultWarning`` per call
names the backend, how many runs and of which configs, and ``environment["UnreturnedRuns"]`` holds the count.
A session that hands back every run (every built-in one) adds neither.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from typing import Any

import pytest
from _sessions import DeferredHost, session_backend

import nsightx
from nsightx._results.sink import RunSink
from nsightx._run.loop import run_loop
from nsightx._run.plan import Plan
from nsightx.ext import RegionId, RunOutput, Session, new_record

METRIC = "drop__value"

DROP: set[tuple[int, int]] = set()
"""The (config, run) keys the session leaves out of its collections (set by each test)."""

FINISHED_WITH_VALUE: set[tuple[int, int]] = set()
"""The keys whose ``finish_run`` already hands back the run's record (a session may)."""


class DroppingSession(Session):
    """Deferred; one record a region, its value the run index; leaves :data:`DROP` out of every collection."""

    deferred = True
    incremental = False

    def __init__(self) -> None:
        self.closed: list[RegionId] = []
        self.finished: list[tuple[int, int]] = []

    def region_enter(self, region: RegionId) -> None:
        pass

    def region_exit(self, region: RegionId, failed: bool) -> None:
        self.closed.append(region)

    def finish_run(self, config: int, run: int) -> RunOutput:
        self.finished.append((config, run))
        if (config, run) in FINISHED_WITH_VALUE:
            return RunOutput([new_record("a", config, run, "k", METRIC, float(run), "ns", 0)])
        return RunOutput()

    def _read(self) -> Iterator[tuple[tuple[int, int], RunOutput]]:
        finished, self.finished = self.finished, []
        closed, self.closed = self.closed, []
        outputs = {key: RunOutput() for key in finished}
        for region in closed:
            key = (region.config, region.run)
            outputs[key].records.append(new_record(region.annotation, *key, "k", METRIC, float(key[1]), "ns", 0))
        yield from ((key, out) for key, out in outputs.items() if key not in DROP)

    def collect_runs(self) -> dict[tuple[int, int], RunOutput]:
        return dict(self._read())


class IncrementalDroppingSession(DroppingSession):
    def completed_runs(self) -> Iterator[tuple[tuple[int, int], RunOutput]]:
        return self._read()


class Plugin:
    @nsightx.hookimpl
    def nsightx_register_backends(self, register: Any) -> None:
        register(session_backend("drop_mapping", METRIC, DroppingSession))
        register(session_backend("drop_incremental", METRIC, IncrementalDroppingSession))


@pytest.fixture
def dropping(plugin_host: Any) -> Iterator[None]:
    nsightx.register_plugin(Plugin(), name="dropping")
    try:
        yield
    finally:
        nsightx.unregister_plugin("dropping")
        DROP.clear()
        FINISHED_WITH_VALUE.clear()


def _call(backend: str, runs: Any = 4, **options: Any) -> tuple[Any, list[warnings.WarningMessage]]:
    @nsightx.analyze.kernel(
        configs=[(n,) for n in range(3)],
        runs=runs,
        warmup=1,
        backend=backend,
        verbosity=nsightx.VerbosityLevel.SILENT,
        **options,
    )
    def f(n: int) -> None:
        with nsightx.annotate("a"):
            pass

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = f()
    return result, [w for w in caught if issubclass(w.category, nsightx.IncompleteResultWarning)]


@pytest.mark.parametrize("backend", ["drop_mapping", "drop_incremental"])
def test_runs_never_handed_back_are_told_once_and_counted_in_the_environment(dropping: None, backend: str) -> None:
    DROP.update({(0, 1), (2, 3), (2, 0), (1, -1)})  # a warm-up left out is no measured run: not counted
    result, told = _call(backend)
    assert len(told) == 1
    message = str(told[0].message)
    assert f"backend {backend!r} never handed back 3 of 12 measured run(s) (config 0: 1, config 2: 2)" in message
    assert told[0].filename == __file__  # the user's line, not the run loop's
    assert result.environment["UnreturnedRuns"] == 3
    assert sorted(result.to_dataframe()["NumRuns"]) == [2, 3, 4]  # what the warning explains


def test_a_run_whose_finish_run_held_its_value_is_not_unreturned(dropping: None) -> None:
    DROP.update({(1, 2), (1, 3)})
    FINISHED_WITH_VALUE.add((1, 2))  # left out of the collection, but finish_run gave its record
    result, told = _call("drop_incremental")
    assert len(told) == 1 and "never handed back 1 of 12 measured run(s) (config 1: 1)" in str(told[0].message)
    assert result.environment["UnreturnedRuns"] == 1


def test_runs_auto_collects_each_run_and_tells_the_same(dropping: None) -> None:
    """``runs="auto"``: the session is collected after every run (another path of the loop)."""
    DROP.add((1, 0))
    result, told = _call("drop_mapping", runs="auto", min_runs=3, max_runs=3)
    assert len(told) == 1 and "(config 1: 1)" in str(told[0].message)
    assert result.environment["UnreturnedRuns"] == 1


@pytest.mark.parametrize("backend", ["drop_mapping", "drop_incremental", "host"])
def test_a_session_that_hands_back_every_run_adds_nothing(dropping: None, backend: str) -> None:
    DROP.add((0, -1))  # only a warm-up left out
    result, told = _call(backend)
    assert told == [] and "UnreturnedRuns" not in result.environment


def test_the_deferred_host_session_hands_back_every_run() -> None:
    """The built-in backends' deferred shape (the events and cupti sessions' CPU stand-in) counts none."""

    def work() -> None:
        with nsightx.annotate("a"):
            pass

    plan = Plan(
        function=work, function_name="work", params=(), configs=((), ()), runs=70, warmup=1, metrics=("t",),
        backend="t", needs_gpu=False,
    )  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("error", nsightx.IncompleteResultWarning)
        assert run_loop(plan, DeferredHost(), RunSink()) == 0
