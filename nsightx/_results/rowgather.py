"""The result's columns of stored runs in two stages: gathered into Python lists as runs come, converted once.

:func:`~nsightx._results.rowparts.parts_from_rows` used to read every run's rows into numpy arrays in one go,
after the last GPU wait. Most of that is per-row Python (a pass per field over the rows, the nvml plugin's
:class:`~nsightx._results.rows.RunValues` answers made into their rows); the numpy conversions, the text
encodings and the repeats of each run's keys per region are a fixed number of calls. :class:`Gather` splits the
two: :meth:`Gather.add` extends one Python list per column with the fields of the rows it is given (the run loop's
sink calls it at each config's end while the GPU still works, see
:class:`~nsightx._results.rowparts.PartsAhead`), and :meth:`Gather.finish` converts each list once. The columns
are those of all the rows read at once, field for field and dtype for dtype, however the rows were split.

Rows only: a :class:`~nsightx._results.runblock.RunBlock` is read from its own arrays by its caller.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Sequence
from operator import attrgetter, itemgetter
from typing import Any

import numpy as np

from nsightx._results.records import Record, RunRecords
from nsightx._results.rows import RUN_SCOPE, RunValues, own_scalar, shared_rows
from nsightx._results.store import (
    SMALL,
    CollectorColumns,
    RecordColumns,
    RegionColumns,
    RunColumns,
    RunParts,
    Text,
    code_type,
)

_COLLECTOR_FIELDS = ("name", "scope", "config", "run", "annotation", "value")
_collector_tuple = attrgetter(*_COLLECTOR_FIELDS)
"""A :class:`~nsightx._results.records.CollectorValue` object's fields as a tuple (a collector row)."""
_COLLECTOR_ITEMS = tuple(map(itemgetter, range(len(_COLLECTOR_FIELDS))))
"""One getter per field of a collector row."""

_RECORD_FIELDS = ("annotation", "config", "run", "kernel", "metric", "value", "unit", "seq")
_RECORD_ITEMS = tuple(map(itemgetter, range(len(_RECORD_FIELDS))))
"""One getter per field of a record row (a :data:`~nsightx._results.rows.RecordRow`)."""
_RECORD_ATTRS = tuple(map(attrgetter, _RECORD_FIELDS))
"""One getter per field of a :class:`Record` object."""
_record_tuple = attrgetter(*_RECORD_FIELDS)
"""A :class:`Record` object's fields as a tuple (a record row)."""


