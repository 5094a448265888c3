"""The collector tables and the throttling verdicts are those of the plain loops they replace (issue 35, sixth round).

:attr:`ResultTable.collectors` stores each value with one look-up by name, and :func:`_throttled_items` reads each
distinct clock-event reasons text once; both must give what the earlier loops gave (kept here as the reference),
key for key, value for value and in the same order, on every committed result and on random inputs.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import nsightx
import nsightx._results.dataframe as dataframe_module
import nsightx._results.table as table_module
from nsightx._results import collectorblock
from nsightx._results.dataframe import CLOCK_DROP_FRACTION, NOT_THROTTLING, _throttled_items
from nsightx._results.store import CollectorColumns
from nsightx._results.table import ResultTable, scope_kind, table_of
from nsightx.columns import CLOCK_EVENT_REASONS, MEASURED_SM_CLOCK

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
RESULTS = sorted(
    [
        *FIXTURES.glob("frames/*.result.json"),
        *FIXTURES.glob("results/*/result.json"),
        *FIXTURES.glob("gpu-results/*.parquet"),
    ]
)


def _reference_collectors(c: CollectorColumns) -> tuple[dict[str, str], dict[tuple[str, str], dict[Any, Any]]]:
    """The loop :attr:`ResultTable.collectors` used before (df452f6)."""
    scopes: dict[str, str] = {}
    tables: dict[tuple[str, str], dict[Any, Any]] = {}
    for name, scope, config, run, annotation, value in zip(
        c.name, c.scope, c.config, c.run, c.annotation, c.value, strict=True
    ):
        kind = scope_kind(scope)
        scopes.setdefault(name, scope)
        key = {"run": (config, run), "once": (), "config": (config,)}.get(kind, (config, run, annotation))
        tables.setdefault((name, kind), {})[key] = value
    return scopes, tables


def _reference_throttled(items: Iterable[tuple[str, int, int, Any]]) -> dict[tuple[int, int], bool] | None:
    """The loop :func:`_throttled_items` used before (df452f6), with two rules of session 19: a clock read that is
    not a finite number is no clock, and an empty reason name (``""``, ``"gpu_idle|"``) names no reason."""
    per_run: dict[tuple[int, int], dict[str, object]] = {}
    for name, config, run, value in items:
        per_run.setdefault((config, run), {})[name] = value
    if not per_run:
        return None

    def clock(values: Mapping[str, object]) -> float | None:
        value = values.get(MEASURED_SM_CLOCK)
        idle = "gpu_idle" in str(values.get(CLOCK_EVENT_REASONS) or "").split("|")
        number = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
        return float(value) if number and not idle else None

    clock_of = {key: clock(values) for key, values in per_run.items()}
    clocks = [c for c in clock_of.values() if c is not None]
    median = statistics.median(clocks) if clocks else None
    out: dict[tuple[int, int], bool] = {}
    for key, values in per_run.items():
        reasons = values.get(CLOCK_EVENT_REASONS)
        by_reason = isinstance(reasons, str) and any(r and r not in NOT_THROTTLING for r in reasons.split("|"))
        c = clock_of[key]
        by_clock = median is not None and c is not None and c < CLOCK_DROP_FRACTION * median
        out[key] = by_reason or by_clock
    return out


def _typed(value: Any) -> Any:
    """A value compared by type and value (floats by their bits), containers item by item, in order."""
    if isinstance(value, dict):
        return [(_typed(k), _typed(v)) for k, v in value.items()]
    if isinstance(value, tuple | list):
        return (type(value), [_typed(v) for v in value])
    return (type(value), value.hex() if isinstance(value, float) else value)


def _collectors_of(columns: CollectorColumns) -> Any:
    made = ResultTable._collector_pass.func(SimpleNamespace(columns=SimpleNamespace(collectors=columns)))  # type: ignore[attr-defined]
    return made[:2]  # the collector tables (the third part is the clock values, gathered in the same pass)


@pytest.mark.parametrize("path", RESULTS, ids=lambda p: str(p.relative_to(FIXTURES)))
def test_fixture_tables_and_verdicts_are_the_loops(path: Path) -> None:
    data = nsightx.load(path).data
    table = table_of(data)
    assert _typed(table.collectors) == _typed(_reference_collectors(table.columns.collectors))
    assert _typed(_throttled_items(table.clock_values)) == _typed(_reference_throttled(table.clock_values))


_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**65), 2**65),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(["none", "", "gpu_idle", "gpu_idle|sw_power_cap", "hw_slowdown", "applications_clocks_setting"]),
    st.text(max_size=3),
)
_ROW = st.tuples(
    st.sampled_from(["A", "B", MEASURED_SM_CLOCK, CLOCK_EVENT_REASONS]),
    st.sampled_from(["once", "config", "run", "annotation", "region", "custom"]),
    st.one_of(st.none(), st.integers(0, 2)),
    st.one_of(st.none(), st.integers(0, 2)),
    st.one_of(st.none(), st.sampled_from(["x", "y"])),
    _SCALARS,
)


@settings(max_examples=400, deadline=None)
@given(rows=st.lists(_ROW, max_size=40))
def test_random_collector_tables_are_the_loop(rows: list[tuple[Any, ...]]) -> None:
    columns = (
        CollectorColumns(*(list(field) for field in zip(*rows, strict=True)))
        if rows
        else CollectorColumns([], [], [], [], [], [])
    )
    assert _typed(_collectors_of(columns)) == _typed(_reference_collectors(columns))


_CLOCK_ITEM = st.tuples(
    st.sampled_from([MEASURED_SM_CLOCK, CLOCK_EVENT_REASONS, "Other"]),
    st.integers(0, 2),
    st.integers(0, 3),
    st.one_of(_SCALARS, st.floats(1000.0, 2000.0), st.integers(100, 2000)),
)


@settings(max_examples=400, deadline=None)
@given(items=st.lists(_CLOCK_ITEM, max_size=40))
def test_random_throttling_verdicts_are_the_loop(items: list[tuple[str, int, int, Any]]) -> None:
    assert _typed(_throttled_items(items)) == _typed(_reference_throttled(items))


def _reference_clock_items(c: CollectorColumns) -> list[tuple[str, Any, Any, Any]]:
    """The clock items the loop gathers: run-scope clock and reasons values with a config, in order."""
    wanted = (MEASURED_SM_CLOCK, CLOCK_EVENT_REASONS)
    return [
        (name, config, run or 0, value)
        for name, scope, config, run, value in zip(c.name, c.scope, c.config, c.run, c.value, strict=True)
        if scope_kind(scope) == "run" and name in wanted and config is not None
    ]


def _pass_of(columns: CollectorColumns) -> Any:
    return ResultTable._collector_pass.func(SimpleNamespace(columns=SimpleNamespace(collectors=columns)))  # type: ignore[attr-defined]


def _columns_of(rows: list[tuple[Any, ...]]) -> CollectorColumns:
    if not rows:
        return CollectorColumns([], [], [], [], [], [])
    return CollectorColumns(*(list(field) for field in zip(*rows, strict=True)))


_BLOCK_NAMES = ["A", "B", "C", MEASURED_SM_CLOCK, CLOCK_EVENT_REASONS]
_CONFIG = st.one_of(st.none(), st.integers(0, 2))
_RUN = st.one_of(st.none(), st.integers(0, 3))
_ANNOTATION = st.one_of(st.none(), st.sampled_from(["x", "y"]))
_PREFIX_ROW = st.tuples(
    st.sampled_from(_BLOCK_NAMES),
    st.sampled_from(["once", "config", "annotation", "region"]),
    _CONFIG,
    _RUN,
    _ANNOTATION,
    _SCALARS,
)


@st.composite
def _prefix_and_block(draw: Any) -> tuple[list[tuple[Any, ...]], int]:
    """Values before a block (no run scope among them), then a block: the same collectors, run after run."""
    prefix = draw(st.lists(_PREFIX_ROW, max_size=6))
    names = draw(st.lists(st.sampled_from(_BLOCK_NAMES), min_size=1, max_size=4, unique=True))
    other = st.sampled_from(["once", "config", "run", "annotation"])
    scopes = ["run", *(draw(other) for _ in names[1:])]
    rows = draw(st.integers(2, 12))
    block = [
        (name, scope, draw(_CONFIG), draw(_RUN), draw(_ANNOTATION), draw(_SCALARS))
        for _ in range(rows)
        for name, scope in zip(names, scopes, strict=True)
    ]
    return prefix + block, len(names)


@settings(max_examples=300, deadline=None)
@given(drawn=_prefix_and_block())
def test_a_block_of_runs_is_filed_as_the_loop_files_it(drawn: tuple[list[tuple[Any, ...]], int]) -> None:
    """The block path (a call of many runs with the nvml plugin) gives the loop's tables, scopes and clock items."""
    rows, period = drawn
    columns = _columns_of(rows)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(collectorblock, "RUN_BLOCK_MIN", 0)
        assert collectorblock.run_block(columns) == (columns.scope.index("run"), period)
        made = _pass_of(columns)
    assert _typed(made[:2]) == _typed(_reference_collectors(columns))
    assert _typed(list(made[2])) == _typed(_reference_clock_items(columns))


