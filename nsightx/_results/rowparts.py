"""A call's runs as the sink stored them, read into columns without one Python object per run, record or region.

The run loop hands the sink each run as a compact row (:data:`~nsightx._results.rows.RunRow`). Making the
:class:`~nsightx._results.records.RunRecords`, :class:`~nsightx._results.records.RegionRun` and
:class:`~nsightx._results.records.Record` objects of those rows and then reading them back into the result's
columns cost ~1.4 us a run beside an empty region on the host backend, of a call of ~7.5 us (issue 35). A
:class:`StoredRuns` hands :func:`~nsightx._results.profileresults.build_results` the rows themselves: their columns
(:meth:`StoredRuns.parts`) come from the tuples in a few C-level passes, and the objects are made only when
something reads them (``ProfileResults.data``, ``records``), through :meth:`StoredRuns.objects`.

The columns are those :meth:`~nsightx._results.store.RunParts.of` makes of the objects, field for field.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Iterator, Sequence
from operator import attrgetter, itemgetter
from typing import Any

import numpy as np

from nsightx._results.records import Record, RunRecords
from nsightx._results.rows import RunRow, RunValues, runs_from_rows, values_rows
from nsightx._results.runblock import RunBlock, concat_parts
from nsightx._results.schema import gc_paused
from nsightx._results.sharedcolumns import shared_collector_parts
from nsightx._results.store import (
    CollectorColumns,
    RecordColumns,
    RegionColumns,
    RunColumns,
    RunParts,
    Text,
)


class StoredRuns(Sequence[RunRecords]):
    """Every run a sink stored, in order: compact rows (or run objects), made into objects only when read.

    A sequence of :class:`RunRecords` to whoever indexes or iterates it (those are made once, all at once, with
    the garbage collector paused); :meth:`parts` reads the columns straight from the rows.
    """

    def __init__(
        self,
        items: Sequence[RunRow | RunRecords | RunBlock],
        made: Callable[[], None] | None = None,
        ahead: PartsAhead | None = None,
    ) -> None:
        """Keep ``items``; ``made`` is called once the objects were made (the run stage freezes them there).

        ``ahead``: the columns of the first of ``items``, built already (see :class:`PartsAhead`).
        """
        self._items = list(items)
        self._objects: list[RunRecords] | None = None
        self._made = made
        self._ahead = ahead
        self._lock = threading.Lock()

    @classmethod
    def of_objects(cls, runs: Sequence[RunRecords]) -> StoredRuns:
        """The runs given as objects already (their columns are then read from the objects)."""
        stored = cls(())
        stored._items = stored._objects = list(runs)  # type: ignore[assignment]  # objects are items too
        return stored

    def objects(self) -> list[RunRecords]:
        """The runs as :class:`RunRecords` objects (made on the first call, then kept)."""
        if self._objects is None:
            with self._lock:
                if self._objects is None:
                    with gc_paused():  # many objects and no cycle (see gc_paused)
                        self._objects = runs_from_rows(self._items)
                        if self._made is not None:
                            self._made()
        return self._objects

    def parts(self) -> RunParts:
        """The runs' columns, read from the rows (no object per run, record or region)."""
        if self._objects is not None:
            return RunParts.of(self._objects)
        if self._ahead is not None:
            parts = self._ahead.parts(self._items)
            if parts is not None:
                return parts
        return parts_from_rows(self._items)

    def measured(self) -> int:
        """How many runs are measured ones (config index >= 0)."""
        return sum(_count(item) for item in self._items if _key(item)[0] >= 0)

    def __getstate__(self) -> dict[str, Any]:
        """The state to pickle (a result that has not built its objects yet holds its stored runs): no lock."""
        return {"_items": self._items, "_objects": self._objects}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["_items"])  # type: ignore[misc]  # a fresh lock
        self._objects = state["_objects"]

    def __len__(self) -> int:
        if self._objects is not None:
            return len(self._objects)
        return sum(map(_count, self._items))

    def __getitem__(self, index: Any) -> Any:
        return self.objects()[index]

    def __iter__(self) -> Iterator[RunRecords]:
        return iter(self.objects())


AHEAD_MIN_RUNS = 64
"""The fewest runs :class:`PartsAhead` builds the columns of in one piece.

On the 2-core VM (``benchmarks/overlap_wait.py``' device, one region and one record a run), the columns of 40 runs
cost 60 us at once against 114 us as three pieces built ahead, the last one and the join (a piece costs ~34 us
and the join ~80 us whatever their size); at 4 x 50 runs 200 against 156 us, at 4 x 200 660 against 300."""


