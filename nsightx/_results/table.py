"""A columnar view of a result, for the DataFrames and the flags: codes, groups and look-ups over its columns.

A result's primary data is :class:`~nsightx._results.store.ResultColumns` (numpy arrays and the few distinct
strings). :class:`ResultTable` reads them as the frames need them:

- one row per per-run value: its codes, config, run and value as they are, and the row's combination of
  (annotation, metric, kernel, unit, config), numbered in first-seen order with one vectorised pass, so work that
  depends only on those (groups, kernel names, units) is done per combination (they are few);
- one row per region execution (:class:`RegionView`): annotation code, config, run, host time, failed, and the
  attributes the quality flags read, as numbers;
- the collector values, with the per-row look-up of each collector column done once per distinct key
  (config, run, or run and annotation), never per row.

No Python loop runs per value or per record. :func:`table_of` makes the table of a ``ResultData`` of objects (its
columns read from them once) and caches it per result object (the model is frozen, so it cannot go stale);
``ProfileResults`` keeps the table of its own columns. numpy only: pandas stays in
:mod:`nsightx._results.dataframe`.
"""

from __future__ import annotations

import functools
import math
import threading
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from operator import methodcaller
from typing import TYPE_CHECKING, Any

import numpy as np

from nsightx._results.collectorblock import ClockItem, ClockValues, file_block, run_block
from nsightx._results.store import Encoder, Floats, Ints, ResultColumns, dense_ids, group_ids
from nsightx.columns import CLOCK_EVENT_REASONS, MEASURED_SM_CLOCK

if TYPE_CHECKING:
    from nsightx._results.records import CollectorValue, Scalar
    from nsightx._results.schema import ResultData
    from nsightx._results.store import RegionColumns, Text, ValueColumns

__all__ = [
    "MISSING",
    "Encoder",
    "Floats",
    "Ints",
    "ResultTable",
    "ClockItem",
    "RowKeys",
    "dense_ids",
    "group_ids",
    "table_of",
]
MISSING = -1
"""The code of a row that has no value (a collector that did not report for that row)."""


