"""The collector columns of compact runs whose values include :class:`~nsightx._results.rows.RunValues` answers.

A :class:`~nsightx._results.rows.RunValues` in a run's compact row stands for several values of that run (the nvml
plugin's: five values of a sample shared by ~100 runs, and the sample's age). Made into six rows per run when the
run was written, then read field by field into the result's columns, they cost ~2.5 us a run of a deferred call on
the GPU host (issue 35). Here each distinct shared mapping is converted once (its names and scalars), and the
columns of all runs are spread from those with numpy indexing: per answer only its shared mapping's identity and
its own value are read in Python. A stretch of runs that hold the same kinds of entries (every run of a call with
the nvml plugin, after its ONCE values) is spread as a table of one row per run (:func:`_uniform_parts`), the
rest value by value (:func:`_spread_parts`).

The columns are those :func:`~nsightx._results.rowparts.parts_from_rows` makes of the same runs with each answer
expanded into its rows (:func:`~nsightx._results.rows.values_rows`), value for value and in the same order.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from operator import attrgetter, itemgetter
from typing import Any

import numpy as np

from nsightx._results.rows import PLAIN_TYPES, RUN_SCOPE, RunValues, own_scalar, shared_rows
from nsightx._results.store import CollectorColumns

_COLLECTOR_FIELDS = ("name", "scope", "config", "run", "annotation", "value")
_collector_tuple = attrgetter(*_COLLECTOR_FIELDS)
_shared_of, _name_of, _value_of = attrgetter("shared"), attrgetter("name"), attrgetter("value")


def _objects(values: Any, count: int) -> Any:
    """An object array of ``values`` as they are (a tuple stays one element; an int stays a Python int)."""
    return np.fromiter(values, object, count)


def shared_collector_parts(rows: Sequence[Any], items: list[Any]) -> tuple[Any, CollectorColumns]:
    """Per run of ``rows`` its number of collector values, and the columns of all of them.

    Args:
        rows: Compact runs (tuples); ``items`` is the chain of their collector entries, among which are
            :class:`RunValues` answers (each the RUN-scope values of its run, see
            :func:`~nsightx._results.rows.values_rows`), the others rows or value objects.
        items: The collector entries of ``rows``, run after run.
    """
    count = len(rows)
    per_run = np.fromiter(map(len, map(itemgetter(5), rows)), np.int64, count)
    cuts = (np.flatnonzero(np.diff(per_run)) + 1).tolist()
    if len(cuts) >= MAX_SEGMENTS:
        return _spread_parts(rows, items, per_run)
    bounds = [0, *cuts, count]
    starts = np.concatenate([[0], np.cumsum(per_run)])[bounds].tolist()
    parts: list[tuple[Any, CollectorColumns]] = []
    for a, b, ia, ib in zip(bounds, bounds[1:], starts, starts[1:], strict=False):
        segment, entries, counts = rows[a:b], items[ia:ib], per_run[a:b]
        part = _uniform_parts(segment, entries, counts) if b - a >= UNIFORM_MIN_RUNS else None
        parts.append(part if part is not None else _spread_parts(segment, entries, counts))
    if len(parts) == 1:
        return parts[0]
    big = max(range(len(parts)), key=lambda i: len(parts[i][1].name))  # its lists are kept, the others put in
    columns: list[list[Any]] = []
    for f in _COLLECTOR_FIELDS:  # each part's lists are its own (made by tolist): the largest is not copied
        column = getattr(parts[big][1], f)
        column[0:0] = list(itertools.chain.from_iterable(getattr(p[1], f) for p in parts[:big]))
        column += itertools.chain.from_iterable(getattr(p[1], f) for p in parts[big + 1 :])
        columns.append(column)
    return np.concatenate([p[0] for p in parts]), CollectorColumns(*columns)


MAX_SEGMENTS = 8
""":func:`shared_collector_parts` spreads runs a stretch of equal entry counts at a time, while they form fewer
stretches than this (a call's ONCE values, then its runs: two); else all at once (:func:`_spread_parts`)."""

UNIFORM_MIN_RUNS = 32
"""A stretch of runs is tried as a table (:func:`_uniform_parts`) from this many runs: fewer are spread as they are."""


def _spread_parts(rows: Sequence[Any], items: list[Any], per_run: Any) -> tuple[Any, CollectorColumns]:
    """:func:`shared_collector_parts` of any runs: every entry placed by its own index (``per_run``: their counts)."""
    count, n = len(rows), len(items)
    item_run = np.repeat(np.arange(count), per_run)
    entries = _objects(items, n)
    is_shared = _objects(map(type, items), n) == RunValues
    shared_at = np.flatnonzero(is_shared)
    answers: list[RunValues] = entries[shared_at].tolist()
    group, names, scalars = _groups(answers)
    sizes = np.ones(n, np.int64)
    sizes[shared_at] = np.array([len(x) for x in names], np.int64)[group]
    ends = np.cumsum(sizes)
    starts = ends - sizes
    total = int(ends[-1]) if n else 0
    columns = [np.empty(total, object) for _ in _COLLECTOR_FIELDS]  # None where not set: the annotation
    _put_plain(columns, entries[~is_shared].tolist(), starts[~is_shared])
    _put_shared(columns, rows, answers, (group, names, scalars), (shared_at, starts, sizes, item_run))
    run_ends = np.cumsum(per_run)
    bounds = np.concatenate([[0], ends])
    n_collectors = bounds[run_ends] - bounds[run_ends - per_run]
    name, scope, config, run, annotation, value = (c.tolist() for c in columns)
    return n_collectors, CollectorColumns(name, scope, config, run, annotation, value)


def _uniform_parts(rows: Sequence[Any], items: list[Any], per_run: Any) -> tuple[Any, CollectorColumns] | None:
    """:func:`shared_collector_parts` of runs that all hold the same kinds of entries, or ``None`` if they do not.

    That is every run of a call with the nvml plugin (the guard's row, then the sample's answer): the same number
    of entries, at each place either a row (or value object) in every run or a :class:`RunValues` in every run,
    of one own name and one number of shared values. Each field's values then form a table of one row per run,
    filled a place at a time (see :func:`_place_pieces`) and read out row after row; a field whose row is the same
    in every run (the names, scopes and annotations, nearly always) is that row repeated. No index per value is
    computed, which is most of what the general spread (:func:`_spread_parts`) costs (1.5 against ~0.6 us a run
    of the nvml plugin's seven values on a shared 2-core VM, issue 35). The columns are the general spread's,
    value for value.
    """
    count = len(rows)
    width = int(per_run[0]) if count else 0
    if not width or int(per_run.min()) != int(per_run.max()):
        return None
    places = [items[j::width] for j in range(width)]
    kinds = [set(map(type, place)) for place in places]
    if any(len(k) != 1 for k in kinds):
        return None
    configs = _objects(map(itemgetter(0), rows), count)[:, None]
    runs = _objects(map(itemgetter(1), rows), count)[:, None]
    pieces: list[list[Any]] = [[] for _ in _COLLECTOR_FIELDS]  # per field, per place: a row, or a table
    for place, (kind,) in zip(places, kinds, strict=True):
        placed = _place_pieces(place, kind, configs, runs)
        if placed is None:
            return None
        for field_pieces, piece in zip(pieces, placed, strict=True):
            field_pieces.append(piece)
    total = sum(len(p) if type(p) is tuple else p.shape[1] for p in pieces[0])
    return np.full(count, total, np.int64), CollectorColumns(*(_read_out(p, count, total) for p in pieces))


def _place_pieces(place: list[Any], kind: type, configs: Any, runs: Any) -> list[Any] | None:
    """The six fields' values of one place of every run: per field the same row for every run (a tuple), or a table.

    A row or value object in every run gives a one-value row or a one-column table per field; :class:`RunValues`
    answers of one own name and one number of values give their groups' names and scalars by group, their own
    values in the last column, scope ``run``, their runs' config and run, no annotation. ``None``: the answers
    differ in own name or size (:func:`_spread_parts` takes them).
    """
    count = len(place)
    if kind is not RunValues:  # a row in every run (or a value object: its fields as a row)
        plain = place if kind is tuple else list(map(_collector_tuple, place))
        fields = [list(map(itemgetter(i), plain)) for i in range(len(_COLLECTOR_FIELDS))]
        return [(f[0],) if i in _FIXED and _one_text(f) else _objects(f, count)[:, None] for i, f in enumerate(fields)]
    if len(set(map(_name_of, place))) != 1:
        return None
    group, names, scalars = _groups(place)
    size = len(names[0])
    if any(len(x) != size for x in names):
        return None
    own = list(map(_value_of, place))
    table = _objects(itertools.chain.from_iterable(scalars), len(scalars) * size).reshape(len(scalars), size)[group]
    table[:, -1] = _objects(own if set(map(type, own)) <= PLAIN_TYPES else map(own_scalar, place), count)
    if len(set(names)) == 1 and _one_text(names[0]):
        name: Any = names[0]
    else:
        name = _objects(itertools.chain.from_iterable(names), len(names) * size).reshape(len(names), size)[group]
    config, run = np.broadcast_to(configs, (count, size)), np.broadcast_to(runs, (count, size))  # views: no copy
    return [name, (RUN_SCOPE,) * size, config, run, (None,) * size, table]


_FIXED = (0, 1, 4)
"""The fields (name, scope, annotation) of a place's rows that :func:`_place_pieces` checks for one value."""


def _one_text(values: Sequence[Any]) -> bool:
    """Whether ``values`` are all the one str, or all ``None``.

    One value of one type: a row repeated is then the same column (``1 == True`` would not make it so for numbers).
    """
    kinds = set(map(type, values))
    return len(kinds) == 1 and kinds <= {str, type(None)} and len(set(values)) == 1


def _read_out(pieces: list[Any], count: int, total: int) -> list[Any]:
    """One field's values of every run, run after run: the pieces' rows repeated when all are the same every run."""
    if all(type(p) is tuple for p in pieces):
        return list(itertools.chain.from_iterable(pieces)) * count
    table = np.empty((count, total), object)
    at = 0
    for piece in pieces:
        width = len(piece) if type(piece) is tuple else piece.shape[1]
        table[:, at : at + width] = piece  # a row is broadcast to every run
        at += width
    result: list[Any] = table.ravel().tolist()
    return result


def _groups(answers: list[RunValues]) -> tuple[Any, list[tuple[str, ...]], list[tuple[Any, ...]]]:
    """The distinct (shared mapping, own name) of ``answers``: each answer's group, each group's names and scalars.

    A group's names are the shared mapping's converted keys and then the own name; its scalars the converted shared
    values and then ``None`` (the place of each answer's own value).
    """
    count = len(answers)
    if not count:
        return np.zeros(0, np.int64), [], []
    names_of = list(map(_name_of, answers))
    ids = np.fromiter(map(id, map(_shared_of, answers)), np.uint64, count)
    if len(set(names_of)) <= 1:  # a group per mapping: found at the runs where the mapping changes
        changes = np.flatnonzero(ids[1:] != ids[:-1]) + 1
        starts = [0, *changes.tolist()]
        index: dict[Any, int] = {}
        firsts: list[int] = []
        for at, key in zip(starts, ids[starts].tolist(), strict=True):  # one step per change, not per answer
            if key not in index:
                index[key] = len(firsts)
                firsts.append(at)
        per_start = np.array([index[key] for key in ids[starts].tolist()], np.int64)
        group = np.repeat(per_start, np.diff([*starts, count]))
        first = np.array(firsts, np.int64)
    else:  # own names differ: a group per (mapping, name), numbered as first seen
        index = {}
        groups: list[int] = []
        firsts = []
        for i, key in enumerate(zip(ids.tolist(), names_of, strict=True)):
            g = index.get(key)
            if g is None:
                g = index[key] = len(firsts)
                firsts.append(i)
            groups.append(g)
        group, first = np.array(groups, np.int64), np.array(firsts, np.int64)
    names: list[tuple[str, ...]] = []
    scalars: list[tuple[Any, ...]] = []
    for i in first.tolist():
        keys_g, values_g = shared_rows(answers[i])
        names.append((*keys_g, answers[i].name))
        scalars.append((*values_g, None))
    return group.reshape(-1), names, scalars


def _put_plain(columns: list[Any], plain: list[Any], at: Any) -> None:
    """Write the plain entries (rows, or value objects) into ``columns`` at the rows ``at``."""
    if not plain:
        return
    plain = [p if type(p) is tuple else _collector_tuple(p) for p in plain]
    for column, getter in zip(columns, map(itemgetter, range(len(_COLLECTOR_FIELDS))), strict=True):
        column[at] = _objects(map(getter, plain), len(plain))


def _put_shared(columns: list[Any], rows: Sequence[Any], answers: list[RunValues], groups: Any, where: Any) -> None:
    """Write the values the ``answers`` stand for into ``columns``, spread from their groups' names and scalars."""
    if not answers:
        return
    group, names, scalars = groups
    shared_at, starts, sizes, item_run = where
    offsets = np.cumsum([0] + [len(x) for x in names])
    flat_names = _objects(itertools.chain.from_iterable(names), int(offsets[-1]))
    flat_scalars = _objects(itertools.chain.from_iterable(scalars), int(offsets[-1]))
    per_answer = sizes[shared_at]
    out_at = np.repeat(starts[shared_at], per_answer)
    answer_of = np.repeat(np.arange(len(answers)), per_answer)
    within = np.arange(len(out_at)) - np.repeat(np.cumsum(per_answer) - per_answer, per_answer)
    out_at += within
    table_at = offsets[group][answer_of] + within
    name, scope, config, run, _, value = columns
    name[out_at] = flat_names[table_at]
    value[out_at] = flat_scalars[table_at]
    value[starts[shared_at] + per_answer - 1] = _objects(map(own_scalar, answers), len(answers))
    scope[out_at] = RUN_SCOPE
    run_at = item_run[shared_at][answer_of]
    config[out_at] = _objects(map(itemgetter(0), rows), len(rows))[run_at]
    run[out_at] = _objects(map(itemgetter(1), rows), len(rows))[run_at]
