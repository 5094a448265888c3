"""The only module that builds pandas DataFrames: the per-run frame and the aggregated frame.

Column names follow nsight-python (``Annotation``, ``AvgValue``, ``CI95_Lower``, ...) with ``MedianValue`` and
``Tool`` added. Statistics: sample standard deviation (ddof=1), 95% confidence interval of the mean
(:func:`~nsightx._results.stats.mean_interval`: Student-t, joined for positive values by the lognormal interval,
so it respects right-skewed data and never goes below zero), relative standard deviation. With
``normalize_against`` every value and spread column is divided by the baseline's mean for the same config and
metric, so no row is half converted.

Measured conditions: when RUN-scope values named ``MeasuredSMClockMHz`` and/or ``ClockEventReasons`` exist (the
``nvml`` plugin writes them; any plugin may), each run is judged :func:`throttled_runs`; the per-run frame gets a
``Throttled`` column, the aggregated one ``ThrottledRuns``, and ``StableMeasurement`` is false for a row with a
throttled run. ``ComputeClock``/``MemoryClock`` stay the backend's rated values (kHz), as in nsight-python.

Quality flags: the aggregated frame's ``Flags`` column holds each row's flag names, sorted and comma-separated
(``""`` when none); :mod:`nsightx._results.flags` documents the evidence of each and
:mod:`nsightx._results.table_flags` computes them for all rows at once.

Both frames are built from the result's columnar view (:mod:`nsightx._results.table`): each column once from
arrays (a column of repeated values, such as a config's parameter or a run's collector value, is made from its
distinct values and per-row positions, with the dtype pandas would infer from the per-row list), statistics with
one groupby over integer group codes; the aggregated frame is handed to pandas as its blocks
(:func:`~nsightx._results.framebuild.frame_of`: the frame ``pd.DataFrame`` makes of its columns). The frames are
the same, column for column and bit for bit, as those the row-by-row code built
(``tests/core/results/test_dataframe_equal.py`` compares them with committed outputs of that code), but for the
interval and ``StableMeasurement`` columns, whose rule changed since (issue 37).
"""

from __future__ import annotations

import functools
import math
import statistics
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from nsightx._errors import ConfigError
from nsightx._results.baseline import check_baseline
from nsightx._results.blockverdicts import block_verdicts
from nsightx._results.extremes import rescale_extremes
from nsightx._results.flags import FEW_RUNS
from nsightx._results.framebuild import frame_of
from nsightx._results.groupshare import SharedGroups, same_kernels
from nsightx._results.groupstats import Moments, fits, mean_min_max, medians, moments
from nsightx._results.memtrim import release_freed
from nsightx._results.stats import STABLE_RSD_PCT, mean_intervals
from nsightx._results.store import SMALL
from nsightx._results.table import MISSING, ClockItem, Ints, ResultTable, RowKeys, group_ids, scope_kind, table_of
from nsightx._results.table_flags import Groups, Spread, flag_cells, shares_interval, spread_of, throttled_rows
from nsightx.columns import CLOCK_EVENT_REASONS, MEASURED_MEM_CLOCK, MEASURED_SM_CLOCK

if TYPE_CHECKING:
    import pandas as pd

    from nsightx._results.records import CollectorValue
    from nsightx._results.schema import ResultData

_ENV_COLUMNS = ("GPU", "Host", "ComputeClock", "MemoryClock")

NOT_THROTTLING = frozenset({"none", "gpu_idle", "applications_clocks_setting"})
"""Reasons that do not make a run throttled: an idle GPU, and clocks an administrator set on purpose."""
CLOCK_DROP_FRACTION = 0.9
"""A run whose SM clock is under this fraction of the call's median (idle reads excluded) counts as throttled."""
_CONDITIONS_FIRST = (MEASURED_SM_CLOCK, MEASURED_MEM_CLOCK)
"""Measured clocks come first among collector columns, next to the rated ones."""


def throttled_runs(data: ResultData) -> dict[tuple[int, int], bool] | None:
    """Which (config, run) were throttled; ``None`` when the result has no measured-condition values.

    A run is throttled when its clock-event reasons include one outside :data:`NOT_THROTTLING`, or when its SM
    clock is below :data:`CLOCK_DROP_FRACTION` of the median SM clock of all the call's runs (reads taken while
    the GPU reported ``gpu_idle`` are left out of both the median and this test: an idle GPU parks its clocks).
    """
    return _throttled(cv for run in data.runs for cv in run.collectors)


def _throttled(collectors: Iterable[CollectorValue]) -> dict[tuple[int, int], bool] | None:
    """:func:`throttled_runs` over the result's collector values (in the order of its runs)."""
    return _throttled_items(
        (cv.name, cv.config, cv.run or 0, cv.value)
        for cv in collectors
        if cv.scope == "run" and cv.name in (MEASURED_SM_CLOCK, CLOCK_EVENT_REASONS) and cv.config is not None
    )


def _throttled_items(
    items: Iterable[ClockItem], clocks: dict[tuple[int, int], float] | None = None
) -> dict[tuple[int, int], bool] | None:
    """:func:`throttled_runs` over the run-scope clock and reason values as (name, config, run, value).

    ``clocks``: when given, filled from the same pass with what :func:`~nsightx._results.flags.run_clocks` makes
    of ``items`` (each run's last finite clock, runs with a reason that says ``gpu_idle`` left out): the flags'
    ``clock_varied`` rule reads it, and it was a second pass over the same values (issue 35).
    """
    block = getattr(items, "block", None)  # a block of runs' clock columns (collectorblock.ClockValues)
    if block is not None:
        done, by_block = block_verdicts(block, clocks, _reasons_read, CLOCK_DROP_FRACTION)
        if done:
            return by_block
    order, clock_value, verdicts = _clock_reads(items, clocks)
    if not order:
        return None
    reads = [(key, verdicts.get(key, _NO_REASONS), clock_value.get(key)) for key in order]
    clock_of = [None if idle else _clock_number(value) for _, (idle, _), value in reads]
    found = [c for c in clock_of if c is not None]
    if not found:  # no clock to compare with: the reasons alone
        return {key: verdict[1] for key, verdict, _ in reads}
    limit = CLOCK_DROP_FRACTION * statistics.median(found)
    return {
        key: verdict[1] or (c is not None and c < limit) for (key, verdict, _), c in zip(reads, clock_of, strict=True)
    }


def _clock_number(value: object) -> float | None:
    """A run's clock value as a float, None when it is not a finite number (a bool is not).

    A NaN read is no clock: in the median it made ``statistics.median`` depend on the reads' order (bf9531b).
    """
    if type(value) is int or type(value) is float or (isinstance(value, int | float) and not isinstance(value, bool)):
        number = float(value)
        return number if math.isfinite(number) else None
    return None


def _clock_reads(
    items: Iterable[ClockItem], clocks: dict[tuple[int, int], float] | None
) -> tuple[dict[tuple[int, int], None], dict[tuple[int, int], object], dict[tuple[int, int], tuple[bool, bool]]]:
    """One pass over the clock items: runs, their last clock values and the verdicts of their last reasons.

    Returned: the runs in first-seen order, each run's last clock value, and :func:`_reasons_read` of its last
    reasons value; ``clocks`` (when given) is filled as ``run_clocks`` fills it.
    """
    order: dict[tuple[int, int], None] = {}
    clock_value: dict[tuple[int, int], object] = {}
    verdicts: dict[tuple[int, int], tuple[bool, bool]] = {}
    read: dict[str, tuple[bool, bool]] = {}  # per distinct reasons text: one split, not one per run
    idle: set[tuple[int, int]] = set()
    for name, config, run, value in items:  # the last value of a name wins, as in a dict per run
        key = (config, run)
        order[key] = None
        if name == MEASURED_SM_CLOCK:
            clock_value[key] = value
            if clocks is not None and isinstance(value, int | float) and not isinstance(value, bool):
                number = float(value)
                if math.isfinite(number):
                    clocks[key] = number  # the last finite clock of the run
        elif name == CLOCK_EVENT_REASONS:
            if type(value) is str:
                verdict = read.get(value)
                if verdict is None:
                    verdict = read[value] = _reasons_read(value)
            else:
                verdict = _reasons_read(value)
            verdicts[key] = verdict
            if verdict[0]:
                idle.add(key)  # any reasons value of the run that says gpu_idle, as run_clocks reads them
    if clocks is not None:
        for key in idle:
            clocks.pop(key, None)
    return order, clock_value, verdicts


