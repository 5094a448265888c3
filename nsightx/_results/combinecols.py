"""``combine_records`` over the result's columns: one value per (annotation, config, run, metric), vectorised.

:func:`~nsightx._results.transform.combine_records` walks one :class:`~nsightx._results.records.Record` object
at a time. :func:`combine_columns` makes the same values from the record and region columns with numpy: the
region ids (first met, run by run: the run's regions, then its records), the failed regions, the groups of
records by region and metric and their order are all found by vectorised passes; only a group of several
records (several kernels of one region, with ``combine_kernel_metrics``) is folded in Python, through the very
same steps ``combine_records`` takes (:func:`~nsightx._results.transform.fold`), so the value and the kernel
names are the same. Where it cannot promise the same result (several kernels and no ``combine``, or a ``combine``
that raised or returned no number: errors the object code raises, for the region it meets first; a metric
requested twice) it returns ``None`` and the caller takes the object path.
A small result (at most :data:`SMALL_COMBINE` records and regions) takes
:func:`~nsightx._results.combinesmall.combine_small`, the same columns from Python lists (issue 35).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from nsightx._results.combinesmall import combine_small, reduce_values
from nsightx._results.store import (
    Floats,
    Ints,
    RecordColumns,
    RunParts,
    Text,
    ValueColumns,
    dense_ids,
    group_ids,
)
from nsightx._results.transform import FAILED_KERNEL

SMALL_COMBINE = 128
"""Up to this many records and region executions :func:`combine_columns` works on Python lists: there the list
path costs less than the vectorised one's ~40 numpy calls (60 rows: 92 against 164 us on a 2-core CPU); from about
150 rows on the vectorised path is the cheaper one (200 rows: 181 against 163 us)."""


def combine_columns(
    parts: RunParts,
    metrics: Sequence[str],
    ignore_kernels: Iterable[str],
    combine: Callable[[float, float], float] | None,
) -> ValueColumns | None:
    """The values ``combine_records`` makes of the runs of ``parts``, as columns; ``None``: take the object path.

    ``None`` also where ``combine`` raised or returned something other than a number: ``combine_records`` then
    raises the error (``ConfigError``, ``TransformError``) for the region it meets first.
    """
    if len(set(metrics)) != len(metrics):
        return None
    ignored = set(ignore_kernels)
    if parts.records.n + parts.regions.n <= SMALL_COMBINE:
        return combine_small(parts, metrics, ignored, combine)
    return combine_arrays(parts, metrics, ignored, combine)


def combine_arrays(
    parts: RunParts,
    metrics: Sequence[str],
    ignored: set[str],
    combine: Callable[[float, float], float] | None,
) -> ValueColumns | None:
    """:func:`combine_columns` by vectorised passes, whatever the size (``metrics`` distinct)."""
    rec, reg = parts.records, parts.regions
    kept = np.flatnonzero(~np.isin(rec.kernel.codes, [i for i, k in enumerate(rec.kernel.names) if k in ignored]))
    names = list(dict.fromkeys([*rec.annotation.names, *reg.annotation.names]))
    rid_reg, rid_rec, rid_keys = _region_ids(parts, kept, names)
    count = len(rid_keys[0])
    failed = np.zeros(count, dtype=np.bool_)
    failed[rid_reg[reg.failed]] = True
    live = ~failed[rid_rec]
    rows, r_rid = kept[live], rid_rec[live]
    g_ids, g_first = group_ids(r_rid, rec.metric.codes[rows])
    sizes = np.bincount(g_ids, minlength=len(g_first))
    if combine is None and bool((sizes > 1).any()):
        return None  # combine_records raises KernelCountError: its message is made from the objects
    g_rid, g_met = r_rid[g_first], rec.metric.codes[rows[g_first]]
    metric_names = list(dict.fromkeys([*rec.metric.names, *metrics]))
    rank = _metric_rank(metric_names, metrics)
    lut = np.array([metric_names.index(m) for m in rec.metric.names] + [0], dtype=np.int64)
    f_rid = np.repeat(np.flatnonzero(failed), len(metrics))
    f_sub = np.tile(np.arange(len(metrics), dtype=np.int64), int(failed.sum()))
    rid = np.concatenate([g_rid, f_rid])
    order = np.lexsort((np.concatenate([rank[lut[g_met]], f_sub]), rid))
    unit_names, none_unit = _with(rec.unit.names, None)
    kernel_names, failed_kernel = _with(rec.kernel.names, FAILED_KERNEL)
    grouped = _group_values(rec, rows, g_ids, g_first, sizes, combine, kernel_names)
    if grouped is None:
        return None  # combine failed: combine_records raises, for the group it meets first
    value, unit, kernel = grouped
    n_failed = int(failed.sum())
    failed_metric = np.array([metric_names.index(m) for m in metrics], dtype=np.int64)
    ann, cfg, run = (k[rid[order]] for k in rid_keys)
    return ValueColumns(
        _first_seen(ann, names),
        cfg,
        run,
        _first_seen(np.concatenate([lut[g_met], np.tile(failed_metric, n_failed)])[order], metric_names),
        np.concatenate([value, np.full(len(f_rid), math.nan)])[order],
        _first_seen(np.concatenate([unit, np.full(len(f_rid), none_unit)])[order], unit_names),
        _first_seen(np.concatenate([kernel, np.full(len(f_rid), failed_kernel)])[order], kernel_names),
    )


def _with(names: list[Any], name: Any) -> tuple[list[Any], int]:
    """A copy of ``names`` that holds ``name`` (appended unless there), and its index."""
    out = list(names)
    if name not in out:
        out.append(name)
    return out, out.index(name)


def _region_ids(parts: RunParts, kept: Ints, names: list[str | None]) -> tuple[Ints, Ints, tuple[Ints, Ints, Ints]]:
    """Dense region ids, numbered as ``combine_records`` meets them (per run: its regions, then its records).

    Returns the id of each region execution, the id of each kept record (``kept``: their rows), and per id its
    annotation (an index into ``names``), config and run.
    """
    rec, reg, runs = parts.records, parts.regions, parts.runs
    index: dict[str | None, int] = {name: i for i, name in enumerate(names)}
    rec_lut = np.array([index[n] for n in rec.annotation.names] + [0], dtype=np.int64)
    reg_lut = np.array([index[n] for n in reg.annotation.names] + [0], dtype=np.int64)
    run_index = np.arange(len(runs.config), dtype=np.int64)
    ann = np.concatenate([reg_lut[reg.annotation.codes], rec_lut[rec.annotation.codes[kept]]])
    cfg = np.concatenate([reg.config, rec.config[kept]])
    run = np.concatenate([reg.run, rec.run[kept]])
    met = np.concatenate([2 * np.repeat(run_index, runs.n_regions), 2 * np.repeat(run_index, runs.n_records)[kept] + 1])
    perm = np.argsort(met, kind="stable")
    ids = np.empty(len(perm), dtype=np.int64)
    sorted_ids, firsts = group_ids(ann[perm], cfg[perm], run[perm])
    ids[perm] = sorted_ids
    at = perm[firsts]
    return ids[: reg.n], ids[reg.n :], (ann[at], cfg[at], run[at])


def _metric_rank(names: list[Any], metrics: Sequence[str]) -> Ints:
    """Per metric name, its place among a region's metrics: the requested ones in order, then the others sorted."""
    requested = {m: i for i, m in enumerate(metrics)}
    extra = {m: len(metrics) + i for i, m in enumerate(sorted(n for n in names if n not in requested))}
    return np.array([requested.get(n, extra.get(n, 0)) for n in names], dtype=np.int64)


