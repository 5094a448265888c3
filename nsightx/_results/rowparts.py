"""A call's runs as the sink stored them, read into columns without one Python object per run, record or region.

The run loop hands the sink each run as a compact row (:data:`~nsightx._results.rows.RunRow`). Making the
:class:`~nsightx._results.records.RunRecords`, :class:`~nsightx._results.records.RegionRun` and
:class:`~nsightx._results.records.Record` objects of those rows and then reading them back into the result's
columns cost ~1.4 us a run beside an empty region on the host backend, of a call of ~7.5 us (issue 35). A
:class:`StoredRuns` hands :func:`~nsightx._results.profileresults.build_results` the rows themselves: their columns
(:meth:`StoredRuns.parts`) come from the tuples in a few C-level passes per field (gathered into lists, then
converted once: :mod:`~nsightx._results.rowgather`; a deferred call's first configs during its GPU wait, see
:class:`PartsAhead`), and the objects are made only when something reads them (``ProfileResults.data``,
``records``), through :meth:`StoredRuns.objects`.

The columns are those :meth:`~nsightx._results.store.RunParts.of` makes of the objects, field for field.
"""

from __future__ import annotations

import itertools
import operator
import threading
from collections.abc import Callable, Iterator, Sequence
from operator import itemgetter
from typing import Any

from nsightx._results.records import RunRecords
from nsightx._results.rowgather import Gather, as_row, with_outputs
from nsightx._results.rows import RunRow, runs_from_rows
from nsightx._results.runblock import RunBlock, concat_parts
from nsightx._results.schema import gc_paused
from nsightx._results.sharedcolumns import shared_collector_parts
from nsightx._results.store import (
    RunColumns,
    RunParts,
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
        frame: Any = None,
    ) -> None:
        """Keep ``items``; ``made`` is called once the objects were made (the run stage freezes them there).

        ``ahead``: the columns of the first of ``items``, gathered already (see :class:`PartsAhead`). ``frame``:
        the frame's pieces computed during the wait (a :class:`~nsightx._results.frameahead.FrameAhead`).
        """
        self._items = list(items)
        self._objects: list[RunRecords] | None = None
        self._made = made
        self._ahead = ahead
        self._frame = frame
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

    def frame_ahead(self, parts: RunParts) -> Any:
        """The frame's pieces computed during the wait, when they were computed from these runs; else None.

        ``parts``: :meth:`parts` of these runs, the columns of the result (see
        :meth:`~nsightx._results.frameahead.FrameAhead.bound`). Handed out once.
        """
        frame, self._frame = self._frame, None
        if frame is None:
            return None
        return frame.bound([item[5] if type(item) is tuple else item for item in self._items], parts.collectors)

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


SHARED_MIN_RUNS = 128
"""From this many runs, :class:`RunValues` answers are spread per shared mapping (:mod:`.sharedcolumns`); fewer
runs expand each answer into its rows (:func:`~nsightx._results.rows.values_rows`), the same columns.

The spread's fixed cost (a few dozen numpy calls) is more than a small call's rows cost: on an H100 host the
matmul sweep's call (44 runs, ~8 samples) spent ~0.33 ms more after the GPU wait with the spread
(``benchmarks/call_phases.py``, 06:57 against 06:45, session 17); on the 2-core VM the two break even at ~50-100
runs, and at 200 runs the spread takes ~15-25% less."""