class PartsAhead:
    """The columns of a sink's first runs, built in pieces before the result asks for them.

    The run loop writes a deferred session's runs while the session still waits for the later ones (a GPU
    session: while the GPU works through them) and, each time a config's last run was written there, has the
    sink build the columns of the runs it stored since the last piece (:meth:`add`). What is left to build after
    the last wait is the last pieces' runs and the join (``concat_parts``), not every run's columns: the columns
    are those :func:`parts_from_rows` makes of all the runs at once, field for field. A piece holds at least
    :data:`AHEAD_MIN_RUNS` runs (those of several configs when they are short), since each piece and the join
    have a fixed cost.

    Runs too few for a piece still have their :class:`RunValues` answers (the nvml plugin's, one a run) made
    into their rows ahead (:attr:`expanded`), what :func:`parts_from_rows` does to each run of a call under
    :data:`SHARED_MIN_RUNS` runs (~2 us a run on the 2-core VM: ~80 of the ~180 us of the 44-run sweep's columns),
    and their collector values into the collector columns' lists (:attr:`fields`, ~20 us more of those).
    """

    def __init__(self) -> None:
        self.pieces: list[RunParts] = []
        self.upto = 0
        """How many of the sink's items the pieces hold."""
        self.shared = False
        """Whether a piece holds :class:`RunValues` answers (see :meth:`parts`)."""
        self.expanded: list[Any] = []
        """While no piece is built: the first items, each run's :class:`RunValues` answers made into rows."""
        self.fields: list[list[Any]] = [[] for _ in _COLLECTOR_ITEMS]
        """The collector columns' lists of the :attr:`expanded` items' values (see :func:`_collector_columns`)."""
        self.n_values = 0
        """How many values :attr:`fields` hold."""

    def add(self, items: Sequence[RunRow | RunRecords | RunBlock]) -> None:
        """Build the columns of ``items`` after those the pieces hold (none while a run block is among them).

        Too few of them for a piece (and no piece built yet): their answers are expanded (see :attr:`expanded`).
        """
        chunk = items[self.upto :]
        if len(chunk) < AHEAD_MIN_RUNS or RunBlock in set(map(type, chunk)):  # a block may still grow
            if not self.pieces:
                self._expand(items)
            return
        self.pieces.append(parts_from_rows(chunk))
        self.upto = len(items)
        self.shared = self.shared or any(type(v) is RunValues for row in chunk if type(row) is tuple for v in row[5])
        self._forget()  # the pieces hold those runs

    def _expand(self, items: Sequence[RunRow | RunRecords | RunBlock]) -> None:
        """Append to :attr:`expanded` the items after those it holds (none from :data:`SHARED_MIN_RUNS` on)."""
        new = items[len(self.expanded) :]
        if len(items) >= SHARED_MIN_RUNS or RunBlock in set(map(type, new)):  # such a call is read otherwise
            self._forget()
            return
        rows = list(map(_expanded_item, new))
        self.expanded += rows
        values = [v if type(v) is tuple else _collector_tuple(v) for row in rows for v in _values_of(row)]
        for field, getter in zip(self.fields, _COLLECTOR_ITEMS, strict=True):
            field += map(getter, values)
        self.n_values += len(values)

    def _forget(self) -> None:
        """Drop what :meth:`_expand` made."""
        self.expanded, self.fields, self.n_values = [], [[] for _ in _COLLECTOR_ITEMS], 0

    def parts(self, items: Sequence[RunRow | RunRecords | RunBlock]) -> RunParts | None:
        """The columns of ``items`` (of which the pieces hold the first), or ``None`` to build them all at once.

        All at once when nothing was built ahead, and when a piece holds :class:`RunValues` answers and the call
        has :data:`SHARED_MIN_RUNS` runs or more (such a call's answers are spread per shared mapping, which costs
        less than a piece's rows then). Without a piece, from the items expanded ahead (:attr:`expanded`) and the
        rest expanded now: what :func:`parts_from_rows` makes of ``items``, field for field.
        """
        if not self.pieces:
            return self._from_expanded(items)
        if self.upto > len(items) or (self.shared and len(items) >= SHARED_MIN_RUNS):
            return None
        rest = items[self.upto :]
        pieces = [*self.pieces, parts_from_rows(rest)] if rest else self.pieces
        joined = pieces[0] if len(pieces) == 1 else concat_parts(pieces)
        self.pieces, self.upto = [joined], len(items)  # the pieces' own arrays are not kept beside the join's
        return joined

    def _from_expanded(self, items: Sequence[RunRow | RunRecords | RunBlock]) -> RunParts | None:
        """:func:`parts_from_rows` of ``items`` from :attr:`expanded`; ``None`` when it holds none of them."""
        done = self.expanded
        if not done or len(done) > len(items) or len(items) >= SHARED_MIN_RUNS:
            return None
        rest = items[len(done) :]
        if RunBlock in set(map(type, rest)):
            return None
        return parts_from_rows([*done, *map(_expanded_item, rest)], (self.n_values, self.fields))