def _group_values(
    rec: RecordColumns,
    rows: Ints,
    g_ids: Ints,
    g_first: Ints,
    sizes: Ints,
    combine: Callable[[float, float], float] | None,
    kernel_names: list[str],
) -> tuple[Floats, Ints, Ints] | None:
    """Per group: its value, unit code and kernel code (into ``kernel_names``, which the folded names extend).

    A group of one record is that record; one of several is folded by ``combine`` as ``combine_records`` folds
    it: its records in launch order (``seq``, ties in record order), ``functools.reduce``, the kernel names joined
    by ``|``, the unit of its first record. ``None`` when a fold fails (``combine`` raised or returned no number).
    """
    first = rows[g_first]
    value = rec.value[first].copy()
    unit = rec.unit.codes[first]
    kernel = rec.kernel.codes[first].astype(np.int64)  # folded names get new codes: past what narrow codes hold
    several = np.flatnonzero(sizes > 1)
    if len(several) == 0:
        return value, unit, kernel
    assert combine is not None, "several records in a region without combine: the object path raises"
    ordered = rows[np.lexsort((rec.seq[rows], g_ids))]  # by group, then launch order (stable: ties keep order)
    starts = (np.cumsum(sizes) - sizes).tolist()
    values, kernels = rec.value[ordered].tolist(), rec.kernel.codes[ordered].tolist()
    index = {name: i for i, name in enumerate(kernel_names)}
    joined: dict[tuple[int, ...], int] = {}
    for g in several.tolist():
        start, stop = starts[g], starts[g] + int(sizes[g])
        number = reduce_values(combine, values[start:stop])
        if number is None:
            return None
        value[g] = number
        names = tuple(kernels[start:stop])
        code = joined.get(names)
        if code is None:
            text = "|".join([kernel_names[k] for k in names])
            code = joined[names] = index.setdefault(text, len(kernel_names))
            if code == len(kernel_names):
                kernel_names.append(text)
        kernel[g] = code
    return value, unit, kernel


def _first_seen(codes: Ints, names: Sequence[Any]) -> Text:
    """The column of ``names[code]`` per row, its names numbered in first-seen order (as ``ValueColumns.of``)."""
    ids, firsts = dense_ids(codes)
    return Text(ids, [names[c] for c in codes[firsts].tolist()])
