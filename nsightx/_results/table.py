"""A columnar view of a result: numpy arrays over its values, regions and collector values, built once per result.

The stored form of a result is a :class:`~nsightx._results.schema.ResultData` of Python records, one object per
value; turning a million of them into a DataFrame row by row (dictionary look-ups, string work, pandas inserts per
column) cost seconds. :func:`table_of` reads each part once and keeps it as arrays:

- one row per :class:`~nsightx._results.transform.RunValue`: the value as ``float64`` and the row's combination
  of (annotation, metric, kernel, unit, config), read together in one pass; per combination (they are few) the
  codes of its strings (each field with its list of distinct values) and its config, so work that depends only on
  those (groups, kernel names, units) is done per combination; per-row code columns and the run index (``int64``)
  are made when first read;
- one row per :class:`~nsightx._results.records.RegionRun` (each column made when first read): annotation code,
  config, run, host time, failed, and the attributes the quality flags read, as numbers;
- the collector values, with the per-row look-up of each collector column done once per distinct key
  (config, run, or run and annotation), never per row.

Each part is one pass over ``data.values`` or ``data.runs`` with C-level iteration (``map``, ``np.fromiter``). The
table is cached per result object (the model is frozen, so it cannot go stale) and dropped with it. numpy only:
pandas stays in :mod:`nsightx._results.dataframe`.
"""

from __future__ import annotations

import functools
import itertools
import math
import threading
import weakref
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from operator import attrgetter, methodcaller
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from nsightx._results.records import CollectorValue, Record, RegionRun, RunRecords, Scalar
    from nsightx._results.schema import ResultData

Ints = np.ndarray[Any, np.dtype[np.int64]]
"""An ``int64`` array (codes, configs, runs, ids)."""
Floats = np.ndarray[Any, np.dtype[np.float64]]
"""A ``float64`` array."""
MISSING = -1
"""The code of a row that has no value (a collector that did not report for that row)."""

_LUT_FACTOR = 4
"""Densify keys through a look-up array when their range is at most this many times the row count (else sort)."""
_MAX_PACKED = 1 << 62
"""Packed keys stay under this (int64); wider combinations are densified step by step."""


class Encoder:
    """Dense integer codes for hashable values, numbered in first-seen order; shareable by several columns.

    Values are told apart by ``==`` and ``hash``, so only strings, ``None``, ints and tuples of those are encoded
    this way (``1``, ``1.0`` and ``True`` would share a code).
    """

    def __init__(self) -> None:
        self._index: dict[Hashable, int] = {}
        self._seen = 0

    @property
    def values(self) -> list[Any]:
        """The distinct values, the one with code ``i`` at position ``i``."""
        return list(self._index)

    def encode(self, items: Iterable[Hashable], n: int) -> Ints:
        """The codes of ``n`` items (one C-level pass: ``dict.setdefault`` remembers each value's first position)."""
        first = np.fromiter(map(self._index.setdefault, items, itertools.count(self._seen)), dtype=np.int64, count=n)
        self._seen += n
        return np.searchsorted(self.first_positions, first).astype(np.int64, copy=False)

    @property
    def first_positions(self) -> Ints:
        """Where each distinct value was first met, counting every item encoded so far (ascending)."""
        return np.fromiter(self._index.values(), dtype=np.int64, count=len(self._index))


def dense_ids(keys: Ints) -> tuple[Ints, Ints]:
    """Dense ids of non-negative integer keys, numbered in first-seen order, and the first row of each id."""
    n = len(keys)
    if n == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    span = int(keys.max()) + 1
    if span <= _LUT_FACTOR * n + 1024:
        first = np.full(span, n, dtype=np.int64)
        first[keys[::-1]] = np.arange(n - 1, -1, -1, dtype=np.int64)  # repeated index: the last write wins
        present = np.flatnonzero(first < n)
        firsts = first[present]
        order = np.argsort(firsts, kind="stable")
        rank = np.empty(span, dtype=np.int64)
        rank[present[order]] = np.arange(len(present), dtype=np.int64)
        return rank[keys], firsts[order]
    _, index, inverse = np.unique(keys, return_index=True, return_inverse=True)
    order = np.argsort(index, kind="stable")
    rank = np.empty(len(index), dtype=np.int64)
    rank[order] = np.arange(len(index), dtype=np.int64)
    return rank[inverse.reshape(-1)], index[order].astype(np.int64)


def group_ids(*columns: Ints) -> tuple[Ints, Ints]:
    """Dense ids of the distinct rows of several integer columns (first-seen order), and each id's first row.

    The ids number the combinations in the order ``groupby(..., sort=False)`` meets them.
    """
    packed: Ints | None = None
    width_so_far = 1
    for col in columns:
        if len(col) == 0:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        low = int(col.min())
        width = int(col.max()) - low + 1
        shifted = col - low
        if packed is None:
            packed, width_so_far = shifted, width
            continue
        if width_so_far * width >= _MAX_PACKED:
            packed, firsts = dense_ids(packed)
            width_so_far = len(firsts)
        packed = packed * width + shifted
        width_so_far *= width
    assert packed is not None, "group_ids needs at least one column"
    return dense_ids(packed)