def _key(item: RunRow | RunRecords | RunBlock) -> tuple[int, int]:
    """(config, run) of a stored item (of its first run, for a block)."""
    if type(item) is RunBlock:
        return item.config, item.first
    return (item[0], item[1]) if type(item) is tuple else (item.config, item.run)  # type: ignore[union-attr]


def _count(item: RunRow | RunRecords | RunBlock) -> int:
    """How many runs a stored item holds (a block holds many)."""
    return len(item) if type(item) is RunBlock else 1


_RECORD_FIELDS = ("annotation", "config", "run", "kernel", "metric", "value", "unit", "seq")
_record_tuple = attrgetter(*_RECORD_FIELDS)
"""A :class:`Record` object's fields as a tuple (a record row)."""


def parts_from_rows(
    items: Sequence[RunRow | RunRecords | RunBlock], known: tuple[int, list[list[Any]]] | None = None
) -> RunParts:
    """The columns of the runs ``items`` stand for (what ``RunParts.of(runs_from_rows(items))`` makes).

    A :class:`RunRecords` among them (the ONCE collector values, a run written as an object) is read as the
    row it would be. ``known``: the collector columns' lists of the first values of ``items`` and how many
    values those are (built ahead, see :class:`PartsAhead`; only when no item holds a :class:`RunValues`).
    """
    rows: Sequence[Any] = items
    kinds = set(map(type, items))
    if RunBlock in kinds:
        return _with_blocks(items)
    if kinds != {tuple}:  # a set of the types in one C-level pass: most often, rows alone
        rows = [item if type(item) is tuple else _as_row(item) for item in items]  # type: ignore[arg-type]
    count = len(rows)
    configs = np.fromiter(map(itemgetter(0), rows), np.int64, count)
    run_ids = np.fromiter(map(itemgetter(1), rows), np.int64, count)
    n_records, n_regions = (np.fromiter(map(len, map(itemgetter(i), rows)), np.int64, count) for i in (2, 3))
    values: list[Any] = list(itertools.chain.from_iterable(map(itemgetter(5), rows)))
    kinds = set(map(type, values))
    if RunValues in kinds and count < SHARED_MIN_RUNS:  # few runs: each answer as its rows, as a plain mapping's
        rows = [_expanded(row) if any(type(v) is RunValues for v in row[5]) else row for row in rows]
        values = list(itertools.chain.from_iterable(map(itemgetter(5), rows)))
        kinds = set(map(type, values))
    if RunValues in kinds:  # answers that stand for several values each: spread per shared mapping
        n_collectors, collectors = shared_collector_parts(rows, values)
    else:  # most calls have no collector with something to say: no pass over the rows then
        n_collectors = (
            np.fromiter(map(len, map(itemgetter(5), rows)), np.int64, count) if values else np.zeros(count, np.int64)
        )
        collectors = _collector_columns(values, kinds) if known is None else _joined(values, *known)
    runs = RunColumns(configs, run_ids, n_records, n_regions, n_collectors)
    regions = _region_columns(rows, configs, run_ids, n_regions)
    return RunParts(runs, _record_columns(rows), regions, collectors)


def _record_columns(rows: Sequence[Any]) -> RecordColumns:
    """The records of ``rows`` as columns: rows of fields (the host session's), objects (GPU backends'), or both.

    Records that are all :class:`Record` objects are read by attribute (``RecordColumns.of``), not made into
    tuples first (~10% of the record columns of the sweep's 40 records).
    """
    records: list[Any] = list(itertools.chain.from_iterable(map(itemgetter(2), rows)))
    kinds = set(map(type, records))
    if kinds == {Record}:
        return RecordColumns.of(records)
    if records and kinds != {tuple}:
        records = [r if type(r) is tuple else _record_tuple(r) for r in records]
    return RecordColumns.of_rows(records)


SHARED_MIN_RUNS = 128
"""From this many runs, :class:`RunValues` answers are spread per shared mapping (:mod:`.sharedcolumns`); fewer
runs expand each answer into its rows (:func:`~nsightx._results.rows.values_rows`), the same columns.

The spread's fixed cost (a few dozen numpy calls) is more than a small call's rows cost: on an H100 host the
matmul sweep's call (44 runs, ~8 samples) spent ~0.33 ms more after the GPU wait with the spread
(``benchmarks/call_phases.py``, 06:57 against 06:45, session 17); on the 2-core VM the two break even at ~50-100
runs, and at 200 runs the spread takes ~15-25% less."""


def _expanded(row: Any) -> Any:
    """``row`` with each :class:`RunValues` answer among its collector values replaced by the rows it stands for."""
    config, run = row[0], row[1]
    values: list[Any] = []
    for v in row[5]:
        if type(v) is RunValues:
            values.extend(values_rows(v, config, run))
        else:
            values.append(v)
    return (*row[:5], tuple(values))