class Gather:
    """The columns of stored runs as Python lists, extended chunk by chunk (:meth:`add`), converted by :meth:`finish`.

    A chunk's :class:`RunValues` answers are made into their rows, as
    :func:`~nsightx._results.rowparts.parts_from_rows` does for a call of fewer than
    :data:`~nsightx._results.rowparts.SHARED_MIN_RUNS` runs (``spread_from`` of :meth:`add`). Once the runs
    gathered reach that many and one of them holds an answer, the call's answers are spread per shared mapping
    instead, over all its rows at once: the gather then stops (:attr:`spread`) and :meth:`finish` answers ``None``.
    """

    def __init__(self, collectors: bool = True) -> None:
        """``collectors``: whether to gather the collector values (without, the runs hold none of them here)."""
        self._with_values = collectors
        self.count = 0
        """How many runs the lists hold."""
        self.spread = False
        """Whether the runs' columns are to be read all at once instead (see the class)."""
        self._shared = False
        self._runs: list[list[int]] = [[] for _ in range(5)]
        """config, run, and the numbers of records, regions and collector values, per run."""
        self._records: list[list[Any]] | None = [[] for _ in _RECORD_FIELDS]
        """Per field of a record, its values, while the records are at most :data:`SMALL` (then ``None``)."""
        self._record_items: list[Any] = []
        """Every record as handed over (a row or a :class:`Record`), for a call of more than :data:`SMALL`."""
        self._regions: list[list[Any]] = [[], [], []]
        """annotation, host_ns and failed (a bool), per region execution."""
        self._one_region = True
        """Whether every run gathered timed one region (its keys are then the regions' keys, not repeated)."""
        self._attributes: list[Any] | None = None
        """Per region execution its attributes, from the first run that has some on (before it: none)."""
        self._handed = False
        """Whether :meth:`finish` handed the collector lists and attributes over (:meth:`add` copies them first)."""
        self._collectors: list[list[Any]] = [[] for _ in _COLLECTOR_FIELDS]

    def add(self, items: Sequence[Any], spread_from: int) -> None:
        """Gather the runs ``items`` stand for (rows or run objects, no block) after those gathered already.

        ``spread_from``: from this many runs, a call with :class:`RunValues` answers has them spread instead.
        """
        if self.spread or not items:
            return
        if self._handed:  # the columns finish returned hold these lists: extend copies
            self._collectors = [list(column) for column in self._collectors]
            self._attributes = None if self._attributes is None else list(self._attributes)
            self._handed = False
        rows: Sequence[Any] = items
        if set(map(type, items)) != {tuple}:
            rows = [item if type(item) is tuple else as_row(item) for item in items]
        counts: Any = itertools.repeat(0, len(rows))  # the runs' numbers of collector values
        if self._with_values:
            values = list(itertools.chain.from_iterable(map(itemgetter(5), rows)))
            kinds = set(map(type, values))
            if RunValues in kinds or self._shared:
                self._shared = True
                if self.count + len(rows) >= spread_from:  # such a call's answers are spread: all at once
                    self._drop()
                    return
            if RunValues in kinds:
                counts = self._add_answered(rows)
            elif values:
                counts = map(len, map(itemgetter(5), rows))
                self._add_collectors(values, kinds)
        self._add_runs(rows, counts)
        self._add_records(list(itertools.chain.from_iterable(map(itemgetter(2), rows))))
        self._add_regions(rows)
        self.count += len(rows)

    def _drop(self) -> None:
        """Stop gathering (see :attr:`spread`): the lists are of no use any more."""
        self.__init__(self._with_values)  # type: ignore[misc]  # empty lists
        self.spread = True

    def _add_runs(self, rows: Sequence[Any], counts: Iterable[int]) -> None:
        configs, run_ids, n_records, n_regions, n_collectors = self._runs
        configs += map(itemgetter(0), rows)
        run_ids += map(itemgetter(1), rows)
        n_records += map(len, map(itemgetter(2), rows))
        n_regions += map(len, map(itemgetter(3), rows))
        n_collectors += counts

    def _add_answered(self, rows: Sequence[Any]) -> list[int]:
        """Gather the collector values of runs among which :class:`RunValues` answers are; their counts per run.

        Each answer stands for the RUN-scope rows :func:`~nsightx._results.rows.values_rows` makes of it: its
        shared mapping's (converted once per mapping, :func:`~nsightx._results.rows.shared_rows`), then its own.
        They go straight into the column lists, with no row tuple per value nor an expanded row per run (the
        nvml plugin's seven values a run: ~2 us a run less than expanding the rows first, on the 2-core VM).
        """
        name, scope, config, run, annotation, value = self._collectors
        counts: list[int] = []
        for row in rows:
            c, r, n = row[0], row[1], 0
            for v in row[5]:
                if type(v) is RunValues:
                    keys, scalars = shared_rows(v)
                    k = len(keys) + 1
                    name += keys
                    name.append(v.name)
                    value += scalars
                    value.append(own_scalar(v))
                    scope += (RUN_SCOPE,) * k
                    config += (c,) * k
                    run += (r,) * k
                    annotation += (None,) * k
                    n += k
                    continue
                v_name, v_scope, v_config, v_run, v_annotation, v_value = v if type(v) is tuple else _collector_tuple(v)
                name.append(v_name)
                scope.append(v_scope)
                config.append(v_config)
                run.append(v_run)
                annotation.append(v_annotation)
                value.append(v_value)
                n += 1
            counts.append(n)
        return counts

    def _add_collectors(self, values: list[Any], kinds: set[type]) -> None:
        if kinds != {tuple}:  # the run loop's rows are tuples already
            values = [v if type(v) is tuple else _collector_tuple(v) for v in values]
        # one pass per field, not zip(*values): that builds an argument tuple of every row (~1.5x as long)
        for column, getter in zip(self._collectors, _COLLECTOR_ITEMS, strict=True):
            column += map(getter, values)

    def _add_records(self, records: list[Any]) -> None:
        """Records as handed over, and while they are few, field by field (:meth:`_record_columns` says why)."""
        items = self._record_items
        items += records
        if self._records is None:
            return
        if len(items) > SMALL:
            self._records = None
            return
        kinds = set(map(type, records))
        getters: tuple[Callable[[Any], Any], ...] = _RECORD_ATTRS  # GPU backends' objects: read by attribute
        if kinds != {Record}:
            getters = _RECORD_ITEMS
            if records and kinds != {tuple}:
                records = [r if type(r) is tuple else _record_tuple(r) for r in records]
        for column, getter in zip(self._records, getters, strict=True):
            column += map(getter, records)

    def _add_regions(self, rows: Sequence[Any]) -> None:
        before = len(self._regions[1])
        flat: list[Any] = list(itertools.chain.from_iterable(map(itemgetter(3), rows)))
        if self._one_region:
            self._one_region = set(map(len, map(itemgetter(3), rows))) == {1}
        names, host_ns, failed = self._regions
        names += map(itemgetter(0), flat)
        host_ns += map(itemgetter(1), flat)
        failed += map(bool, map(itemgetter(2), flat))
        if self._attributes is None:
            if not any(map(itemgetter(4), rows)):
                return
            self._attributes = [{} for _ in range(before)]
        _extend_attributes(self._attributes, rows)

    def finish(self) -> RunParts | None:
        """The columns of every run gathered (``None`` when :attr:`spread`): one conversion per column.

        The collector columns and the attributes are the lists themselves: a later :meth:`add` extends copies,
        so that the columns returned stay as they are.
        """
        if self.spread:
            return None
        n = self.count
        configs, run_ids, n_records, n_regions, n_collectors = (np.fromiter(c, np.int64, n) for c in self._runs)
        runs = RunColumns(configs, run_ids, n_records, n_regions, n_collectors)
        names, host_ns, failed = self._regions
        n_flat = len(host_ns)
        attributes = self._attributes
        one = self._one_region  # most runs time one region: their keys as they are, not repeated per region
        regions = RegionColumns(
            _text(names),
            configs.copy() if one else np.repeat(configs, n_regions),
            run_ids.copy() if one else np.repeat(run_ids, n_regions),
            np.fromiter(host_ns, np.int64, n_flat),
            np.fromiter(failed, np.bool_, n_flat),
            attributes if attributes is not None and any(attributes) else None,
        )
        self._handed = True
        return RunParts(runs, self._record_columns(), regions, CollectorColumns(*self._collectors))

    def _record_columns(self) -> RecordColumns:
        """The records' columns: those of a few from their fields' lists, of many as ``RecordColumns`` reads them.

        A few records' columns are a fixed number of small conversions, their fields read before (during the
        GPU wait); many records are read at once through the combinations of their repeating fields
        (``RecordColumns.of_rows``), which costs less than one list per field (~30% on 100k records).
        """
        if self._records is None:
            records = self._record_items
            kinds = set(map(type, records))
            if kinds == {Record}:
                return RecordColumns.of(records)
            if kinds != {tuple}:
                records = [r if type(r) is tuple else _record_tuple(r) for r in records]
            return RecordColumns.of_rows(records)
        return _field_columns(*self._records)