_NO_REASONS = (False, False)
""":func:`_reasons_read` of a run without a reasons value (``None``)."""


def _reasons_read(reasons: object) -> tuple[bool, bool]:
    """A run's clock-event reasons value: whether it says ``gpu_idle``, and whether it names a throttling reason.

    An empty name (``""``, or the tail of ``"gpu_idle|"``) names no reason, as the ``ClockEventReasons`` column
    reads it: it made the run throttled (bf9531b).
    """
    idle = "gpu_idle" in str(reasons or "").split("|")
    return idle, isinstance(reasons, str) and any(r and r not in NOT_THROTTLING for r in reasons.split("|"))


_SMALL = SMALL
"""Up to this many rows a column is handed to pandas as the per-row list (pandas' fixed costs dominate there): the
one "few rows" threshold of the result's columns, :data:`nsightx._results.store.SMALL`."""


class _Column:
    """A per-run column as its distinct values and each row's position among them (no per-row Python objects)."""

    def __init__(self, items: list[Any], pos: Ints) -> None:
        self.items = items
        """The distinct values the rows use (``None`` last for rows without one)."""
        self.pos = pos
        """Per row, the position of its value in :attr:`items`."""

    @functools.cached_property
    def values(self) -> pd.Series:
        """:attr:`items` with the dtype pandas infers for the per-row list.

        A list and its set of distinct values infer the same dtype.
        """
        import pandas as pd

        return pd.Series(self.items, dtype=None if self.items else object)

    def array(self) -> Any:
        """The column's per-row data, to hand to the DataFrame (the per-row list for few rows, as before)."""
        if len(self.pos) <= _SMALL:
            items = self.items
            return [items[p] for p in self.pos.tolist()]
        if isinstance(self.values.dtype, np.dtype):
            return self.values.to_numpy()[self.pos]
        return self.values.array.take(self.pos)

    def notna(self) -> Any:
        """Per row, whether its value is not missing."""
        return self.values.notna().to_numpy()[self.pos]


def _column(values: Sequence[Any], codes: Ints, dense: bool = False) -> _Column:
    """The per-row column of ``values[code]`` (``None`` where the code is :data:`MISSING`).

    ``dense``: the caller knows that every value is used and no code is :data:`MISSING` (a collector that reported
    every run, see :meth:`~nsightx._results.table.ResultTable.collector_column`); the count over the rows that
    would find it out is skipped (the same column either way).
    """
    if 0 < len(codes) <= _SMALL:
        return _small_column(values, codes)
    if len(values) == 1 and len(codes) and (dense or int(codes.min()) == 0):  # one value in every row (once-scope)
        return _Column([values[0]], codes)
    used = None if dense else np.bincount(codes + 1, minlength=len(values) + 1) > 0  # slot 0 counts MISSING
    if used is None or (not used[0] and bool(used[1:].all())):  # every value used, no row without one
        listed, slots = _distinct(list(values))
        return _Column(listed, codes if len(listed) == len(values) else slots[codes])  # distinct: slots is arange
    kept = np.flatnonzero(used[1:])  # a count was taken: not dense
    items = [values[i] for i in kept.tolist()]
    listed, slots = _distinct(items)
    where = np.zeros(len(values) + 1, dtype=np.int64)
    where[kept] = slots
    if used[0]:
        where[-1] = len(listed)  # code -1 reads the last slot
        listed.append(None)
    return _Column(listed, where[codes])


def _small_column(values: Sequence[Any], codes: Ints) -> _Column:
    """:func:`_column` over the codes as a Python list: the same items and positions, without a numpy call per step.

    For a few hundred rows the bincount, flatnonzero and fancy indexing of the general path cost more than the
    loop (each cold numpy call on a tiny array costs about 10 us, issue 35).
    """
    listed_codes = codes.tolist()
    used = set(listed_codes)
    if len(values) == 1 and MISSING not in used:  # one value in every row (a once-scope value)
        return _Column([values[0]], codes)
    if MISSING not in used and len(used) == len(values):  # every value used, no row without one
        listed, slots = _distinct(list(values))
        return _Column(listed, codes if len(listed) == len(values) else slots[codes])  # distinct: slots is arange
    kept = sorted(used - {MISSING})
    listed, slots = _distinct([values[i] for i in kept])
    where = dict(zip(kept, slots.tolist(), strict=True))
    if MISSING in used:
        where[MISSING] = len(listed)
        listed.append(None)
    return _Column(listed, np.array([where[c] for c in listed_codes], dtype=np.int64))


def _distinct(items: list[Any]) -> tuple[list[Any], Any]:
    """Equal items (same type, same value; floats by their bits) merged: the distinct ones, and each item's slot."""
    kinds = set(map(type, items))
    if kinds == {str}:  # names, reasons: strings equal by value are interchangeable
        index = {v: i for i, v in enumerate(dict.fromkeys(items))}
        return list(index), np.fromiter(map(index.__getitem__, items), dtype=np.int64, count=len(items))
    if len(kinds) == 1 and kinds <= {int, float, bool}:  # numbers (a run's clock): kept as they are
        return list(items), np.arange(len(items), dtype=np.int64)
    listed: list[Any] = []
    slots: dict[Hashable, int] = {}
    out = np.zeros(len(items), dtype=np.int64)
    for i, v in enumerate(items):
        out[i] = slots.setdefault(_identity(v), len(listed))
        if out[i] == len(listed):
            listed.append(v)
    return listed, out


def _identity(value: Any) -> Hashable:
    """A key under which two values are interchangeable in a column: same type and value (floats by their bits)."""
    if isinstance(value, float):
        return (type(value), value.hex())
    try:
        return (type(value), hash(value), value)
    except TypeError:
        return ("id", id(value))


def _repeat(value: Any, n: int) -> _Column:
    """A per-run column of one value (``[value] * n``)."""
    return _Column([value], np.zeros(n, dtype=np.int64))


def _scopes(table: ResultTable) -> dict[str, str]:
    """Collector name -> scope, the measured clocks first, then in first-seen order."""
    scopes = table.collectors[0]
    first = {n: scopes[n] for n in _CONDITIONS_FIRST if n in scopes}
    return {**first, **scopes}


def _devices(data: ResultData) -> list[Any] | None:
    """The device of each config (``Device`` column), or None when no device was chosen."""
    if data.config_devices:
        return list(data.config_devices)
    device = data.environment.get("Device")
    return None if device is None else [device] * len(data.plan.configs)


def _run_columns(data: ResultData, t: ResultTable, throttled: Any = None) -> dict[str, Any]:
    """The per-run frame's columns, in order (nsight-python's ``profiled_data`` layout, params last).

    Columns of repeated values are :class:`_Column`; ``throttled`` (a ``Throttled`` column) goes after the
    collector columns.
    """
    plan, env, n = data.plan, data.environment, t.n
    cols: dict[str, Any] = {
        "Annotation": _column(t.annotations, t.annotation),
        "Value": t.value if n else [],
        "Metric": _column(t.metrics, t.metric),
        "Kernel": _column(t.kernels, t.kernel),
    }
    for name in _ENV_COLUMNS:
        cols[name] = _repeat(env.get(name), n)
    if data.config_hosts:  # a sweep spread over workers: the host of each config
        cols["Host"] = _column(data.config_hosts, t.config)
    cols["Unit"] = _column(t.units, t.unit)
    sources = plan.metric_backends  # a joined result: which backend measured what
    tools = [sources.get(m, plan.backend) for m in t.metrics] if sources else None
    cols["Tool"] = _column(tools, t.metric) if tools else _repeat(plan.backend, n)
    devices = _devices(data)
    if devices is not None:
        cols["Device"] = _column(devices, t.config)
    cols["Config"] = t.config if n else []
    cols["Run"] = t.run if n else []
    for name in _scopes(t):
        cols[name] = _column(*t.collector_column(name))
    if throttled is not None:
        cols["Throttled"] = throttled
    configs = plan.configs
    for i, p in enumerate(plan.params):
        cols[p] = _column([cfg[i] for cfg in configs], t.config)
    return cols