def _expanded_item(item: Any) -> Any:
    """A stored item as :func:`parts_from_rows` reads it in a call of few runs: a row's answers expanded."""
    if type(item) is tuple and any(type(v) is RunValues for v in item[5]):
        return _expanded(item)
    return item


def _with_blocks(items: Sequence[Any]) -> RunParts:
    """:func:`parts_from_rows` of items among which are :class:`RunBlock` objects: each group's columns, joined."""
    parts: list[RunParts] = []
    rows: list[Any] = []
    for item in items:
        if type(item) is not RunBlock:
            rows.append(item)
            continue
        if rows:
            parts.append(parts_from_rows(rows))
            rows = []
        if len(item):
            parts.append(item.parts())
    if rows or not parts:
        parts.append(parts_from_rows(rows))
    return parts[0] if len(parts) == 1 else concat_parts(parts)


_COLLECTOR_FIELDS = ("name", "scope", "config", "run", "annotation", "value")
_collector_tuple = attrgetter(*_COLLECTOR_FIELDS)
"""A :class:`~nsightx._results.records.CollectorValue` object's fields as a tuple (a collector row)."""


def _collector_columns(values: list[Any], kinds: set[type]) -> CollectorColumns:
    """The columns of collector rows and objects (the run loop hands rows; a run object holds objects).

    ``kinds`` is the set of the types of ``values``.
    """
    if not values:
        return CollectorColumns([], [], [], [], [], [])
    if kinds != {tuple}:  # the run loop's rows are tuples already
        values = [v if type(v) is tuple else _collector_tuple(v) for v in values]
    # one pass per field, not zip(*values): that builds an argument tuple of every row and took ~1.5x as long
    # (the nvml plugin's seven values a run: ~2.5 us a run of a deferred call, on the path of the whole call)
    name, scope, config, run, annotation, value = (list(map(getter, values)) for getter in _COLLECTOR_ITEMS)
    return CollectorColumns(name, scope, config, run, annotation, value)


_COLLECTOR_ITEMS = tuple(map(itemgetter, range(len(_COLLECTOR_FIELDS))))
"""One getter per field of a collector row."""


def _joined(values: list[Any], known: int, fields: list[list[Any]]) -> CollectorColumns:
    """:func:`_collector_columns` of ``values``, the lists of whose first ``known`` values are ``fields``."""
    rest = values[known:]
    tail = _collector_columns(rest, set(map(type, rest)))
    return CollectorColumns(*(head + more for head, more in zip(fields, _fields_of(tail), strict=True)))


def _fields_of(columns: CollectorColumns) -> tuple[list[Any], ...]:
    """The lists of ``columns``, in the order of a collector row's fields."""
    return (columns.name, columns.scope, columns.config, columns.run, columns.annotation, columns.value)


def _values_of(item: Any) -> Sequence[Any]:
    """The collector values of a stored item (not a block): a row's sixth field, a run object's values."""
    return item[5] if type(item) is tuple else item.collectors


def _as_row(run: RunRecords) -> tuple[Any, ...]:
    """A run object as a row, its regions' attributes kept per region (the sixth field is for :func:`_attributes`)."""
    regions = [(g.annotation, g.host_ns, g.failed) for g in run.regions]
    values = tuple(map(_collector_tuple, run.collectors))
    return (run.config, run.run, run.records, regions, [g.attributes for g in run.regions], values)


def _region_columns(rows: Sequence[Any], configs: Any, run_ids: Any, n_regions: Any) -> RegionColumns:
    """The region executions of ``rows`` as columns (config and run spread from their run)."""
    flat: list[tuple[str, int, bool]] = list(itertools.chain.from_iterable(map(itemgetter(3), rows)))
    n = len(flat)
    return RegionColumns(
        Text.of(map(itemgetter(0), flat), n),
        np.repeat(configs, n_regions),
        np.repeat(run_ids, n_regions),
        np.fromiter(map(itemgetter(1), flat), np.int64, n),
        np.fromiter(map(bool, map(itemgetter(2), flat)), np.bool_, n),
        _attributes(rows),
    )


def _attributes(rows: Sequence[Any]) -> list[Any] | None:
    """Per region execution, its attributes; ``None`` when none has any (as ``RegionColumns.of`` makes them)."""
    if not any(map(itemgetter(4), rows)):
        return None
    out: list[Any] = []
    append, extend = out.append, out.extend
    for row in rows:
        attributes, regions = row[4], row[3]
        if type(attributes) is list:  # a run object's, per region (see _as_row)
            extend(attributes)
        elif len(regions) == 1:  # most runs time one region: no generator per run (~2x as fast, issue 35)
            append(attributes.get(regions[0][0]) or {})
        else:
            extend([attributes.get(region[0]) or {} for region in regions])
    return out if any(out) else None
