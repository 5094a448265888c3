"""A deferred call of few runs has its RunValues answers and collector columns made while the GPU works (issue 35).

The nvml plugin answers each run with one :class:`~nsightx.ext.RunValues` (a sample many runs share, and its age);
a call under ``SHARED_MIN_RUNS`` runs has each made into its rows by :func:`parts_from_rows`. The sink's
:meth:`~nsightx._results.sink.RunSink.build_ahead`, which the run loop calls at each config's end while a deferred
session still waits, does that for the runs it holds (``rowgather.Gather``), with the other columns' lists; after
the wait only the last runs are. The columns must be those :func:`parts_from_rows` makes of
all the runs at once, field for field, whatever the items hold (run objects, value objects, records as objects or
rows, region attributes).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest

from nsightx._results import rowgather
from nsightx._results.records import RunRecords, new_collector_value, new_record
from nsightx._results.rowparts import parts_from_rows
from nsightx._results.rows import RunValues, runs_from_rows
from nsightx._results.sink import RunSink
from nsightx._results.store import RunParts, Text


def _plain(value: Any) -> Any:
    """Columns as plain data: arrays as (dtype, list), text as its strings, dataclasses field by field."""
    if isinstance(value, Text):
        return ("text", value.strings())
    if isinstance(value, np.ndarray):
        return (str(value.dtype), value.tolist())
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def _rows(configs: int, runs: int) -> list[Any]:
    """Runs as the run loop hands them: a sample shared by three runs and an age, a guard row, some oddities."""
    out: list[Any] = []
    for c in range(configs):
        for r in range(runs):
            sample = {"Clock": 1980 + (r // 3), "Power": 150.5, "Reasons": "none"}
            answer = RunValues(sample, "AgeMs", r * 0.25)
            values: tuple[Any, ...] = (("ThermalPauseS", "run", c, r, None, 0.0), answer)
            if r == 1:  # a value object among the rows (the stop rule's, an earlier scope's)
                values += (new_collector_value("Extra", "config", c, None, None, "x"),)
            if r == 2:  # a run without its answer (a collector that raised)
                values = values[:1]
            record = new_record("a", c, r, "k", "m", float(c * 100 + r), "ns", 0)
            records = (record,) if r % 2 else (("a", c, r, "k", "m", float(c * 100 + r), "ns", 0),)
            attributes = {"a": {"span_ns": r}} if r % 3 == 0 else {}
            out.append((c, r, records, (("a", 1000 + r, False),), attributes, values))
    return out


def _stored(rows: list[Any], ahead: bool) -> RunSink:
    """A sink fed as the run loop feeds it: the ONCE values as a run object, then each run; config ends noted."""
    sink = RunSink()
    sink.write(RunRecords(-1, -1, collectors=(new_collector_value("Driver", "once", None, None, None, "580"),)))
    for row, following in zip(rows, [*rows[1:], None], strict=True):
        sink.add_run(row)
        if ahead and following is not None and following[0] != row[0]:
            sink.build_ahead()
    return sink


@pytest.mark.parametrize(("configs", "runs"), [(4, 10), (3, 5), (1, 7), (2, 60)])
def test_columns_built_from_answers_expanded_ahead_are_those_of_all_runs_at_once(configs: int, runs: int) -> None:
    rows = _rows(configs, runs)
    sink = _stored(rows, ahead=True)
    ahead = sink._ahead
    # every config's runs but the last one's gathered (their answers expanded); one config: nothing ahead
    assert ahead.upto == (1 + (configs - 1) * runs if configs > 1 else 0)
    parts = sink.stored().parts()
    items = _stored(rows, ahead=False)._items
    assert _plain(parts) == _plain(parts_from_rows(items))
    assert _plain(parts) == _plain(RunParts.of(runs_from_rows(items)))


def test_after_the_wait_only_the_last_configs_answers_are_expanded(monkeypatch: pytest.MonkeyPatch) -> None:
    sink = _stored(_rows(4, 10), ahead=True)
    expanded: list[Any] = []
    real = rowgather.shared_rows

    def counted(answer: RunValues) -> Any:
        expanded.append(answer.value)
        return real(answer)

    monkeypatch.setattr(rowgather, "shared_rows", counted)
    sink.stored().parts()
    assert expanded == [r * 0.25 for r in range(10) if r != 2]  # config 3's answers (its run 2 has none)
