"""The consistency checks of a result, on the columns of a Parquet result, before any Python object is built.

The same guarantees as :func:`nsightx._results.integrity.check_result` gives a JSON file: each run's config and
run index in the plan's range and stored once (the ONCE-collector entry, config -1 run -1, holding no record or
region), each record and region execution the run's own and stored once within it, collector values naming a
config and run in range or none, and each per-run value belonging to a held run and stored once. Here they are
numpy operations over whole columns; only when one fails does the reader build the objects and let
``check_result`` name the first bad entry, by the same JSON path a JSON file's message would give.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from nsightx._results.integrity import Completeness
from nsightx._results.store import Bools, Ints, Text
from nsightx._results.table import group_ids

_MAX_PACKED = 1 << 62
"""Packed keys stay under this (``int64``); wider rows are told apart by sorting."""
_BLOCK = 1 << 16
"""Rows checked at a time (:func:`_part_fits`, :func:`_unique`, :func:`_held`): their temporaries stay this short."""

if TYPE_CHECKING:
    import pyarrow as pa

    from nsightx._results.schema import PlanInfo
    from nsightx._results.store import CollectorColumns, ResultColumns, ValueColumns


def ints(col: pa.ChunkedArray, null: int = -1) -> Ints:
    """An integer column as ``int64`` (nulls as ``null``)."""
    arr = col.combine_chunks() if col.num_chunks != 1 else col.chunk(0)
    if arr.null_count:
        arr = arr.fill_null(null)
    return np.asarray(arr.to_numpy(zero_copy_only=False), dtype=np.int64)


def text(col: pa.ChunkedArray) -> Text:
    """A string column as a :class:`~nsightx._results.store.Text` (nulls as ``None``).

    Equal strings get one code across chunks and dictionaries, and each distinct string is in the names once: the
    work is per distinct string, plus one take per row.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    index: dict[str | None, int] = {}
    parts = []
    for chunk in col.chunks:
        arr = chunk if pa.types.is_dictionary(chunk.type) else pc.dictionary_encode(chunk)
        lut = [index.setdefault(s, len(index)) for s in arr.dictionary.to_pylist()]
        indices = arr.indices
        if indices.null_count:
            lut.append(index.setdefault(None, len(index)))
            indices = indices.fill_null(len(lut) - 1)
        positions = indices.to_numpy(zero_copy_only=False)  # int32 as Arrow holds them; Text narrows them
        if lut != list(range(len(lut))):  # else (one chunk, distinct names: what nsightx writes) the codes are these
            positions = np.array(lut, dtype=np.int64)[positions]
        parts.append(positions)
    if len(parts) == 1:
        return Text(parts[0], list(index))
    return Text(np.concatenate(parts) if parts else np.zeros(0, np.int64), list(index))


def _unique(*columns: Ints) -> bool:
    """Whether the rows of the columns are distinct.

    Each row is packed into one key. Where the keys' range allows (the common case: it is about the row count)
    they are marked in a table of flags a block of rows at a time, the block's keys packed on the fly: a row
    repeats an earlier one when fewer flags are newly set than the block has rows. Only the flags (a byte per
    key) are made beside the columns, no row-long key array or count. Else the packed keys are sorted.
    """
    n = len(columns[0])
    if n == 0:
        return True
    lows, spans, width = [], [], 1
    for col in columns:
        low, high = int(col.min()), int(col.max())
        lows.append(low)
        spans.append(high - low + 1)
        if width * spans[-1] >= _MAX_PACKED:
            return len(group_ids(*columns)[1]) == n
        width *= spans[-1]
    if width > 4 * n + 1024:
        packed = _packed(columns, lows, spans, 0, n)
        packed.sort()
        return bool((packed[1:] != packed[:-1]).all())
    seen, marked = np.zeros(width, np.bool_), 0
    for start in range(0, n, _BLOCK):
        stop = min(start + _BLOCK, n)
        seen[_packed(columns, lows, spans, start, stop)] = True
        now = int(np.count_nonzero(seen))
        if now - marked != stop - start:
            return False
        marked = now
    return True


def _packed(columns: tuple[Ints, ...], lows: list[int], spans: list[int], start: int, stop: int) -> Ints:
    """The packed keys of rows ``start:stop`` (``(... (c0 - low0) * span1 + c1 - low1 ...)``, in ``int64``)."""
    packed = np.zeros(stop - start, np.int64)
    for col, low, span in zip(columns, lows, spans, strict=True):
        packed *= span
        packed += col[start:stop]  # narrow codes widen in the addition, element by element
        packed -= low
    return packed