def runs_frame(data: ResultData, table: ResultTable | None = None) -> pd.DataFrame:
    """One row per (run, annotation, metric): nsight-python's ``profiled_data`` layout, params last.

    ``table``: the columnar view of the result's values (``None``: :func:`table_of` ``data``, whose plan,
    environment and per-config lists are read either way).
    """
    import pandas as pd

    t = table if table is not None else table_of(data)
    verdicts = _throttled_items(t.clock_values)
    throttled = None
    if verdicts is not None:
        throttled = pd.arrays.BooleanArray(*throttled_rows(t, verdicts)) if t.n else pd.array([], dtype="boolean")
    columns = _run_columns(data, t, throttled)
    return pd.DataFrame({name: c.array() if isinstance(c, _Column) else c for name, c in columns.items()})


def _first(col: _Column, groups: Groups) -> Any:
    """``groupby(...).first()`` of a per-run column: each group's first value that is not missing.

    Each group is represented by that row (or its first row when every value is missing) and pandas takes the
    first of these one-row groups, so a group without a value gets exactly what pandas gives it.
    """
    import pandas as pd

    plain = _plain(col.items)
    if plain is not None:
        return plain[col.pos[groups.first]]
    present = col.values.notna().to_numpy()
    if present.all():  # every group's first value is its first row's
        return pd.Series(col.values.array.take(col.pos[groups.first]), dtype=col.values.dtype).to_numpy()
    rows = np.flatnonzero(present[col.pos])
    n = len(col.pos)
    first = np.full(groups.count, n, dtype=np.int64)
    first[groups.ids[rows][::-1]] = rows[::-1]  # repeated index: the last write wins, which is the first row
    rep = np.where(first < n, first, groups.first)
    picked = pd.Series(col.values.array.take(col.pos[rep]), dtype=col.values.dtype)
    return picked.groupby(np.arange(groups.count), sort=False).first().to_numpy()


def _plain(items: list[Any]) -> Any:
    """``pd.Series(items).to_numpy()`` for items of one plain type without a missing one, else None.

    The array pandas makes of such a list (str: object, int within int64: int64, float without NaN: float64,
    bool: bool), made without pandas: these per-config and per-call values are most of a small result's columns.
    """
    kinds = set(map(type, items))
    if len(kinds) != 1 or not items:
        return None
    kind = next(iter(kinds))
    if kind is str:
        return np.array(items, dtype=object)
    if kind is bool:
        return np.array(items, dtype=np.bool_)
    if kind is int and _INT64[0] <= min(items) and max(items) <= _INT64[1]:
        return np.array(items, dtype=np.int64)
    if kind is float and not any(v != v for v in items):
        return np.array(items, dtype=np.float64)
    return None


def _union_reasons(col: _Column, groups: Groups) -> Any:
    """Per group: the clock-event reasons of its runs united (``none`` without any), read once per distinct value."""
    strings = all(v is None or type(v) is str for v in col.items)
    if strings and _no_reasons(col.items):
        return _none_reasons(groups.count)  # no run named a reason (the usual case)
    values = col.items if strings else col.values.tolist()
    _, first = group_ids(groups.ids, col.pos)
    names: list[set[str]] = [set() for _ in range(groups.count)]
    for g, p in zip(groups.ids[first].tolist(), col.pos[first].tolist(), strict=True):
        v = values[p]
        if v is not None and not (isinstance(v, float) and math.isnan(v)):
            names[g].update(n for n in str(v).split("|") if n and n != "none")
    return np.array(["|".join(sorted(s)) if s else "none" for s in names], dtype=object)


def _no_reasons(values: list[Any]) -> bool:
    """Whether reasons values (strings or None) name no reason: each is ``none`` or empty, or missing."""
    return all(n in ("", "none") for v in values if v is not None for n in v.split("|"))


def _none_reasons(count: int) -> Any:
    """The reasons column of groups none of whose runs named a reason."""
    return np.full(count, "none", dtype=object)


class _Numbers:
    """A numeric per-row column, kept as its distinct numbers and each row's position (no row-long array built).

    The collector statistics read only the rows of one group of each class (:meth:`rows`); with 100 regions a run
    that is a hundredth of the rows, and the row-long array of each collector was a tenth of the frame (issue 35).
    ``pos`` ``None``: ``numbers`` is the per-row column itself (the pandas conversion).
    """

    def __init__(self, numbers: Any, pos: Ints | None) -> None:
        self.numbers = numbers
        self.pos = pos

    @property
    def dtype(self) -> Any:
        """The dtype of the per-row column."""
        return np.asarray(self.numbers).dtype

    def rows(self, rows: Ints | None = None) -> Any:
        """The per-row column (``rows`` ``None``), else its values at ``rows``: ``full()[rows]``, exactly."""
        if self.pos is None:
            full = np.asarray(self.numbers)
            return full if rows is None else full[rows]
        return self.numbers[self.pos if rows is None else self.pos[rows]]

    def full(self) -> Any:
        """The per-row column as :func:`_numeric` gave it before (an array, or the pandas Series)."""
        return self.numbers if self.pos is None else self.numbers[self.pos]


def _numeric(col: _Column) -> _Numbers | None:
    """The column as numbers (``pd.to_numeric``), or None when a value is not a number or there is none.

    Python ints and floats (and missing values) are converted with numpy, to the dtype pandas would give them
    (int64 for ints alone, else float64 with NaN for a missing value), once per distinct value; other values go
    through pandas, per row.
    """
    import pandas as pd

    kinds = set(map(type, col.items))
    if kinds <= {int, float, type(None)} and kinds & {int, float}:
        if kinds == {int} and _INT64[0] <= min(col.items) and max(col.items) <= _INT64[1]:
            return _Numbers(np.array(col.items, dtype=np.int64), col.pos)
        if int not in kinds or all(abs(v) <= 2**53 for v in col.items if type(v) is int):
            floats = np.array([math.nan if v is None else v for v in col.items], dtype=np.float64)
            return None if np.isnan(floats).all() else _Numbers(floats, col.pos)  # NaN alone: no number, as pandas

    numeric = pd.to_numeric(col.values, errors="coerce")
    converted = numeric.notna().to_numpy()
    if (col.values.notna().to_numpy() & ~converted).any() or not converted.any():
        return None
    return _Numbers(pd.Series(numeric.array.take(col.pos), dtype=numeric.dtype), None)


def _collector_stats(
    out: dict[str, Any], scopes: Mapping[str, str], groups: Groups, table: ResultTable, value_column: Any = None
) -> Moments | None:
    """Add each collector's columns to ``out``: numeric per-run values as ``_Avg/_Std/_Min/_Max``, else the first.

    Numeric statistics are computed once per class of groups that see the same runs (:func:`_numeric_stats`):
    with the nvml plugin's values and 100 regions a run, a groupby over every row per collector and statistic
    was most of the frame's time (issue 35). A collector that reported for every row (``dense``) with one value
    (once-scope) or numbers only (the nvml plugin's) skips the per-row column (:func:`_once_column`,
    :func:`_dense_numbers`): the same arrays without its per-column steps.

    ``value_column``: the value column (:func:`_numpy_values`), whose moments are computed with the numeric columns of
    the first scope whose statistics are taken over every group's rows (one :func:`moments` call for both);
    returned, else None. Done in two steps: :func:`collector_prep` (all that does not read the values, which a
    deferred call does while its GPU works, see :mod:`nsightx._results.frameahead`), then :func:`_collector_finish`.
    """
    return _collector_finish(out, collector_prep(scopes, groups, table), groups, value_column)