def _number(value: object) -> float:
    """A numeric attribute as float; NaN for anything else (bools included). As the flag rules read one."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return math.nan


_NONE = type(None)


def _numbers_list(values: list[object]) -> list[float]:
    """:func:`_number` of each value, as a list; values of the plain kinds (float, int, missing) without a call each.

    ``float`` of an int or float is what :func:`_number` returns for it, NaN for a missing value (an attribute
    that an execution does not have: often every execution, such as the events backend's ``device_ns``); any
    other kind (a bool, a numpy scalar, a string) goes through :func:`_number` itself.
    """
    kinds = set(map(type, values))
    if kinds == {float}:
        return values  # type: ignore[return-value]
    if kinds == {_NONE}:
        return [math.nan] * len(values)
    if not kinds <= {float, int, _NONE}:
        return list(map(_number, values))
    if _NONE in kinds:
        return [math.nan if v is None else float(v) for v in values]  # type: ignore[arg-type]
    return list(map(float, values))  # type: ignore[arg-type]


def numbers(values: Sequence[object]) -> Floats:
    """:func:`_number` of each value, vectorised for the common types (int, float, missing)."""
    out = np.full(len(values), np.nan)
    kinds = list(map(type, values))
    simple = {int, float, bool, str, type(None)}
    if not simple.issuperset(kinds):
        return np.fromiter(map(_number, values), dtype=np.float64, count=len(values))
    idx = [i for i, k in enumerate(kinds) if k is int or k is float]
    if idx:
        out[idx] = np.array([values[i] for i in idx], dtype=np.float64)
    return out


class AnnotationIndex:
    """The code of each annotation name met so far in one result (values first, then regions and records).

    Shared by a :class:`ResultTable` and its :class:`RegionView`, which adds the names of region executions
    when it is first read. The view holds this and not the table: a view that held its table made a reference
    cycle (table -> cached view -> table) with every table a frame built, so each ``to_dataframe()`` left its
    table, columns and collector tables to the cyclic garbage collector instead of reference counting (~3,650
    objects a 400-run host call with the nvml double on a CPU; ~2,060 a 200-run call of a 16 KiB op on the H100,
    session 27).
    """

    def __init__(self, names: Sequence[str | None]) -> None:
        self._lock = threading.Lock()  # the lazily built parts may add names from several threads
        self._index: dict[str | None, int] = {name: i for i, name in enumerate(names)}

    def names(self) -> list[str | None]:
        """Every name met so far; a code is an index into it."""
        return list(self._index)

    def codes(self, names: Text) -> Ints:
        """Codes of a column of annotation names (new names are added; per distinct name, not per row)."""
        with self._lock:
            index = self._index
            lut = np.array([index.setdefault(name, len(index)) for name in names.names], dtype=np.int64)
        return lut[names.codes] if len(lut) else np.zeros(len(names.codes), np.int64)


class RegionView:
    """One row per region execution, in the order of ``data.runs``, as the flags read them.

    Most results never need most of them: the quality flags read the host time and the ids only where some
    execution has GPU-time evidence (the host backend's have none).
    """

    def __init__(self, regions: RegionColumns, annotations: AnnotationIndex) -> None:
        self._regions = regions
        self._annotations = annotations
        self.n = regions.n
        """Number of region executions."""
        self.config: Ints = regions.config
        """Config index."""
        self.run: Ints = regions.run
        """Run index."""
        self.failed: np.ndarray[Any, np.dtype[np.bool_]] = regions.failed
        """Whether the region raised (and ``ignore_failures`` swallowed it)."""

    @functools.cached_property
    def annotation(self) -> Ints:
        """Code into :attr:`ResultTable.annotations`."""
        return self._annotations.codes(self._regions.annotation)

    @functools.cached_property
    def host_ns(self) -> Floats:
        """Host wall time (ns)."""
        return self._regions.host_ns.astype(np.float64)

    @functools.cached_property
    def _with_attributes(self) -> tuple[Ints, list[Mapping[str, Scalar]]]:
        """The executions that have attributes (positions, and their attribute mappings)."""
        attrs = self._regions.attributes
        if attrs is None:  # the host backend records none
            return np.zeros(0, np.int64), []
        sizes = list(map(len, attrs))
        if 0 not in sizes:  # every execution has some (a GPU backend's): all of them, in order
            return np.arange(self.n, dtype=np.intp), list(attrs)
        where = np.flatnonzero(np.array(sizes, dtype=np.int64))
        return where, [attrs[i] for i in where.tolist()]

    @property
    def has_attributes(self) -> bool:
        """Whether any execution has attributes."""
        return bool(self._with_attributes[1])

    def attribute(self, name: str) -> Floats:
        """A numeric attribute per execution (NaN when absent or not a number; a bool is not a number)."""
        out = np.full(self.n, np.nan)
        where, attrs = self._with_attributes
        if attrs:
            out[where] = numbers(list(map(methodcaller("get", name), attrs)))
        return out

    def attribute_lists(self, names: Sequence[str]) -> list[list[float]]:
        """Several numeric attributes per execution, read in one pass over the executions' mappings.

        Per name, a list of floats with :meth:`attribute`'s numbers (NaN when absent or not a number). For a few
        executions the flags judge them in plain Python: one pass here, where one :meth:`attribute` per name walks
        the mappings once each and makes a numpy array each (issue 35).
        """
        where, attrs = self._with_attributes
        every = len(attrs) == self.n  # every execution has attributes (a GPU backend's): no placement
        places = None if every else where.tolist()
        out = []
        for name in names:
            got = _numbers_list(list(map(methodcaller("get", name), attrs)))
            if every:
                out.append(got)
                continue
            column = [math.nan] * self.n
            for i, number in zip(places, got, strict=True):  # type: ignore[arg-type]
                column[i] = number
            out.append(column)
        return out

    @functools.cached_property
    def launch_bound(self) -> np.ndarray[Any, np.dtype[np.int8]]:
        """The backend's own ``launch_bound`` attribute: 1 true, 0 false, -1 absent or not a bool."""
        out = np.full(self.n, -1, dtype=np.int8)
        where, attrs = self._with_attributes
        own = list(map(methodcaller("get", "launch_bound"), attrs))
        if own and set(map(type, own)) != {type(None)}:  # some execution has one (cupti's); else all -1
            out[where] = [int(v) if isinstance(v, bool) else -1 for v in own]
        return out


@dataclass(frozen=True, eq=False)
class RowKeys:
    """The distinct keys of the value rows at one level (config, run, or run and annotation)."""

    ids: Ints
    """Per value row, the index of its key in :attr:`keys`."""
    keys: list[tuple[Any, ...]]
    """The distinct keys, as the collector tables spell them: ``(config,)``, ``(config, run)``,
    ``(config, run, annotation)``."""

    def __post_init__(self) -> None:
        self.ids.setflags(write=False)  # handed out as it is (:meth:`ResultTable.lookup`), so never changed


def _key(kind: str, config: int | None, run: int | None, annotation: str | None) -> tuple[Any, ...]:
    """The key, in a collector table of ``kind``, of a collector value of that config, run and annotation."""
    if kind == "run":
        return (config, run)
    if kind == "once":
        return ()
    if kind == "config":
        return (config,)
    return (config, run, annotation)


def scope_kind(scope: str) -> str:
    """Which key a collector value of ``scope`` is stored under: once, config, run, or annotation (any other)."""
    return scope if scope in ("once", "config", "run") else "annotation"


@dataclass(frozen=True, eq=False)
class Combinations:
    """A table's (annotation, metric, kernel, unit, config) combinations of value rows, in first-seen order.

    They are few, and the work per combination (groups, kernels, units) is done once per combination, not per row.
    """

    ids: Ints
    """Per value row, its combination."""
    first: Ints
    """Per combination, its first value row."""
    annotation: Ints
    metric: Ints
    kernel: Ints
    unit: Ints
    """Per combination, the codes of its annotation, metric, kernel and unit."""
    config: Ints
    """Per combination, its config."""

    @classmethod
    def of(cls, v: ValueColumns) -> Combinations:
        """The combinations of the value rows ``v``.

        A text column of one name (a call's metric, kernel, unit) tells no rows apart: it is left out of the key
        (the same ids, which depend on equality alone; a small result's rows are numbered as tuples, shorter
        without it).
        """
        keyed = [c.codes for c in (v.annotation, v.metric, v.kernel, v.unit) if len(c.names) > 1]
        ids, first = group_ids(*keyed, v.config)
        codes = (v.annotation.codes[first], v.metric.codes[first], v.kernel.codes[first], v.unit.codes[first])
        return cls(ids, first, *codes, v.config[first])


class ResultTable:
    """The columnar view of one result (see the module docstring). Build it with :func:`table_of`."""

    def __init__(self, columns: ResultColumns) -> None:
        v = columns.values
        self.n = v.n
        """Number of value rows."""
        self.columns = columns
        """The result's columns this view reads."""
        self.annotation: Ints = v.annotation.codes
        self.metric: Ints = v.metric.codes
        self.kernel: Ints = v.kernel.codes
        self.unit: Ints = v.unit.codes
        """Per value row, the codes of its annotation, metric, kernel and unit (indices into the lists below)."""
        self.config: Ints = v.config
        self.run: Ints = v.run
        """Per value row, its config and run index."""
        self.value: Floats = v.value
        """Per value row, the value."""
        self.metrics: list[str] = v.metric.names  # type: ignore[assignment]
        self.kernels: list[str] = v.kernel.names  # type: ignore[assignment]
        self.units: list[str | None] = v.unit.names
        """Distinct metrics, kernels and units (a code is an index)."""
        self._annotations = AnnotationIndex(v.annotation.names)

    @functools.cached_property
    def combinations(self) -> Combinations:
        """The value rows' (annotation, metric, kernel, unit, config) combinations (:class:`Combinations`).

        Found at the first read, not when the table is made: a deferred call's frame hands its table the ones
        computed during the GPU wait where they are provably the same (:meth:`FrameAhead.take
        <nsightx._results.frameahead.FrameAhead.take>`), so the frame does not number its rows again (issue 35).
        """
        return Combinations.of(self.columns.values)

    @property
    def annotations(self) -> list[str]:
        """Every annotation name met so far (values first, then regions and records), the code being the index."""
        return self._annotations.names()  # type: ignore[return-value]

    def annotation_codes(self, names: Text) -> Ints:
        """Codes of a column of annotation names in :attr:`annotations` (new names are added; per distinct name)."""
        return self._annotations.codes(names)

    @functools.cached_property
    def regions(self) -> RegionView:
        """The region executions as columns."""
        return RegionView(self.columns.regions, self._annotations)

    def has_metric(self, metric: str) -> bool:
        """Whether any raw record is of ``metric``."""
        names = self.columns.records.metric
        return metric in names.names and bool((names.codes == names.names.index(metric)).any())

    @functools.cached_property
    def collector_values(self) -> list[CollectorValue]:
        """Every collector value, in the order of ``data.runs`` (objects, built once; they are a few per run)."""
        return self.columns.collectors.objects()

    @property
    def clock_values(self) -> list[ClockItem]:
        """The run-scope ``MeasuredSMClockMHz`` and ``ClockEventReasons`` values, in order: (name, config, run, value).

        All that the throttling verdict and the measured clocks read (``throttled_runs``, ``measured_clocks``
        skip every other value): with the nvml plugin, half of the values, as plain tuples (an object each was a
        quarter of the frame's time spent on collectors, issue 35). Values without a config are left out, as the
        rules leave them out; a missing run reads as run 0, as the rules read it. Gathered in the same pass over
        the collector values as :attr:`collectors` (one pass where there were two).
        """
        return self._collector_pass[2]

    @property
    def collectors(self) -> tuple[dict[str, str], dict[tuple[str, str], dict[Any, Scalar]]]:
        """Collector name -> its first-seen scope, and (name, kind) -> {key: value} (the last value of a key wins).

        Keys are ``()`` (once), ``(config,)``, ``(config, run)`` and ``(config, run, annotation)``.
        """
        scopes, tables, _ = self._collector_pass
        return scopes, tables

    @functools.cached_property
    def _collector_pass(
        self,
    ) -> tuple[dict[str, str], dict[tuple[str, str], dict[Any, Scalar]], list[ClockItem]]:
        """:attr:`collectors` and :attr:`clock_values`, from one pass over the collector values.

        Where the values end in a block of the same collectors run after run (a call with the nvml plugin), the
        values before it are filed here one by one and the block a collector at a time
        (:mod:`nsightx._results.collectorblock`); the tables, scopes and clock items are the same either way.
        """
        c = self.columns.collectors
        scopes: dict[str, str] = {}
        tables: dict[tuple[str, str], dict[Any, Scalar]] = {}
        clocks: list[ClockItem] = []
        wanted = (MEASURED_SM_CLOCK, CLOCK_EVENT_REASONS)
        start, period = run_block(c)
        head: tuple[list[Any], ...] = (c.name, c.scope, c.config, c.run, c.annotation, c.value)
        if period:  # the loop files what comes before the block
            head = tuple(column[:start] for column in head)
        # One pass in plain Python: a few values per run, where sorting them by (name, kind) cost more (issue 35).
        # ``current`` holds, per name, the scope its last value had, that scope's kind, its table and whether its
        # run-scope values are clock items: a value of the same scope (the usual case) is stored with one look-up
        # by name and no call. The (config, run) keys are made by ``zip`` (in C), not one tuple display a value.
        current: dict[str, tuple[str, str, dict[Any, Scalar], bool]] = {}
        names, scope_list, configs, runs, annotations, values = head
        for name, scope, key, annotation, value in zip(
            names, scope_list, zip(configs, runs, strict=False), annotations, values, strict=True
        ):
            entry = current.get(name)
            if entry is None or entry[0] != scope:
                scopes.setdefault(name, scope)
                kind = scope_kind(scope)
                clock = kind == "run" and name in wanted
                entry = current[name] = (scope, kind, tables.setdefault((name, kind), {}), clock)
            kind = entry[1]
            if kind == "run":
                entry[2][key] = value  # the last value of a key wins, where it was first
                if entry[3] and key[0] is not None:
                    clocks.append((name, key[0], key[1] or 0, value))
            elif kind == "once":
                entry[2][()] = value
            elif kind == "config":
                entry[2][key[:1]] = value
            else:
                entry[2][(*key, annotation)] = value
        if period:

            def file(name: str, scope: str) -> tuple[dict[Any, Scalar], str]:
                scopes.setdefault(name, scope)
                kind = scope_kind(scope)
                return tables.setdefault((name, kind), {}), kind

            block = file_block(c, start, period, file, wanted)
            if clocks or not isinstance(block, ClockValues):
                clocks += block
            else:
                clocks = block  # the block holds every clock item: its columns go with them
        return scopes, tables, clocks

    def row_keys(self, kind: str) -> RowKeys:
        """The distinct keys of the value rows for a collector scope kind (``config``, ``run``, ``annotation``)."""
        if kind == "config":
            return self._config_keys
        if kind == "run":
            return self._run_keys
        if kind == "annotation":
            return self._annotation_keys
        raise ValueError(f"row_keys({kind!r}): the kinds are 'config', 'run' and 'annotation'")

    @functools.cached_property
    def _config_keys(self) -> RowKeys:
        ids, firsts = group_ids(self.config)
        return RowKeys(ids, [(c,) for c in self.config[firsts].tolist()])

    @functools.cached_property
    def _run_keys(self) -> RowKeys:
        ids, firsts = group_ids(self.config, self.run)
        return RowKeys(ids, list(zip(self.config[firsts].tolist(), self.run[firsts].tolist(), strict=True)))

    @functools.cached_property
    def _annotation_keys(self) -> RowKeys:
        ids, firsts = group_ids(self.config, self.run, self.annotation)
        names = self.annotations
        configs, runs = self.config[firsts].tolist(), self.run[firsts].tolist()
        annotations = self.annotation[firsts].tolist()
        return RowKeys(ids, [(c, r, names[a]) for c, r, a in zip(configs, runs, annotations, strict=True)])

    def lookup(self, kind: str, mapping: Mapping[Any, Scalar]) -> tuple[list[Scalar], Ints]:
        """Per value row, ``mapping`` at the row's key of ``kind`` (``once``: the key ``()``).

        Returns:
            The values found (one per distinct key that has a value other than ``None``) and, per row, the index
            of its value in that list, or :data:`MISSING`.
        """
        found, codes, _ = self._lookup(kind, mapping)
        return found, codes

    def _lookup(self, kind: str, mapping: Mapping[Any, Scalar]) -> tuple[list[Scalar], Ints, bool]:
        """:meth:`lookup`, and whether every value found is used by a row and every row has one (``dense``)."""
        if kind == "once":
            value = mapping.get(())
            if value is None:
                return [], np.full(self.n, MISSING, np.int64), self.n == 0
            return [value], np.zeros(self.n, np.int64), self.n > 0
        keys = self.row_keys(kind)
        values = list(map(mapping.get, keys.keys))  # one dictionary look-up per distinct key
        if None not in values:  # every key has a value (a collector that reported every run); scalars never == None
            return values, keys.ids, True  # each key is some row's, by construction
        present = np.array([v is not None for v in values], dtype=np.bool_)
        per_key = np.where(present, np.cumsum(present) - 1, MISSING)
        return [v for v in values if v is not None], per_key[keys.ids], False

    def collector_rows(self, name: str) -> tuple[list[Scalar], Ints]:
        """The values of collector ``name`` per value row, as the per-run frame shows them (see :meth:`lookup`)."""
        found, codes, _ = self.collector_column(name)
        return found, codes

    def collector_column(self, name: str) -> tuple[list[Scalar], Ints, bool]:
        """:meth:`collector_rows`, and whether every value found is some row's and every row has one.

        The frames' column builder skips its count over the rows when this is known (issue 35).
        """
        scopes, tables = self.collectors
        kind = scope_kind(scopes[name])
        return self._lookup(kind, tables.get((name, kind), {}))


_CACHE: dict[int, tuple[weakref.ReferenceType[ResultData], ResultTable]] = {}
_CACHE_LOCK = threading.Lock()


def table_of(data: ResultData) -> ResultTable:
    """The (cached) columnar view of ``data``; built on first use and forgotten when ``data`` is."""
    key = id(data)
    entry = _CACHE.get(key)
    if entry is not None and entry[0]() is data:
        return entry[1]
    table = ResultTable(ResultColumns.of(data.runs, data.values))
    with _CACHE_LOCK:
        entry = _CACHE.get(key)
        if entry is not None and entry[0]() is data:
            return entry[1]
        _CACHE[key] = (weakref.ref(data), table)
        weakref.finalize(data, _forget, key, table)
    return table


def _forget(key: int, table: ResultTable) -> None:
    """Drop the cache entry of a result that was collected (unless the id was reused by a newer entry)."""
    with _CACHE_LOCK:
        entry = _CACHE.get(key)
        if entry is not None and entry[1] is table:
            del _CACHE[key]
