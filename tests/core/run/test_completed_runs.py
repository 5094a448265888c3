"""A deferred session that hands its runs back one by one (``Session.completed_runs``) while the loop writes them.

The events backend waits on each run's end event in launch order; the run loop now writes each run (its row, the
sink, the raw file) as soon as it came back, while the session still waits for the later ones, rather than all of
them after the last wait. These tests drive the real run loop and sink with two deterministic deferred sessions
that measure the same things: one that hands back a mapping from ``collect_runs`` only (every session written
before ``completed_runs`` existed), one that hands runs back one at a time (in a shuffled order too), and check that
what a reader sees is the same: the runs, their order, their records, regions and values, and the raw file's lines;
also when the user's function raises mid-way or a region's failure is ignored. A session whose reading fails
mid-way keeps the runs it read before the failure, each run is stored once and in order, and the error reaches the
caller.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import nsightx
from nsightx._errors import MeasurementError
from nsightx._results.records import RegionId
from nsightx._results.rowparts import parts_from_rows
from nsightx._results.sink import RunSink
from nsightx._results.store import Text
from nsightx._run import context
from nsightx._run.backend import RunOutput, Session
from nsightx._run.loop import run_loop
from nsightx._run.plan import Plan
from nsightx.ext import RunValues, new_record

_Key = tuple[int, int]


class Mapped(Session):
    """A deferred session whose values are made of the run and region (the same in every execution).

    Its runs come back only from ``collect_runs``, as a mapping, as every deferred session's did before
    ``completed_runs``. ``fail_at``: reading that run raises :class:`MeasurementError`.
    """

    deferred = True

    def __init__(self, fail_at: _Key | None = None) -> None:
        self.closed: list[tuple[RegionId, bool]] = []
        self.finished: list[_Key] = []
        self.fail_at = fail_at
        self.collects = 0

    def region_enter(self, region: RegionId) -> None:
        pass

    def region_exit(self, region: RegionId, failed: bool) -> None:
        self.closed.append((region, failed))

    def finish_run(self, config: int, run: int) -> RunOutput:
        self.finished.append((config, run))
        return RunOutput()

    def _read(self) -> Iterator[tuple[_Key, RunOutput]]:
        """Each finished run's output, in the order the runs finished (taken now, read as iterated)."""
        self.collects += 1
        finished, self.finished = self.finished, []
        closed, self.closed = self.closed, []
        by_run: dict[_Key, list[tuple[RegionId, bool]]] = {key: [] for key in finished}
        for region, failed in closed:
            by_run.setdefault((region.config, region.run), []).append((region, failed))
        return self._outputs(by_run)

    def _outputs(self, by_run: dict[_Key, list[tuple[RegionId, bool]]]) -> Iterator[tuple[_Key, RunOutput]]:
        for key, regions in by_run.items():
            if key == self.fail_at:
                raise MeasurementError(f"run {key} could not be read")
            out = RunOutput()
            for region, failed in regions:
                value = 1000.0 * region.config + region.run + len(region.annotation) / 8
                out.region_attributes[region.annotation] = {"span_ns": int(value * 3)}
                if not failed:
                    out.records.append(
                        new_record(region.annotation, region.config, region.run, "k", "m", value, "ns", 0)
                    )
            yield key, out

    def collect_runs(self) -> dict[_Key, RunOutput]:
        return dict(self._read())


class Incremental(Mapped):
    """The same session, handing each run back as it is read (``shuffle``: neighbours swapped, 1<->0, 3<->2...)."""

    def __init__(self, fail_at: _Key | None = None, shuffle: bool = False, sink: RunSink | None = None) -> None:
        super().__init__(fail_at)
        self.shuffle = shuffle
        self.sink = sink
        self.stored_when_handed: list[tuple[_Key, int]] = []
        """(run, how many measured runs the sink held) as each run was handed back."""

    def completed_runs(self) -> Iterator[tuple[_Key, RunOutput]]:
        items = self._read()
        if self.shuffle:
            items = _swapped(items)
        for key, out in items:
            if self.sink is not None:
                self.stored_when_handed.append((key, self.sink.measured))
            yield key, out