class CollectorPrep(NamedTuple):
    """:func:`_collector_stats` up to its :func:`moments` calls: what it computes without reading the values."""

    out: dict[str, Any]
    """The collector columns in their order: the non-numeric ones made, the numeric ones' names (value None)."""
    kinds: list[_NumericPrep]
    """Per scope kind of the numeric columns (in their order), what :func:`_numeric_finish` takes."""


def collector_prep(scopes: Mapping[str, str], groups: Groups, table: ResultTable) -> CollectorPrep:
    """The columns of :func:`_collector_stats` that do not need statistics, and the numeric ones prepared.

    Reads the table's collector columns (:meth:`~nsightx._results.table.ResultTable.collector_column`), its row
    keys and ``groups``: never a measured value.
    """
    out: dict[str, Any] = {}
    numbers: dict[str, _Numbers] = {}
    for name, scope in scopes.items():
        values, codes, dense = table.collector_column(name)
        quick: Any = None
        if dense and name != CLOCK_EVENT_REASONS:
            quick = _once_column(values, groups.count) if scope == "once" else _dense_numbers(values, codes)
        elif dense and all(type(v) is str for v in values) and _no_reasons(values):  # the reasons, none named
            quick = _none_reasons(groups.count)  # _union_reasons' usual case, without the per-row column
        if quick is None:
            col = _column(values, codes, dense)
            if name == CLOCK_EVENT_REASONS:
                out[name] = _union_reasons(col, groups)
                continue
            quick = _numeric(col) if scope != "once" else None
            if quick is None:
                out[name] = _first(col, groups)
                continue
        if not isinstance(quick, _Numbers):
            out[name] = quick
            continue
        numbers[name] = quick
        out.update(dict.fromkeys((f"{name}_Avg", f"{name}_Std", f"{name}_Min", f"{name}_Max")))  # column order
    kinds = []
    for kind in dict.fromkeys(scope_kind(scopes[name]) for name in numbers):
        named = {name: numbers[name] for name in numbers if scope_kind(scopes[name]) == kind}
        kinds.append(_numeric_prep(named, groups, table.row_keys(kind)))
    return CollectorPrep(out, kinds)


def _collector_finish(out: dict[str, Any], prep: CollectorPrep, groups: Groups, value_column: Any) -> Moments | None:
    """:func:`_collector_stats` from its :class:`CollectorPrep`: the columns into ``out``, the values' moments.

    ``prep`` is left as it is (its columns go into ``out``, its lists are not changed).
    """
    out.update(prep.out)
    joint = None
    for kind in prep.kinds:
        stats, got = _numeric_finish(kind, groups, value_column if joint is None else None)
        out.update(stats)
        joint = joint if got is None else got
    return joint


def _once_column(values: list[Any], count: int) -> Any:
    """``_first(_column(values, codes, dense=True), groups)`` of one value in every row (a once-scope collector).

    The value's plain array (:func:`_plain`) repeated for each group; None where the general path decides.
    """
    plain = _plain(values) if len(values) == 1 else None
    return None if plain is None else plain.repeat(count)


def _dense_numbers(values: list[Any], codes: Ints) -> _Numbers | None:
    """``_numeric(_column(values, codes, dense=True))`` for Python ints and floats, or None: the general path.

    Every value is some row's and every row has one (``dense``), so the rows read ``values[codes]``: the numbers
    :func:`_numeric` converts, with the dtype it gives them (int64 for ints alone, else float64), without the
    column of distinct values made first.
    """
    kinds = set(map(type, values))
    if kinds == {int}:
        if _INT64[0] <= min(values) and max(values) <= _INT64[1]:
            return _Numbers(np.array(values, dtype=np.int64), codes)
        return None
    if kinds and kinds <= {int, float} and (int not in kinds or all(abs(v) <= 2**53 for v in values if type(v) is int)):
        floats = np.array(values, dtype=np.float64)
        return None if np.isnan(floats).all() else _Numbers(floats, codes)  # NaN alone: the general path says
    return None


class _NumericPrep(NamedTuple):
    """:func:`_numeric_stats` of a few columns up to its :func:`moments` call (:func:`_numeric_prep`)."""

    numbers: Mapping[str, _Numbers]
    shared: SharedGroups | None
    codes: Ints
    size: int
    """The number of groups, or of classes of groups, that ``codes`` number."""
    picked: list[Any]
    """Per column, its values at the rows the statistics read."""
    fitted: bool
    """Whether :func:`moments` takes them (:func:`fits`); else pandas does."""


def _numeric_stats(
    numbers: Mapping[str, _Numbers], groups: Groups, keys: RowKeys, values: Any = None
) -> tuple[dict[str, Any], Moments | None]:
    """``<name>_Avg/_Std/_Min/_Max`` per group of each numeric per-row column, whose value is a function of ``keys``.

    Groups with the same sequence of keys have the same values: each statistic is computed over one group of each
    such class (:meth:`~nsightx._results.table_flags.Groups.shared_by`, which the flags reuse) and spread to the
    others. All columns at once with :func:`~nsightx._results.groupstats.moments` (pandas' numbers, pandas' kernel
    kind: that of the groups, see :func:`same_kernels`), else with pandas.

    ``values``: a per-row column (the values, :func:`_numpy_values`) to take the moments of in the same call where
    the statistics are taken over every group's rows (no class of groups shares them); its moments are returned
    as well (None where they were not taken).
    """
    return _numeric_finish(_numeric_prep(numbers, groups, keys), groups, values)


def _numeric_prep(numbers: Mapping[str, _Numbers], groups: Groups, keys: RowKeys) -> _NumericPrep:
    """:func:`_numeric_stats` up to its :func:`moments` call: the classes of groups, the rows read, :func:`fits`."""
    shared = groups.shared_by(keys)
    if shared is None:
        rows, codes, count = None, groups.ids, groups.count
    else:
        rows, codes, count = shared.rows, shared.ids, int(shared.of_group.max()) + 1
    picked = [v.rows(rows) for v in numbers.values()]
    return _NumericPrep(numbers, shared, codes, count, picked, fits(picked, codes, count))


def _numeric_finish(prep: _NumericPrep, groups: Groups, values: Any = None) -> tuple[dict[str, Any], Moments | None]:
    """:func:`_numeric_stats` from its :class:`_NumericPrep` (left as it is)."""
    numbers, shared, codes, count = prep.numbers, prep.shared, prep.codes, prep.size
    ascending = groups.ascending
    if not prep.fitted:
        full = {name: v.full() for name, v in numbers.items()}
        return _numeric_stats_pandas(full, groups, shared, ascending), None
    extra = int(shared is None and values is not None)  # the values as column 0: their own statistics
    picked = [values, *prep.picked] if extra else prep.picked
    if len(codes) <= _SMALL:  # one conversion for all columns; C order, as column_stack gives (reduceat's order)
        matrix = np.ascontiguousarray(np.array(picked, dtype=np.float64).T)
    else:
        matrix = np.column_stack(picked).astype(np.float64)
    m = moments(matrix, codes, count, ascending)
    spread = None if shared is None else shared.of_group
    out: dict[str, Any] = {}
    missing: Any = np.isnan(m.minimum).any(axis=0).tolist()  # per column: a group without a value (min NaN)
    for j, (name, number) in enumerate(numbers.items(), start=extra):
        low, high = m.minimum[:, j], m.maximum[:, j]
        if number.dtype == np.int64 and not missing[j]:
            low, high = low.astype(np.int64), high.astype(np.int64)
        for suffix, column in (("Avg", m.mean[:, j]), ("Std", m.std[:, j]), ("Min", low), ("Max", high)):
            out[f"{name}_{suffix}"] = column if spread is None else column[spread]
    if not extra:
        return out, None
    return out, Moments(m.count[:, :1], m.mean[:, :1], m.std[:, :1], m.minimum[:, :1], m.maximum[:, :1])


