"""Load's checks and the frame's statistics hold no row-long temporaries (issue 35: 1e6 records under 2x the
columns), and give the same numbers, bit for bit, as the whole-array forms they replace.

The peaks are Python-traced memory (``tracemalloc``; numpy reports its arrays to it), which is deterministic: no
timing or resident-set noise. At 2e598b0, at a million values, ``to_dataframe`` peaked at about 35 bytes per value
beyond the columns and the load's checks at about 16 (per added value between the two results here: 26 and 14);
now 13 and 2 (here: 16 and 1).
"""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from _synthetic import host_result

import nsightx
from nsightx._results.dataframe import _pandas_moments
from nsightx._results.parquetcheck import columns_fit
from nsightx._results.profileresults import ProfileResults
from nsightx._results.records import Record, RegionRun, RunRecords
from nsightx._results.stats import group_sums, log_moments
from nsightx._results.store import group_ids
from nsightx._results.table import ResultTable
from nsightx._results.table_flags import Groups, spread_of

METRIC = "host__time_duration.sum"
CONFIGS, REGIONS = 4, 200  # regions interleaved in each run: no group's rows are contiguous
SMALL, LARGE = 100, 300  # runs per config: 80,000 and 240,000 values


def _loaded(runs: int, folder: Path) -> ProfileResults:
    """A host-backend result of ``CONFIGS x runs x REGIONS`` values, saved and loaded back."""
    rng = np.random.default_rng(runs)
    names = [f"region{i}" for i in range(REGIONS)]
    out = []
    for c in range(CONFIGS):
        for r in range(runs):
            ns = (1000.0 + rng.random(REGIONS) * 100.0 * (c + 1)).tolist()
            records = tuple(Record(a, c, r, "region", METRIC, v, "ns") for a, v in zip(names, ns, strict=True))
            execs = tuple(RegionRun(a, c, r, int(v)) for a, v in zip(names, ns, strict=True))
            out.append(RunRecords(c, r, records, execs))
    res = host_result(out, [(c,) for c in range(CONFIGS)], runs)
    return nsightx.load(res.save(folder / f"r{runs}.parquet"))


@pytest.fixture(scope="module")
def sized(tmp_path_factory: pytest.TempPathFactory) -> dict[int, ProfileResults]:
    """Loaded results of :data:`SMALL` and :data:`LARGE` runs per config."""
    folder = tmp_path_factory.mktemp("sized")
    return {runs: _loaded(runs, folder) for runs in (SMALL, LARGE)}


@pytest.fixture(scope="module")
def big(sized: dict[int, ProfileResults]) -> ProfileResults:
    """The larger of the two."""
    return sized[LARGE]


def _traced_peak(fn: Callable[[], Any]) -> int:
    """Bytes of Python-traced memory ``fn()`` needed at its peak beyond what was held when it started."""
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        fn()
        return tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()


def _bytes_per_added_value(sized: dict[int, ProfileResults], work: Callable[[ProfileResults], Any]) -> float:
    """How much ``work``'s traced peak grows per value between the two results (what grows with the rows; the
    blocks' fixed-size temporaries cancel out)."""
    small, large = sized[SMALL], sized[LARGE]
    assert small.data.plan and large.data.plan  # their objects (built on first use) made before measuring
    grown = _traced_peak(lambda: work(large)) - _traced_peak(lambda: work(small))
    return grown / (large.columns.values.n - small.columns.values.n)


def test_to_dataframe_needs_under_20_bytes_per_value_beyond_the_columns(sized: dict[int, ProfileResults]):
    # The table's group ids are 8 bytes a value; before, the sort and the row-long weights made about 26 here.
    per_value = _bytes_per_added_value(sized, lambda r: ProfileResults.from_columns(r.data, r.columns).to_dataframe())
    assert per_value < 20, f"to_dataframe's peak grows {per_value:.1f} bytes per value"
    for res in sized.values():
        fresh = ProfileResults.from_columns(res.data, res.columns)
        pd.testing.assert_frame_equal(fresh.to_dataframe(), res.to_dataframe(), check_exact=True)


def test_the_loads_checks_need_under_3_bytes_per_value(sized: dict[int, ProfileResults]):
    # A flag per possible (annotation, config, run, metric) key, about one per value; before, about 14 bytes.
    per_value = _bytes_per_added_value(sized, lambda r: columns_fit(r.data.plan, r.columns))
    assert per_value < 3, f"columns_fit's peak grows {per_value:.1f} bytes per value"
    assert all(columns_fit(r.data.plan, r.columns) for r in sized.values())


def _odd_values(n: int, seed: int) -> np.ndarray[Any, np.dtype[np.float64]]:
    """Values with NaN, both infinities, zeros and negatives among them."""
    rng = np.random.default_rng(seed)
    value = 1000.0 + rng.standard_normal(n) * 50.0
    spots = rng.choice(n, 600, replace=False)
    value[spots[:100]] = np.nan
    value[spots[100:200]] = np.inf
    value[spots[200:300]] = -np.inf
    value[spots[300:400]] = 0.0
    value[spots[400:]] = -rng.random(200)
    return value


