"""numpy's per-group statistics are pandas' ``groupby`` statistics, bit for bit (issue 35)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from nsightx._results import groupstats
from nsightx._results.groupstats import fits, medians, moments

_REDUCEAT = hasattr(pd.core.groupby.ops.BaseGrouper, "_reduceat_aggregate")
"""Whether this pandas reduces groups whose codes ascend with ``ufunc.reduceat`` (3.1 on; 3.0 with its loop)."""


def _pandas_mean(values: np.ndarray, codes: np.ndarray) -> np.ndarray:
    """The per-group mean nsightx gives: pandas 3.1's, on every pandas.

    Groups whose codes ascend, without a NaN in the column: pandas 3.1's ``reduceat`` sum over the size (pandas
    3.0 adds them in its compensated loop instead); else pandas' loop, the same on both.
    """
    grouped = pd.Series(values).groupby(codes, sort=False)
    if _REDUCEAT or not bool((codes[1:] >= codes[:-1]).all()) or bool(np.isnan(values).any()):
        return grouped.mean().to_numpy()
    size = np.bincount(codes)
    return np.add.reduceat(values[:, None], np.cumsum(size) - size, axis=0)[:, 0] / size.astype(np.float64)


def _first_seen(codes: np.ndarray) -> np.ndarray:
    """The codes renumbered in first-seen order, as ``groupby(sort=False)`` numbers its groups."""
    _, first, inverse = np.unique(codes, return_index=True, return_inverse=True)
    rank = np.empty(len(first), dtype=np.int64)
    rank[np.argsort(first)] = np.arange(len(first))
    return rank[inverse.reshape(-1)]


def _case(seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Values of one kind (spread, NaN, infinities, integers, rounded) in groups, ascending or not."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 60))
    codes = _first_seen(rng.integers(0, int(rng.integers(1, 8)), n))
    if seed % 2:
        codes = np.sort(codes)
    values = rng.normal(1e3 * 10.0 ** rng.integers(-3, 9), 10.0 ** rng.integers(-6, 3), n)
    kind = seed % 5
    if kind == 1:
        values[rng.random(n) < 0.2] = np.nan
    elif kind == 2:
        values[rng.random(n) < 0.1] = np.inf * rng.choice([-1.0, 1.0])
    elif kind == 3:
        values = rng.integers(-100, 100, n).astype(np.float64)
    elif kind == 4:
        values = np.round(values, 2)
    return values, codes


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    """Equal bit for bit (NaN equal to NaN, the sign of zero counted)."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return bool(np.array_equal(a, b, equal_nan=True) and (np.signbit(a) == np.signbit(b)).all())


@pytest.mark.parametrize("seed", range(400))
def test_statistics_are_pandas_groupby_bit_for_bit(seed: int) -> None:
    """Kahan and reduceat means, Welford std, min, max, count and median: pandas' numbers on each kind of data."""
    values, codes = _case(seed)
    count = int(codes.max()) + 1
    assert fits([values], codes, count)
    m = moments(values[:, None], codes, count, ascending=bool((codes[1:] >= codes[:-1]).all()))
    grouped = pd.Series(values).groupby(codes, sort=False)
    assert _same(m.mean[:, 0], _pandas_mean(values, codes))
    assert _same(m.std[:, 0], grouped.std(ddof=1).to_numpy())
    assert _same(m.minimum[:, 0], grouped.min().to_numpy())
    assert _same(m.maximum[:, 0], grouped.max().to_numpy())
    assert np.array_equal(m.count[:, 0], grouped.count().to_numpy())
    median = medians(values, codes, count)
    assert median is not None
    assert _same(median, grouped.median().to_numpy())


@pytest.mark.parametrize("seed", range(120))
def test_groups_of_one_size_in_order_are_pandas_groupby_bit_for_bit(seed: int) -> None:
    """A sweep's usual shape (each group's rows together, all groups one size, no NaN) takes a path of its own."""
    rng = np.random.default_rng(seed)
    count, size, width = int(rng.integers(1, 9)), int(rng.integers(1, 40)), int(rng.integers(1, 4))
    codes = np.repeat(np.arange(count, dtype=np.int64), size)
    values = rng.normal(1e3 * 10.0 ** rng.integers(-3, 9), 10.0 ** rng.integers(-6, 3), (count * size, width))
    if seed % 3 == 1:
        values = np.round(values, 1)
    elif seed % 3 == 2:
        values[rng.random(values.shape) < 0.1] = np.inf
    m = moments(values, codes, count, ascending=True)
    for j in range(width):
        grouped = pd.Series(values[:, j]).groupby(codes, sort=False)
        assert _same(m.mean[:, j], _pandas_mean(values[:, j], codes))
        assert _same(m.std[:, j], grouped.std(ddof=1).to_numpy())
        assert _same(m.minimum[:, j], grouped.min().to_numpy())
        assert _same(m.maximum[:, j], grouped.max().to_numpy())
        assert np.array_equal(m.count[:, j], grouped.count().to_numpy())


def test_several_columns_at_once_are_each_column_alone() -> None:
    """Columns reduced together give what each gives alone (a NaN in one keeps the other on reduceat)."""
    values, codes = _case(1)
    other = values.copy()
    other[0] = np.nan
    both = moments(np.column_stack([values, other]), codes, int(codes.max()) + 1, ascending=True)
    for j, column in enumerate((values, other)):
        grouped = pd.Series(column).groupby(codes, sort=False)
        assert _same(both.mean[:, j], _pandas_mean(column, codes))
        assert _same(both.std[:, j], grouped.std(ddof=1).to_numpy())


