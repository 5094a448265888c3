"""The frame's pieces computed during a deferred call's GPU wait (nsightx._results.frameahead, issue 35).

A deferred call hands its sink the rows of its last runs before it waits (collector values and regions, no
records), the sink computes the frame's value-independent pieces from them and a predicted row layout, and the
first ``to_dataframe()`` takes them only where they are the frame's own. Checked here: over the random result
shapes of the frame reference, the frame with the pieces is bit for bit the frame without them; the pieces are
taken where the layout is the predicted one; stale pieces (other collector values, another row layout, other
columns) are not used. (tests/core/run/test_while_waiting.py: a decorated call computes them during its wait.)
"""

from __future__ import annotations

import warnings
from dataclasses import replace
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from test_frame_reference import EXAMPLES, Shape, _run, build, shapes

import nsightx
from nsightx._results import frameahead
from nsightx._results.dataframe import aggregate_source
from nsightx._results.profileresults import ProfileResults, build_results
from nsightx._results.records import RunRecords
from nsightx._results.rowgather import _collector_tuple
from nsightx._results.sink import RunSink
from nsightx._results.store import CollectorColumns, Text
from nsightx._results.table import Combinations, ResultTable


def _row(run: RunRecords) -> tuple[Any, ...]:
    """A run object as the run loop's row (attributes per annotation, collector values as row tuples)."""
    regions = tuple((g.annotation, g.host_ns, g.failed) for g in run.regions)
    attributes = {g.annotation: g.attributes for g in run.regions if g.attributes}
    return (run.config, run.run, run.records, regions, attributes, tuple(map(_collector_tuple, run.collectors)))


def _deferred(shape: Shape, stored: list[tuple[Any, ...]] | None = None) -> ProfileResults:
    """``shape``'s result as a deferred call makes it: rows expected and pieces computed, then the runs stored.

    ``stored``: the rows stored after the wait (default: the expected ones with their records and attributes).
    """
    plain = build(shape)  # the plan, environment and transforms of the reference's build
    rows = [_row(_run(shape, c, r)) for c in range(len(shape.configs)) for r in range(shape.runs)]
    sink = RunSink()
    sink.expect_runs([(c, r, (), regions, {}, values) for c, r, _, regions, _, values in rows])
    sink.prepare_frame()
    for row in rows if stored is None else stored:
        sink.add_run(row)
    plan = plain.data.plan
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return build_results(
            plan,
            sink.stored(),
            plain.data.environment,
            combine=(lambda a, b: a + b) if shape.combine else None,
            created=plain.data.created,
        )


def _without_ahead(result: ProfileResults) -> ProfileResults:
    """A result over the same columns that computes every piece itself."""
    return ProfileResults.from_columns(result._shell, result.columns, result._configs)


def _frame_or_error(result: ProfileResults) -> pd.DataFrame | str:
    try:
        return result.to_dataframe()
    except nsightx.ConfigError as e:  # no baseline value: both ways alike
        return str(e)


def assert_same_bits(got: pd.DataFrame | str, want: pd.DataFrame | str) -> None:
    """Same columns, dtypes and cells; floats by their bits (NaN payloads and signed zeros included)."""
    if isinstance(want, str) or isinstance(got, str):
        assert got == want
        return
    assert list(got.columns) == list(want.columns)
    assert list(got.dtypes) == list(want.dtypes)
    for name in want.columns:
        a, b = got[name], want[name]
        if a.dtype == np.float64:
            assert np.array_equal(a.to_numpy().view(np.int64), b.to_numpy().view(np.int64)), name
        else:
            pd.testing.assert_series_equal(a, b, check_exact=True)


