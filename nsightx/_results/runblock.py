"""Consecutive runs of one config kept as columns: the host session's runs, with no Python object per run.

Beside an empty region on the host backend, a run's own content is one region's name, host time and failure flag,
and one record that repeats the time (none when the region failed: a failed region has no record on any
backend). Handing each run to the sink as tuples (a :data:`~nsightx._results.rows.RunRow`, its record row, its
region row, a list and the backend's :class:`~nsightx._run.backend.RunOutput`) cost ~1.2 us of a ~3.6 us run,
and reading those tuples back into the result's columns another ~1 us (issue 35). A :class:`RunBlock` takes the
regions of many runs straight into preallocated columns instead (``array`` and a list of the names, the same
string object for every run): the run loop's run state appends to them as each region closes, and the result
reads them as numpy arrays (:meth:`RunBlock.parts`). The rows and objects those runs stand for are made only if
something asks for them (:meth:`RunBlock.rows`), equal to those the run loop made before.

A run may also hold RUN-scope collector values (the nvml plugin's, the thermal guard's pause): the loop appends
each run's collector rows to one flat list (:attr:`RunBlock.values`) and their number to :attr:`RunBlock.n_values`,
so those runs too are stored without a row, a list or an output object per run, and the result reads the values'
columns in one pass.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from typing import Any

import numpy as np

from nsightx._enums import CollectionScope
from nsightx._results.records import Scalar
from nsightx._results.rows import RunRow
from nsightx._results.store import (
    CollectorColumns,
    RecordColumns,
    RegionColumns,
    RunColumns,
    RunParts,
    Text,
)

_RUN = CollectionScope.RUN.value
"""The scope of every collector value a block holds."""

TimedRecord = tuple[str, str, "str | None"]
"""(kernel, metric, unit) of the one record a session makes of each region's host time (value: the nanoseconds as a
float, seq 0); see :attr:`~nsightx._run.backend.Session.timed_records`."""


class RunBlock:
    """Runs ``first``, ``first + 1``, ... of config ``config`` whose content is their regions alone.

    Each run holds :attr:`counts` regions (in closing order, the next ones of :attr:`names`, :attr:`host_ns` and
    :attr:`failed`), and, when :attr:`record` is set, one record per region that did not fail made of its host
    time (a failed region has no record: the frames show it as NaN, ``Kernel="failed"``). A run is in
    the block once its count is appended: regions appended after the last count (a run that raised) are not part
    of it.

    Args:
        config: The config index of every run.
        first: The run index of the first run.
        record: (kernel, metric, unit) of each live region's record; ``None``: the runs hold no record.
    """

    def __init__(self, config: int, first: int, record: TimedRecord | None) -> None:
        self.config = config
        self.first = first
        self.record = record
        self.counts = array("q")
        """Per run, how many regions it closed."""
        self.names: list[str] = []
        """Per region, its annotation."""
        self.host_ns = array("q")
        """Per region, its host nanoseconds."""
        self.failed = bytearray()
        """Per region, 1 when it closed with an exception."""
        self.value_names: list[str] = []
        """Per RUN-scope collector value of the runs (one run after the other), its column name."""
        self.values: list[Scalar] = []
        """Per RUN-scope collector value, the value (its scope is ``run``, its config and run its run's)."""
        self.n_values = array("q")
        """Per run, how many of :attr:`values` it holds; empty when no run of the block holds any (all zero)."""

    def __len__(self) -> int:
        return len(self.counts)

    def seal(self) -> None:
        """Cut the columns back to the regions and values of the counted runs.

        A run that raised left its regions after them; a run stopped between its values and its count, its values.
        """
        total = sum(self.counts)
        del self.names[total:], self.host_ns[total:], self.failed[total:]
        if self.n_values or self.values:
            del self.n_values[len(self.counts) :]
            n = sum(self.n_values)
            del self.value_names[n:], self.values[n:]

    def _regions(self) -> tuple[int, list[int]]:
        """How many regions the block's runs hold, and the runs' counts."""
        counts = self.counts.tolist()
        return sum(counts), counts

    def rows(self) -> list[RunRow]:
        """The runs as the run loop's compact rows (equal to those it handed over for such runs before)."""
        config, first, record = self.config, self.first, self.record
        total, counts = self._regions()
        regions = list(zip(self.names[:total], self.host_ns[:total], map(bool, self.failed[:total]), strict=True))
        out: list[RunRow] = []
        start = at = 0
        names, values, n_values = self.value_names, self.values, self.n_values.tolist() or [0] * len(counts)
        for i, n in enumerate(counts):
            run, own = first + i, tuple(regions[start : start + n])
            start += n
            records: list[Any] = []
            if record is not None:
                kernel, metric, unit = record
                records = [(name, config, run, kernel, metric, float(ns), unit, 0) for name, ns, bad in own if not bad]
            k = n_values[i]
            pairs = zip(names[at : at + k], values[at : at + k], strict=True)
            own_values = tuple((name, _RUN, config, run, None, v) for name, v in pairs)
            out.append((config, run, records, own, {}, own_values))
            at += k
        return out

    def last_row(self) -> RunRow | None:
        """The last run as a compact row (``None`` when the block holds none)."""
        return self.rows()[-1] if self.counts else None

    def parts(self) -> RunParts:
        """The runs' columns, read from the block's arrays (the columns :meth:`rows` stand for)."""
        total, counts = self._regions()
        n_runs = len(counts)
        configs = np.full(n_runs, self.config, np.int64)
        run_ids = np.arange(self.first, self.first + n_runs, dtype=np.int64)
        n_regions = np.array(counts, dtype=np.int64)
        ns, failed = np.zeros(0, np.int64), np.zeros(0, np.bool_)
        if total:  # copies: a view would lock the arrays' size
            ns = np.frombuffer(self.host_ns, np.int64, total).copy()
            failed = np.frombuffer(self.failed, np.uint8, total).astype(np.bool_)
        names = Text.of(self.names[:total], total)
        region_runs = np.repeat(run_ids, n_regions)
        regions = RegionColumns(names, np.full(total, self.config, np.int64), region_runs, ns, failed, None)
        n_values = np.zeros(n_runs, np.int64)
        if self.n_values:
            n_values = np.frombuffer(self.n_values, np.int64, n_runs).copy()
        runs = RunColumns(configs, run_ids, n_regions.copy(), n_regions, n_values)
        if self.record is None:
            runs = RunColumns(configs, run_ids, np.zeros(n_runs, np.int64), n_regions, runs.n_collectors)
            records = RecordColumns.of_rows([])
        else:
            runs, records = self._records(runs, names, region_runs, ns, failed)
        n = int(n_values.sum())
        value_runs: list[int | None] = []
        value_runs += np.repeat(run_ids, n_values).tolist()
        collectors = CollectorColumns(
            self.value_names[:n],
            [_RUN] * n,
            [self.config] * n,
            value_runs,
            [None] * n,
            self.values[:n],
        )
        return RunParts(runs, records, regions, collectors)

    def _records(
        self, runs: RunColumns, names: Text, region_runs: Any, ns: Any, failed: Any
    ) -> tuple[RunColumns, RecordColumns]:
        """The record columns of the regions that did not fail, and ``runs`` with each run's count of them.

        A failed region has no record (docs/api.md, the backend contract), as :meth:`rows` makes them.
        """
        kernel, metric, unit = self.record  # type: ignore[misc]  # parts calls this only when record is set
        if failed.any():
            live = ~failed
            ns, region_runs = ns[live], region_runs[live]
            kept = [name for name, bad in zip(self.names, failed.tolist(), strict=False) if not bad]
            names = Text.of(kept, len(kept))
            per_run = np.bincount(region_runs - self.first, minlength=len(runs.run)).astype(np.int64)
            runs = RunColumns(runs.config, runs.run, per_run, runs.n_regions, runs.n_collectors)
        total = len(ns)
        records = RecordColumns(
            Text(names.codes.copy(), list(names.names)),
            np.full(total, self.config, np.int64),
            region_runs.copy(),
            _constant(kernel, total),
            _constant(metric, total),
            ns.astype(np.float64),
            _constant(unit, total),
            np.zeros(total, np.int64),
        )
        return runs, records


def _constant(name: str | None, n: int) -> Text:
    """A text column of ``n`` rows that all hold ``name`` (no name when there is no row, as :meth:`Text.of`)."""
    return Text(np.zeros(n, np.int64), [name] if n else [])


def concat_text(texts: Sequence[Text]) -> Text:
    """One text column of ``texts`` one after the other; names in first-seen order, as :meth:`Text.of` numbers them.

    Each column's names must be in the order their rows first meet them, and each must occur (as :meth:`Text.of`
    makes them).
    """
    index: dict[str | None, int] = {}
    pieces = [np.zeros(0, np.int64)]
    for text in texts:
        if len(text.codes):
            lut = np.array([index.setdefault(name, len(index)) for name in text.names], dtype=np.int64)
            pieces.append(lut[text.codes])
    return Text(np.concatenate(pieces), list(index))


def concat_parts(parts: Sequence[RunParts]) -> RunParts:
    """The columns of several consecutive groups of runs, as one (the columns of all their runs, in order)."""
    runs = RunColumns(*(_cat([getattr(p.runs, f) for p in parts]) for f in _RUN_FIELDS))
    rec = [p.records for p in parts]
    records = RecordColumns(
        concat_text([r.annotation for r in rec]),
        _cat([r.config for r in rec]),
        _cat([r.run for r in rec]),
        concat_text([r.kernel for r in rec]),
        concat_text([r.metric for r in rec]),
        _cat([r.value for r in rec], np.float64),
        concat_text([r.unit for r in rec]),
        _cat([r.seq for r in rec]),
    )
    reg = [p.regions for p in parts]
    attributes: list[Any] | None = None
    if any(g.attributes is not None for g in reg):
        attributes = []
        for g in reg:
            attributes.extend(g.attributes if g.attributes is not None else [{} for _ in range(g.n)])
    regions = RegionColumns(
        concat_text([g.annotation for g in reg]),
        _cat([g.config for g in reg]),
        _cat([g.run for g in reg]),
        _cat([g.host_ns for g in reg]),
        _cat([g.failed for g in reg], np.bool_),
        attributes if attributes and any(attributes) else None,
    )
    col = [p.collectors for p in parts]
    collectors = CollectorColumns(*(_joined([getattr(c, f) for c in col]) for f in _COLLECTOR_FIELDS))
    return RunParts(runs, records, regions, collectors)


_RUN_FIELDS = ("config", "run", "n_records", "n_regions", "n_collectors")
_COLLECTOR_FIELDS = ("name", "scope", "config", "run", "annotation", "value")


def _joined(lists: list[list[Any]]) -> list[Any]:
    """The items of ``lists`` one after the other, in one new list (each list extended in C, not item by item)."""
    out: list[Any] = []
    for items in lists:
        out += items
    return out


def _cat(arrays: list[Any], dtype: Any = np.int64) -> Any:
    """``arrays`` one after the other, as one array of ``dtype``."""
    return np.concatenate([np.zeros(0, dtype), *arrays]).astype(dtype, copy=False)