@settings(max_examples=300, deadline=None)
@given(rows=st.lists(_ROW, max_size=60))
def test_any_values_are_filed_as_the_loop_files_them_with_or_without_a_block(rows: list[tuple[Any, ...]]) -> None:
    columns = _columns_of(rows)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(collectorblock, "RUN_BLOCK_MIN", 0)
        made = _pass_of(columns)
    assert _typed(made[:2]) == _typed(_reference_collectors(columns))
    assert _typed(list(made[2])) == _typed(_reference_clock_items(columns))


def test_the_nvml_plugins_runs_take_the_block(monkeypatch: pytest.MonkeyPatch) -> None:
    """300 runs of three run-scope values after a ONCE value are filed as a block (fails if it is never taken)."""
    rows: list[tuple[Any, ...]] = [("GPUName", "once", None, None, None, "H100")]
    for r in range(300):
        rows += [
            (MEASURED_SM_CLOCK, "run", 0, r, None, 1980 - (r % 5) * 400),
            ("GPUTemperatureC", "run", 0, r, None, 40 + r % 3),
            (CLOCK_EVENT_REASONS, "run", 0, r, None, "gpu_idle" if r % 7 == 0 else "none"),
        ]
    columns = _columns_of(rows)
    filed: list[int] = []
    real = collectorblock.file_block

    def spy(c: CollectorColumns, start: int, period: int, file: Any, wanted: tuple[str, ...]) -> Any:
        filed.append(period)
        return real(c, start, period, file, wanted)

    monkeypatch.setattr(table_module, "file_block", spy)
    made = _pass_of(columns)
    assert filed == [3]
    assert _typed(made[:2]) == _typed(_reference_collectors(columns))
    assert _typed(list(made[2])) == _typed(_reference_clock_items(columns))