def _same_bits(a: Any, b: Any) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and bool((a.view(np.uint8) == b.view(np.uint8)).all())


@pytest.mark.parametrize("count", [1, 7, 5000])
def test_group_sums_are_bincounts_sums_bit_for_bit(count: int):
    n = 200_003  # blocks, and a short last one
    rng = np.random.default_rng(count)
    ids = rng.integers(0, count, n)
    w = _odd_values(n, count) * 1e-3 + rng.random(n)
    got = group_sums(ids, count, lambda start, stop: w[start:stop])
    assert _same_bits(got, np.bincount(ids, weights=w, minlength=count))


def _spread_whole(value: Any, g: Any, count: int) -> list[Any]:
    """The spread as it was computed over whole arrays (np.bincount over row-long weights)."""
    finite = np.isfinite(value)
    xs = np.where(finite, value, 0.0)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        n = np.bincount(g, weights=finite, minlength=count).astype(np.int64)
        mean = np.bincount(g, weights=xs, minlength=count) / n
        mean_abs = np.bincount(g, weights=np.abs(xs), minlength=count) / n
        dev = value - mean[g]
        dev[~finite] = 0.0
        std = np.sqrt(np.bincount(g, weights=dev * dev, minlength=count) / (n - 1))
        std[n < 2] = np.nan
        gf, x = g[finite], value[finite]
        logs = np.log(np.where(x > 0.0, x, 1.0))
        k = np.bincount(gf, minlength=count)
        log_mean = np.bincount(gf, weights=logs, minlength=count) / k
        d = logs - log_mean[gf]
        log_var = np.bincount(gf, weights=d * d, minlength=count) / (k - 1)
    return [n, mean, mean_abs, std, log_mean, log_var]


@pytest.mark.parametrize("odd", [False, True])
def test_spread_and_log_moments_are_the_whole_array_sums(big: ProfileResults, odd: bool):
    columns = big.columns
    if odd:
        value = _odd_values(columns.values.n, 3)
        columns = replace(columns, values=replace(columns.values, value=value))
    table = ResultTable(columns)
    groups = Groups.of(table)
    spread = spread_of(table, groups)
    n, mean, mean_abs, std, log_mean, log_var = _spread_whole(table.value, groups.ids, groups.count)
    minimum = log_moments(table.value, groups.ids, groups.count)[0]
    bad = ~(minimum > 0.0) | (n < 2)
    log_mean[bad], log_var[bad] = np.nan, np.nan
    for got, want in zip(
        (spread.n, spread.mean, spread.mean_abs, spread.std, spread.log_mean, spread.log_var),
        (n, mean, mean_abs, std, log_mean, log_var),
        strict=True,
    ):
        assert _same_bits(got, want)


@pytest.mark.parametrize("layout", ["interleaved", "sorted", "one_big_group"])
def test_blockwise_moments_are_one_pandas_groupby_bit_for_bit(layout: str):
    n = 300_000
    if layout == "interleaved":
        ids = np.tile(np.arange(1000, dtype=np.int64), n // 1000)
    elif layout == "sorted":
        ids = np.repeat(np.arange(1000, dtype=np.int64), n // 1000)
    else:
        ids = np.zeros(n, np.int64)
        ids[::1000] = np.arange(n // 1000)  # group 0 holds almost every row; the others one row each
        ids, _ = group_ids(ids)
    count = int(ids.max()) + 1
    value = _odd_values(n, 5)
    got = _pandas_moments(value, ids, count)
    want = pd.Series(value).groupby(ids, sort=True).agg(["mean", "median", "std", "min", "max", "count"])
    for name, stat in (
        ("AvgValue", "mean"),
        ("MedianValue", "median"),
        ("StdDev", "std"),
        ("MinValue", "min"),
        ("MaxValue", "max"),
        ("NumRuns", "count"),
    ):
        assert _same_bits(got[name], want[stat].to_numpy()), name


def test_group_ids_match_a_sort_based_numbering():
    rng = np.random.default_rng(2)
    cols = [rng.integers(0, 5, 100_000).astype(np.int8), rng.integers(-3, 40, 100_000), rng.integers(0, 2, 100_000)]
    ids, first = group_ids(*cols)
    keys = np.stack([c.astype(np.int64) for c in cols], axis=1)
    _, index, inverse = np.unique(keys, axis=0, return_index=True, return_inverse=True)
    order = np.argsort(index, kind="stable")
    rank = np.empty(len(index), np.int64)
    rank[order] = np.arange(len(index))
    assert np.array_equal(ids, rank[inverse.reshape(-1)]) and np.array_equal(first, index[order])
    assert all(c.dtype == d for c, d in zip(cols, (np.int8, np.int64, np.int64), strict=True))  # inputs unchanged


def test_a_loaded_results_frame_is_unchanged_by_where_its_columns_came_from(big: ProfileResults, tmp_path: Path):
    again = nsightx.load(big.save(tmp_path / "again.parquet"))
    pd.testing.assert_frame_equal(again.to_dataframe(), big.to_dataframe(), check_exact=True)