def _swapped(items: Iterator[tuple[_Key, RunOutput]]) -> Iterator[tuple[_Key, RunOutput]]:
    while True:
        pair = list(itertools.islice(items, 2))
        yield from reversed(pair)
        if len(pair) < 2:
            return


def _plan(function: Any, configs: int, runs: int, warmup: int, collectors: tuple[Any, ...] = ()) -> Plan:
    return Plan(
        collectors=collectors,
        function=function,
        function_name="f",
        params=("i",),
        configs=tuple((i,) for i in range(configs)),
        runs=runs,
        warmup=warmup,
        metrics=("m",),
        backend="host",
        needs_gpu=False,
    )


class _User:
    """The user's function: regions "a" and "bb"; raises at call ``stop_at``; region "bb" fails (ignored) at ``bad``."""

    def __init__(self, stop_at: int | None, bad: frozenset[int]) -> None:
        self.calls = 0
        self.stop_at = stop_at
        self.bad = bad

    def __call__(self, i: int) -> None:
        self.calls += 1
        if self.calls == self.stop_at:
            raise RuntimeError("the user's function stopped")
        with nsightx.annotate("a"):
            pass
        with nsightx.annotate("bb", ignore_failures=True):
            if self.calls in self.bad:
                raise ValueError("ignored")


class Sampled:
    """A RUN collector like the nvml one: a :class:`RunValues` over a mapping that changes every 3 runs."""

    name = "sampled"
    scope = nsightx.CollectionScope.RUN

    def __init__(self) -> None:
        self.seen = 0
        self.shared: dict[str, Any] = {}

    def collect(self, ctx: Any) -> RunValues:
        if self.seen % 3 == 0:
            self.shared = {"Clock": 1900 + self.seen, "Power": 0.5 * self.seen}
        self.seen += 1
        return RunValues(self.shared, "AgeMs", self.seen / 1000)


def _plain(value: Any) -> Any:
    """The columns of a result (``RunParts`` and its parts) as plain data: arrays as (dtype, list), text as strings."""
    if isinstance(value, Text):
        return ("text", value.strings())
    if isinstance(value, np.ndarray):
        return (str(value.dtype), value.tolist())
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def _execute(session: Mapped, plan: Plan, path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, ...]:
    """Run ``plan`` through the run loop into a sink with a raw file; the host clock a counter (the same each time).

    Returns (the result's columns as plain data, the runs as plain data, the raw file's lines as JSON, the
    error's text or ""). The columns are read first, as a call reads them (before any run object is made).
    """
    monkeypatch.setattr(context, "_clock", itertools.count(0, 1000).__next__)
    sink = RunSink(path)
    if isinstance(session, Incremental):
        session.sink = sink
    error = ""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            run_loop(plan, session, sink)
    except (RuntimeError, MeasurementError) as e:
        error = f"{type(e).__name__}: {e}"
    finally:
        sink.close()
    columns = _plain(sink.stored().parts())
    assert columns == _plain(parts_from_rows(list(sink.stored()._items)))  # pieces built ahead: the same columns
    runs = [r.model_dump() for r in sink.runs]
    lines = path.read_text().splitlines() if path.exists() else []  # no run finished: no file
    return columns, runs, [json.loads(line) for line in lines], error


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    configs=st.integers(1, 3),
    runs=st.integers(1, 9),
    warmup=st.integers(0, 2),
    stop_at=st.none() | st.integers(1, 30),
    bad=st.frozensets(st.integers(1, 30), max_size=4),
    shuffle=st.booleans(),
    every=st.sampled_from([2, 5, 64]),
    sampled=st.booleans(),
)
def test_an_incremental_session_gives_what_a_mapping_session_gives(
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
    configs: int,
    runs: int,
    warmup: int,
    stop_at: int | None,
    bad: frozenset[int],
    shuffle: bool,
    every: int,
    sampled: bool,
) -> None:
    from nsightx._run import backend as _backend

    monkeypatch.setattr(_backend, "COLLECT_EVERY", every)
    folder = tmp_path_factory.mktemp("runs")
    outcomes = []
    for name, session in (("mapped", Mapped()), ("incremental", Incremental(shuffle=shuffle))):
        plan = _plan(_User(stop_at, bad), configs, runs, warmup, (Sampled(),) if sampled else ())
        outcomes.append(_execute(session, plan, folder / f"{name}.jsonl", monkeypatch))
    mapped, incremental = outcomes
    assert incremental == mapped
    assert all(r["records"] for r in mapped[1])  # every run written kept its measurements


