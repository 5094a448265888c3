"""The columnar view of a result: codes, keys and look-ups against the records they come from, and its cache."""

from __future__ import annotations

import gc
import math
import random
import weakref

import numpy as np
import pytest

import nsightx
from nsightx._results.records import CollectorValue
from nsightx._results.schema import ResultData
from nsightx._results.table import MISSING, Encoder, ResultTable, dense_ids, group_ids, numbers, table_of

SILENT = nsightx.VerbosityLevel.SILENT


def test_encoder_codes_in_first_seen_order_and_shared_between_columns():
    enc = Encoder()
    first = enc.encode(iter(["b", "a", "b", None, "a"]), 5)
    assert first.tolist() == [0, 1, 0, 2, 1] and enc.values == ["b", "a", None]
    more = enc.encode(iter(["c", "a"]), 2)
    assert more.tolist() == [3, 1] and enc.values == ["b", "a", None, "c"]


def _reference_ids(*columns):
    seen: dict[tuple[int, ...], int] = {}
    ids = [seen.setdefault(key, len(seen)) for key in zip(*(c.tolist() for c in columns), strict=True)]
    firsts = {}
    for row, i in enumerate(ids):
        firsts.setdefault(i, row)
    return ids, [firsts[i] for i in range(len(seen))]


@pytest.mark.parametrize("high", [3, 1000, 10**12])
def test_group_ids_number_rows_as_groupby_sort_false_meets_them(high: int):
    rng = np.random.default_rng(high)
    cols = [rng.integers(-5, high, 500), rng.integers(0, 4, 500), rng.integers(0, high, 500)]
    ids, firsts = group_ids(*cols)
    want_ids, want_firsts = _reference_ids(*cols)
    assert ids.tolist() == want_ids and firsts.tolist() == want_firsts


@pytest.mark.parametrize("constant", [0, 1, 2])
def test_group_ids_with_a_column_of_one_value(constant: int):
    """A column holding one value (a result's single metric or kernel) is skipped when packing, ids unchanged."""
    rng = np.random.default_rng(constant)
    cols = [rng.integers(0, 6, 200), rng.integers(0, 3, 200)]
    cols.insert(constant, np.full(200, 7, dtype=np.int64))
    ids, firsts = group_ids(*cols)
    assert (ids.tolist(), firsts.tolist()) == _reference_ids(*cols)


def test_group_ids_of_wide_keys_that_would_overflow_when_packed():
    rng = np.random.default_rng(1)
    cols = [rng.integers(0, 2**40, 300) for _ in range(3)]  # 2**120 combinations: densified step by step
    ids, firsts = group_ids(*cols)
    assert (ids.tolist(), firsts.tolist()) == _reference_ids(*cols)


@pytest.mark.parametrize("n", [0, 1, 2, 7, 63, 64, 65, 130])
def test_group_ids_of_few_rows_are_those_of_the_numpy_path(n: int, monkeypatch: pytest.MonkeyPatch):
    """Up to 64 rows (a small result's groups, keys and combinations) the ids come from a dictionary of row tuples,
    without the per-column numpy packing; they are the ids and first rows the packing gives, for any column type."""
    from nsightx._results import store

    rng = np.random.default_rng(n)
    cases = [
        [rng.integers(-3, 3, n).astype(np.int8), rng.integers(0, 2, n)],
        [np.full(n, 5, dtype=np.int64), rng.integers(0, 10**12, n), rng.integers(-1, 1, n).astype(np.int16)],
        [rng.integers(0, 4, n)],
    ]
    small = [group_ids(*cols) for cols in cases]
    if n <= 64:  # the small path never reaches the packing
        monkeypatch.setattr(store, "dense_ids", lambda keys: pytest.fail("numpy packing used for few rows"))
        assert [[a.tolist() for a in group_ids(*cols)] for cols in cases] == [[a.tolist() for a in s] for s in small]
        monkeypatch.undo()
    monkeypatch.setattr(store, "_SMALL_ROWS", -1)  # the numpy path for every size
    for cols, (ids, firsts) in zip(cases, small, strict=True):
        want_ids, want_firsts = group_ids(*cols)
        assert ids.dtype == want_ids.dtype == firsts.dtype == want_firsts.dtype == np.int64
        assert (ids.tolist(), firsts.tolist()) == (want_ids.tolist(), want_firsts.tolist()) == _reference_ids(*cols)


@pytest.mark.parametrize("n", [0, 1, 44, 65, 300])
def test_combinations_leave_out_text_columns_of_one_name(n: int):
    """The table's combination ids skip a text column of one name (all its codes 0): they are the ids of the
    whole (annotation, metric, kernel, unit, config) key, for small and large tables."""
    from nsightx._results.store import Text, ValueColumns

    rng = np.random.default_rng(n)
    config, run = rng.integers(0, 4, n), rng.integers(0, 3, n)
    one = Text(np.zeros(n, dtype=np.int8), ["m"])
    two = Text(rng.integers(0, 2, n).astype(np.int8), ["a", "b"])
    for annotation, kernel in ((one, two), (two, one), (one, one)):
        values = ValueColumns(annotation, config, run, one, rng.random(n), one, kernel)
        codes = (annotation.codes, one.codes, kernel.codes, one.codes, config)
        want = _reference_ids(*codes)
        t = _table_over(values)
        assert (t.combinations.ids.tolist(), t.combinations.first.tolist()) == want


