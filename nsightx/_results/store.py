"""The primary data of a result: its values, runs, records, region executions and collector values as columns.

A result holds hundreds of thousands of values; as Python objects (one :class:`~nsightx._results.records.Record`,
:class:`~nsightx._results.records.RegionRun` or :class:`~nsightx._results.transform.RunValue` each) every reader
(the DataFrame, the Parquet file) paid an attribute look-up per object and field. :class:`ResultColumns` keeps
them as numpy arrays instead: integers and floats as they are, each string field as per-row codes into the short
list of its distinct strings (:class:`Text`). It is made once, either from the objects a call produced
(:meth:`ResultColumns.of`: one C-level pass per field) or straight from the arrays of a Parquet file (no object at
all); the objects, which ``ProfileResults.data`` and ``records`` still give, are built from it on first use
(:meth:`ResultColumns.run_records`, :meth:`ResultColumns.run_values`), with the same values.

Collector values are few (a handful per run, none per record) and of mixed types; they are kept as one Python list
per field. numpy only: pandas and pyarrow stay in the modules that build frames and files.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from operator import attrgetter, itemgetter
from typing import TYPE_CHECKING, Any

import numpy as np

from nsightx._results.records import new_collector_value, new_record, new_region_run, new_run_records
from nsightx._results.schema import gc_paused
from nsightx._results.transform import new_run_value

if TYPE_CHECKING:
    from nsightx._results.records import CollectorValue, Record, RegionRun, RunRecords, Scalar
    from nsightx._results.transform import RunValue

Ints = np.ndarray[Any, np.dtype[np.int64]]
"""An ``int64`` array (codes, configs, runs, ids)."""
Floats = np.ndarray[Any, np.dtype[np.float64]]
"""A ``float64`` array."""
Bools = np.ndarray[Any, np.dtype[np.bool_]]
"""A boolean array."""


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


_LUT_FACTOR = 4
"""Densify keys through a look-up array when their range is at most this many times the row count (else sort)."""
_MAX_PACKED = 1 << 62
"""Packed keys stay under this (int64); wider combinations are densified step by step."""
_DENSE_BLOCK = 1 << 16
"""Rows whose first positions :func:`dense_ids` writes at a time (no row-long ``arange``: 8 MB at a million)."""


def dense_ids(keys: Ints, reuse: bool = False) -> tuple[Ints, Ints]:
    """Dense ids of non-negative integer keys, numbered in first-seen order, and the first row of each id.

    ``reuse``: ``keys`` is the caller's own scratch array, which may become the ids (no second row-long array).
    """
    n = len(keys)
    if n == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    span = int(keys.max()) + 1
    if span <= _LUT_FACTOR * n + 1024:
        first = np.full(span, n, dtype=np.int64)
        for stop in range(n, 0, -_DENSE_BLOCK):  # from the last block: the earlier rows' writes come later
            start = max(stop - _DENSE_BLOCK, 0)
            # repeated index: the last write wins, so each key keeps its first row
            first[keys[start:stop][::-1]] = np.arange(stop - 1, start - 1, -1, dtype=np.int64)
        present = np.flatnonzero(first < n)
        firsts = first[present]
        order = np.argsort(firsts, kind="stable")
        rank = np.empty(span, dtype=np.int64)
        rank[present[order]] = np.arange(len(present), dtype=np.int64)
        if not reuse:
            return rank[keys], firsts[order]
        for start in range(0, n, _DENSE_BLOCK):
            keys[start : start + _DENSE_BLOCK] = rank[keys[start : start + _DENSE_BLOCK]]
        return keys, firsts[order]
    _, index, inverse = np.unique(keys, return_index=True, return_inverse=True)
    order = np.argsort(index, kind="stable")
    rank = np.empty(len(index), dtype=np.int64)
    rank[order] = np.arange(len(index), dtype=np.int64)
    return rank[inverse.reshape(-1)], index[order].astype(np.int64)


def group_ids(*columns: Ints) -> tuple[Ints, Ints]:
    """Dense ids of the distinct rows of several integer columns (first-seen order), and each id's first row.

    The ids number the combinations in the order ``groupby(..., sort=False)`` meets them. Up to
    :data:`_SMALL_ROWS` rows they are numbered with a dictionary of row tuples (the same ids): for the few dozen rows
    of a small result a dozen numpy calls per column cost more than the rows themselves (issue 35).
    """
    if columns and len(columns[0]) <= _SMALL_ROWS:
        return _small_group_ids(columns)
    packed: Ints | None = None
    width_so_far = 1
    for col in columns:
        if len(col) == 0:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        low = int(col.min())
        width = int(col.max()) - low + 1
        if width == 1 and packed is not None:  # one value: it tells no rows apart (the ids depend on equality alone)
            continue
        if packed is None:
            packed, width_so_far = col.astype(np.int64), width  # a copy (codes may be narrow, Text), in int64
            packed -= low
            continue
        if width_so_far * width >= _MAX_PACKED:
            packed, firsts = dense_ids(packed, reuse=True)
            width_so_far = len(firsts)
        # In place, the column widened element by element: no row-long temporary. ``packed * width + col`` may
        # wrap around in int64 before ``- low``; the wrapped sum minus ``low`` is still the exact key (< 2**62).
        packed *= width
        packed += col
        packed -= low
        width_so_far *= width
    assert packed is not None, "group_ids needs at least one column"
    return dense_ids(packed, reuse=True)


def same_ints(a: Ints, b: Ints) -> bool:
    """``np.array_equal`` of two 1-D integer arrays, by their bytes where they share a dtype.

    Integers of one dtype are equal exactly when their bytes are (no NaN, no negative zero). ``np.array_equal``
    is ~1.8 us of checks and temporaries a call on a few dozen rows; the frame of a call that computed its pieces
    ahead compares half a dozen such columns (issue 35). Arrays of different dtypes go to ``np.array_equal``.
    """
    if a.dtype != b.dtype:
        return bool(np.array_equal(a, b))
    return a.shape == b.shape and a.tobytes() == b.tobytes()


SMALL = 512
"""Columns of at most this many rows are made by Python loops over lists (a call of a few configs and runs): there,
numpy's per-call overhead (a few microseconds a call, a few dozen calls a result) costs more than the loops. The
arrays made are the same, dtype and all, as the vectorised path makes."""


def _small_text(items: Iterable[str | None]) -> Text:
    """:meth:`Text.of` for a few items: codes in first-seen order from a dict, no numpy call but the last.

    A column of one string (a call's metric, unit, its one region) is common: its names come from one C-level
    pass (``dict.fromkeys``) and its codes are zeros, without a dictionary call per item (~2.2 against 3.8 us for
    44 items); a column of several strings has its codes looked up in C (``map`` over the names' index, read
    into the array by ``np.fromiter``: ~4 against ~8 us for 50 items of 5 names, no list nor setdefault per item).
    """
    seq = items if isinstance(items, list) else list(items)
    first = dict.fromkeys(seq)
    if len(first) == 1:
        return Text(np.zeros(len(seq), dtype=code_type(1)), list(first))
    index = dict(zip(first, range(len(first)), strict=True))  # first-seen order: fromkeys keeps it
    codes = np.fromiter(map(index.__getitem__, seq), code_type(len(index)), len(seq))
    return Text(codes, list(index))


_SMALL_ROWS = 64
"""Up to this many rows :func:`group_ids` numbers the rows in Python (numpy's fixed costs dominate there)."""


def _small_group_ids(columns: Sequence[Ints]) -> tuple[Ints, Ints]:
    """:func:`group_ids` of a few rows: the row tuples numbered in first-seen order with a dictionary."""
    index: dict[tuple[int, ...], int] = {}
    firsts: list[int] = []
    ids: list[int] = []
    for row, key in enumerate(zip(*(c.tolist() for c in columns), strict=True)):
        found = index.setdefault(key, len(index))
        if found == len(firsts):
            firsts.append(row)
        ids.append(found)
    return np.array(ids, dtype=np.int64), np.array(firsts, dtype=np.int64)


_CODE_TYPES = ((100, np.int8), (30_000, np.int16), (2_000_000_000, np.int32))
"""The narrowest signed type for codes into at most so many names (with headroom: ``codes + 1`` still fits)."""


def code_type(n_names: int) -> type[np.signedinteger[Any]]:
    """The integer type :class:`Text` keeps its codes in, for ``n_names`` distinct names."""
    for limit, kind in _CODE_TYPES:
        if n_names <= limit:
            return kind
    return np.int64


@dataclass(frozen=True, eq=False)
class Text:
    """A column of strings (or ``None``): per row, a code into :attr:`names`.

    The codes are kept in the narrowest signed integer type that fits the names (:func:`code_type`; a result's
    names are few, so usually ``int8`` or ``int16``): they are a large part of a result's memory. Code that does
    arithmetic on them (packing several columns into one key) widens them first.
    """

    codes: Ints
    """Per row, the index of its string in :attr:`names`."""
    names: list[str | None]
    """The strings the codes index (each once; ``None`` stands for a missing one)."""

    def __post_init__(self) -> None:
        kind = code_type(len(self.names))
        if self.codes.dtype != kind:
            object.__setattr__(self, "codes", self.codes.astype(kind))

    @classmethod
    def of(cls, items: Iterable[str | None], n: int) -> Text:
        """The column of ``n`` strings (one C-level pass)."""
        if n <= SMALL:
            return _small_text(items)
        enc = Encoder()
        codes = enc.encode(items, n)
        return cls(codes, enc.values)

    def strings(self) -> list[str | None]:
        """The per-row strings (the same string object for equal rows)."""
        return list(map(self.names.__getitem__, self.codes.tolist()))


def _fields(
    items: Sequence[Any],
    strings: Sequence[str],
    numbers: Sequence[str],
    key: Callable[[Any], tuple[Any, ...]] | None = None,
) -> dict[str, Any]:
    """Columns of fields that repeat (names, config, seq) from one pass over ``items``.

    The combinations of those fields are few (one per region, kernel, metric and config), so the items are read
    once for all of them (one tuple each) and each column is then made per combination and spread to the rows.
    ``key`` reads those fields of an item, in that order (default: the attributes of those names). A few items
    (:data:`SMALL`) are read field by field from their tuples instead: the same columns, fewer numpy calls.
    """
    if len(items) <= SMALL:
        rows = list(map(key or attrgetter(*strings, *numbers), items))
        small: dict[str, Any] = {name: _small_text(map(itemgetter(i), rows)) for i, name in enumerate(strings)}
        for i, name in enumerate(numbers, start=len(strings)):
            small[name] = np.array(list(map(itemgetter(i), rows)), dtype=np.int64)
        return small
    enc = Encoder()
    combo = enc.encode(map(key or attrgetter(*strings, *numbers), items), len(items))
    distinct = enc.values
    out: dict[str, Any] = {}
    for i, name in enumerate(strings):
        per_combo = Text.of((d[i] for d in distinct), len(distinct))
        out[name] = Text(per_combo.codes[combo], per_combo.names)
    for i, name in enumerate(numbers, start=len(strings)):
        out[name] = np.array([d[i] for d in distinct], dtype=np.int64)[combo]
    return out


def _ints(items: Sequence[Any], name: str) -> Ints:
    return np.fromiter(map(attrgetter(name), items), np.int64, len(items))


def _floats(items: Sequence[Any], name: str) -> Floats:
    return np.fromiter(map(attrgetter(name), items), np.float64, len(items))


@dataclass(frozen=True, eq=False)
class ValueColumns:
    """The per-run values (``ResultData.values``), one row each, in order."""

    annotation: Text
    config: Ints
    run: Ints
    metric: Text
    value: Floats
    unit: Text
    kernel: Text

    @property
    def n(self) -> int:
        """Number of rows."""
        return len(self.value)

    @classmethod
    def of(cls, values: Sequence[RunValue]) -> ValueColumns:
        """The columns of ``values``."""
        f = _fields(values, ("annotation", "metric", "unit", "kernel"), ("config",))
        run, value = _ints(values, "run"), _floats(values, "value")
        return cls(f["annotation"], f["config"], run, f["metric"], value, f["unit"], f["kernel"])

    def objects(self) -> tuple[RunValue, ...]:
        """The values as :class:`~nsightx._results.transform.RunValue` objects."""
        return tuple(
            map(
                new_run_value,
                self.annotation.strings(),
                self.config.tolist(),
                self.run.tolist(),
                self.metric.strings(),
                self.value.tolist(),
                self.unit.strings(),
                self.kernel.strings(),
            )
        )


_RECORD_STRINGS = ("annotation", "kernel", "metric", "unit")
_RECORD_NUMBERS = ("config", "seq")


@dataclass(frozen=True, eq=False)
class RecordColumns:
    """Every raw record of every run, in the order of the runs."""

    annotation: Text
    config: Ints
    run: Ints
    kernel: Text
    metric: Text
    value: Floats
    unit: Text
    seq: Ints

    @property
    def n(self) -> int:
        """Number of rows."""
        return len(self.value)

    @classmethod
    def of(cls, records: Sequence[Record]) -> RecordColumns:
        """The columns of ``records``."""
        f = _fields(records, _RECORD_STRINGS, _RECORD_NUMBERS)
        run, value = _ints(records, "run"), _floats(records, "value")
        return cls(f["annotation"], f["config"], run, f["kernel"], f["metric"], value, f["unit"], f["seq"])

    @classmethod
    def of_rows(cls, rows: Sequence[tuple[Any, ...]]) -> RecordColumns:
        """The columns of records given as tuples of their fields in declaration order (``RecordRow``).

        The same columns as :meth:`of` the :class:`~nsightx._results.records.Record` objects of those tuples.
        """
        n = len(rows)
        f = _fields(rows, _RECORD_STRINGS, _RECORD_NUMBERS, itemgetter(0, 3, 4, 6, 1, 7))
        run = np.fromiter(map(itemgetter(2), rows), np.int64, n)
        value = np.fromiter(map(itemgetter(5), rows), np.float64, n)
        return cls(f["annotation"], f["config"], run, f["kernel"], f["metric"], value, f["unit"], f["seq"])

    def objects(self) -> list[Record]:
        """The records as :class:`~nsightx._results.records.Record` objects."""
        return list(
            map(
                new_record,
                self.annotation.strings(),
                self.config.tolist(),
                self.run.tolist(),
                self.kernel.strings(),
                self.metric.strings(),
                self.value.tolist(),
                self.unit.strings(),
                self.seq.tolist(),
            )
        )


@dataclass(frozen=True, eq=False)
class RegionColumns:
    """Every region execution of every run, in the order of the runs."""

    annotation: Text
    config: Ints
    run: Ints
    host_ns: Ints
    failed: Bools
    attributes: list[Mapping[str, Scalar]] | None
    """Per row, the backend's attributes of the execution; ``None`` when no execution has any (the host backend)."""

    @property
    def n(self) -> int:
        """Number of rows."""
        return len(self.host_ns)

    @classmethod
    def of(cls, regions: Sequence[RegionRun]) -> RegionColumns:
        """The columns of ``regions``."""
        n = len(regions)
        attrs = list(map(attrgetter("attributes"), regions))
        return cls(
            Text.of(map(attrgetter("annotation"), regions), n),
            _ints(regions, "config"),
            _ints(regions, "run"),
            _ints(regions, "host_ns"),
            np.fromiter(map(bool, map(attrgetter("failed"), regions)), np.bool_, n),
            attrs if any(attrs) else None,
        )

    def objects(self) -> list[RegionRun]:
        """The executions as :class:`~nsightx._results.records.RegionRun` objects."""
        n = self.n
        attrs = self.attributes if self.attributes is not None else [{} for _ in range(n)]
        return list(
            map(
                new_region_run,
                self.annotation.strings(),
                self.config.tolist(),
                self.run.tolist(),
                self.host_ns.tolist(),
                self.failed.tolist(),
                attrs,
            )
        )


@dataclass(frozen=True, eq=False)
class CollectorColumns:
    """Every collector value of every run, in the order of the runs: one list per field (they are few)."""

    name: list[str]
    scope: list[str]
    config: list[int | None]
    run: list[int | None]
    annotation: list[str | None]
    value: list[Scalar]

    @classmethod
    def of(cls, values: Sequence[CollectorValue]) -> CollectorColumns:
        """The columns of ``values``."""
        fields = ("name", "scope", "config", "run", "annotation", "value")
        return cls(*(list(map(attrgetter(f), values)) for f in fields))

    def objects(self) -> list[CollectorValue]:
        """The values as :class:`~nsightx._results.records.CollectorValue` objects."""
        return list(map(new_collector_value, self.name, self.scope, self.config, self.run, self.annotation, self.value))


@dataclass(frozen=True, eq=False)
class RunColumns:
    """One row per run: its keys and how many records, region executions and collector values it holds."""

    config: Ints
    run: Ints
    n_records: Ints
    n_regions: Ints
    n_collectors: Ints

    @classmethod
    def of(cls, runs: Sequence[RunRecords]) -> RunColumns:
        """The columns of ``runs``."""
        count = len(runs)
        sizes = (np.fromiter(map(len, map(attrgetter(f), runs)), np.int64, count) for f in _PARTS)
        return cls(_ints(runs, "config"), _ints(runs, "run"), *sizes)


_PARTS = ("records", "regions", "collectors")


@dataclass(frozen=True, eq=False)
class RunParts:
    """The columns of a result's runs, before its values are known."""

    runs: RunColumns
    records: RecordColumns
    regions: RegionColumns
    collectors: CollectorColumns

    @classmethod
    def of(cls, runs: Sequence[RunRecords]) -> RunParts:
        """The columns of ``runs`` (one pass per field over the objects)."""
        flat = [list(itertools.chain.from_iterable(map(attrgetter(part), runs))) for part in _PARTS]
        return cls(
            RunColumns.of(runs), RecordColumns.of(flat[0]), RegionColumns.of(flat[1]), CollectorColumns.of(flat[2])
        )

    def with_values(self, values: ValueColumns) -> ResultColumns:
        """The whole result's columns."""
        return ResultColumns(values, self.runs, self.records, self.regions, self.collectors)


@dataclass(frozen=True, eq=False)
class ResultColumns:
    """A result's runs and values as columns (see the module docstring)."""

    values: ValueColumns
    runs: RunColumns
    records: RecordColumns
    regions: RegionColumns
    collectors: CollectorColumns

    @classmethod
    def of(cls, runs: Sequence[RunRecords], values: Sequence[RunValue]) -> ResultColumns:
        """The columns of a result's runs and values (one pass per field over the objects)."""
        return RunParts.of(runs).with_values(ValueColumns.of(values))

    def run_records(self) -> tuple[RunRecords, ...]:
        """The runs as :class:`~nsightx._results.records.RunRecords` objects (records, regions, collectors)."""
        r = self.runs
        with gc_paused():  # millions of objects and no cycles: a collection would walk all of them again and again
            parts: tuple[list[Any], ...] = (
                self.records.objects(),
                self.regions.objects(),
                self.collectors.objects(),
            )
            grouped = [
                _split(part, n.tolist())
                for part, n in zip(parts, (r.n_records, r.n_regions, r.n_collectors), strict=True)
            ]
            return tuple(map(new_run_records, r.config.tolist(), r.run.tolist(), *grouped))

    def run_values(self) -> tuple[RunValue, ...]:
        """The per-run values as :class:`~nsightx._results.transform.RunValue` objects."""
        with gc_paused():
            return self.values.objects()


def one_per_region(records: RecordColumns, regions: RegionColumns, ignored: Iterable[str]) -> ValueColumns | None:
    """The per-run values as ``combine_records`` makes them, when each region execution has exactly one record.

    That is the common case (a host, events or single-kernel result: one time per region): the records, run by
    run, are then one per region execution, in the same order, and none failed; each value is its record, so the
    values are the record columns themselves, found with a few vectorised comparisons and no Python object.
    ``None`` when the result is not of that shape (several kernels or metrics per region, a failed region, an
    ignored kernel, records without a region): ``combine_records`` then works on the objects.
    """
    n = records.n
    if n != regions.n or bool(regions.failed.any()):
        return None
    if n <= SMALL:
        return _one_per_region_small(records, regions, ignored)
    kernels = records.kernel
    if set(ignored) & {kernels.names[k] for k in np.unique(kernels.codes).tolist()}:
        return None
    index = {name: i for i, name in enumerate(records.annotation.names)}
    lut = np.array([index.get(name, -1) for name in regions.annotation.names] + [-1], dtype=np.int64)
    same = (
        np.array_equal(lut[regions.annotation.codes], records.annotation.codes)
        and np.array_equal(regions.config, records.config)
        and np.array_equal(regions.run, records.run)
    )
    if not same:
        return None
    if len(group_ids(records.annotation.codes, records.config, records.run)[1]) != n:
        return None  # a region id met twice: combine_records merges those
    return ValueColumns(
        records.annotation, records.config, records.run, records.metric, records.value, records.unit, records.kernel
    )


def _one_per_region_small(
    records: RecordColumns, regions: RegionColumns, ignored: Iterable[str]
) -> ValueColumns | None:
    """:func:`one_per_region` for a few rows (:data:`SMALL`): the same tests on Python lists, fewer numpy calls."""
    kernels = records.kernel
    if set(ignored) & {kernels.names[k] for k in set(kernels.codes.tolist())}:
        return None
    index = {name: i for i, name in enumerate(records.annotation.names)}
    names = [index.get(name, -1) for name in regions.annotation.names]
    annotations = records.annotation.codes.tolist()
    configs, runs = records.config.tolist(), records.run.tolist()
    same = (
        [names[c] for c in regions.annotation.codes.tolist()] == annotations
        and regions.config.tolist() == configs
        and regions.run.tolist() == runs
    )
    if not same or len(set(zip(annotations, configs, runs, strict=True))) != len(annotations):
        return None  # not one record per region execution, or a region id met twice (combine_records merges those)
    return ValueColumns(
        records.annotation, records.config, records.run, records.metric, records.value, records.unit, records.kernel
    )


def _split(entries: list[Any], counts: list[int]) -> Iterator[tuple[Any, ...]]:
    """``entries`` cut into consecutive tuples of ``counts`` entries each."""
    it = iter(entries)
    return map(tuple, map(itertools.islice, itertools.repeat(it), counts))
