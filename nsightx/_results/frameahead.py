"""The frame's work that reads no measured value, done while a deferred call's GPU works through its last runs.

When a GPU call (events, cupti) has launched its last run it waits ~30 ms for the GPU; its runs' collector values
(the nvml plugin's clocks, power, temperatures, throttle reasons), configs and regions are known by then, and only
the measured values (and cupti's kernel names) come after. ``to_dataframe()`` after the call spent ~0.4 ms of a
~1 ms frame (2-core VM, the 4x11 sweep) on work that reads none of them: the collector columns and their
statistics' preparation, the throttling verdicts, the row keys (issue 35). :class:`FrameAhead` does that work
during the wait, on a table of the same runs whose value rows are *predicted*: one row per region execution and
a single metric (what a backend of one record per region makes, :func:`~nsightx._results.store.one_per_region`),
the value itself unknown (NaN).

Trust first: the pieces are used only where they are provably what the frame would compute itself.

- :meth:`FrameAhead.bound` (the result being built): the runs stored are the ones the pieces were computed from
  (each run's collector values the same tuple object, the ONCE values the same run object; they are immutable),
  and the result's collector columns equal the ones computed ahead. Those columns are made from the runs by the
  same code either way (:func:`~nsightx._results.rowparts.parts_from_rows`, whose columns do not depend on how the
  runs were split), so they are the same values.
- :meth:`FrameAhead.take` (``to_dataframe()``): the frame's table reads those collector columns (the same object)
  and its value rows have the predicted layout: the same count, configs, runs and annotations (codes and names),
  and the same groups (:meth:`~nsightx._results.table_flags.Groups.of`, recomputed and compared). Where its
  metric, kernel and unit split none of the predicted rows' combinations (one name each, as predicted, or one per
  combination), its own combinations, and so its groups, are the predicted ones: the table is handed them
  (:func:`_predicted_combinations`), not numbered again.

What :func:`~nsightx._results.dataframe.frame_pieces` computes reads nothing else of the table (its collector
columns, its row keys, which are functions of the configs, runs and annotations, and the groups), so the pieces
are the frame's own. A result whose regions' kernels ``combine_kernel_metrics`` made one row a region (cupti's
split-K configs) has those rows too. Anything else (a result loaded from a file, a derived one, rows other than
one a region, a host call, which has no wait) takes the frame's usual path. The pieces are handed out once.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from nsightx._results.dataframe import FramePieces, frame_pieces
from nsightx._results.store import CollectorColumns, RunParts, Text, ValueColumns, code_type, same_ints
from nsightx._results.table import Combinations, ResultTable
from nsightx._results.table_flags import Groups

_INJECTED = ("_collector_pass", "_config_keys", "_run_keys", "_annotation_keys")
"""The table's cached views the pieces were computed from, handed to the frame's table with them."""


class FrameAhead:
    """:func:`~nsightx._results.dataframe.frame_pieces` of a call's runs, computed before their values came.

    Made by :meth:`of` during the wait; :meth:`bound` ties it to the result's columns, :meth:`take` hands the
    pieces to the frame of a table over those columns (see the module docstring for when).
    """

    def __init__(self, sources: list[Any], parts: RunParts, table: ResultTable, pieces: FramePieces) -> None:
        self._sources = sources
        """Per stored item, the object its collector values were read from (see :func:`collector_source`)."""
        self._collectors: CollectorColumns = parts.collectors
        self._table: ResultTable | None = table
        self._pieces: FramePieces | None = pieces
        self._bound: CollectorColumns | None = None

    @classmethod
    def of(cls, sources: list[Any], parts: RunParts) -> FrameAhead | None:
        """The pieces of runs whose columns (records left out) are ``parts``; None when they have no region."""
        table = ResultTable(parts.with_values(predicted_values(parts)))
        if table.n == 0:
            return None
        return cls(sources, parts, table, frame_pieces(table, finish=True))

    def bound(self, sources: Sequence[Any], collectors: CollectorColumns) -> FrameAhead | None:
        """This, tied to the result's ``collectors``, when they come from the same runs as the pieces; else None.

        ``sources``: :func:`collector_source` of each run the result was made of, in order.
        """
        mine = self._sources
        same = len(sources) == len(mine) and all(a is b for a, b in zip(sources, mine, strict=True))
        ahead = self._collectors
        if not same or not _equal_columns(ahead, collectors):
            return None
        self._bound = collectors
        return self

    def take(self, table: ResultTable) -> FramePieces | None:
        """The pieces, if ``table`` is over the bound collector columns with the predicted rows; handed out once.

        The table gets the views they were computed from (its collector pass and row keys: the same values), so
        that the rest of the frame (the flags) reads them too.
        """
        ahead, pieces = self._table, self._pieces
        self._table = self._pieces = None
        if ahead is None or pieces is None or table.columns.collectors is not self._bound:
            return None
        if not _same_rows(ahead, table):
            return None
        cached = table.__dict__
        known = _predicted_combinations(ahead, table) if "combinations" not in cached else None
        if known is not None:
            cached["combinations"] = known  # the table's own, and so are the groups: the pieces' own
        else:
            groups = Groups.of(table)
            if not (same_ints(groups.ids, pieces.groups.ids) and same_ints(groups.first, pieces.groups.first)):
                return None
        for name in _INJECTED:
            if name in ahead.__dict__:
                cached.setdefault(name, ahead.__dict__[name])
        return pieces


def collector_source(item: Any) -> Any:
    """What a stored item's collector values are read from: a row's tuple of values, else the item (a run object).

    Both are immutable: the same object holds the same values.
    """
    return item[5] if type(item) is tuple else item


def predicted_values(parts: RunParts) -> ValueColumns:
    """One value row per region execution, of one metric, kernel and unit, the value NaN: the predicted layout."""
    regions = parts.regions
    n = regions.n
    one = Text(np.zeros(n, dtype=code_type(1)), ["?"])
    unit = Text(np.zeros(n, dtype=code_type(1)), [None])
    return ValueColumns(regions.annotation, regions.config, regions.run, one, np.full(n, np.nan), unit, one)


def _predicted_combinations(ahead: ResultTable, table: ResultTable) -> Combinations | None:
    """``table``'s row combinations, read off the predicted rows' (``ahead``), given :func:`_same_rows`; else None.

    A table numbers its rows by config and by its text columns of more than one name, in first-seen order
    (:meth:`~nsightx._results.table.Combinations.of`). The predicted rows have one metric, kernel and unit, so
    their combinations are those of the annotations and configs, which ``table`` shares. A metric, kernel or unit
    column of ``table`` with several names splits no predicted combination where it has one code in each (a
    kernel per config: cuBLAS' per-size choice); then it is a finer key that numbers the same combinations in the
    same first-seen order: the same ids and first rows, whose codes are read off ``table``. A column that splits
    one: None (the table numbers its own).
    """
    known = ahead.combinations
    ids, first = known.ids, known.first
    v = table.columns.values
    for text in (v.metric, v.kernel, v.unit):
        if len(text.names) > 1 and not same_ints(text.codes[first][ids], text.codes):
            return None
    codes = (v.annotation.codes[first], v.metric.codes[first], v.kernel.codes[first], v.unit.codes[first])
    return Combinations(ids, first, *codes, v.config[first])


def _equal_columns(a: CollectorColumns, b: CollectorColumns) -> bool:
    """Whether two collector columns hold equal lists (``==``, in C: by identity first)."""
    fields = ("name", "scope", "config", "run", "annotation", "value")
    return all(getattr(a, f) == getattr(b, f) for f in fields)


def _same_rows(ahead: ResultTable, table: ResultTable) -> bool:
    """Whether ``table``'s value rows have the configs, runs and annotations of ``ahead``'s (the predicted ones)."""
    if table.n != ahead.n:
        return False
    mine, theirs = ahead.columns.values, table.columns.values
    return (
        same_ints(table.config, ahead.config)
        and same_ints(table.run, ahead.run)
        and same_ints(table.annotation, ahead.annotation)
        and theirs.annotation.names == mine.annotation.names
    )
