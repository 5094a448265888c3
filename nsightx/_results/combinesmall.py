"""``combine_columns`` for a small result: the same columns from Python lists, one pass per step (issue 35).

:func:`~nsightx._results.combinecols.combine_columns` finds region ids, failed regions, groups and their order
with vectorised passes: about forty numpy calls, whatever the size. For the few dozen records of a small call (the
matmul sweep: 4 configs x 10 runs, ~50 records) those calls cost more than the rows themselves (~0.2 ms of a
call's ~0.6 ms after its runs, on a 2-core CPU). :func:`combine_small` walks the same rows as Python lists, in the
same order, and makes the very same :class:`~nsightx._results.store.ValueColumns` (names, codes and their dtypes,
values bit for bit); a group of several records is folded as ``combine_records`` folds it. Where ``combine``
fails, the object path is taken: ``combine_records`` raises the error of the group it meets first (the same call
with ``derive_metric`` names the same region).

Records that come region by region, one block of one metric per region (a GPU backend's, cupti's split-K with two
kernels a region: :func:`region_blocks`), need no region ids, grouping or sort: each block is folded where it
lies (~50 against ~85 us for the matmul sweep's 50 records and 40 regions, on a 2-core CPU).
"""

from __future__ import annotations

import functools
import itertools
import math
import operator
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from nsightx._results.store import RunParts, Text, ValueColumns, _small_text
from nsightx._results.transform import FAILED_KERNEL, as_float

Entry = tuple[int, int, str, float, "str | None", "str | None"]
"""One value before ordering: (region id, metric rank, metric, value, unit, kernel)."""


def combine_small(
    parts: RunParts,
    metrics: Sequence[str],
    ignored: set[str],
    combine: Callable[[float, float], float] | None,
) -> ValueColumns | None:
    """What ``combine_columns`` makes of ``parts`` (its metrics distinct), from lists; ``None``: the object path.

    ``None`` also where ``combine`` raised or returned something other than a number (the object path raises).
    """
    rec = parts.records
    starts = region_blocks(parts, ignored)
    if starts is not None:
        return _fold_blocks(parts, starts, combine)
    keys, failed, rid_of = _region_ids(parts, ignored)
    groups: dict[tuple[int, int], list[int]] = {}
    metric_codes = rec.metric.codes.tolist()
    for row, rid in rid_of.items():  # record order: the groups are numbered as they are first met
        if rid not in failed:
            groups.setdefault((rid, metric_codes[row]), []).append(row)
    if combine is None and any(len(rows) > 1 for rows in groups.values()):
        return None  # combine_records raises KernelCountError: its message is made from the objects
    rank = _ranks(rec.metric.names, metrics)
    units = rec.unit.strings()
    fields = (rec.value.tolist(), rec.kernel.strings(), rec.seq.tolist())
    entries: list[Entry] = []
    values, kernels = fields[0], fields[1]
    for (rid, code), rows in groups.items():
        name = rec.metric.names[code]
        assert name is not None, "a record's metric is a string"
        first = rows[0]
        if len(rows) == 1:  # most groups: one kernel a region (no call per group)
            value, kernel = values[first], kernels[first]
        else:
            folded = _group_value(fields, rows, combine)
            if folded is None:
                return None  # combine failed: combine_records raises, for the group it meets first
            value, kernel = folded
        entries.append((rid, rank[name], name, value, units[first], kernel))
    for rid in sorted(failed):
        entries.extend((rid, i, m, math.nan, None, FAILED_KERNEL) for i, m in enumerate(metrics))
    # By (region id, metric rank), as the vectorised path's lexsort: no two entries share that pair, so the
    # tuples' own order is decided by it (no key function called per entry, no comparison of the values).
    entries.sort()
    return ValueColumns(
        _text([keys[e[0]][0] for e in entries]),
        np.array([keys[e[0]][1] for e in entries], dtype=np.int64),
        np.array([keys[e[0]][2] for e in entries], dtype=np.int64),
        _text([e[2] for e in entries]),
        np.array([e[3] for e in entries], dtype=np.float64),
        _text([e[4] for e in entries]),
        _text([e[5] for e in entries]),
    )


def region_blocks(parts: RunParts, ignored: set[str]) -> list[int] | None:
    """Where each region's records start, when the records come region by region; else None.

    That is the shape of a GPU backend's result with several kernels in some regions (cupti's split-K): one
    metric, no failed region, no ignored kernel, every region's key distinct, and the records, in their order,
    in blocks of one key each, the blocks' keys those of the regions in theirs. ``combine_records`` then numbers
    the regions as they come (a key first met among the records is met in the regions' order too), and each
    block is one group: one value per region, in region order, no grouping by key or sorting needed.
    """
    rec, reg = parts.records, parts.regions
    n = rec.n
    if not n or len(rec.metric.names) != 1 or any(reg.failed.tolist()) or not ignored.isdisjoint(rec.kernel.names):
        return None
    reg_keys = list(zip(reg.annotation.strings(), reg.config.tolist(), reg.run.tolist(), strict=True))
    rec_keys = list(zip(rec.annotation.strings(), rec.config.tolist(), rec.run.tolist(), strict=True))
    starts = [0, *itertools.compress(range(1, n), map(operator.ne, rec_keys[1:], rec_keys))]
    if len(starts) != len(reg_keys) or list(map(rec_keys.__getitem__, starts)) != reg_keys:
        return None
    if len(set(reg_keys)) != len(reg_keys):
        return None  # a key met twice: combine_records merges its blocks
    return starts