class PartsAhead:
    """The columns of a sink's first runs, gathered before the result asks for them.

    The run loop writes a deferred session's runs while the session still waits for the later ones (a GPU
    session: while the GPU works through them) and, each time a config's last run was written there, has the
    sink gather the runs it stored since (:meth:`add`): their fields go into one Python list per column
    (:class:`~nsightx._results.rowgather.Gather`), their :class:`RunValues` answers (the nvml plugin's, one a
    run) made into rows. What is left after the last wait is the last config's runs and one conversion per
    column (:meth:`parts`), with no join of pieces: the columns are those :func:`parts_from_rows` makes of all
    the runs at once, field for field, whatever the call's size.
    """

    def __init__(self) -> None:
        self.gathered = Gather()
        self._bare: tuple[list[Any], list[RunRow], RunParts] | None = None
        """Set by :meth:`expect`: the items stored then, the rows expected after them, and the columns of both
        without records and attributes."""

    @property
    def upto(self) -> int:
        """How many of the sink's items are gathered."""
        return self.gathered.count

    def add(self, items: Sequence[RunRow | RunRecords | RunBlock]) -> None:
        """Gather the items after those gathered already (none while a run block is among them: it may grow)."""
        self._bare = None  # the runs are gathered as they come back: what expect kept is of no use
        chunk = items[self.upto :]
        if RunBlock not in set(map(type, chunk)):
            self.gathered.add(chunk, SHARED_MIN_RUNS)

    def parts(self, items: Sequence[RunRow | RunRecords | RunBlock]) -> RunParts | None:
        """The columns of ``items`` (of which the first are gathered), or ``None`` to read them all at once.

        All at once when nothing was gathered ahead, when a run block is among the rest, and when the call's
        :class:`RunValues` answers are spread per shared mapping (see :class:`~nsightx._results.rowgather.Gather`).
        Nothing gathered ahead but the columns kept by :meth:`expect`: those, with the runs' outputs added, when
        ``items`` are the runs they were read from.
        """
        if not self.upto:
            return self._filled(items)
        if self.upto > len(items):
            return None
        rest = items[self.upto :]
        if RunBlock in set(map(type, rest)):
            return None
        self.gathered.add(rest, SHARED_MIN_RUNS)
        return self.gathered.finish()

    def expect(
        self, items: Sequence[RunRow | RunRecords | RunBlock], expected: list[RunRow], parts: RunParts | None = None
    ) -> None:
        """Keep the columns of ``items`` and of the runs ``expected`` after them, records and attributes left out.

        For a session collected in batches (cupti): every run of its last batch comes back after the GPU wait, so
        nothing is gathered ahead run by run (:meth:`add`); its runs' keys, regions and collector values are
        known before the wait, and their columns are read during it (the sink's ``prepare_frame`` reads them for
        the frame's pieces). :meth:`parts` then adds the records and attributes of the runs as they were stored
        (:func:`~nsightx._results.rowgather.with_outputs`), when they are those runs (else it reads them all at
        once, as without this).

        ``expected``: rows whose records and attributes are empty (:func:`bare_row`). ``parts``: the columns of
        ``items`` and ``expected`` as bare rows, when read already (else they are read here).
        """
        self._bare = None
        if self.upto or not expected or RunBlock in set(map(type, items)):
            return
        before = list(items)
        if parts is None:
            bare = [bare_row(item if type(item) is tuple else as_row(item)) for item in before]  # type: ignore[arg-type]
            parts = parts_from_rows([*bare, *expected])
        self._bare = (before, list(expected), parts)

    def _filled(self, items: Sequence[RunRow | RunRecords | RunBlock]) -> RunParts | None:
        """The columns of ``items`` from those gathered by :meth:`expect`, if they are its runs; else None (once)."""
        bare, self._bare = self._bare, None
        if bare is None:
            return None
        before, expected, parts = bare
        n = len(before)
        rest: Sequence[Any] = items[n:]
        if len(rest) != len(expected) or not all(map(operator.is_, items[:n], before)):
            return None
        if set(map(type, rest)) != {tuple}:
            return None
        if not all(map(operator.is_, map(_VALUES, rest), map(_VALUES, expected))):
            return None  # the collector values: the same tuple object, as the run loop hands them over
        if list(map(_BARE_KEYS, rest)) != list(map(_BARE_KEYS, expected)):
            return None
        rows = [item if type(item) is tuple else as_row(item) for item in items]  # type: ignore[arg-type]
        return with_outputs(parts, rows)


_VALUES = itemgetter(5)
_BARE_KEYS = itemgetter(0, 1, 3)
"""A row's config, run and regions: what :meth:`PartsAhead.expect` read of it beside its collector values."""


def bare_row(row: tuple[Any, ...]) -> RunRow:
    """A run's row without its records and attributes: its keys, regions and collector values (the same objects)."""
    return (row[0], row[1], (), row[3], {}, row[5])


def _key(item: RunRow | RunRecords | RunBlock) -> tuple[int, int]:
    """(config, run) of a stored item (of its first run, for a block)."""
    if type(item) is RunBlock:
        return item.config, item.first
    return (item[0], item[1]) if type(item) is tuple else (item.config, item.run)  # type: ignore[union-attr]


def _count(item: RunRow | RunRecords | RunBlock) -> int:
    """How many runs a stored item holds (a block holds many)."""
    return len(item) if type(item) is RunBlock else 1


def parts_from_rows(items: Sequence[RunRow | RunRecords | RunBlock]) -> RunParts:
    """The columns of the runs ``items`` stand for (what ``RunParts.of(runs_from_rows(items))`` makes).

    A :class:`RunRecords` among them (the ONCE collector values, a run written as an object) is read as the
    row it would be. The rows are gathered into lists and converted (:class:`~nsightx._results.rowgather.Gather`);
    a call of :data:`SHARED_MIN_RUNS` runs or more with :class:`RunValues` answers has them spread per shared
    mapping (:mod:`.sharedcolumns`).
    """
    if RunBlock in set(map(type, items)):
        return _with_blocks(items)
    gather = Gather()
    gather.add(items, SHARED_MIN_RUNS)
    parts = gather.finish()
    return parts if parts is not None else _spread_parts(items)


def _spread_parts(items: Sequence[Any]) -> RunParts:
    """:func:`parts_from_rows` of rows whose :class:`RunValues` answers are spread per shared mapping."""
    rows: list[Any] = [item if type(item) is tuple else as_row(item) for item in items]
    gather = Gather(collectors=False)
    gather.add(rows, SHARED_MIN_RUNS)
    parts = gather.finish()
    assert parts is not None, "a gather without collector values is never spread"
    values: list[Any] = list(itertools.chain.from_iterable(map(itemgetter(5), rows)))
    n_collectors, collectors = shared_collector_parts(rows, values)
    runs = parts.runs
    runs = RunColumns(runs.config, runs.run, runs.n_records, runs.n_regions, n_collectors)
    return RunParts(runs, parts.records, parts.regions, collectors)


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
