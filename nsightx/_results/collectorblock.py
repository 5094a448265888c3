"""The collector values of a call's runs as a block: the same collectors in the same order, run after run.

With the nvml plugin every run of a GPU call carries the same six run-scope values in the same order, after the
call's ONCE values (:func:`~nsightx._results.sharedcolumns.shared_collector_parts` lays them out so). Filed one
value at a time (:attr:`ResultTable.collectors <nsightx._results.table.ResultTable.collectors>`'s loop: a look-up
by name, a scope check, a key, a store) they cost ~1.9 us a run of the frame on a 2-core VM
(``frame_stages.py --per-run``, session 27). Found as a block, each collector's values are a strided slice of
the columns, filed with one ``dict.update(zip(keys, values))`` (in C) per collector, which files them as the
loop does: the last value of a key wins, at the place of its first.

:func:`run_block` finds the block (or says there is none, and the loop files everything); :func:`file_block`
files it into the tables the loop filled with the values before it.
"""

from __future__ import annotations

from itertools import chain
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    from nsightx._results.store import CollectorColumns

RUN_BLOCK_MIN = 256
"""Fewest values a block is looked for in (fewer are filed by the loop at no measurable cost)."""

ClockItem = tuple[str, int, int, Any]
"""(name, config, run or 0, value) of a run-scope clock or reasons value, as the throttling rules read it."""


class ClockBlock(NamedTuple):
    """The block's clock and reasons columns where each run has one of each (see :func:`clock_block`)."""

    keys: list[tuple[Any, Any]]
    """(config, run) of each run, all distinct, in order."""
    clocks: list[Any]
    """Each run's ``MeasuredSMClockMHz`` value."""
    reasons: list[Any]
    """Each run's ``ClockEventReasons`` value."""


class ClockValues(list[ClockItem]):
    """The clock items (a list, as before), with the block's columns where the block alone holds them."""

    block: ClockBlock | None = None


def run_block(c: CollectorColumns) -> tuple[int, int]:
    """(start, period) of the block that ends the columns, or (``len``, 0) when they do not end in one.

    The block starts at the first run-scope value; from there to the end, the value at position ``start + j``
    and every ``period``-th after it are of the same collector (all ``period`` collectors distinct) and scope.
    """
    n = len(c.name)
    if not all(isinstance(column, list | tuple) for column in (c.name, c.scope, c.config, c.run, c.value)):
        return n, 0  # the columns are lists wherever nsightx makes them; anything else is filed by the loop
    try:
        start = c.scope.index("run")
    except ValueError:
        return n, 0
    if n - start < RUN_BLOCK_MIN:
        return n, 0
    first = c.name[start]
    try:
        period = c.name.index(first, start + 1) - start
    except ValueError:
        return n, 0
    rows, left = divmod(n - start, period)
    names = c.name[start : start + period]
    if left or len(set(names)) != period:
        return n, 0
    for j, name in enumerate(names):
        column = slice(start + j, n, period)
        if c.name[column].count(name) != rows or c.scope[column].count(c.scope[start + j]) != rows:
            return n, 0
    return start, period


def file_block(
    c: CollectorColumns,
    start: int,
    period: int,
    file: Any,
    clock_names: tuple[str, ...],
) -> list[ClockItem]:
    """File the block's values into the loop's tables; return its clock items, in the order of the values.

    Args:
        c: The collector columns; the block is ``c[start:]``, ``period`` values a run.
        start: Where the block starts.
        period: Values per run.
        file: ``file(name, scope)``: the loop's table for that collector and scope (made where it is new, with the
            collector's first scope noted), and the scope's kind.
        clock_names: Collectors whose run-scope values with a config are clock items.
    """
    n = len(c.name)
    clock_columns: list[list[ClockItem | None]] = []
    columns: dict[str, tuple[list[Any], list[Any], list[Any]]] = {}
    for j in range(period):
        name, scope = c.name[start + j], c.scope[start + j]
        table, kind = file(name, scope)
        column = slice(start + j, n, period)
        config, value = c.config[column], c.value[column]
        if kind == "once":
            table[()] = value[-1]
        elif kind == "config":
            table.update(zip(zip(config), value, strict=True))
        elif kind == "run":
            run = c.run[column]
            table.update(zip(zip(config, run, strict=True), value, strict=True))
            if name in clock_names:
                clock_columns.append(_clock_column(name, config, run, value))
                columns[name] = (config, run, value)
        else:
            keys = zip(config, c.run[column], c.annotation[column], strict=True)
            table.update(zip(keys, value, strict=True))
    if len(clock_columns) < 2:
        return [item for item in chain.from_iterable(clock_columns) if item is not None]
    items = ClockValues(item for item in chain.from_iterable(zip(*clock_columns, strict=True)) if item is not None)
    items.block = clock_block(columns, clock_names)
    return items


def clock_block(
    columns: dict[str, tuple[list[Any], list[Any], list[Any]]], names: tuple[str, ...]
) -> ClockBlock | None:
    """The clock and reasons columns (``names``, in that order) where every run has one of each, else None.

    Both collectors' values must be of the same runs, in the same order, each run once, with a config and a run.
    """
    if len(names) != 2 or any(name not in columns for name in names):
        return None
    (config, run, clocks), (config_r, run_r, reasons) = columns[names[0]], columns[names[1]]
    if config != config_r or run != run_r or None in config or None in run:
        return None
    keys = list(zip(config, run, strict=True))
    if len(dict.fromkeys(keys)) != len(keys):
        return None
    return ClockBlock(keys, clocks, reasons)


def _clock_column(name: str, config: list[Any], run: list[Any], value: list[Any]) -> list[ClockItem | None]:
    """One collector's clock items, run by run (None for a value without a config, which is no clock item)."""
    return [None if k is None else (name, k, r or 0, v) for k, r, v in zip(config, run, value, strict=True)]