@pytest.fixture
def taken(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Whether each FrameAhead.take handed its pieces out."""
    seen: list[bool] = []
    take = frameahead.FrameAhead.take

    def noted(self: frameahead.FrameAhead, table: Any) -> Any:
        pieces = take(self, table)
        seen.append(pieces is not None)
        return pieces

    monkeypatch.setattr(frameahead.FrameAhead, "take", noted)
    return seen


@settings(
    max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
@given(shape=shapes())
def test_the_frame_with_the_pieces_is_the_frame_without_them(shape: Shape) -> None:
    shape.derive = False  # a derived result never takes them (see test_a_derived_result_has_no_pieces)
    result = _deferred(shape)
    assert_same_bits(_frame_or_error(result), _frame_or_error(_without_ahead(result)))
    assert_same_bits(_frame_or_error(result), _frame_or_error(_without_ahead(result)))  # the cached frame


def _simple(runs: int = 4, configs: int = 3, clocks: bool = True) -> Shape:
    """One record per region, one metric, run-scope nvml-like collectors: the predicted layout."""
    shape = Shape(
        configs=[(c * 64 + 1,) for c in range(configs)],
        params=("n",),
        runs=runs,
        annotations=("gemm",),
        metrics=("gpu__time_duration.sum",),
        combine=False,
        derive=False,
    )
    for c in range(configs):
        for r in range(runs):
            shape.regions[("gemm", c, r)] = [{"gpu__time_duration.sum": 1000.0 + 7 * r + c}]
    every = [(c, r) for c in range(configs) for r in range(runs)]
    shape.collectors["GPUName"] = ("once", {None: "H100"})
    shape.collectors["GPUPowerW"] = ("run", {w: 300.5 + w[1] for w in every})
    shape.collectors["ThermalPauseS"] = ("run", {w: 0.0 if w[1] % 2 else -0.0 for w in every})
    if clocks:
        shape.collectors["MeasuredSMClockMHz"] = ("run", {w: 1980 - 400 * (w == (1, 2)) for w in every})
        shape.collectors["ClockEventReasons"] = ("run", {w: "none" for w in every})
    return shape


def test_the_pieces_are_taken_for_the_predicted_layout(taken: list[bool]) -> None:
    result = _deferred(_simple())
    assert result._frame_ahead is not None
    got = result.to_dataframe()
    assert taken == [True]
    assert_same_bits(got, _without_ahead(result).to_dataframe())
    assert got["ThrottledRuns"].tolist() == [0, 1, 0]  # config 1's run 2 ran at a lower clock


def test_the_pieces_are_handed_out_once() -> None:
    result = _deferred(_simple())
    ahead = result._frame_ahead
    assert ahead is not None
    table = result._table()
    pieces = ahead.take(table)
    assert pieces is not None and ahead.take(table) is None
    assert_same_bits(
        aggregate_source(result._shell, result._configs, table, pieces)(), _without_ahead(result).to_dataframe()
    )


def test_pieces_of_other_collector_values_are_not_used(taken: list[bool]) -> None:
    """A run stored with other values than it was expected with (another tuple): the pieces are not bound."""
    shape = _simple()
    stored = [_row(_run(shape, c, r)) for c in range(3) for r in range(4)]
    stored[5] = (*stored[5][:5], tuple((*v[:5], 999.0) if v[0] == "GPUPowerW" else v for v in stored[5][5]))
    result = _deferred(shape, stored)
    assert result._frame_ahead is None
    frame = result.to_dataframe()
    assert taken == []
    assert_same_bits(frame, _without_ahead(result).to_dataframe())
    assert frame["GPUPowerW_Max"].tolist()[1] == 999.0  # the stored value, not the expected one


def test_a_result_of_two_metrics_a_region_does_not_take_the_pieces(taken: list[bool]) -> None:
    """Two metrics a region: not the one-row-per-region layout the pieces predict; they are refused at the frame."""
    shape = _simple()
    shape.metrics = ("gpu__time_duration.sum", "bytes")
    for key, kernels in shape.regions.items():
        kernels[0]["bytes"] = 64.0 + key[2]
    result = _deferred(shape)
    frame = result.to_dataframe()
    assert taken in ([], [False]) and len(frame) == 6
    assert_same_bits(frame, _without_ahead(result).to_dataframe())


def test_two_kernels_a_region_combined_take_the_pieces(taken: list[bool]) -> None:
    """The cupti sweep's split-K config: two kernels in its regions, combined into one row a region (the pieces'
    layout) by ``combine_kernel_metrics``: the pieces are taken and the frame is the same."""
    shape = _simple()
    shape.combine = True
    for (_, c, r), kernels in shape.regions.items():
        if c == 1:
            kernels.append({"gpu__time_duration.sum": 200.0 + r})
    result = _deferred(shape)
    frame = result.to_dataframe()
    assert taken == [True]
    assert_same_bits(frame, _without_ahead(result).to_dataframe())
    assert_same_bits(frame, result.to_dataframe())


def _same_combinations(a: Combinations, b: Combinations) -> bool:
    fields = ("ids", "first", "annotation", "metric", "kernel", "unit", "config")
    pairs = [(getattr(a, f), getattr(b, f)) for f in fields]
    return all(x.dtype == y.dtype and np.array_equal(x, y) for x, y in pairs)


def test_a_table_of_the_predicted_layout_is_handed_the_predicted_combinations() -> None:
    """One metric, kernel and unit, as predicted: the frame's table does not number its rows again; the
    combinations it is handed are the ones it would find itself, and the frame is the same."""
    result = _deferred(_simple())
    ahead = result._frame_ahead
    assert ahead is not None and ahead._table is not None
    predicted, table = ahead._table.combinations, result._table()
    assert "combinations" not in table.__dict__  # found at the first read, not when the table is made
    pieces = ahead.take(table)
    assert pieces is not None and table.combinations.ids is predicted.ids
    assert _same_combinations(predicted, Combinations.of(table.columns.values))
    assert_same_bits(
        aggregate_source(result._shell, result._configs, table, pieces)(), _without_ahead(result).to_dataframe()
    )


@pytest.mark.parametrize("used", [False, True])
def test_a_kernel_a_config_is_handed_the_predicted_combinations(used: bool) -> None:
    """Several kernel names, one per config (cuBLAS' per-size choice) or a second name no row uses: no predicted
    combination is split, so the table is handed their ids with its own codes: those it would find itself."""
    result = _deferred(_simple())
    ahead = result._frame_ahead
    assert ahead is not None and ahead._table is not None
    predicted = ahead._table.combinations
    values = result.columns.values
    codes = values.config.astype(np.int8) if used else np.zeros(values.n, dtype=np.int8)
    table = _relabelled(result, kernel=Text(codes, ["k0", "k1", "k2"]))
    assert ahead.take(table) is not None
    assert table.combinations.ids is predicted.ids
    assert _same_combinations(table.combinations, Combinations.of(table.columns.values))
    assert table.combinations.kernel.tolist() == ([0, 1, 2] if used else [0, 0, 0])


def test_a_kernel_column_that_splits_a_combination_numbers_its_own() -> None:
    """Two kernels in one config's rows: the table numbers its own combinations (the groups compared as before)."""
    result = _deferred(_simple())
    ahead = result._frame_ahead
    assert ahead is not None and ahead._table is not None
    predicted = ahead._table.combinations
    values = result.columns.values
    table = _relabelled(result, kernel=Text(values.run.astype(np.int8) % 2, ["k0", "k1"]))
    assert ahead.take(table) is not None  # the groups (annotation, metric, config) are the same
    assert table.combinations.ids is not predicted.ids and table.combinations.ids.max() == 5
    assert _same_combinations(table.combinations, Combinations.of(table.columns.values))


def _relabelled(result: ProfileResults, **changed: Any) -> ResultTable:
    """A table over the result's columns (its bound collector columns) with some value columns changed."""
    return ResultTable(replace(result.columns, values=replace(result.columns.values, **changed)))


def test_pieces_of_another_row_layout_are_not_used() -> None:
    """Over the bound collector columns, value rows of other runs, configs, annotations or groups: not used."""
    values = _deferred(_simple()).columns.values
    swapped = values.run.copy()
    swapped[[0, 1]] = swapped[[1, 0]]
    other_config = values.config.copy()
    other_config[-1] = 0
    two = Text(np.arange(values.n, dtype=np.int8) % 2, ["gpu__time_duration.sum", "bytes"])
    renamed = Text(values.annotation.codes, ["other"])
    for changed in ({"run": swapped}, {"config": other_config}, {"metric": two}, {"annotation": renamed}):
        result = _deferred(_simple())
        ahead = result._frame_ahead
        assert ahead is not None
        assert ahead.take(_relabelled(result, **changed)) is None, changed
    result = _deferred(_simple())
    assert result._frame_ahead is not None
    assert result._frame_ahead.take(_relabelled(result)) is not None  # the same rows: taken


def test_pieces_are_not_used_for_other_columns(taken: list[bool]) -> None:
    """A table over columns other than the bound ones (a copy of them): not used, even with equal values."""
    result = _deferred(_simple())
    ahead = result._frame_ahead
    assert ahead is not None
    c = result.columns.collectors
    copied = CollectorColumns(
        list(c.name), list(c.scope), list(c.config), list(c.run), list(c.annotation), list(c.value)
    )
    assert ahead.take(ResultTable(replace(result.columns, collectors=copied))) is None


def test_a_derived_result_has_no_pieces() -> None:
    shape = _simple()
    plain = build(shape)
    rows = [_row(_run(shape, c, r)) for c in range(3) for r in range(4)]
    sink = RunSink()
    sink.expect_runs([(c, r, (), regions, {}, values) for c, r, _, regions, _, values in rows])
    sink.prepare_frame()
    for row in rows:
        sink.add_run(row)
    result = build_results(
        plain.data.plan, sink.stored(), plain.data.environment, derive_metric=lambda t, n: (t * n, "ns")
    )
    assert result._frame_ahead is None


def test_a_loaded_result_has_no_pieces(tmp_path: Any) -> None:
    result = _deferred(_simple())
    loaded = nsightx.load(result.save(tmp_path / "r.parquet"))
    assert loaded._frame_ahead is None
    assert_same_bits(loaded.to_dataframe(), _without_ahead(result).to_dataframe())


def test_the_pieces_carry_the_collector_columns_finished() -> None:
    """Computed during the wait, the collector statistics are the frame's own: the frame takes only the values'."""
    result = _deferred(_simple())
    ahead = result._frame_ahead
    assert ahead is not None
    pieces = ahead.take(result._table())
    assert pieces is not None and pieces.finished is not None
    want = _without_ahead(result).to_dataframe()
    assert set(pieces.finished) == {
        c for c in want.columns if c.startswith(("GPUPowerW", "ThermalPause", "Measured"))
    } | {
        "GPUName",
        "ClockEventReasons",
    }
    for name, column in pieces.finished.items():
        assert np.asarray(column).tolist() == want[name].tolist(), name  # no NaN in these