def _number(value: object) -> float:
    """A numeric attribute as float; NaN for anything else (bools included). As the flag rules read one."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return math.nan


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


class RegionColumns:
    """One row per region execution (``RegionRun``), in the order of ``data.runs``; each column made when first read.

    Most results never need most of them: the quality flags read the host time and the ids only where some
    execution has GPU-time evidence (the host backend's have none).
    """

    def __init__(self, runs: Sequence[RunRecords], table: ResultTable) -> None:
        self._runs = runs
        self._table = table

    @functools.cached_property
    def _regions(self) -> list[RegionRun]:
        return list(itertools.chain.from_iterable(map(attrgetter("regions"), self._runs)))

    @functools.cached_property
    def n(self) -> int:
        """Number of region executions."""
        return len(self._regions)

    def _ints(self, name: str) -> Ints:
        return np.fromiter(map(attrgetter(name), self._regions), dtype=np.int64, count=self.n)

    @functools.cached_property
    def annotation(self) -> Ints:
        """Code into :attr:`ResultTable.annotations`."""
        return self._table.annotation_codes(map(attrgetter("annotation"), self._regions), self.n)

    @functools.cached_property
    def config(self) -> Ints:
        """Config index."""
        return self._ints("config")

    @functools.cached_property
    def run(self) -> Ints:
        """Run index."""
        return self._ints("run")

    @functools.cached_property
    def host_ns(self) -> Floats:
        """Host wall time (ns)."""
        return np.fromiter(map(attrgetter("host_ns"), self._regions), dtype=np.float64, count=self.n)

    @functools.cached_property
    def failed(self) -> np.ndarray[Any, np.dtype[np.bool_]]:
        """Whether the region raised (and ``ignore_failures`` swallowed it)."""
        return np.fromiter(map(bool, map(attrgetter("failed"), self._regions)), dtype=np.bool_, count=self.n)

    @functools.cached_property
    def _with_attributes(self) -> tuple[Ints, list[Mapping[str, Scalar]]]:
        """The executions that have attributes (positions, and their attribute mappings)."""
        get = attrgetter("attributes")
        if not any(any(map(get, run.regions)) for run in self._runs):  # the host backend records none
            return np.zeros(0, np.int64), []
        attrs = list(map(attrgetter("attributes"), self._regions))
        where = np.flatnonzero(np.fromiter(map(len, attrs), dtype=np.int64, count=self.n))
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

    @functools.cached_property
    def launch_bound(self) -> np.ndarray[Any, np.dtype[np.int8]]:
        """The backend's own ``launch_bound`` attribute: 1 true, 0 false, -1 absent or not a bool."""
        out = np.full(self.n, -1, dtype=np.int8)
        where, attrs = self._with_attributes
        if attrs:
            own = map(methodcaller("get", "launch_bound"), attrs)
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


def scope_kind(scope: str) -> str:
    """Which key a collector value of ``scope`` is stored under: once, config, run, or annotation (any other)."""
    return scope if scope in ("once", "config", "run") else "annotation"


class ResultTable:
    """The columnar view of one result (see the module docstring). Build it with :func:`table_of`."""

    def __init__(self, data: ResultData) -> None:
        vals = data.values
        n = len(vals)
        self.n = n
        """Number of value rows."""
        self._values = vals
        self._runs: tuple[RunRecords, ...] = data.runs  # not ``data``: the cache must not keep the result alive
        self._lock = threading.Lock()
        # One pass for five fields: the (annotation, metric, kernel, unit, config) combinations are few, and the
        # work per combination (codes, groups, kernels, units) is then done once per combination, not per row.
        combos = Encoder()
        self.combo: Ints = combos.encode(map(attrgetter("annotation", "metric", "kernel", "unit", "config"), vals), n)
        """Per value row, its combination of (annotation, metric, kernel, unit, config)."""
        self.combo_first: Ints = combos.first_positions
        """Per combination, its first value row."""
        distinct = combos.values
        encoders = [Encoder() for _ in range(4)]
        per_combo = [e.encode((c[i] for c in distinct), len(distinct)) for i, e in enumerate(encoders)]
        self.combo_annotation, self.combo_metric, self.combo_kernel, self.combo_unit = per_combo
        """Per combination, the codes of its annotation, metric, kernel and unit."""
        self.combo_config: Ints = np.array([c[4] for c in distinct], dtype=np.int64)
        self._annotation_codes = encoders[0]
        self.metrics: list[str] = encoders[1].values
        self.kernels: list[str] = encoders[2].values
        self.units: list[str | None] = encoders[3].values
        """Distinct metrics, kernels and units (a code is an index)."""
        self.value: Floats = np.fromiter(map(attrgetter("value"), vals), dtype=np.float64, count=n)

    @functools.cached_property
    def annotation(self) -> Ints:
        """Per value row, the code of its annotation in :attr:`annotations`."""
        return self.combo_annotation[self.combo]

    @functools.cached_property
    def metric(self) -> Ints:
        """Per value row, the code of its metric in :attr:`metrics`."""
        return self.combo_metric[self.combo]

    @functools.cached_property
    def kernel(self) -> Ints:
        """Per value row, the code of its kernel in :attr:`kernels`."""
        return self.combo_kernel[self.combo]

    @functools.cached_property
    def unit(self) -> Ints:
        """Per value row, the code of its unit in :attr:`units`."""
        return self.combo_unit[self.combo]

    @functools.cached_property
    def config(self) -> Ints:
        """Per value row, its config index."""
        return self.combo_config[self.combo]

    @functools.cached_property
    def run(self) -> Ints:
        """Per value row, its run index (read when first needed: only collectors and flags of runs need it)."""
        return np.fromiter(map(attrgetter("run"), self._values), dtype=np.int64, count=self.n)

    @property
    def annotations(self) -> list[str]:
        """Every annotation name met so far (values first, then regions and records), the code being the index."""
        return self._annotation_codes.values

    def annotation_codes(self, items: Iterable[str], n: int) -> Ints:
        """Codes of ``n`` annotation names in :attr:`annotations` (new names are added)."""
        with self._lock:  # the encoder is shared by the lazily built parts
            return self._annotation_codes.encode(items, n)

    @functools.cached_property
    def regions(self) -> RegionColumns:
        """The region executions as columns (each made from one pass over the runs' regions when first read)."""
        return RegionColumns(self._runs, self)

    def has_metric(self, metric: str) -> bool:
        """Whether any raw record is of ``metric`` (a C-level scan that stops at the first)."""
        get = attrgetter("metric")
        return any(metric in map(get, run.records) for run in self._runs)

    @functools.cached_property
    def records(self) -> list[Record]:
        """Every raw record, in the order of ``data.runs`` (the list itself; columns are made where needed)."""
        return list(itertools.chain.from_iterable(map(attrgetter("records"), self._runs)))

    @functools.cached_property
    def collector_values(self) -> list[CollectorValue]:
        """Every collector value, in the order of ``data.runs``."""
        return list(itertools.chain.from_iterable(map(attrgetter("collectors"), self._runs)))

    @functools.cached_property
    def collectors(self) -> tuple[dict[str, str], dict[tuple[str, str], dict[Any, Scalar]]]:
        """Collector name -> its first-seen scope, and (name, kind) -> {key: value} (the last value of a key wins).

        Keys are ``()`` (once), ``(config,)``, ``(config, run)`` and ``(config, run, annotation)``.
        """
        scopes: dict[str, str] = {}
        tables: dict[tuple[str, str], dict[Any, Scalar]] = {}
        fields = attrgetter("name", "scope", "config", "run", "annotation", "value")
        for name, scope, config, run, annotation, value in map(fields, self.collector_values):
            scopes.setdefault(name, scope)
            if scope == "run":  # the common case first
                tables.setdefault((name, "run"), {})[(config, run)] = value
            elif scope == "once":
                tables.setdefault((name, "once"), {})[()] = value
            elif scope == "config":
                tables.setdefault((name, "config"), {})[(config,)] = value
            else:
                tables.setdefault((name, "annotation"), {})[(config, run, annotation)] = value
        return scopes, tables

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
        if kind == "once":
            value = mapping.get(())
            return ([], np.full(self.n, MISSING, np.int64)) if value is None else ([value], np.zeros(self.n, np.int64))
        keys = self.row_keys(kind)
        values = list(map(mapping.get, keys.keys))  # one dictionary look-up per distinct key
        present = np.array([v is not None for v in values], dtype=np.bool_)
        per_key = np.where(present, np.cumsum(present) - 1, MISSING)
        return [v for v in values if v is not None], per_key[keys.ids]

    def collector_rows(self, name: str) -> tuple[list[Scalar], Ints]:
        """The values of collector ``name`` per value row, as the per-run frame shows them (see :meth:`lookup`)."""
        scopes, tables = self.collectors
        kind = scope_kind(scopes[name])
        return self.lookup(kind, tables.get((name, kind), {}))


_CACHE: dict[int, tuple[weakref.ReferenceType[ResultData], ResultTable]] = {}
_CACHE_LOCK = threading.Lock()


def table_of(data: ResultData) -> ResultTable:
    """The (cached) columnar view of ``data``; built on first use and forgotten when ``data`` is."""
    key = id(data)
    entry = _CACHE.get(key)
    if entry is not None and entry[0]() is data:
        return entry[1]
    table = ResultTable(data)
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
