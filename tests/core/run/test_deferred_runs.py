"""A deferred session's fixed-count runs (a GPU backend's): a loop of their own, collector answers kept until written.

Issue 35 (the 16 KiB op at most 1.10x the bare loop): on the events and cupti backends the nvml plugin cost
~3.5 us a run on a CPU, in the run loop's general path (every run through ``_Runner.run``, its RUN values made
into rows between two runs, a collector context made per run). A deferred session's runs after the first of a
config now go through ``_Sweep._deferred_runs``, their answers made into rows when the runs are written, and RUN
collectors that read no per-run field of their context (``reads_run_fields = False``, the nvml one) get one
context per config. These tests check on the real host backend and run loop, its session made deferred, that the
runs read back as the row path of an ordinary session stores them, that a run that raises loses no earlier run,
and what each collector's context is.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pytest
from _sessions import Cool, DeferredHost
from nsightx_host import METRIC, HostSession

import nsightx
from nsightx._results.sink import RunSink
from nsightx._run import loop
from nsightx._run.backend import COLLECT_EVERY
from nsightx._run.loop import run_loop
from nsightx._run.plan import Plan
from nsightx._run.thermal import ThermalSettings
from nsightx.ext import RunValues


class Sampled:
    """A RUN collector like the nvml one: a shared mapping that changes every 4 runs, and an age."""

    name = "sampled"
    scope = nsightx.CollectionScope.RUN

    def __init__(self) -> None:
        self.shared: dict[str, Any] = {}
        self.seen = 0

    def collect(self, ctx: Any) -> Mapping[str, Any]:
        if self.seen % 4 == 0:  # a new sample
            self.shared = {"Clock": 1900 + self.seen, "Power": np.float32(0.5), 7: "seven"}
        self.seen += 1
        return RunValues(self.shared, "AgeMs", self.seen / 1000)


class Contexts:
    """A RUN collector that keeps every context it was handed; ``reads_run_fields`` as given."""

    scope = nsightx.CollectionScope.RUN

    def __init__(self, name: str, reads_run_fields: bool | None) -> None:
        self.name = name
        if reads_run_fields is not None:
            self.reads_run_fields = reads_run_fields
        self.contexts: list[Any] = []

    def collect(self, ctx: Any) -> int:
        self.contexts.append(ctx)
        return len(self.contexts)


def flaky(ctx: Any) -> float:
    if ctx.run == 3:
        raise RuntimeError("no reading")
    return float(ctx.run)


def plan(function: Any, runs: int = 12, configs: int = 2, collectors: tuple[Any, ...] | None = None) -> Plan:
    """A guarded plan on the host backend with RUN collectors (one returns :class:`RunValues`, one raises once)."""
    return Plan(
        function=function,
        function_name="f",
        params=("i",),
        configs=tuple((i,) for i in range(configs)),
        runs=runs,
        warmup=1,
        metrics=(METRIC,),
        backend="host",
        needs_gpu=True,  # the host session measures no GPU, but the guard is built for such a plan
        thermal=ThermalSettings(source=Cool()),
        collectors=collectors if collectors is not None else (Sampled(), nsightx.InfoCollector("flaky", flaky, "run")),
    )


def work(i: int) -> None:
    with nsightx.annotate("a"):
        pass


class RowSink(RunSink):
    """A sink that opens no block: every run of an ordinary session reaches it as a row."""

    def open_block(self, config: int, first: int, record: Any) -> None:
        return None


def test_deferred_fixed_runs_read_back_as_an_ordinary_sessions_runs() -> None:
    deferred, rows, session = RunSink(), RowSink(), DeferredHost()
    runs = COLLECT_EVERY + 10  # written in two batches
    with pytest.warns(RuntimeWarning, match="flaky"):
        run_loop(plan(work, runs=runs), session, deferred)
    with pytest.warns(RuntimeWarning, match="flaky"):
        run_loop(plan(work, runs=runs), HostSession(), rows)
    assert session.collects == 3  # every 64 pending runs, and the end of the call
    a, b = deferred.runs, rows.runs
    assert [(r.config, r.run, r.collectors) for r in a] == [(r.config, r.run, r.collectors) for r in b]
    assert [[(x.annotation, x.metric) for x in r.records] for r in a] == [
        [(x.annotation, x.metric) for x in r.records] for r in b
    ]
    names = [v.name for v in a[5].collectors]
    assert names == ["ThermalPauseS", "Clock", "Power", "7", "AgeMs", "flaky"] and len(a) == 2 * runs
    assert a[3].collectors[-1].value is None and type(a[5].collectors[2].value) is float  # as before


def test_a_deferred_sessions_runs_after_the_first_of_a_config_skip_the_general_loop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    measured: list[tuple[int, int]] = []
    general = loop._Runner.run

    def counted(self: Any, ci: int, r: int) -> Any:
        if r >= 0:
            measured.append((ci, r))
        return general(self, ci, r)

    monkeypatch.setattr(loop._Runner, "run", counted)
    sink = RunSink()
    with pytest.warns(RuntimeWarning, match="flaky"):
        run_loop(plan(work, runs=8, configs=3), DeferredHost(), sink)
    assert measured == [(0, 0), (1, 0), (2, 0)]  # run 0 takes the config's values; the rest their own loop
    assert [(r.config, r.run) for r in sink.runs] == [(c, r) for c in range(3) for r in range(8)]


def test_a_deferred_run_that_raises_keeps_every_earlier_run_with_its_values() -> None:
    seen = [0]

    def fails(i: int) -> None:
        seen[0] += 1
        with nsightx.annotate("a"):
            if seen[0] == 9 + 1 + 6:  # config 1, run 5 (after 9 calls of config 0 and a warm-up run)
                raise ValueError("boom")

    sink, session = RunSink(), DeferredHost()
    with pytest.warns(RuntimeWarning, match="flaky"), pytest.raises(ValueError, match="boom"):
        run_loop(plan(fails, runs=8), session, sink)
    assert [(r.config, r.run) for r in sink.runs] == [(0, r) for r in range(8)] + [(1, r) for r in range(5)]
    assert all(len(r.records) == 1 and len(r.collectors) == 6 for r in sink.runs)


@pytest.mark.parametrize("session", [DeferredHost, HostSession])
def test_run_collectors_that_read_no_run_field_get_one_context_per_config(session: type[HostSession]) -> None:
    steady = Contexts("steady", reads_run_fields=False)
    run_loop(plan(work, runs=4, configs=2, collectors=(steady,)), session(), RunSink())
    assert len(steady.contexts) == 8 and len({id(c) for c in steady.contexts}) == 2
    assert [(c.config, c.run, c.scope) for c in steady.contexts[::4]] == [(0, None, "run"), (1, None, "run")]
    assert steady.contexts[0].params == {"i": 0} and steady.contexts[4].args == (1,)


@pytest.mark.parametrize("flag", [None, True])
def test_a_collector_that_may_read_the_run_gets_every_run_its_own_context(flag: bool | None) -> None:
    steady, other = Contexts("steady", reads_run_fields=False), Contexts("other", reads_run_fields=flag)
    run_loop(plan(work, runs=4, configs=2, collectors=(steady, other)), DeferredHost(), RunSink())
    assert [(c.config, c.run) for c in other.contexts] == [(c, r) for c in range(2) for r in range(4)]
    assert [c.run for c in steady.contexts] == [0, 1, 2, 3] * 2  # the call's contexts are per run for all


def test_the_nvml_run_collector_reads_no_run_field() -> None:
    from nsightx_nvml._collectors import RunConditions

    assert RunConditions.reads_run_fields is False


class Reading(Sampled):
    """:class:`Sampled` with a per-config reader of the run's start (as the nvml collector has): it answers as
    ``collect`` would; with ``plain`` a dict, and at its ``fail``-th answer it raises."""

    reads_run_fields = False

    def __init__(self, plain: bool = False, fail: int = -1) -> None:
        super().__init__()
        self.plain, self.fail, self.offered, self.read = plain, fail, 0, 0

    def run_reader(self, ctx: Any) -> Any:
        self.offered += 1
        assert ctx.run is None and ctx.config is not None  # the config's shared context

        def answer(now: int | None) -> Any:
            assert type(now) is int  # the run's start, read by the loop
            self.read += 1
            if self.read == self.fail:
                raise RuntimeError("no reading")
            values = self.collect(ctx)
            return dict(values) if self.plain else values

        return answer


@pytest.mark.parametrize("plain", [False, True])
def test_a_collector_with_a_run_reader_is_read_through_it_and_its_runs_read_back_as_collects(plain: bool) -> None:
    # Issue 35: the deferred loop asks the one RUN collector's reader once per config, then calls it before each
    # run (no context written, no collect); the runs are those a collector without a reader gives.
    reading, sink = Reading(plain=plain, fail=5), RunSink()
    with pytest.warns(RuntimeWarning, match="'sampled' \\(run scope\\) raised RuntimeError: no reading"):
        run_loop(plan(work, runs=COLLECT_EVERY + 10, configs=2, collectors=(reading,)), DeferredHost(), sink)
    assert reading.offered == 2  # once a config; run 0 of each goes through the general loop's collect
    assert reading.read == 2 * (COLLECT_EVERY + 10 - 1)
    expected, rows = Sampled(), RowSink()
    expected.seen = 0
    run_loop(plan(work, runs=COLLECT_EVERY + 10, configs=2, collectors=(expected,)), HostSession(), rows)
    got, want = [r.collectors for r in sink.runs], [r.collectors for r in rows.runs]
    failed = 5  # config 0, run 5: the reader's fifth answer (runs 1 to 5; run 0 came from collect) raised
    assert [v.name for v in got[failed]] == ["ThermalPauseS", "sampled"] and got[failed][1].value is None
    del got[failed], want[-1]  # the failed read took no answer of collect: the runs after it are one behind
    assert [[(v.name, v.value, type(v.value)) for v in c] for c in got] == [
        [(v.name, v.value, type(v.value)) for v in c] for c in want
    ]
    assert all([v.name for v in c] == ["ThermalPauseS", "Clock", "Power", "7", "AgeMs"] for c in got)
