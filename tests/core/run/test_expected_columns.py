"""A session collected in batches (cupti): its runs' columns are read during the wait, outputs added after it.

Every run of such a session's last batch comes back after the GPU wait, so nothing can be gathered run by run
while it waits (``build_ahead``, the events backend's way). Their keys, regions and collector values are known
before the wait, though: the run loop hands the sink their rows without outputs (``expect_runs``), and the sink's
``prepare_frame`` (a profiled call's work during the wait) reads their columns for the frame's pieces; the sink
keeps those for the result, and after the wait only the records, the record counts and the regions' attributes
are read (``rowgather.with_outputs``). These tests check that the columns are
those of all the runs read at once, field for field, whatever the call (a failure, an ignored region failure, a
RUN collector's shared answers, a raw file), that the gathered columns are used only for the runs they were
gathered from, and that a call of many runs or records (other column paths) gives the same columns too.
"""

from __future__ import annotations

import itertools
import warnings
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_completed_runs import Incremental, Mapped, Sampled, _plain, _plan, _User

from nsightx._errors import MeasurementError
from nsightx._results import rowparts
from nsightx._results.records import RunRecords, new_collector_value
from nsightx._results.rowparts import PartsAhead, bare_row, parts_from_rows
from nsightx._results.rows import RunValues
from nsightx._results.sink import RunSink
from nsightx._run import context
from nsightx._run.loop import run_loop


def _filled_calls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Count the columns made from those gathered during the wait (one entry per use, the runs' count)."""
    calls: list[int] = []
    real = rowparts.with_outputs

    def counted(parts: Any, rows: Any) -> Any:
        calls.append(len(rows))
        return real(parts, rows)

    monkeypatch.setattr(rowparts, "with_outputs", counted)
    return calls


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    configs=st.integers(1, 3),
    runs=st.integers(1, 9),
    warmup=st.integers(0, 2),
    stop_at=st.none() | st.integers(1, 30),
    bad=st.frozensets(st.integers(1, 30), max_size=4),
    sampled=st.booleans(),
    raw=st.booleans(),
)
def test_a_batch_sessions_columns_are_those_of_its_runs_read_at_once(
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
    configs: int,
    runs: int,
    warmup: int,
    stop_at: int | None,
    bad: frozenset[int],
    sampled: bool,
    raw: bool,
) -> None:
    monkeypatch.setattr(context, "_clock", itertools.count(0, 1000).__next__)
    calls = _filled_calls(monkeypatch)
    sink = RunSink(tmp_path_factory.mktemp("raw") / "raw.jsonl" if raw else None)
    plan = _plan(_User(stop_at, bad), configs, runs, warmup, (Sampled(),) if sampled else ())
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            run_loop(plan, Mapped(), sink, while_waiting=[sink.prepare_frame])
    except RuntimeError:
        pass
    finally:
        sink.close()
    stored = sink.stored()
    columns = _plain(stored.parts())
    assert columns == _plain(parts_from_rows(list(stored._items)))
    finished = stop_at is None or stop_at > configs * (runs + warmup)
    assert calls == ([configs * runs] if finished else [])  # a failed call never waited for its last run


def test_a_session_handing_runs_back_one_by_one_has_its_configs_gathered_as_they_come(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The events backend's way: its configs are gathered as they come back (``build_ahead``), then the last."""
    calls = _filled_calls(monkeypatch)
    sink = RunSink()
    run_loop(_plan(_User(None, frozenset()), 3, 4, 1), Incremental(), sink, while_waiting=[sink.prepare_frame])
    assert sink._ahead.upto == 8 and sink._ahead._bare is None  # what its frame work read is not kept
    stored = sink.stored()
    assert _plain(stored.parts()) == _plain(parts_from_rows(list(stored._items)))
    assert calls == []


def test_a_session_whose_read_fails_has_its_runs_read_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Its runs are written without their outputs: the same rows, so the gathered columns still serve."""
    calls = _filled_calls(monkeypatch)
    sink = RunSink()
    with pytest.raises(MeasurementError):
        plan = _plan(_User(None, frozenset()), 2, 3, 0)
        run_loop(plan, Mapped(fail_at=(1, 1)), sink, while_waiting=[sink.prepare_frame])
    stored = sink.stored()
    assert _plain(stored.parts()) == _plain(parts_from_rows(list(stored._items)))
    assert calls == [6]


def _rows(n: int, records: int, shared: bool) -> list[Any]:
    """``n`` runs of one region and ``records`` records each; RUN values as shared answers or as rows."""
    sample = {"Clock": 1900, "Power": 250.5}
    out = []
    for i in range(n):
        config, run = divmod(i, 10)
        recs = tuple(("r", config, run, f"k{j % 3}", "m", float(i + j), "ns", j) for j in range(records))
        values: tuple[Any, ...] = (
            (RunValues(sample, "AgeMs", i / 10),) if shared else (("AgeMs", "run", config, run, None, i / 10),)
        )
        out.append((config, run, recs, (("r", 100 + i, i % 7 == 3),), {"r": {"span_ns": i}}, values))
    return out


@pytest.mark.parametrize(("n", "records", "shared"), [(40, 1, True), (200, 1, True), (30, 2, False), (60, 40, False)])
def test_the_gathered_columns_with_the_outputs_are_those_of_the_runs(n: int, records: int, shared: bool) -> None:
    """Few and many runs (many shared answers are spread), few and many records (other column paths)."""
    once = RunRecords(-1, -1, collectors=(new_collector_value("GPU", "once", None, None, None, "H100"),))
    rows = _rows(n, records, shared)
    ahead = PartsAhead()
    ahead.expect([once], [bare_row(r) for r in rows])
    got = ahead.parts([once, *rows])
    assert got is not None
    assert _plain(got) == _plain(parts_from_rows([once, *rows]))
    assert ahead.parts([once, *rows]) is None  # handed out once


def test_the_gathered_columns_serve_only_the_runs_they_were_gathered_from() -> None:
    rows = _rows(12, 1, False)
    expected = [bare_row(r) for r in rows]
    others = [
        rows[:-1],  # a run fewer
        [*rows, rows[-1]],  # a run more
        [*rows[:-1], (*rows[-1][:5], tuple(list(rows[-1][5])))],  # another values object (equal, not the same)
        [*rows[:-1], (rows[-1][0], 99, *rows[-1][2:])],  # another run index
        [*rows[:-1], (*rows[-1][:3], (("r", 1, False),), *rows[-1][4:])],  # other regions
    ]
    for items in others:
        ahead = PartsAhead()
        ahead.expect([], expected)
        assert ahead.parts(items) is None
    ahead = PartsAhead()
    ahead.expect([RunRecords(-1, -1)], expected)
    assert ahead.parts([RunRecords(-1, -1), *rows]) is None  # an equal run object, not the one stored then


def test_a_sink_keeps_the_columns_its_frame_work_read(tmp_path: Path) -> None:
    rows = _rows(5, 2, True)
    sink = RunSink(tmp_path / "raw.jsonl")
    sink.expect_runs([bare_row(r) for r in rows])
    sink.prepare_frame()
    for row in rows:
        sink.add_run(row)
    sink.close()
    stored = sink.stored()
    assert _plain(stored.parts()) == _plain(parts_from_rows(rows))
    assert sink._ahead._bare is None  # used