def _numeric_stats_pandas(
    numbers: Mapping[str, Any], groups: Groups, shared: SharedGroups | None, ascending: bool
) -> dict[str, Any]:
    """:func:`_numeric_stats` with one pandas groupby per column and statistic (columns numpy cannot take).

    The mean of a numpy int64 or float64 column (and a float64 column's minimum and maximum) is
    :func:`_ordered_stats`', the numpy path's numbers on every pandas.
    """
    import pandas as pd

    if shared is not None:
        rows, ids = same_kernels(shared, ascending)
    out: dict[str, Any] = {}
    for name, values in numbers.items():
        numeric = pd.Series(values, copy=False)
        if shared is None:
            ng = numeric.groupby(groups.ids, sort=False)
        else:
            ng = numeric.take(rows).groupby(ids, sort=True)
        ours = _ordered_stats(values, groups, shared, ascending)
        for suffix, stat in (("Avg", "mean"), ("Std", "std"), ("Min", "min"), ("Max", "max")):
            column = ours[suffix] if suffix in ours else getattr(ng, stat)().to_numpy()
            out[f"{name}_{suffix}"] = column if shared is None else column[shared.of_group]
    return out


def _ordered_stats(values: Any, groups: Groups, shared: SharedGroups | None, ascending: bool) -> dict[str, Any]:
    """``Avg`` (and, of float64 values, ``Min`` and ``Max``) per group or class, as :func:`moments` gives them.

    :func:`~nsightx._results.groupstats.mean_min_max` over the rows :func:`_numeric_stats` reads; empty for other
    columns (a pandas Series: nullable or other dtypes), whose statistics stay pandas'.
    """
    if not isinstance(values, np.ndarray) or values.dtype not in (np.int64, np.float64):
        return {}
    if shared is None:
        picked, codes, count = values, groups.ids, groups.count
    else:
        picked, codes, count = values[shared.rows], shared.ids, int(shared.of_group.max()) + 1
    avg, low, high = mean_min_max(picked.astype(np.float64), codes, count, ascending)
    return {"Avg": avg, "Min": low, "Max": high} if values.dtype == np.float64 else {"Avg": avg}


def _ascending(ids: Ints) -> bool:
    """Whether ``ids`` never decrease (pandas then reduces each group with ``ufunc.reduceat``, see same_kernels)."""
    return bool((ids[1:] >= ids[:-1]).all())


def _stability(out: dict[str, Any], spread: Spread, groups: Groups, throttled: Any) -> Any:
    """Add the CI and relative spread columns to ``out``; return ``StableMeasurement`` (and count throttled runs).

    The interval is :func:`~nsightx._results.stats.mean_interval`'s, from the group's summaries and the moments of
    its logs (``spread``, over its finite values: a group with an infinite value has no interval anyway).
    """
    import pandas as pd

    avg, std, n = out["AvgValue"], out["StdDev"], out["NumRuns"]
    lower, upper = mean_intervals(avg, std, n, out["MinValue"], spread.log_mean, spread.log_var)
    rsd = _few_relative_spread(std, avg) if len(avg) <= _FEW_SPREAD_ROWS else _relative_spread(std, avg)
    out["CI95_Lower"] = lower
    out["CI95_Upper"] = upper
    out["RelativeStdDevPct"] = rsd
    unknown = np.isnan(rsd)
    stable = np.where(unknown, False, (rsd < STABLE_RSD_PCT) & (n >= FEW_RUNS))
    if throttled is not None:
        count = np.bincount(groups.ids, weights=throttled, minlength=groups.count).astype(np.int64)
        out["ThrottledRuns"] = count
        stable[count > 0] = False  # known: a row with a throttled run is not stable
        unknown = unknown & (count == 0)
    return pd.arrays.BooleanArray(stable, unknown)


_FEW_SPREAD_ROWS = 32
"""Up to this many rows ``RelativeStdDevPct`` is computed over Python floats (:func:`_few_relative_spread`): 1.5
against 6 us for 4 rows, numpy's equal near 24 (2-core VM, warm)."""


def _relative_spread(std: Any, avg: Any) -> Any:
    """``RelativeStdDevPct``: ``100 * std / |avg|``, NaN where it is not finite (a zero or unknown mean)."""
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):  # an overflow is mended just below
        rsd = 100.0 * std / np.abs(avg)
        past = np.isinf(rsd) & np.isfinite(std) & (avg != 0.0)
        if past.any():  # 100 * std past 1.8e308, the ratio not
            rsd[past] = (100.0 * (std / np.abs(avg)))[past]
    rsd[~np.isfinite(rsd)] = np.nan
    return rsd


def _few_relative_spread(std: Any, avg: Any) -> Any:
    """:func:`_relative_spread` of a few rows (up to :data:`_FEW_SPREAD_ROWS`) over Python floats: the same bits.

    A zero or NaN mean gives NaN without dividing (numpy's quotient there is an infinity or a NaN, set to NaN; a
    Python division by zero raises); every other non-finite ratio becomes NaN as there (~12 numpy calls on
    4-element arrays for a sweep's frame, issue 35).
    """
    out = []
    for s, a in zip(std.tolist(), avg.tolist(), strict=True):
        size = abs(a)
        if size == 0.0 or size != size:
            out.append(math.nan)
            continue
        rsd = 100.0 * s / size
        if math.isinf(rsd) and math.isfinite(s):  # 100 * std past 1.8e308, the ratio not
            rsd = 100.0 * (s / size)
        out.append(rsd if math.isfinite(rsd) else math.nan)
    return np.array(out, dtype=np.float64)


def _top_kernels(t: ResultTable, groups: Groups) -> Any:
    """The most frequent kernel name of each group's successful runs (``failed`` if none succeeded).

    Ties go to the kernel met first, as the stable sort of the row-by-row code did. Counted per combination of
    the table (each has one group and one kernel), whose order is the rows' first-seen order.
    """
    if len(t.kernels) == 1 and t.kernels[0] != "failed":  # one kernel in every row (a single-kernel result)
        return np.full(groups.count, t.kernels[0], dtype=object)
    out = np.full(groups.count, "failed", dtype=object)
    failed = t.kernels.index("failed") if "failed" in t.kernels else MISSING
    c = t.combinations
    if len(c.first) <= _SMALL:
        return _few_top_kernels(t, groups, out, failed)
    combos = np.flatnonzero(c.kernel != failed)
    if len(combos) == 0:
        return out
    rows = np.bincount(c.ids, minlength=len(c.first))[combos]
    group = groups.ids[c.first[combos]]
    pair, first = group_ids(group, c.kernel[combos])
    count = np.bincount(pair, weights=rows)
    group, kernel = group[first], c.kernel[combos][first]
    order = np.lexsort((np.arange(len(count)), -count, group))
    lead = order[np.r_[True, group[order][1:] != group[order][:-1]]]
    names = t.kernels
    out[group[lead]] = [names[k] for k in kernel[lead].tolist()]
    return out


