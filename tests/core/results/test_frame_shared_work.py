"""The small-result shortcuts of the aggregated frame give the general path's numbers (issue 35, frame round 7)."""

from __future__ import annotations

import numpy as np
import pytest

import nsightx
from nsightx._results import stats
from nsightx._results.groupstats import fits, moments
from nsightx._results.table_flags import Groups

SWEEPS = ("tests/fixtures/gpu-results/sweep-cupti.parquet", "tests/fixtures/gpu-results/sweep-events.parquet")


def _summaries(rng: np.random.Generator, rows: int) -> tuple[np.ndarray, ...]:
    """Per-row summaries with every case the interval handles: few runs, NaN and infinite spreads, zero minimum."""
    n = rng.integers(0, 12, rows)
    mean = rng.normal(100.0, 50.0, rows)
    std = np.abs(rng.normal(5.0, 5.0, rows))
    std[rng.random(rows) < 0.1] = np.nan
    std[rng.random(rows) < 0.05] = np.inf
    minimum = mean - rng.random(rows) * 10.0
    minimum[rng.random(rows) < 0.1] = 0.0
    log_mean, log_var = np.log(np.abs(mean)), rng.random(rows) * 0.1
    return mean, std, n, minimum, log_mean, log_var


@pytest.mark.parametrize("rows", [0, 1, 4, 40, 512])
def test_mean_intervals_few_rows_equal_numpy_quantiles(rows: int, monkeypatch: pytest.MonkeyPatch) -> None:
    summaries = _summaries(np.random.default_rng(rows), rows)
    few = stats.mean_intervals(*summaries)
    monkeypatch.setattr(stats, "_FEW_ROWS", -1)  # every row count takes np.unique and searchsorted
    general = stats.mean_intervals(*summaries)
    for a, b in zip(few, general, strict=True):
        assert a.tobytes() == b.tobytes()  # bit for bit, NaN signs included


def test_groups_ascending_found_once() -> None:
    table = nsightx.load(SWEEPS[0])._table()
    groups = Groups.of(table)
    ids = groups.ids
    assert groups.ascending is bool((ids[1:] >= ids[:-1]).all())
    assert "ascending" in vars(groups)  # cached on the groups: the value and collector statistics share it
    shuffled = Groups(ids[::-1].copy(), groups.first)
    assert shuffled.ascending is False


def test_fits_rejects_int64_minimum_on_few_rows() -> None:
    """-2**63 is not exactly a float64 (``np.abs`` of it overflows to itself, which read as small)."""
    codes = np.zeros(4, dtype=np.int64)
    column = np.array([1, 2, 3, -(2**63)], dtype=np.int64)
    assert not fits([column], codes, 1)
    assert fits([column[:3]], codes[:3], 1)
    assert not fits([np.array([2**53 + 1, 0, 0, 0], dtype=np.int64)], codes, 1)


@pytest.mark.parametrize("path", SWEEPS)
def test_small_collector_matrix_is_column_stack(path: str) -> None:
    """The collector matrix of a small result is column_stack's (values, dtype and C order), so moments agree."""
    rng = np.random.default_rng(7)
    codes = np.repeat(np.arange(4), 10)
    picked = [rng.integers(0, 2000, 40), rng.random(40), rng.integers(-5, 5, 40).astype(np.float64)]
    stacked = np.column_stack(picked).astype(np.float64)
    matrix = np.ascontiguousarray(np.array(picked, dtype=np.float64).T)
    assert matrix.flags.c_contiguous and matrix.dtype == stacked.dtype
    assert matrix.tobytes() == stacked.tobytes()
    a, b = moments(matrix, codes, 4, True), moments(stacked, codes, 4, True)
    for name in ("count", "mean", "std", "minimum", "maximum"):
        assert getattr(a, name).tobytes() == getattr(b, name).tobytes()
    frame = nsightx.load(path).to_dataframe()
    assert frame["MeasuredSMClockMHz_Min"].dtype == np.int64


def test_the_few_rows_thresholds_are_one() -> None:
    """The small-result paths of the frame, the flags and the intervals switch at the same row count."""
    from nsightx._results import dataframe, stats, store

    assert dataframe._SMALL == stats._FEW_ROWS == store.SMALL