def _field_columns(
    annotation: list[Any],
    config: list[Any],
    run: list[Any],
    kernel: list[Any],
    metric: list[Any],
    value: list[Any],
    unit: list[Any],
    seq: list[Any],
) -> RecordColumns:
    """The records' columns from their fields' lists (a few records: see :meth:`Gather._record_columns`)."""
    n = len(value)
    return RecordColumns(
        _text(annotation),
        np.array(config, dtype=np.int64),
        np.fromiter(run, np.int64, n),
        _text(kernel),
        _text(metric),
        np.fromiter(value, np.float64, n),
        _text(unit),
        np.array(seq, dtype=np.int64),
    )


def _output_columns(records: list[Any]) -> RecordColumns:
    """The columns of ``records`` as :meth:`Gather._add_records` then :meth:`Gather._record_columns` make them.

    A few record rows (the run loop's tuples of a deferred session's runs: cupti's ``record_rows``) are read in one
    transposition, ``zip(*records)``, rather than a pass per field into a fresh :class:`Gather`'s lists (~60 records:
    ~4 against ~16 us on the 2-core VM, after the GPU wait); records of another kind or count go through it.
    """
    if records and len(records) <= SMALL and set(map(type, records)) == {tuple} and set(map(len, records)) == {8}:
        return _field_columns(*map(list, zip(*records, strict=True)))
    gather = Gather(collectors=False)
    gather._add_records(records)
    return gather._record_columns()