def _few_top_kernels(t: ResultTable, groups: Groups, out: Any, failed: int) -> Any:
    """:func:`_top_kernels` of a few combinations, over Python ints: the same kernel per group.

    Each (group, kernel) pair's rows are summed in the combinations' order; a group takes its pair with the most
    rows, the first such pair met on a tie (the numpy path sorts the pairs by group, count, then first-seen order).
    """
    c = t.combinations
    rows = np.bincount(c.ids, minlength=len(c.first)).tolist()
    counts: dict[tuple[int, int], int] = {}
    for kernel, n, group in zip(c.kernel.tolist(), rows, groups.ids[c.first].tolist(), strict=True):
        if kernel != failed:
            counts[group, kernel] = counts.get((group, kernel), 0) + n
    best: dict[int, tuple[int, int]] = {}
    for (group, kernel), n in counts.items():
        if group not in best or n > best[group][0]:
            best[group] = (n, kernel)
    names = t.kernels
    for group, (_, kernel) in best.items():
        out[group] = names[kernel]
    return out


def _scalar(value: Any, n: int) -> Any:
    """A column of one value, made as ``frame[name] = value`` makes it (``pd.Series(None, index)`` would be float)."""
    import pandas as pd

    dtype = _scalar_dtype(type(value).__name__) if type(value) in _PLAIN else None
    if dtype is None or (type(value) is int and not _INT64[0] <= value <= _INT64[1]):
        holder = pd.DataFrame(index=pd.RangeIndex(n))
        holder["value"] = value
        return holder["value"]
    if isinstance(dtype, np.dtype):
        return np.full(n, value, dtype=dtype)
    if type(value) is str:
        return [value] * n  # the frame infers the same dtype for the list, without a pandas array built here
    return pd.array([value] * n, dtype=dtype)


_SAMPLES: dict[str, Any] = {"str": "s", "int": 1, "float": 1.5, "bool": True, "NoneType": None}
"""A value of each plain type, by type name (another type, a subclass included, takes the general path)."""
_PLAIN = (str, int, float, bool, type(None))
_INT64 = (-(2**63), 2**63 - 1)


def prepare() -> None:
    """Do now, once per process, what the first ``to_dataframe()`` would do before it reads any result.

    Importing this module (pandas, the frame's modules) and asking pandas each plain type's dtype cost ~25 ms on a
    2-core VM, ~20 times a fresh 4x11 frame; a script that calls ``f().to_dataframe()`` once paid them after the
    GPU was done. A GPU call runs this while its GPU works through the last runs (the run loop's ``while_waiting``,
    issue 35). Later calls find it all cached.
    """
    for kind in _SAMPLES:
        _scalar_dtype(kind)


@functools.cache
def _scalar_dtype(kind: str) -> Any:
    """The dtype ``frame[name] = value`` gives a value of type ``kind`` (asked of pandas once per type).

    Asked as the dtype of a one-item list (``pd.Series([value])``): for these plain types pandas infers the same
    dtype for a scalar set into a frame and for a list of it (``sanitize_array``; ``tests/core/results/
    test_framebuild.py`` checks each), and the list costs a fifth of a frame's ``__setitem__``, which was a
    visible part of a process's first ``to_dataframe()`` (issue 35). A ``str`` is then also what a list of
    strings infers, so :func:`_scalar` hands the frame that list.
    """
    import pandas as pd

    return pd.Series([_SAMPLES[kind]]).dtype


def aggregate(
    data: ResultData, configs: Sequence[tuple[Any, ...]] | None = None, table: ResultTable | None = None
) -> pd.DataFrame:
    """One row per (annotation, metric, config) with mean, median, spread, CI and stability columns.

    Args:
        data: The result (its plan, environment and per-config lists; its runs and values only without ``table``).
        configs: The original config objects (kept in memory by a live result) to show in parameter
            columns; ``None`` uses the JSON-safe copies stored in the result.
        table: The columnar view of the result's runs and values; ``None``: :func:`table_of` ``data``.
    """
    return aggregate_source(data, configs, table)()


class FramePieces(NamedTuple):
    """What :func:`aggregate_source` computes from a table's row layout and collector values alone.

    None of it reads a measured value (:func:`frame_pieces`): a deferred call computes it while its GPU works
    (:mod:`nsightx._results.frameahead`), and the frame takes it when the table it was computed from has the same
    collector values and row layout as the frame's.
    """

    groups: Groups
    collectors: CollectorPrep
    """:func:`collector_prep` of the table's collectors (the scopes of :func:`_scopes`)."""
    verdicts: dict[tuple[int, int], bool] | None
    """:func:`_throttled_items` of the table's clock values."""
    clocks: dict[tuple[int, int], float]
    """The measured clocks :func:`_throttled_items` gathered from the same pass."""
    throttled: Any
    """Per value row, whether its run was throttled (:func:`throttled_rows`); None without verdicts."""
    finished: dict[str, Any] | None = None
    """The collector columns themselves (:func:`_collector_finish` of :attr:`collectors`, the values' moments left
    to the frame), where they were computed ahead; None: the frame finishes them, with the values' moments in the
    same :func:`moments` call. Each column's statistics are its own whatever the other columns of that call hold
    (:func:`_numpy_values`), so the columns are the same either way."""


def frame_pieces(table: ResultTable, finish: bool = False) -> FramePieces:
    """The :class:`FramePieces` of ``table`` (a table with value rows).

    ``finish``: compute the collector columns too (:attr:`FramePieces.finished`): what a deferred call does while
    its GPU works (the frame then computes only the values' moments, issue 35); the frame's own pieces leave them to
    :func:`aggregate_source`, which takes the values' moments in the same call.
    """
    groups = Groups.of(table)
    prep = collector_prep(_scopes(table), groups, table)
    clocks: dict[tuple[int, int], float] = {}
    verdicts = _throttled_items(table.clock_values, clocks)
    throttled = None if verdicts is None else throttled_rows(table, verdicts)[0]
    finished: dict[str, Any] | None = None
    if finish:
        finished = {}
        _collector_finish(finished, prep, groups, None)
    return FramePieces(groups, prep, verdicts, clocks, throttled, finished)


def aggregate_source(
    data: ResultData,
    configs: Sequence[tuple[Any, ...]] | None = None,
    table: ResultTable | None = None,
    pieces: FramePieces | None = None,
) -> Callable[[], pd.DataFrame]:
    """:func:`aggregate`'s frame as a function that makes a new one at each call (the statistics computed once).

    Each frame it makes owns its data (:func:`frame_of` copies every column; ``pd.DataFrame`` and, under
    copy-on-write, ``pd.concat`` too): ``to_dataframe()`` hands the first one to the user as it is and makes its
    cached frame only if it is asked again (see :meth:`~nsightx.ProfileResults.to_dataframe`).

    ``pieces``: :func:`frame_pieces` of ``table``, computed ahead (see :mod:`nsightx._results.frameahead`, which
    checks that they are ``table``'s); ``None``: computed here.
    """
    import pandas as pd

    plan = data.plan
    t = table if table is not None else table_of(data)
    if t.n == 0:
        return functools.partial(pd.DataFrame, columns=_empty_columns(plan.params, plan.normalize_against))
    if pieces is None:
        pieces = frame_pieces(t)
    groups = pieces.groups
    collected, joint = _collector_columns(pieces, t)  # the collector columns, after the value columns
    out = _value_stats(data, t, groups, joint)
    clocks = dict(pieces.clocks)
    verdicts = None if pieces.verdicts is None else dict(pieces.verdicts)
    throttled = pieces.throttled
    out.update(collected)
    spread = spread_of(t, groups)
    out["StableMeasurement"] = _stability(out, spread, groups, throttled)
    same = shares_interval(spread, out["NumRuns"], out["AvgValue"], out["MinValue"])
    interval = (out["CI95_Lower"], out["CI95_Upper"]) if same else None  # the flags' unstable rule reuses it
    out["Flags"] = flag_cells(data, t, groups, verdicts, spread, throttled, interval, clocks)
    out["Normalized"] = np.zeros(groups.count, dtype=np.bool_)
    if plan.normalize_against is not None:
        _normalize(out, plan.normalize_against, plan.function, t, groups)
    out["Geomean"] = _geomeans(out["AvgValue"], t, groups)
    sources = plan.metric_backends  # a joined result: which backend measured what
    if sources:
        out["Tool"] = _column([sources.get(m, plan.backend) for m in t.metrics], t.metric[groups.first]).array()
    else:
        out["Tool"] = _scalar(plan.backend, groups.count)
    devices = _devices(data)
    if devices is not None:
        out["Device"] = _column(devices, out["Config"]).array()
    idx = out["Config"].tolist()
    cfgs = configs if configs is not None else plan.configs
    params = {p: [cfgs[c][i] for c in idx] for i, p in enumerate(plan.params)}
    front = {"Annotation": out.pop("Annotation"), "Metric": out.pop("Metric")}
    del out["Config"]
    if len({*front, *params, *out}) == len(front) + len(params) + len(out):
        return functools.partial(frame_of, {**front, **params, **out}, groups.count)
    parts = (pd.DataFrame(front), pd.DataFrame(params, index=pd.RangeIndex(groups.count)), pd.DataFrame(out))
    return functools.partial(pd.concat, parts, axis=1)  # a parameter named like a column: both kept, as before