def completeness_of(plan: PlanInfo, run_configs: Ints) -> Completeness:
    """:func:`nsightx._results.integrity.completeness` from the runs' config column (runs checked)."""
    once = int(np.count_nonzero(run_configs < 0))
    held_configs = len(np.unique(run_configs)) - (1 if once else 0)
    n = len(plan.configs)
    return Completeness(len(run_configs) - once, n * plan.runs, n, held_configs, plan.adaptive)


def columns_fit(plan: PlanInfo, columns: ResultColumns) -> bool:
    """Whether the result's columns (as read from the file) pass every check of the module docstring."""
    runs = columns.runs
    config, run = runs.config, runs.run
    counts = [runs.n_records, runs.n_regions, runs.n_collectors]
    if any(len(n) and int(n.min()) < 0 for n in counts):
        return False
    once = (config == -1) & (run == -1)
    bad = ~once & ((config < 0) | (config >= len(plan.configs)) | (run < 0) | (run >= plan.runs))
    if bad.any() or (once & ((counts[0] > 0) | (counts[1] > 0))).any() or not _unique(config[~once], run[~once]):
        return False
    rec, reg = columns.records, columns.regions
    parts = (
        (rec, counts[0], [rec.annotation.codes, rec.kernel.codes, rec.metric.codes, rec.seq]),
        (reg, counts[1], [reg.annotation.codes]),
    )
    for part, n, idents in parts:
        if int(n.sum()) != part.n or not _part_fits(part.config, part.run, config, run, n, idents):
            return False
    return _collectors_fit(plan, columns.collectors) and _values_fit(plan, columns.values, config[~once], run[~once])


def _part_fits(part_config: Ints, part_run: Ints, config: Ints, run: Ints, n: Ints, idents: list[Ints]) -> bool:
    """Whether each run's ``n`` entries (in run order) name that run, and each is stored once within it.

    Checked a block of whole runs at a time, about :data:`_BLOCK` rows each (a run's entries never span two
    blocks, so once per block is once per run): a million records would otherwise make several arrays of a
    million ``int64`` each (issue 35: the load's peak memory).
    """
    ends = np.cumsum(n)
    first = 0
    while first < len(n):
        start = int(ends[first - 1]) if first else 0
        last = max(int(np.searchsorted(ends, start + _BLOCK, side="right")), first + 1)
        stop = int(ends[last - 1])
        owner = np.repeat(np.arange(first, last, dtype=np.int64), n[first:last])
        rows = slice(start, stop)
        if not np.array_equal(part_config[rows], config[owner]) or not np.array_equal(part_run[rows], run[owner]):
            return False
        if not _unique(owner, *(ident[rows] for ident in idents)):
            return False
        first = last
    return True


def _collectors_fit(plan: PlanInfo, collectors: CollectorColumns) -> bool:
    """Collector values name a config and a run in range, or none (null)."""
    n = len(collectors.config)
    config = np.fromiter((0 if c is None else c for c in collectors.config), np.int64, n)
    run = np.fromiter((0 if r is None else r for r in collectors.run), np.int64, n)
    return bool(((config >= 0) & (config < len(plan.configs)) & (run >= 0) & (run < plan.runs)).all())


def _values_fit(plan: PlanInfo, values: ValueColumns, held_configs: Ints, held_runs: Ints) -> bool:
    """Each value belongs to a held run and is stored once."""
    config, run = values.config, values.run
    if not ((config >= 0) & (config < len(plan.configs)) & (run >= 0) & (run < plan.runs)).all():
        return False
    width = max(plan.runs, 1)
    if len(config) and not _held(config, run, width, held_configs * width + held_runs, len(plan.configs) * width):
        return False
    return _unique(values.annotation.codes, config, run, values.metric.codes)


def _held(config: Ints, run: Ints, width: int, held: Ints, span: int) -> bool:
    """Whether every row's key ``config * width + run`` (each in ``range(span)``) is one of ``held``.

    Through a table of ``span`` flags where that is short (no sort of the keys), else ``np.isin``; the keys are
    made a block of rows at a time (a million rows would otherwise make two arrays of 8 MB).
    """
    table: Bools | None = None
    if span <= 4 * len(config) + 1024:
        table = np.zeros(span, np.bool_)
        table[held] = True
    for start in range(0, len(config), _BLOCK):
        keys = config[start : start + _BLOCK] * width
        keys += run[start : start + _BLOCK]
        if not (np.isin(keys, held).all() if table is None else table[keys].all()):
            return False
    return True