_BLOCK_CLOCK = st.one_of(
    st.none(), st.floats(allow_nan=True, allow_infinity=True), st.floats(1000.0, 2000.0), st.integers(100, 2000)
)
_BLOCK_REASONS = st.sampled_from(["none", "", "gpu_idle", "gpu_idle|sw_power_cap", "hw_slowdown", "gpu_idle|"])


@st.composite
def _clock_block(draw: Any) -> Any:
    """A block's clock and reasons columns: distinct (config, run) keys, one clock and one reasons value each."""
    keys = draw(st.lists(st.tuples(st.integers(0, 2), st.integers(0, 40)), unique=True, max_size=60))
    odd = draw(st.booleans())  # sometimes a value the block path must decline (a bool clock, a number as reasons)
    clock = st.one_of(_BLOCK_CLOCK, st.booleans()) if odd else _BLOCK_CLOCK
    reasons = st.one_of(_BLOCK_REASONS, st.integers(0, 3)) if odd else _BLOCK_REASONS
    return collectorblock.ClockBlock(keys, [draw(clock) for _ in keys], [draw(reasons) for _ in keys])


def _items_of(block: Any) -> list[tuple[str, Any, Any, Any]]:
    """The clock items the loop reads for the same runs (clock then reasons, run by run)."""
    items: list[tuple[str, Any, Any, Any]] = []
    for (config, run), clock, reasons in zip(*block, strict=True):
        items += [(MEASURED_SM_CLOCK, config, run, clock), (CLOCK_EVENT_REASONS, config, run, reasons)]
    return items


@settings(max_examples=400, deadline=None)
@given(block=_clock_block())
def test_block_verdicts_are_the_loops_or_decline(block: Any) -> None:
    from nsightx._results.blockverdicts import block_verdicts
    from nsightx._results.dataframe import _clock_reads, _reasons_read

    clocks: dict[tuple[int, int], float] = {}
    done, verdicts = block_verdicts(block, clocks, _reasons_read, CLOCK_DROP_FRACTION)
    items = _items_of(block)
    plain = all(type(v) in (int, float, type(None)) for v in block.clocks) and all(
        type(r) is str for r in block.reasons
    )
    assert done == plain
    if not done:
        assert verdicts is None and clocks == {}
        return
    assert _typed(verdicts) == _typed(_reference_throttled(items))
    loop_clocks: dict[tuple[int, int], float] = {}
    _clock_reads(items, loop_clocks)
    assert _typed(clocks) == _typed(loop_clocks)


def test_a_block_of_runs_gets_its_verdicts_from_the_columns(monkeypatch: pytest.MonkeyPatch) -> None:
    """The nvml plugin's runs: the verdicts come from the block's columns (fails if that path is never taken)."""
    rows: list[tuple[Any, ...]] = [("GPUName", "once", None, None, None, "H100")]
    for r in range(300):
        rows += [
            (MEASURED_SM_CLOCK, "run", r % 2, r, None, 1980 - (r % 5) * 400),
            (
                CLOCK_EVENT_REASONS,
                "run",
                r % 2,
                r,
                None,
                "gpu_idle" if r % 7 == 0 else ("sw_power_cap" if r % 11 == 0 else "none"),
            ),
            ("GPUTemperatureC", "run", r % 2, r, None, 40 + r % 3),
        ]
    items = _pass_of(_columns_of(rows))[2]
    assert isinstance(items, collectorblock.ClockValues) and items.block is not None
    used: list[bool] = []
    real = dataframe_module.block_verdicts

    def spy(*args: Any) -> Any:
        used.append(True)
        return real(*args)

    monkeypatch.setattr(dataframe_module, "block_verdicts", spy)
    clocks: dict[tuple[int, int], float] = {}
    assert _typed(_throttled_items(items, clocks)) == _typed(_reference_throttled(list(items)))
    assert used == [True]
    loop_clocks: dict[tuple[int, int], float] = {}
    from nsightx._results.dataframe import _clock_reads

    _clock_reads(list(items), loop_clocks)
    assert _typed(clocks) == _typed(loop_clocks)