def _collector_columns(pieces: FramePieces, t: ResultTable) -> tuple[dict[str, Any], Moments | None]:
    """The collector columns of the frame, and the values' moments where they were taken with them.

    Finished ahead (:attr:`FramePieces.finished`): those, and None (the frame takes the values' moments alone).
    """
    if pieces.finished is not None:
        return dict(pieces.finished), None
    collected: dict[str, Any] = {}
    joint = _collector_finish(collected, pieces.collectors, pieces.groups, _numpy_values(t.value, pieces.groups))
    return collected, joint


def _empty_columns(params: Sequence[str], normalize_against: str | None) -> list[str]:
    """The columns of a result that holds no run (a sweep stopped in its first run, every run unreturned).

    The same columns a measured result has, in its order, so that ``df[["n", "AvgValue", "CI95_Upper"]]`` and
    :func:`~nsightx.filter_flags` work on it as on any other (collector and ``Device`` columns, known only from
    values, are left out).
    """
    stats = [name for name, _ in _MOMENTS]
    normalized = ["Normalized", "NormalizationValue"] if normalize_against is not None else ["Normalized"]
    return [
        *("Annotation", "Metric", *params, *stats, "NumRuns", "Kernel", *_ENV_COLUMNS, "Unit"),
        *("CI95_Lower", "CI95_Upper", "RelativeStdDevPct", "StableMeasurement", "Flags", *normalized),
        *("Geomean", "Tool"),
    ]


def _value_stats(data: ResultData, t: ResultTable, groups: Groups, joint: Moments | None = None) -> dict[str, Any]:
    """The key columns, the value statistics (one groupby over the group codes), kernel, environment and unit.

    ``joint``: the values' moments, when the collector statistics computed them with theirs (see
    :func:`_numpy_values`).
    """
    first = groups.first
    out: dict[str, Any] = {
        "Annotation": _column(t.annotations, t.annotation[first]).array(),
        "Metric": _column(t.metrics, t.metric[first]).array(),
        "Config": t.config[first],
    }
    out.update(_value_moments(t.value, groups, joint))
    out["Kernel"] = _top_kernels(t, groups)
    for name in _ENV_COLUMNS:
        out[name] = _scalar(data.environment.get(name), groups.count)
    if data.config_hosts:
        out["Host"] = _column(data.config_hosts, out["Config"]).array()
    out["Unit"] = _first(_column(t.units, t.unit), groups)
    return out


_NUMPY_ROWS = 8192
"""Up to this many value rows their statistics are numpy's (one pass per run); beyond, pandas' loops are faster."""


def _numpy_values(values: Any, groups: Groups) -> Any:
    """The values, where :func:`_value_moments` takes numpy's statistics of them (else None).

    Their moments may then be computed in the collector statistics' call (:func:`_numeric_stats`, one column more
    in the same passes): each column's statistics are its own, whatever the other columns hold.
    """
    return values if len(values) <= _NUMPY_ROWS and fits([values], groups.ids, groups.count) else None


def _value_moments(values: Any, groups: Groups, joint: Moments | None = None) -> dict[str, Any]:
    """``AvgValue`` .. ``NumRuns`` per group: numpy's :mod:`~nsightx._results.groupstats`, else pandas' groupby.

    ``joint``: the values' moments, computed with the collectors' (only where :func:`_numpy_values` gave them).
    Rows whose values lie at the edges of the float range are computed again, scaled (:mod:`.extremes`).
    """
    out = _plain_moments(values, groups.ids, groups.count, groups.ascending, joint)
    return rescale_extremes(values, groups.ids, groups.ascending, out, _plain_moments)


def _plain_moments(values: Any, ids: Ints, count: int, ascending: bool, joint: Moments | None = None) -> dict[str, Any]:
    """:func:`_value_moments` in pandas' arithmetic, without the scaled rows."""
    small = joint is not None or (len(values) <= _NUMPY_ROWS and fits([values], ids, count))
    median = medians(values, ids, count) if small else None
    if median is not None:
        m = joint if joint is not None else moments(values[:, None], ids, count, ascending)
        columns = (m.mean, median[:, None], m.std, m.minimum, m.maximum, m.count)
        # Contiguous either way: a column of the joint moments is a strided view, and numpy's strided and contiguous
        # loops may give a NaN of another sign (the interval's ends of a group with an infinite value differed
        # between a result whose collector statistics took the values' moments and one that did not).
        names = ("AvgValue", "MedianValue", "StdDev", "MinValue", "MaxValue", "NumRuns")
        return {name: np.ascontiguousarray(c[:, 0]) for name, c in zip(names, columns, strict=True)}
    return _pandas_moments(values, ids, count, ascending)


_BLOCK_ROWS = 1 << 16
"""Rows per pandas groupby in :func:`_pandas_moments` (whole groups, so a block may hold more)."""
_MOMENTS = (
    ("AvgValue", "mean"),
    ("MedianValue", "median"),
    ("StdDev", "std"),
    ("MinValue", "min"),
    ("MaxValue", "max"),
)


def _pandas_moments(values: Any, ids: Ints, count: int, ascending: bool | None = None) -> dict[str, Any]:
    """``AvgValue`` .. ``NumRuns`` per group, by pandas' groupby over the rows sorted by group, block by block.

    Mean, minimum and maximum of float64 values are :func:`~nsightx._results.groupstats.mean_min_max`'s (numpy's
    path's numbers on every pandas: pandas 3.1 reduces the sorted blocks with ``reduceat``, 3.0 with its
    compensated loop); ``ascending``: whether ``ids`` never decrease (found when None).

    One groupby over a million rows made about 42 MB of temporary arrays (its codes, the order that sorts them,
    the values in that order), as much as the result's columns themselves (issue 35: peak memory under twice
    the columns). Here the rows are put in group order once (a stable sort: each group keeps its rows in their
    order, so the sums, Welford's variance and the medians are pandas' own, bit for bit) and each block of about
    :data:`_BLOCK_ROWS` rows of whole groups is one groupby; the groups come out in order of their ids.
    """
    import pandas as pd

    sizes = np.bincount(ids, minlength=count)
    ends = np.cumsum(sizes)
    blocks = _group_blocks(ends, count)
    rows = _BlockRows(ids, blocks)
    out = {name: np.empty(count, np.float64) for name, _ in _MOMENTS}
    out["NumRuns"] = np.empty(count, np.int64)
    ours = values.dtype == np.float64
    stats = [(name, stat) for name, stat in _MOMENTS if not ours or stat in ("median", "std")]
    reduce = ours and (_ascending(ids) if ascending is None else ascending) and not bool(np.isnan(values).any())
    for b, (first, last) in enumerate(blocks):
        block_ids = np.repeat(np.arange(first, last, dtype=np.int64), sizes[first:last])
        picked = values[rows.of(b)]
        if ours:  # each group's rows lie in one block, in row order: its numbers are those of all rows at once
            got = mean_min_max(picked, block_ids - first, last - first, reduce)
            out["AvgValue"][first:last], out["MinValue"][first:last], out["MaxValue"][first:last] = got
        block = pd.Series(picked, copy=False).groupby(block_ids, sort=False)
        for name, stat in stats:
            out[name][first:last] = getattr(block, stat)().to_numpy()
        out["NumRuns"][first:last] = block.count().to_numpy()
    del rows, block, picked
    release_freed(len(values))  # pandas' per-block pieces, before the flags' row-long arrays (see memtrim)
    return out