def _table_over(values: object) -> ResultTable:
    """A :class:`ResultTable` over ``values`` (the constructor reads the value columns only)."""
    from types import SimpleNamespace

    return ResultTable(SimpleNamespace(values=values))  # type: ignore[arg-type]


def test_same_ints_is_array_equal_of_integer_columns():
    """The frame's comparisons of integer columns: by bytes within a dtype, ``np.array_equal`` across dtypes."""
    from nsightx._results.store import same_ints

    a = np.array([0, 1, 1, 3], dtype=np.int64)
    cases = [
        (a, a.copy()),
        (a, a[:3]),
        (a, np.array([0, 1, 2, 3])),
        (a, a.astype(np.int8)),
        (a, np.array([0, 1, 1, 300], dtype=np.int16)),
        (a[::2], np.array([0, 1])),
        (a[::2], np.array([0, 2])),
        (np.zeros(0, np.int64), np.zeros(0, np.int8)),
    ]
    for x, y in cases:
        assert same_ints(x, y) is bool(np.array_equal(x, y))


def test_dense_ids_of_no_rows():
    ids, firsts = dense_ids(np.zeros(0, dtype=np.int64))
    assert len(ids) == 0 and len(firsts) == 0


def test_numbers_read_attributes_as_the_flag_rules_do():
    values = [1, 2.5, True, "3", None, math.inf, np.float64(4.0), np.int64(5)]
    got = numbers(values)
    want = [1.0, 2.5, math.nan, math.nan, math.nan, math.inf, 4.0, math.nan]  # numpy ints are not Python ints
    assert [
        (g, w) for g, w in zip(got.tolist(), want, strict=True) if not (g == w or (math.isnan(g) and math.isnan(w)))
    ] == []


@pytest.fixture(scope="module")
def measured() -> ResultData:
    """A host-backend sweep (3 configs x 4 runs x 2 regions, one failing) with collectors of every scope."""
    from nsightx._results.profileresults import build_results

    @nsightx.analyze.kernel(configs=[(1,), (2,), (3,)], runs=4, warmup=0, backend="host", verbosity=SILENT)
    def sweep(n: int) -> None:
        with nsightx.annotate("a"):
            sum(range(n))
        with nsightx.annotate("b", ignore_failures=True):
            if n == 2:
                raise RuntimeError("b fails at n=2")

    with pytest.warns(RuntimeWarning, match="b fails"):
        data = sweep().data
    rng = random.Random(3)
    runs = [
        run.model_copy(
            update={
                "collectors": (
                    CollectorValue(name="once", scope="once", value="v1"),
                    CollectorValue(name="cfg", scope="config", config=run.config, value=run.config * 10),
                    CollectorValue(name="clock", scope="run", config=run.config, run=run.run, value=rng.random()),
                    CollectorValue(name="clock", scope="run", config=run.config, run=run.run, value="last wins"),
                    CollectorValue(
                        name="occ", scope="annotation", config=run.config, run=run.run, annotation="a", value=7
                    ),
                )
            }
        )
        for run in data.runs
    ]
    return build_results(data.plan, runs, dict(data.environment)).data


def test_value_columns_are_the_values_fields(measured: ResultData):
    t = table_of(measured)
    vals = measured.values
    assert [t.annotations[c] for c in t.annotation] == [v.annotation for v in vals]
    assert [t.metrics[c] for c in t.metric] == [v.metric for v in vals]
    assert [t.kernels[c] for c in t.kernel] == [v.kernel for v in vals]
    assert [t.units[c] for c in t.unit] == [v.unit for v in vals]
    assert t.config.tolist() == [v.config for v in vals] and t.run.tolist() == [v.run for v in vals]
    assert np.array_equal(t.value, [v.value for v in vals], equal_nan=True)
    assert "failed" in t.kernels and np.isnan(t.value[np.array(t.kernels)[t.kernel] == "failed"]).all()


def test_region_columns_are_the_region_runs(measured: ResultData):
    regs = table_of(measured).regions
    flat = [reg for run in measured.runs for reg in run.regions]
    names = table_of(measured).annotations
    assert [names[c] for c in regs.annotation] == [r.annotation for r in flat]
    assert regs.config.tolist() == [r.config for r in flat] and regs.run.tolist() == [r.run for r in flat]
    assert regs.host_ns.tolist() == [float(r.host_ns) for r in flat]
    assert regs.failed.tolist() == [r.failed for r in flat] and regs.failed.any()
    assert not regs.has_attributes and (regs.launch_bound == -1).all()


@pytest.mark.parametrize(
    ("name", "row"),
    [
        ("once", lambda v: "v1"),
        ("cfg", lambda v: v.config * 10),
        ("clock", lambda v: "last wins"),
        ("occ", lambda v: 7 if v.annotation == "a" else None),
    ],
)
def test_collector_rows_look_up_each_rows_key(measured: ResultData, name, row):
    found, codes = table_of(measured).collector_rows(name)
    got = [None if c == MISSING else found[c] for c in codes.tolist()]
    assert got == [row(v) for v in measured.values]


def test_the_view_is_cached_per_result_object_and_dropped_with_it(measured: ResultData):
    assert table_of(measured) is table_of(measured)
    copy = measured.model_copy()
    view = weakref.ref(table_of(copy))
    assert view() is not table_of(measured)
    del copy
    gc.collect()
    assert view() is None  # the cache does not keep a result (or its view) alive