def test_each_run_is_written_before_the_session_hands_back_the_next(tmp_path: Path) -> None:
    sink = RunSink(tmp_path / "raw.jsonl")
    session = Incremental(sink=sink)
    run_loop(_plan(_User(None, frozenset()), 2, 4, 1), session, sink)
    measured = [(key, held) for key, held in session.stored_when_handed if key[1] >= 0]
    assert [key for key, _ in measured] == [(c, r) for c in range(2) for r in range(4)]
    assert [held for _, held in measured] == list(range(8))  # run k came back with the k runs before it stored
    assert session.collects == 1
    assert len((tmp_path / "raw.jsonl").read_text().splitlines()) == 8
    assert sink._ahead.upto == 4  # config 0's runs, gathered during the wait


def test_a_mapping_session_builds_no_columns_ahead() -> None:
    """Its runs are all back when the first is written: they are read all at once, after the wait."""
    sink = RunSink()
    run_loop(_plan(_User(None, frozenset()), 3, 4, 1), Mapped(), sink)
    assert sink._ahead.upto == 0 and len(sink.stored().parts().runs.config) == 12


@pytest.mark.parametrize("incremental", [False, True])
def test_a_read_that_fails_mid_way_stores_every_run_once_in_order_and_raises(tmp_path: Path, incremental: bool) -> None:
    session = Incremental(fail_at=(1, 1)) if incremental else Mapped(fail_at=(1, 1))
    sink = RunSink(tmp_path / "raw.jsonl")
    with pytest.raises(MeasurementError, match=r"run \(1, 1\) could not be read"):
        run_loop(_plan(_User(None, frozenset()), 2, 3, 0), session, sink)
    sink.close()
    keys = [(r.config, r.run) for r in sink.runs]
    assert keys == [(c, r) for c in range(2) for r in range(3)]
    lines = [json.loads(line) for line in (tmp_path / "raw.jsonl").read_text().splitlines()]
    assert [(line["config"], line["run"]) for line in lines] == keys
    read = [bool(r.records) for r in sink.runs]
    # a mapping is all or nothing; one run at a time, the runs read before the failure keep their values
    assert read == ([True] * 4 + [False] * 2 if incremental else [False] * 6)


def test_finished_configs_are_gathered_during_the_wait_whatever_their_size() -> None:
    """Each config's runs are gathered at its end, a few or many (no piece that must pay for itself)."""
    for runs in (2, 20, 40):
        sink = RunSink()
        run_loop(_plan(_User(None, frozenset()), 3, runs, 0), Incremental(), sink)
        assert sink._ahead.upto == 2 * runs  # configs 0 and 1; config 2's runs are read after the last wait


@pytest.mark.parametrize("session", [Incremental, Mapped])
def test_a_write_that_raises_keeps_the_later_runs_measurements(tmp_path: Path, session: type[Mapped]) -> None:
    """The first-run check raising (a profiled call's): the runs after it still get what the session read.

    A mapping session (``Mapped``) is written from its one mapping (``loop._write_collected``): the same."""
    checked: list[int] = []

    def on_first(run: Any) -> None:
        checked.append(run.run)
        raise RuntimeError("first run refused")

    sink = RunSink(on_first=on_first)
    with pytest.raises(RuntimeError, match="first run refused"):
        run_loop(_plan(_User(None, frozenset()), 1, 3, 0), session(), sink)
    assert checked == [0]
    assert [(r.run, bool(r.records)) for r in sink.runs] == [(0, True), (1, True), (2, True)]
