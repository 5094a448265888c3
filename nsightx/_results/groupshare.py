"""Groups that hold the same sequence of keys, found once so that per-key statistics are computed once per sequence.

A collector value belongs to a run (or a config), not to a region: every aggregated row of one config sees the
same runs in the same order, hence the same collector values. With 100 regions a run, the nvml plugin's
statistics were computed 100 times over the same numbers (issue 35: the 10 x 100 x 100 frame with collectors was
4.6x the pandas floor). :func:`shared_groups` numbers the groups by their sequence of keys, so that a statistic
is computed over one group of each sequence and spread to the others. The numbers are those of every group
computed on its own: a group's statistic depends on its values in row order alone, and equal key sequences give
equal value sequences.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from nsightx._results.store import Ints


class SharedGroups(NamedTuple):
    """Groups merged by their sequence of keys (see :func:`shared_groups`).

    A named tuple, not a frozen dataclass: the class is made when the frame's modules are first imported, inside a
    process's first ``to_dataframe()``, and a frozen dataclass took ~0.7 ms to make there (a tuple ~0.1 ms).
    """

    rows: Ints
    """The value rows of one group of each class, ascending (the rows a statistic needs)."""
    ids: Ints
    """Per row of :attr:`rows`, its class (0 .. count - 1)."""
    of_group: Ints
    """Per group, its class."""


def shared_groups(group_ids: Ints, count: int, keys: Ints, first: Ints | None = None) -> SharedGroups | None:
    """Classes of the groups whose rows, in row order, have the same ``keys``; ``None`` when no two groups share one.

    Args:
        group_ids: Per value row, its group (0 .. ``count`` - 1).
        count: Number of groups.
        keys: Per value row, the key its per-row value is a function of (a run's id for a run-scope collector).
        first: Per group, its first row, when the caller has it: groups whose first keys all differ share no
            sequence, which is found without sorting the rows (one region per run: each config's own runs).
    """
    if count < 2:
        return None
    if first is not None and len(np.unique(keys[first])) == count:
        return None
    order = np.argsort(group_ids, kind="stable")  # the rows group by group, each group's in row order
    size = np.bincount(group_ids, minlength=count)
    start = np.concatenate(([0], np.cumsum(size)[:-1]))
    seq = keys[order]
    of_group = np.empty(count, dtype=np.int64)
    representative: list[Ints] = []
    classes = 0
    sizes = np.unique(size).tolist()
    for s in sizes:  # groups of one size at a time: a matrix of their key sequences
        members = np.flatnonzero(size == s)
        if len(sizes) == 1:  # every group of one size: the sorted keys are the matrix already (no gather)
            matrix = seq.reshape(count, s)
        else:
            matrix = seq[start[members][:, None] + np.arange(s, dtype=np.int64)]
        first, inverse = _distinct_rows(matrix)
        of_group[members] = inverse + classes
        representative.append(members[first])
        classes += len(first)
    if classes == count:
        return None
    reps = np.concatenate(representative)
    is_rep = np.zeros(count, dtype=np.bool_)
    is_rep[reps] = True
    rows = np.flatnonzero(is_rep[group_ids])
    return SharedGroups(rows, of_group[group_ids[rows]], of_group)


_MIX = np.random.default_rng(35).integers(1, 2**63, size=4096, dtype=np.uint64) | np.uint64(1)
"""Odd multipliers that mix a key sequence into one 64-bit number (fixed seed: the same classes every run)."""


def _distinct_rows(matrix: Ints) -> tuple[Ints, Ints]:
    """The first row of each distinct row of ``matrix`` and each row's class (``np.unique(axis=0)``'s, faster).

    Rows are told apart by a 64-bit mix of their entries, then checked entry by entry against their class's first
    row: equal mixes of different rows (never seen, but possible) fall back to ``np.unique(axis=0)``.
    """
    width = matrix.shape[1]
    if width <= len(_MIX):
        # sum of products modulo 2**64, as ``(matrix.astype(uint64) * mix).sum(axis=1)``, without its two
        # row-long temporaries (a tenth of a millisecond each at 1e5 rows, issue 35): int64 -> uint64 is a view
        mixed = np.ascontiguousarray(matrix).view(np.uint64) @ _MIX[:width]
        _, first, inverse = np.unique(mixed, return_index=True, return_inverse=True)
        inverse = inverse.reshape(-1)
        if np.array_equal(matrix, matrix[first[inverse]]):
            return first, inverse
    _, first, inverse = np.unique(matrix, axis=0, return_index=True, return_inverse=True)
    return first, inverse.reshape(-1)


def same_kernels(shared: SharedGroups, ascending: bool) -> tuple[Ints, Ints]:
    """The rows and class ids to group, ordered so that pandas picks the kernels it picks for all rows.

    pandas reduces groups whose ids never decrease with ``ufunc.reduceat`` and others with its own loops, whose
    last bits can differ (a mean of four clocks: ``1969.0500000000002`` against ``1969.05``). Each group's result
    depends on its values alone within either kind, so the classes are handed over in the same kind as the groups:
    ascending (each class's rows together, in row order) when ``ascending`` (the groups' ids never decrease), else
    not ascending, with one extra row of an extra class in front where they would be (its result is dropped: the
    class ids ``0 .. count - 1`` come first in a sorted groupby).
    """
    rows, ids = shared.rows, shared.ids
    if ascending:
        order = np.argsort(ids, kind="stable")
        return rows[order], ids[order]
    if len(ids) and bool((ids[1:] >= ids[:-1]).all()):
        extra = int(ids.max()) + 1
        return np.concatenate([rows[:1], rows]), np.concatenate([np.array([extra], dtype=np.int64), ids])
    return rows, ids
