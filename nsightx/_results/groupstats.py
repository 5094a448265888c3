"""Per-group count, mean, standard deviation, minimum, maximum and median of numeric columns, with numpy.

The aggregated DataFrame's statistics were one pandas ``groupby`` per column and statistic; for a result of a
few dozen runs their fixed costs were most of ``to_dataframe()`` (issue 35). This module computes every column's
statistics at once and gives the numbers pandas gives, bit for bit, by doing pandas' arithmetic in pandas' order
(pandas 3.1's: pandas 3.0 adds ascending groups in its compensated loop too; these numbers stay the same on every
pandas, and :func:`mean_min_max` gives them for results too large for the padded layout):

- mean: where the group codes never decrease and the column holds no NaN, pandas reduces each group with
  ``np.add.reduceat`` and divides by its size; otherwise its loop adds each group's values in row order with
  Kahan compensation (a compensation that became NaN, from an infinite value, is reset to zero), then divides;
- standard deviation (``ddof=1``): Welford's update in row order, ``sqrt(M2 / (n - 1))``, NaN for ``n <= 1``;
- minimum and maximum: ``ufunc.reduceat`` in the first case, else a strict comparison against the running value
  in row order (so of equal values the first stays);
- median: the middle value of the group's sorted values, or the half sum of the two middle ones.

NaN values are skipped; a group without a value gets NaN. The loops run once per position within a group over
every group and column together (the groups laid out as a padded matrix), so a result of 44 runs costs a few
dozen numpy operations. :func:`fits` says when this layout is cheap and the numbers are known to match (float64
or int64 columns, integers exactly representable, no negative zero for the median); the caller keeps pandas for
the rest. ``tests/core/results/test_groupstats.py`` compares every statistic with pandas' on random data.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

Array = np.ndarray[Any, Any]

_MAX_STEPS = 4096
"""The largest group this module reduces (one numpy pass per position in a group)."""
_PAD = 4
"""The padded matrix may hold at most this many times the rows (plus a small allowance): skewed sizes go to pandas."""
_EXACT_INT = 2**53


@dataclass(frozen=True, eq=False)
class Moments:
    """Per group (rows) and column (columns): non-NaN count, mean, sample standard deviation, minimum, maximum."""

    count: Array
    mean: Array
    std: Array
    minimum: Array
    maximum: Array


def fits(columns: list[Array], codes: Array, count: int) -> bool:
    """Whether :func:`moments` handles these columns and groups (else the caller asks pandas).

    Args:
        columns: The per-row columns, each float64 or int64.
        codes: Per row, its group (0 .. ``count`` - 1).
        count: Number of groups.
    """
    few = len(codes) <= _LISTED  # a few rows: the integer check over Python ints, no numpy call per column
    for column in columns:
        if column.dtype == np.int64:
            if few and len(column):
                if max(map(abs, column.tolist())) > _EXACT_INT:
                    return False
            elif len(column) and int(np.abs(column).max()) > _EXACT_INT:
                return False
        elif column.dtype != np.float64:
            return False
    if not len(codes):
        return False
    largest = int(np.bincount(codes, minlength=count).max())
    return largest <= _MAX_STEPS and largest * count <= _PAD * len(codes) + 1024


def _padded(values: Array, codes: Array, count: int) -> tuple[Array, Array, Array]:
    """The values as a (group, position, column) matrix (NaN pads short groups), group sizes, rows in group order."""
    order = np.argsort(codes, kind="stable")  # each group's rows in row order
    size = np.bincount(codes, minlength=count)
    start = np.cumsum(size) - size
    sorted_codes = codes[order]
    position = np.arange(len(codes)) - start[sorted_codes]
    matrix = np.full((count, int(size.max()), values.shape[1]), np.nan)
    matrix[sorted_codes, position] = values[order]
    return matrix, size, order


def moments(values: Array, codes: Array, count: int, ascending: bool) -> Moments:
    """The statistics of each column of ``values`` per group, as pandas' ``groupby(codes)`` computes them.

    Args:
        values: (rows, columns) float64 (integer columns converted: pandas converts them for mean and std).
        codes: Per row, its group (0 .. ``count`` - 1), the codes pandas' groupby would use.
        count: Number of groups.
        ascending: Whether pandas reduces these groups with ``ufunc.reduceat`` (where there is no NaN): it does
            where the groups' codes never decrease. ``codes`` themselves need not: a caller that hands over one
            group of each class of groups that share their runs (:func:`_numeric_stats` of the frame) keeps the
            groups' kind, and the classes' ids may come in any order (before 2026-12-06 a sweep with
            ``derive_metric`` and three or more configs had its collector statistics put on the wrong configs).
    """
    clean = ascending and not bool(np.isnan(values).any())  # mean, min, max all reduceat's: the loop skips them
    even = clean and len(codes) % count == 0 and _sorted(codes)  # _even reads each group's rows as consecutive
    if even and bool((np.bincount(codes, minlength=count) == len(codes) // count).all()):
        return _even(values, count)
    matrix, size, order = _padded(values, codes, count)
    shape = (count, values.shape[1])
    mean, m2, seen = np.zeros(shape), np.zeros(shape), np.zeros(shape)
    sums = None if clean else (np.zeros(shape), np.zeros(shape), np.full(shape, np.inf), np.full(shape, -np.inf))
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        if bool(np.isnan(matrix).any()):
            for k in range(matrix.shape[1]):
                v = matrix[:, k, :]
                ok = ~np.isnan(v)
                seen += ok
                delta = v - mean  # Welford, as pandas' group_var
                new_mean = mean + delta / seen
                np.copyto(m2, m2 + (v - new_mean) * delta, where=ok)
                np.copyto(mean, new_mean, where=ok)
                if sums is not None:
                    _kahan_step(v, ok, *sums)
        else:
            m2 = _full_steps(matrix, mean, m2, seen, sums)
        none = seen == 0
        std = np.where(seen <= 1, np.nan, np.sqrt(m2 / (seen - 1)))
        if sums is None:
            avg, low, high = np.full(shape, np.nan), np.full(shape, np.nan), np.full(shape, np.nan)
        else:
            total, _, low, high = sums
            avg = np.where(none, np.nan, total / seen)
    low[none] = np.nan
    high[none] = np.nan
    if ascending:
        _reduceat(values[order], size, avg, low, high)
    return Moments(seen.astype(np.int64), avg, std, low, high)


def _even(values: Array, count: int) -> Moments:
    """:func:`moments` of groups that are consecutive rows, all of one size, without a NaN (a sweep's usual shape).

    The same arithmetic as the general path, without padding or masks: every group has a value at every position.
    """
    steps, width = len(values) // count, values.shape[1]
    if values.size <= _LISTED or count * width <= _LISTED_GROUPS:
        std = _listed_std(values, count, steps)
    else:
        matrix = values.reshape(count, steps, width)
        mean, m2 = np.zeros((count, width)), np.zeros((count, width))
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
            for k in range(steps):
                v = matrix[:, k, :]
                delta = v - mean  # Welford, as pandas' group_var (``seen`` is k + 1 in every group)
                mean = mean + delta / float(k + 1)
                m2 = m2 + (v - mean) * delta
            std = np.full((count, width), np.nan) if steps <= 1 else np.sqrt(m2 / float(steps - 1))
    starts = np.arange(count, dtype=np.intp) * steps
    with np.errstate(over="ignore"):  # a sum past the float range: the row is computed again, scaled (.extremes)
        avg = np.add.reduceat(values, starts, axis=0) / float(steps)  # as _reduceat
    low = np.minimum.reduceat(values, starts, axis=0)
    high = np.maximum.reduceat(values, starts, axis=0)
    return Moments(np.full((count, width), steps, dtype=np.int64), avg, std, low, high)


_LISTED_GROUPS = 32
"""Up to this many (group, column) pairs :func:`_even` takes its spreads over Python floats, whatever the steps: a
numpy step costs about as much as ~30 Python ones (four configs of six columns: 24 pairs, 11 steps, issue 35)."""


def _listed_std(values: Array, count: int, steps: int) -> Array:
    """:func:`_even`'s standard deviations over Python floats: the same Welford steps, one column and group at a time.

    Python's float arithmetic is numpy's float64 arithmetic (IEEE, round to nearest), without a numpy call per step.
    Each column is one list (the matrix transposed once) and the step divisors are made once, not per value.
    """
    width = values.shape[1]
    if steps <= 1:
        return np.full((count, width), np.nan)
    divisors = [float(k + 1) for k in range(steps)]
    last = float(steps - 1)
    out = []
    for column in values.T.tolist():
        for start in range(0, count * steps, steps):
            mean = m2 = 0.0
            for v, d in zip(column[start : start + steps], divisors, strict=True):
                delta = v - mean
                mean = mean + delta / d
                m2 = m2 + (v - mean) * delta
            var = m2 / last
            out.append(math.sqrt(var) if var >= 0 else _nan_sqrt(var))
    return np.array(out, dtype=np.float64).reshape(width, count).T


def _nan_sqrt(value: float) -> float:
    """``np.sqrt`` of a NaN or negative value: the NaN numpy makes (its sign bit too), without numpy's warning."""
    with np.errstate(invalid="ignore"):
        return float(np.sqrt(value))


def _full_steps(matrix: Array, mean: Array, m2: Array, seen: Array, sums: tuple[Array, ...] | None) -> Array:
    """:func:`moments`' loop where every group has a value at every position (no NaN, no padding); returns ``M2``.

    The same arithmetic, step for step: with every value present each masked update is a plain one and the count
    after step ``k`` is ``k + 1`` (fewer numpy calls per step: the collectors' classes of 100 runs, issue 35).
    ``mean``, ``seen`` and ``sums`` are updated in place.
    """
    for k in range(matrix.shape[1]):
        v = matrix[:, k, :]
        seen += 1.0
        delta = v - mean  # Welford, as pandas' group_var
        new_mean = mean + delta / seen
        m2 = m2 + (v - new_mean) * delta
        mean[...] = new_mean
        if sums is not None:
            total, comp, low, high = sums
            y = v - comp  # Kahan, as _kahan_step with every value present
            t = total + y
            c = (t - total) - y
            c[np.isnan(c)] = 0.0
            total[...] = t
            comp[...] = c
            np.copyto(low, v, where=v < low)
            np.copyto(high, v, where=v > high)
    return m2


def _kahan_step(v: Array, ok: Array, total: Array, comp: Array, low: Array, high: Array) -> None:
    """Add one position's values (``v``, present where ``ok``) to the running sums, minimum and maximum, in place.

    The sum with Kahan compensation as pandas' ``group_mean`` (a compensation that became NaN is reset to zero);
    the minimum and maximum by strict comparison, so of equal values the first stays.
    """
    y = v - comp
    t = total + y
    c = (t - total) - y
    c[np.isnan(c)] = 0.0
    np.copyto(total, t, where=ok)
    np.copyto(comp, c, where=ok)
    np.copyto(low, v, where=v < low)
    np.copyto(high, v, where=v > high)


def _reduceat(values: Array, size: Array, avg: Array, low: Array, high: Array) -> None:
    """Overwrite mean, minimum and maximum of the NaN-free columns with pandas' ``ufunc.reduceat`` results.

    ``values`` are in group order (each group's rows together, in row order), as they are when the codes ascend.
    """
    clean = ~np.isnan(values).any(axis=0)
    if not clean.any():
        return
    present = np.flatnonzero(size)
    starts = (np.cumsum(size) - size)[present]
    part = values[:, clean]
    with np.errstate(over="ignore"):  # a sum past the float range: the row is computed again, scaled (.extremes)
        sums = np.add.reduceat(part, starts, axis=0)
    avg[np.ix_(present, clean)] = sums / size[present].astype(np.float64)[:, None]
    low[np.ix_(present, clean)] = np.minimum.reduceat(part, starts, axis=0)
    high[np.ix_(present, clean)] = np.maximum.reduceat(part, starts, axis=0)


def medians(values: Array, codes: Array, count: int) -> Array | None:
    """Per group, the median of its non-NaN values (NaN without one); ``None`` when a value is negative zero.

    pandas picks the middle values with a selection algorithm, which may return either zero of a tie between
    ``0.0`` and ``-0.0``; such columns are left to pandas.
    """
    if values.dtype == np.float64 and len(values) <= _LISTED:
        return _listed_medians(values.tolist(), codes.tolist(), count)
    if bool((np.signbit(values) & (values == 0)).any()):
        return None
    order = np.lexsort((values, codes))  # by group, then value, NaN last
    n = np.bincount(codes, weights=~np.isnan(values), minlength=count).astype(np.int64)
    start = np.cumsum(np.bincount(codes, minlength=count)) - np.bincount(codes, minlength=count)
    ordered = values[order]
    safe = np.maximum(n, 1)
    upper = ordered[np.minimum(start + safe // 2, len(values) - 1)]
    lower = ordered[np.minimum(start + (safe - 1) // 2, len(values) - 1)]
    with np.errstate(invalid="ignore", over="ignore"):  # -inf and inf in the middle: NaN, as pandas, unannounced
        out = np.where(n % 2 == 1, upper, (upper + lower) / 2)
    out[n == 0] = np.nan
    return out


_LISTED = 128
"""Up to this many float rows :func:`medians` works over Python lists: a few dozen numpy calls cost more there."""


def _listed_medians(values: list[float], codes: list[int], count: int) -> Array | None:
    """:func:`medians` over Python floats (the same IEEE arithmetic: the middle value, or the half sum of two)."""
    groups: list[list[float]] = [[] for _ in range(count)]
    for v, c in zip(values, codes, strict=True):
        if v == 0.0 and math.copysign(1.0, v) < 0:
            return None
        if v == v:  # NaN skipped
            groups[c].append(v)
    out = np.empty(count)
    for i, group in enumerate(groups):
        n = len(group)
        if not n:
            out[i] = math.nan
            continue
        group.sort()
        upper = group[n // 2]
        out[i] = upper if n % 2 else (upper + group[(n - 1) // 2]) / 2
    return out


def mean_min_max(values: Array, codes: Array, count: int, ascending: bool) -> tuple[Array, Array, Array]:
    """Per group mean, minimum and maximum of one float64 column: :func:`moments`' numbers, for any number of rows.

    pandas changed how it reduces groups whose codes ascend (``ufunc.reduceat`` from 3.1, its compensated loop
    before), so the numbers a groupby gives depend on the installed pandas; these are the same numbers as
    :func:`moments` gives on every pandas: ``reduceat`` over each group's rows where ``ascending`` and the column
    holds no NaN, else the compensated sum of the non-NaN values in row order and the first of the extreme values
    in row order. The work is a few passes over the rows plus one small step per position in the largest group
    (:func:`_kahan_means`).

    Args:
        values: Per row, the value (float64; NaN skipped).
        codes: Per row, its group (0 .. ``count`` - 1).
        count: Number of groups.
        ascending: :func:`moments`' argument (reduceat for a column without NaN; the rows taken in group order).
    """
    size = np.bincount(codes, minlength=count)
    if ascending and not bool(np.isnan(values).any()):
        ordered = values if _sorted(codes) else values[np.argsort(codes, kind="stable")]
        avg, low, high = (np.full((count, 1), np.nan) for _ in range(3))
        _reduceat(ordered[:, None], size, avg, low, high)  # the very arithmetic of moments' reduceat
        return avg[:, 0], low[:, 0], high[:, 0]
    rows = np.flatnonzero(~np.isnan(values))
    kept, groups = values[rows], codes[rows]
    seen = np.bincount(groups, minlength=count)
    with np.errstate(invalid="ignore", divide="ignore"):
        avg = np.where(seen == 0, np.nan, _kahan_means(kept, groups, seen) / seen)
    return avg, _first_extreme(kept, groups, count, np.minimum), _first_extreme(kept, groups, count, np.maximum)


def _sorted(codes: Array) -> bool:
    """Whether ``codes`` never decrease (each group's rows together, in row order)."""
    return bool((codes[1:] >= codes[:-1]).all())


def _first_extreme(values: Array, codes: Array, count: int, ufunc: np.ufunc) -> Array:
    """Per group the smallest (``np.minimum``) or largest value, as a strict comparison in row order keeps it.

    A running extreme replaced only by a strictly smaller (larger) value ends on the first row that equals the
    extreme: of ``0.0`` and ``-0.0`` the first one seen stays. NaN where a group has no value.
    """
    out = np.full(count, np.nan)
    if not len(values):
        return out
    order = np.argsort(codes, kind="stable")
    size = np.bincount(codes, minlength=count)
    present = np.flatnonzero(size)
    out[present] = ufunc.reduceat(values[order], (np.cumsum(size) - size)[present])
    first = np.flatnonzero(values == out[codes])  # in row order
    groups, where = np.unique(codes[first], return_index=True)
    out[groups] = values[first[where]]
    return out


def _kahan_means(values: Array, codes: Array, seen: Array) -> Array:
    """Per group the compensated sum of ``values`` (no NaN among them) in row order, as ``_kahan_step`` adds.

    The groups are laid out largest first, so the groups that still have a value at a position are the first ones:
    one numpy step per position over a prefix of the running sums, every row visited once. Groups of more than
    :data:`_MAX_STEPS` values are left to pandas' compensated loop (:func:`_pandas_kahan`).
    """
    if len(values) and int(seen.max()) > _MAX_STEPS:
        return _pandas_kahan(values, codes, len(seen))
    rank = np.argsort(-seen, kind="stable")  # slot -> group, largest first
    slot = np.empty(len(seen), dtype=np.intp)
    slot[rank] = np.arange(len(seen))
    by_slot = seen[rank]
    active = np.bincount(by_slot, minlength=int(by_slot.max(initial=0)) + 1)[::-1].cumsum()[::-1][1:]
    offset = np.cumsum(active) - active  # where each position's values start in the step-ordered array
    order = np.argsort(codes, kind="stable")
    position = np.arange(len(codes)) - (np.cumsum(seen) - seen)[codes[order]]
    stepped = np.empty(len(values))
    stepped[offset[position] + slot[codes[order]]] = values[order]
    total, comp = np.zeros(len(seen)), np.zeros(len(seen))
    with np.errstate(invalid="ignore", over="ignore"):
        for k, a in enumerate(active.tolist()):
            v = stepped[offset[k] : offset[k] + a]
            y = v - comp[:a]
            t = total[:a] + y
            c = (t - total[:a]) - y
            c[np.isnan(c)] = 0.0
            total[:a] = t
            comp[:a] = c
    return total[slot]


def _pandas_kahan(values: Array, codes: Array, count: int) -> Array:
    """Per group the compensated sum in row order, by pandas' own loop (groups too large for a numpy step each).

    Every pandas so far adds each group's values in row order with Kahan compensation in its loop (the kernel
    ``_kahan_step`` follows); it takes that loop where the codes do not ascend. One row of an extra group in front
    keeps them from ascending; its result is dropped. A group without a row is absent from pandas' result (0 here).
    """
    import pandas as pd

    front = np.concatenate([np.array([count], dtype=np.int64), codes.astype(np.int64)])
    series = pd.Series(np.concatenate([values[:1], values]), copy=False)
    sums = series.groupby(front, sort=True).sum()
    present = sums.index.to_numpy()
    out = np.zeros(count)
    out[present[:-1]] = sums.to_numpy()[:-1]  # the extra group is the last (the largest id)
    return out