def _group_blocks(ends: Ints, count: int) -> list[tuple[int, int]]:
    """Blocks ``(first, last)`` of whole groups of about :data:`_BLOCK_ROWS` rows (a larger group is one block).

    ``ends``: per group, the cumulative count of rows up to and including it.
    """
    blocks, first = [], 0
    while first < count:
        start = int(ends[first - 1]) if first else 0
        last = max(int(np.searchsorted(ends, start + _BLOCK_ROWS, side="right")), first + 1)
        blocks.append((first, last))
        first = last
    return blocks


class _BlockRows:
    """The rows of each block of groups, in group order and within a group in row order (a stable sort's order).

    Found a block at a time: each row's block number (one narrow row-long array), then per block the rows that
    carry it, sorted stably by group. The same rows in the same order as ``argsort(ids, kind="stable")`` cut at
    the blocks' ends, without its row-long ``int64`` order and the values taken in that order (16 MB at a million
    values). Rows already in group order are slices, with no copy at all.
    """

    def __init__(self, ids: Ints, blocks: list[tuple[int, int]]) -> None:
        self._ids = ids
        self._bounds = [0, *(int(last) for _, last in blocks)]
        self._sorted = _ascending(ids)
        self._owner: Any = None
        if not self._sorted and len(blocks) > 1:
            groups_per_block = [last - first for first, last in blocks]
            block_of = np.repeat(np.arange(len(blocks), dtype=np.min_scalar_type(len(blocks))), groups_per_block)
            self._owner = block_of[ids]
        self._starts = np.searchsorted(ids, self._bounds) if self._sorted else None

    def of(self, b: int) -> Any:
        """The rows of block ``b``: a slice where the rows are in group order, else their positions."""
        if self._starts is not None:
            return slice(int(self._starts[b]), int(self._starts[b + 1]))
        if self._owner is None:  # one block: all rows
            return np.argsort(self._ids, kind="stable")
        rows = np.flatnonzero(self._owner == b)
        return rows[np.argsort(self._ids[rows], kind="stable")]


_SCALED = ("AvgValue", "MedianValue", "StdDev", "MinValue", "MaxValue", "CI95_Lower", "CI95_Upper")


def _normalize(out: dict[str, Any], baseline: str, function: str, t: ResultTable, groups: Groups) -> None:
    """Divide every value and spread column by the baseline's mean for the same config and metric (in place).

    A baseline mean of 0 (a counter or derived metric that is 0 for the baseline) gives the quotients IEEE
    division gives, ±inf (NaN where the value is 0 too), without a numpy warning: the frame says what the ratio
    is, ``NormalizationValue`` shows the 0, and the plots leave such rows out.
    """
    names, all_metrics = t.annotations, t.metrics
    annotations = [names[a] for a in t.annotation[groups.first].tolist()]
    metrics = [all_metrics[m] for m in t.metric[groups.first].tolist()]
    configs, avg = out["Config"].tolist(), out["AvgValue"]
    check_baseline(baseline, annotations, function, "the result holds")
    base = {(c, m): float(v) for a, m, c, v in zip(annotations, metrics, configs, avg, strict=True) if a == baseline}
    index = list(zip(configs, metrics, strict=True))
    missing = sorted({k for k in index if k not in base}, key=str)
    if missing:
        shown = ", ".join(f"config {c} / {m}" for c, m in missing[:5])
        raise ConfigError(
            f"normalize_against={baseline!r}: no baseline value for {shown}"
            f"{' and more' if len(missing) > 5 else ''}; every config must run the baseline annotation"
        )
    denom = np.array([base[k] for k in index], dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):  # a baseline mean of 0: x / 0 is ±inf, 0 / 0 NaN (api.md)
        for col in _SCALED:
            out[col] = out[col] / (np.abs(denom) if col == "StdDev" else denom)
    _order_ends(out, np.signbit(denom))  # -0.0 too: x / -0.0 is -x / 0, an order reversed as by any negative
    out["Unit"] = _scalar("ratio", groups.count)
    out["Normalized"] = _scalar(baseline, groups.count)
    out["NormalizationValue"] = denom


def _order_ends(out: dict[str, Any], negative: Any) -> None:
    """Swap the (min, max) and (CI95 lower, upper) ends of rows divided by a negative baseline mean (in place).

    Dividing by a negative number reverses the order: the smallest ratio is the largest value over the baseline.
    """
    if not negative.any():
        return
    for low, high in (("MinValue", "MaxValue"), ("CI95_Lower", "CI95_Upper")):
        a, b = np.asarray(out[low], dtype=np.float64), np.asarray(out[high], dtype=np.float64)
        out[low], out[high] = np.where(negative, b, a), np.where(negative, a, b)


def _geomeans(avg: Any, t: ResultTable, groups: Groups) -> Any:
    """Per row, the geometric mean of ``avg`` over the rows of its (annotation, metric), one group at a time.

    Each group's values go through :func:`_geomean` as their own array, as ``groupby(...).transform`` did, so
    the reductions add in the same order.
    """
    if len(set(t.combinations.annotation.tolist())) == 1 and len(set(t.combinations.metric.tolist())) == 1:
        return _one_geomean(avg, groups.count)  # one region, one metric: every row's group is all rows
    return _geomeans_by_pair(avg, t, groups)


def _geomeans_by_pair(avg: Any, t: ResultTable, groups: Groups) -> Any:
    """:func:`_geomeans` of any result: the rows numbered by (annotation, metric), each group reduced in turn."""
    first = groups.first
    pair, _ = group_ids(t.annotation[first], t.metric[first])
    order = np.argsort(pair, kind="stable")
    values = np.asarray(avg, dtype=np.float64)[order]
    kept = np.isfinite(values) & (values > 0)
    logs = np.log(values[kept])  # elementwise, so the same numbers as taking each group's log on its own
    size = np.bincount(pair[order][kept], minlength=int(pair.max()) + 1)
    means = np.full(len(size), math.nan)
    start = 0
    for i, k in enumerate(size.tolist()):
        if k:
            means[i] = float(np.exp(np.mean(logs[start : start + k])))  # the group's own reduction, as before
        start += k
    return means[pair]


def _one_geomean(avg: Any, count: int) -> Any:
    """:func:`_geomeans` where every row is of one (annotation, metric): the one group's mean in every row.

    The same reduction over the same array (the rows in their order, those not finite or not positive left out):
    ``np.mean``'s own steps, ``np.add.reduce`` and a division by the count, without its dispatch and checks.
    """
    values = np.asarray(avg, dtype=np.float64)
    logs = np.log(values[np.isfinite(values) & (values > 0)])
    mean = float(np.exp(float(np.add.reduce(logs)) / len(logs))) if len(logs) else math.nan
    return np.full(count, mean)


def frame_copy(frame: pd.DataFrame) -> pd.DataFrame:
    """A copy of ``frame`` that its user may change without changing ``frame`` (what ``to_dataframe()`` returns).

    Under pandas' copy-on-write (always on from pandas 3) a shallow copy is one: its data is copied when either
    frame is written to, and its index and column objects are its own; else a deep copy.
    """
    import pandas as pd

    cow = int(pd.__version__.split(".")[0]) >= 3 or pd.options.mode.copy_on_write is True
    return frame.copy(deep=not cow)
