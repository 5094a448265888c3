"""The sink of a sweep's task: the runs of its config, kept as they were handed over, to be sent to the caller.

A task measures one config with a plan that holds that config alone, so the run loop numbers its runs config 0.
This sink numbers each run as the sweep's config (``index``) as it arrives, so the caller's sink takes the runs as
they are. It keeps the compact rows the run loop hands over (:data:`~nsightx._results.rows.RunRow`; a backend that
writes :class:`~nsightx._results.records.RunRecords` objects is kept as objects) and pickles them in
:meth:`TaskRuns.payload`: the smallest form that round-trips exactly (a float's every bit, NaN and infinities
included, which JSON does not keep), about a sixth of the raw file's JSON lines and a sixth of a result's JSON.

Like :class:`~nsightx._results.sink.RunSink`, it stores a run handed over twice once (the run loop's clean-up after
an interrupt), and hands the first measured run to ``check`` (the call's first-run checks) once it is stored.
"""

from __future__ import annotations

import dataclasses
import pickle
from collections.abc import Callable

from nsightx._results.records import CollectorValue, Record, RunRecords, new_collector_value
from nsightx._results.rows import CollectorRow, RecordRow, RunRow, RunValues, run_from_row


class TaskRuns:
    """Keeps the runs of one task's config, numbered as config ``index`` of the sweep.

    Args:
        index: The config's index in the sweep.
    """

    def __init__(self, index: int) -> None:
        self.index = index
        self.items: list[RunRow | RunRecords] = []
        """Every stored run, in order, numbered as config ``index``."""
        self.check: Callable[[RunRecords], None] | None = None
        """Called once with the first measured run (as the task's plan numbers it, config 0), once stored."""

    @property
    def measured(self) -> int:
        """How many measured runs (config index >= 0) were stored."""
        return sum(1 for r in self.items if (r[0] if isinstance(r, tuple) else r.config) >= 0)

    def add_run(self, row: RunRow) -> None:
        """Store one finished run in compact form (the run loop's way)."""
        renumbered = _row_as(row, self.index)
        if self.items and self.items[-1] == renumbered:
            return  # handed over again: stored already
        self.items.append(renumbered)
        if row[0] >= 0:
            self._check_first(run_from_row(row))

    def write(self, run: RunRecords) -> None:
        """Store one finished run given as an object (a backend that measures elsewhere writes these)."""
        renumbered = run_as(run, self.index)
        if self.items and self.items[-1] == renumbered:
            return
        self.items.append(renumbered)
        if run.config >= 0:
            self._check_first(run)

    def _check_first(self, run: RunRecords) -> None:
        check, self.check = self.check, None
        if check is not None:
            check(run)

    def close(self) -> None:
        """Nothing to close: the runs stay in memory until :meth:`payload`."""

    def payload(self) -> bytes:
        """The stored runs, pickled: what the task sends back (read with :func:`runs_of_payload`)."""
        return pickle.dumps(self.items, protocol=pickle.HIGHEST_PROTOCOL)


def runs_of_payload(payload: bytes) -> list[RunRow | RunRecords]:
    """The runs :meth:`TaskRuns.payload` pickled, in order (rows, or objects where a backend wrote objects)."""
    items: list[RunRow | RunRecords] = pickle.loads(payload)
    return items


def _row_as(row: RunRow, index: int) -> RunRow:
    """``row`` numbered as config ``index`` (a ONCE row, config -1, stays as it is)."""
    config, run, records, regions, attributes, collectors = row
    if config < 0:
        return row
    return (
        index,
        run,
        tuple(_record_row_as(r, index) for r in records),
        regions,  # a region row takes its config from the run
        attributes,
        tuple(_collector_as(c, index) for c in collectors),
    )


def run_as(run: RunRecords, index: int) -> RunRecords:
    """``run`` numbered as config ``index``, its records, regions and collector values too.

    A ONCE run, and a ONCE value, stay as they are.
    """
    if run.config < 0:
        return run
    return dataclasses.replace(
        run,
        config=index,
        records=tuple(_record_as(r, index) for r in run.records),
        regions=tuple(dataclasses.replace(g, config=index) for g in run.regions),
        collectors=tuple(_value_as(_as_object(c), index) for c in run.collectors),
    )


def _as_object(value: CollectorRow | CollectorValue) -> CollectorValue:
    return new_collector_value(*value) if isinstance(value, tuple) else value


def _value_as(value: CollectorValue, index: int) -> CollectorValue:
    """A collector value object numbered as config ``index`` (a ONCE value stays)."""
    return value if value.config is None else dataclasses.replace(value, config=index)


def _record_row_as(record: RecordRow | Record, index: int) -> RecordRow | Record:
    """A record of a row, as a tuple or an object, numbered as config ``index``."""
    if isinstance(record, tuple):
        return (record[0], index, *record[2:])
    return _record_as(record, index)


def _record_as(record: Record, index: int) -> Record:
    return dataclasses.replace(record, config=index)


def _collector_as(
    value: CollectorRow | CollectorValue | RunValues, index: int
) -> CollectorRow | CollectorValue | RunValues:
    """A collector value of a row, as a tuple or an object, numbered as config ``index`` (a ONCE value stays).

    A :class:`~nsightx._results.rows.RunValues` answer stays as it is: its values take their config from the run.
    """
    if isinstance(value, RunValues):
        return value
    if isinstance(value, tuple):
        name, scope, config, run, annotation, v = value
        return value if config is None else (name, scope, index, run, annotation, v)
    return _value_as(value, index)