def test_what_numpy_does_not_take_is_left_to_pandas() -> None:
    """Other dtypes, integers past 2**53, one huge group among small ones, negative zero in a median."""
    codes = np.array([0, 0, 1], dtype=np.int64)
    assert not fits([np.array([1, 2, 3], dtype=np.int32)], codes, 2)
    assert not fits([np.array([2**60, 1, 2], dtype=np.int64)], codes, 2)
    skewed = np.concatenate([np.zeros(10_000, dtype=np.int64), np.arange(1, 100, dtype=np.int64)])
    assert not fits([np.zeros(len(skewed))], skewed, 100)
    assert medians(np.array([0.0, -0.0, 1.0]), codes, 2) is None


@pytest.mark.parametrize("name", ["cupti-triton-axpb.parquet"])
def test_gpu_result_frame_is_the_pandas_one(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The H100 result's frame (nvml values, env values) with numpy statistics equals the one with pandas'."""
    from _paths import FIXTURES

    import nsightx
    from nsightx._results import dataframe

    path = FIXTURES / "gpu-results" / name
    fast = nsightx.load(path).to_dataframe()
    monkeypatch.setattr(dataframe, "fits", lambda *_: False)
    monkeypatch.setattr(dataframe, "_plain", lambda _: None)
    slow = nsightx.load(path).to_dataframe()
    pd.testing.assert_frame_equal(fast, slow, check_exact=True)


@pytest.mark.parametrize("seed", range(60))
def test_small_inputs_over_python_floats_are_the_numpy_path(seed: int) -> None:
    """Up to ``_LISTED`` values (the std: or ``_LISTED_GROUPS`` groups and columns) the median and the even groups'
    std run over Python floats: the same bits (issue 35).

    The numpy path is asked for the same numbers with the listed limits set to zero.
    """
    values, codes = _case(seed)
    count = int(codes.max()) + 1
    listed = groupstats._listed_medians(values.tolist(), codes.tolist(), count)
    even = np.repeat(np.arange(count, dtype=np.int64), 5)
    wide = np.random.default_rng(seed).normal(1e3, 1.0, (5 * count, 2))
    wide[seed % len(wide), seed % 2] = [np.inf, -np.inf, 1e3][seed % 3]  # the even path: no NaN among them
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(groupstats, "_LISTED", 0)
        patch.setattr(groupstats, "_LISTED_GROUPS", 0)
        assert _same(listed, medians(values, codes, count))
        numpy_std = moments(wide, even, count, ascending=True).std
    assert _same(groupstats._listed_std(wide, count, 5), numpy_std)
    assert groupstats._listed_medians([1.0, -0.0], [0, 0], 1) is None  # left to pandas, as on the numpy path


def _apart(n: int, layout: str) -> tuple[np.ndarray, np.ndarray]:
    """Values whose compensated sums and ``reduceat`` sums differ in the last bit, in 40 groups of ``n // 40``."""
    rng = np.random.default_rng(19)
    groups = np.arange(40, dtype=np.int64)
    codes = np.tile(groups, n // 40) if layout == "interleaved" else np.repeat(groups, n // 40)
    return rng.normal(1e3, 10.0, len(codes)), codes


@pytest.mark.parametrize("layout", ["interleaved", "sorted"])
def test_large_results_have_the_small_paths_statistics_on_every_pandas(layout: str) -> None:
    """Past ``_NUMPY_ROWS`` values the frame's statistics are the numpy path's, bit for bit (pandas 3.0.6 and 3.1).

    pandas 3.1 sums the blocks' sorted groups with ``reduceat`` and 3.0 with its compensated loop, so before, the
    large path's means followed the installed pandas: interleaved groups differed on 3.1, sorted ones on 3.0.
    """
    from nsightx._results import dataframe

    values, codes = _apart(40 * 500, layout)
    ascending = layout == "sorted"
    small = moments(values[:, None], codes, 40, ascending)
    order = np.argsort(codes, kind="stable")  # each group's rows in row order, together
    other = moments(values[order][:, None], codes[order], 40, not ascending)  # the other kind of mean
    assert not _same(small.mean[:, 0], other.mean[:, 0])  # the two kinds differ on these values
    large = dataframe._pandas_moments(values, codes, 40)
    for name, want in (("AvgValue", small.mean), ("StdDev", small.std), ("MinValue", small.minimum)):
        assert _same(large[name], want[:, 0]), name
    assert _same(large["MaxValue"], small.maximum[:, 0])


@pytest.mark.parametrize("seed", range(40))
def test_mean_min_max_is_moments_at_any_size(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Both kinds of mean, with NaN, infinities and both zeros, by numpy steps and by pandas' loop (huge groups)."""
    rng = np.random.default_rng(seed)
    n, count = int(rng.integers(1, 3000)), int(rng.integers(1, 50))
    codes = rng.integers(0, count, n)
    ascending = bool(seed % 2)
    if ascending:
        codes = np.sort(codes)
    values = rng.normal(1e3 * 10.0 ** rng.integers(-3, 9), 10.0 ** rng.integers(-6, 3), n)
    if seed % 4 == 1:
        values[rng.random(n) < 0.2] = np.nan
    elif seed % 4 == 2:
        values[rng.random(n) < 0.05] = np.inf * rng.choice([-1.0, 1.0])
    elif seed % 4 == 3:
        values = rng.choice([0.0, -0.0, 1.0, -1.0], n)
    for kind in {ascending, False}:
        m = moments(values[:, None], codes, count, kind)
        got = groupstats.mean_min_max(values, codes, count, kind)
        for mine, want in zip(got, (m.mean, m.minimum, m.maximum), strict=True):
            assert _same(mine, want[:, 0])
        monkeypatch.setattr(groupstats, "_MAX_STEPS", 0)
        assert _same(groupstats.mean_min_max(values, codes, count, kind)[0], m.mean[:, 0])
        monkeypatch.undo()