def with_outputs(parts: RunParts, rows: Sequence[Any]) -> RunParts:
    """The columns of ``rows``, given ``parts``: those of the same rows without their records and attributes.

    A batch of runs whose outputs all came back after the GPU wait (a session collected in batches: cupti) had
    its rows' keys, regions and collector values gathered during the wait, from rows whose records and
    attributes were left out (see :class:`~nsightx._results.rowparts.PartsAhead`). What is left after the wait is
    the records' columns, the runs' record counts and the regions' attributes, made here as :meth:`Gather.add`
    of all ``rows`` at once followed by :meth:`Gather.finish` makes them; every other column is ``parts``'s.

    ``rows``: rows only (a run object as :func:`as_row` makes it).
    """
    records = list(itertools.chain.from_iterable(map(itemgetter(2), rows)))
    attributes: list[Any] | None = None
    if any(map(itemgetter(4), rows)):
        attributes = []
        _extend_attributes(attributes, rows)
    runs, regions = parts.runs, parts.regions
    n_records = np.fromiter(map(len, map(itemgetter(2), rows)), np.int64, len(rows))
    return RunParts(
        RunColumns(runs.config, runs.run, n_records, runs.n_regions, runs.n_collectors),
        _output_columns(records),
        RegionColumns(
            regions.annotation,
            regions.config,
            regions.run,
            regions.host_ns,
            regions.failed,
            attributes if attributes is not None and any(attributes) else None,
        ),
        parts.collectors,  # gathered for these runs only: handed over as they are
    )


def _text(column: list[Any]) -> Text:
    """``Text.of`` the strings of ``column``; a column of one string (a call's metric, its unit) without a dict.

    ``list.count`` compares in C, by identity first (the run loop hands the same string object run after run):
    ~0.3 against ~2 us for the 44 runs of the sweep, ~1 us a column after the GPU wait.
    """
    n = len(column)
    if n and column.count(column[0]) == n:
        return Text(np.zeros(n, dtype=code_type(1)), [column[0]])
    return Text.of(column, n)


def _extend_attributes(out: list[Any], rows: Sequence[Any]) -> None:
    """Append to ``out`` per region execution of ``rows`` its attributes (``{}`` for none)."""
    append, extend = out.append, out.extend
    for row in rows:
        attributes, regions = row[4], row[3]
        if type(attributes) is list:  # a run object's, per region (see as_row)
            extend(attributes)
        elif len(regions) == 1:  # most runs time one region: no generator per run (~2x as fast, issue 35)
            append(attributes.get(regions[0][0]) or {})
        else:
            extend([attributes.get(region[0]) or {} for region in regions])


def as_row(run: RunRecords) -> tuple[Any, ...]:
    """A run object as a row, its regions' attributes kept per region (a list: see :func:`_extend_attributes`)."""
    regions = [(g.annotation, g.host_ns, g.failed) for g in run.regions]
    values = tuple(map(_collector_tuple, run.collectors))
    return (run.config, run.run, run.records, regions, [g.attributes for g in run.regions], values)