def _fold_blocks(
    parts: RunParts, starts: list[int], combine: Callable[[float, float], float] | None
) -> ValueColumns | None:
    """:func:`combine_small` of records in blocks per region (see :func:`region_blocks`), the very same columns."""
    rec, reg = parts.records, parts.regions
    ends = [*starts[1:], rec.n]
    if combine is None and any(map(operator.ne, ends, map((1).__add__, starts))):
        return None  # combine_records raises KernelCountError: its message is made from the objects
    fields: tuple[list[float], list[Any], list[int]] = (rec.value.tolist(), rec.kernel.strings(), rec.seq.tolist())
    values, kernels, seq = fields
    folded: tuple[float, str | None] | None
    out_values = list(map(values.__getitem__, starts))  # most regions: one kernel, its record's value and name
    out_kernels = list(map(kernels.__getitem__, starts))
    for i, (first, end) in enumerate(zip(starts, ends, strict=True)):
        if end - first == 1:
            continue
        order = seq[first:end]
        if order == sorted(order):  # launch order already (a stable sort keeps it): no key call per record
            assert combine is not None, "checked above"
            number = reduce_values(combine, values[first:end])
            folded = None if number is None else (number, "|".join(kernels[first:end]))
        else:
            folded = _group_value(fields, list(range(first, end)), combine)
        if folded is None:
            return None  # combine failed: combine_records raises, for the group it meets first
        out_values[i], out_kernels[i] = folded
    units = rec.unit.strings()
    return ValueColumns(
        _text(reg.annotation.strings()),
        np.array(reg.config.tolist(), dtype=np.int64),
        np.array(reg.run.tolist(), dtype=np.int64),
        _text([rec.metric.names[0]] * len(starts)),
        np.array(out_values, dtype=np.float64),
        _text(list(map(units.__getitem__, starts))),
        _text(out_kernels),
    )


def _region_ids(
    parts: RunParts, ignored: set[str]
) -> tuple[list[tuple[str | None, int, int]], set[int], dict[int, int]]:
    """Region ids numbered as ``combine_records`` meets them (per run: its regions, then its kept records).

    Returns per id its (annotation, config, run), the ids of failed regions, and per kept record row its id.
    """
    rec, reg, runs = parts.records, parts.regions, parts.runs
    reg_keys = list(zip(reg.annotation.strings(), reg.config.tolist(), reg.run.tolist(), strict=True))
    rec_keys = list(zip(rec.annotation.strings(), rec.config.tolist(), rec.run.tolist(), strict=True))
    dropped = [name in ignored for name in rec.kernel.names]
    kernels = rec.kernel.codes.tolist()
    reg_failed = reg.failed.tolist()
    index: dict[tuple[str | None, int, int], int] = {}
    failed: set[int] = set()
    rid_of: dict[int, int] = {}
    g = r = 0
    for n_regions, n_records in zip(runs.n_regions.tolist(), runs.n_records.tolist(), strict=True):
        for j in range(g, g + n_regions):
            rid = index.setdefault(reg_keys[j], len(index))
            if reg_failed[j]:
                failed.add(rid)
        for j in range(r, r + n_records):
            if not dropped[kernels[j]]:
                rid_of[j] = index.setdefault(rec_keys[j], len(index))
        g, r = g + n_regions, r + n_records
    return list(index), failed, rid_of


def _ranks(names: Sequence[Any], metrics: Sequence[str]) -> dict[Any, int]:
    """Per metric name, its place among a region's metrics: the requested ones in order, then the others sorted."""
    rank: dict[Any, int] = {m: i for i, m in enumerate(metrics)}
    extra = sorted(n for n in dict.fromkeys(names) if n not in rank)
    rank.update((n, len(metrics) + i) for i, n in enumerate(extra))
    return rank


def _group_value(
    fields: tuple[list[float], list[Any], list[int]],
    rows: list[int],
    combine: Callable[[float, float], float] | None,
) -> tuple[float, str | None] | None:
    """The value and kernel name of one group of records (one region and metric), as ``fold`` makes them.

    ``fields``: the records' values, kernel names and launch order (``seq``) as lists. ``None``: ``combine``
    raised or returned no number (the caller takes the object path, which raises the error).
    """
    values, kernels, seq = fields
    if len(rows) == 1:
        return values[rows[0]], kernels[rows[0]]
    assert combine is not None, "several records in a region without combine: the object path raises"
    ordered = sorted(rows, key=seq.__getitem__)  # launch order; stable: ties keep record order
    number = reduce_values(combine, [values[i] for i in ordered])
    if number is None:
        return None
    return number, "|".join([kernels[i] for i in ordered])


def reduce_values(combine: Callable[[float, float], float], values: list[float]) -> float | None:
    """``combine`` folded over ``values`` as a float; ``None`` when it raised or returned no number."""
    try:
        return as_float(functools.reduce(combine, values))
    except Exception:
        return None


def _text(items: list[Any]) -> Text:
    """The column of ``items``, its names in first-seen order (as ``combine_columns`` numbers them).

    That is :func:`~nsightx._results.store._small_text` (a column of one name, the metric or unit of most calls,
    without a dictionary call per item).
    """
    return _small_text(items)
