"""The small-result paths of the aggregated frame give what the general paths give (issue 35, fifth round).

For a few hundred rows or fewer, per-run columns are made over Python lists (:func:`_small_column`) and the frame's
text columns are slices of one Arrow-backed array; these tests compare each with the general path (numpy, or
``pd.DataFrame``) on random small inputs.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nsightx._results import dataframe, table_flags
from nsightx._results.dataframe import _column, _small_column
from nsightx._results.flags import FLAGS
from nsightx._results.framebuild import frame_of
from nsightx._results.table import MISSING, table_of
from nsightx._results.table_flags import Groups

_VALUES = st.one_of(
    st.lists(st.text(max_size=4), min_size=1, max_size=6),
    st.lists(st.integers(-(2**70), 2**70), min_size=1, max_size=6),
    st.lists(st.floats(allow_nan=True, allow_infinity=True), min_size=1, max_size=6),
    st.lists(st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.floats(), st.text(max_size=2)), max_size=6),
)


@st.composite
def _values_and_codes(draw: st.DrawFn) -> tuple[list[object], np.ndarray]:
    """A per-value list and per-row codes into it (some rows :data:`MISSING`)."""
    values = draw(_VALUES)
    low = MISSING if draw(st.booleans()) else 0
    high = max(len(values) - 1, low)
    codes = draw(st.lists(st.integers(low, high), min_size=1, max_size=40))
    return values, np.array(codes, dtype=np.int64)


def _general(values: list[object], codes: np.ndarray, monkeypatch: pytest.MonkeyPatch) -> dataframe._Column:
    with monkeypatch.context() as m:
        m.setattr(dataframe, "_SMALL", 0)  # every column takes the numpy path
        return _column(values, codes)


def _identity(items: list[object]) -> list[object]:
    """Items compared by type and value, floats by their bits (NaN and -0.0 included)."""
    return [(type(v), v.hex() if isinstance(v, float) else v) for v in items]


@settings(max_examples=300, deadline=None)
@given(case=_values_and_codes())
def test_small_column_is_the_numpy_column(case: tuple[list[object], np.ndarray]) -> None:
    values, codes = case
    if not len(values) and (codes != MISSING).any():
        return
    mp = pytest.MonkeyPatch()
    expected = _general(values, codes, mp)
    got = _small_column(values, codes)
    assert _identity(got.items) == _identity(expected.items)
    assert got.pos.dtype == expected.pos.dtype
    assert got.pos.tolist() == expected.pos.tolist()


def test_column_takes_the_small_path_up_to_the_threshold(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    real = dataframe._small_column
    monkeypatch.setattr(dataframe, "_small_column", lambda v, c: calls.append(len(c)) or real(v, c))
    _column(["a", "b"], np.zeros(dataframe._SMALL, dtype=np.int64))
    _column(["a", "b"], np.zeros(dataframe._SMALL + 1, dtype=np.int64))
    assert calls == [dataframe._SMALL]


@settings(max_examples=100, deadline=None)
@given(texts=st.lists(st.lists(st.text(max_size=5), min_size=3, max_size=3), min_size=1, max_size=6))
def test_text_columns_are_the_frame_pandas_makes(texts: list[list[str]]) -> None:
    columns: dict[str, object] = {f"t{i}": list(col) for i, col in enumerate(texts)}
    columns["v"] = np.arange(3, dtype=np.float64)
    columns["o"] = np.array(texts[0], dtype=object)
    got, expected = frame_of(columns, 3), pd.DataFrame(columns)
    pd.testing.assert_frame_equal(got, expected, check_exact=True)
    assert got.dtypes.tolist() == expected.dtypes.tolist()
    for name in expected.columns:
        assert type(got[name].array) is type(expected[name].array), name


def _counting_text_arrays(monkeypatch: pytest.MonkeyPatch) -> Callable[[], list[int]]:
    """A switch that, once called, counts the text arrays pandas constructs (its list grows by one for each).

    Skips where this pandas stores text as numpy objects (no text array to count).
    """
    text = pd.DataFrame({"s": ["s"]})["s"].dtype
    if isinstance(text, np.dtype) or int(pd.__version__.split(".")[0]) < 3:
        pytest.skip("text is stored as numpy objects here")
    made = type(pd.array(["s"], dtype=text))
    real = made.__init__
    calls: list[int] = []

    def counted(self: object, *args: object, **kwargs: object) -> None:
        calls.append(1)
        real(self, *args, **kwargs)  # type: ignore[arg-type]

    def start() -> list[int]:
        monkeypatch.setattr(made, "__init__", counted)
        return calls

    return start


def test_text_columns_are_checked_once(monkeypatch: pytest.MonkeyPatch) -> None:
    count = _counting_text_arrays(monkeypatch)
    columns = {f"t{i}": ["a", "bc", ""] for i in range(8)}
    frame_of(columns, 3)  # the column labels are made once per set of names
    calls = count()
    frame = frame_of(columns, 3)
    assert len(calls) <= 1  # one array for all eight columns, sliced
    assert frame["t7"].tolist() == ["a", "bc", ""]
    frame.loc[0, "t0"] = "changed"  # a slice shares the buffer, never the data a user changes
    assert frame["t1"].tolist() == ["a", "bc", ""]


_FLOATS = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, -0.0, 1e308, -1e308, 5e-324, 1.5]),
    st.floats(1e3, 1e4),
)


@st.composite
def _values_and_groups(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray, int]:
    """Values (NaN, infinities, signed zeros, overflowing sums) and dense group ids 0 .. count - 1."""
    values = draw(st.lists(_FLOATS, min_size=1, max_size=30))
    count = draw(st.integers(1, min(len(values), 5)))
    ids = list(range(count)) + draw(st.lists(st.integers(0, count - 1), min_size=len(values), max_size=len(values)))
    return np.array(values, dtype=np.float64), np.array(ids[: len(values)], dtype=np.int64), count


def _bits(array: np.ndarray) -> tuple[str, list[int]]:
    """An array's dtype and the bits of each of its values (NaN signs and payloads, negative zero)."""
    return str(array.dtype), array.view(np.uint64 if array.dtype == np.float64 else array.dtype).tolist()


@settings(max_examples=300, deadline=None)
@given(case=_values_and_groups())
def test_small_spread_is_the_numpy_spread(case: tuple[np.ndarray, np.ndarray, int]) -> None:
    values, ids, count = case
    expected = table_flags._spread(values, ids, count)
    got = table_flags._small_spread(values, ids, count)
    for name in ("n", "mean", "mean_abs", "std", "minimum", "log_mean", "log_var"):
        assert _bits(getattr(got, name)) == _bits(getattr(expected, name)), name


@settings(max_examples=200, deadline=None)
@given(rows=st.lists(st.lists(st.booleans(), min_size=len(FLAGS), max_size=len(FLAGS)), max_size=12))
def test_small_flag_cells_are_the_numpy_cells(rows: list[list[bool]]) -> None:
    columns = np.array(rows, dtype=np.bool_).reshape(len(rows), len(FLAGS))
    verdicts = {name: columns[:, i] for i, name in enumerate(FLAGS)}
    mp = pytest.MonkeyPatch()
    with mp.context() as m:
        m.setattr(table_flags, "SMALL", -1)  # the numpy path for any number of rows
        expected = table_flags._cells(verdicts)
    assert table_flags._cells(verdicts) == expected


@settings(max_examples=300, deadline=None)
@given(
    rows=st.lists(
        st.tuples(
            st.integers(0, 3),
            st.one_of(st.sampled_from([1980.0, 1700.0, 0.0, -0.0, -5.0, np.inf, -np.inf]), st.floats(1e3, 2e3)),
            st.booleans(),
        ),
        min_size=1,
        max_size=30,
    )
)
def test_small_clock_rule_is_the_numpy_rule(rows: list[tuple[int, float, bool]]) -> None:
    ids = np.array([r[0] for r in rows], dtype=np.int64)
    clock = np.array([r[1] for r in rows], dtype=np.float64)
    kept = np.array([r[2] for r in rows], dtype=np.bool_)
    count = int(ids.max()) + 1
    mp = pytest.MonkeyPatch()
    with mp.context() as m:
        m.setattr(table_flags, "SMALL", -1)
        expected = table_flags._varied(ids, clock, kept, count)
    got = table_flags._varied(ids, clock, kept, count)
    assert got.dtype == expected.dtype
    assert got.tolist() == expected.tolist()


@pytest.mark.parametrize("seed", range(0, 150, 3))
def test_small_flag_paths_give_the_numpy_flags(seed: int) -> None:
    """Region sums (launch-bound and serialised), clock rule, spread and cells: each small path against numpy's."""
    from test_table_flags import random_data, vectorised_flags

    data = random_data(seed)
    table = table_of(data)
    groups = Groups.of(table)
    rng = np.random.default_rng(seed)
    weights = [rng.random(table.regions.n) < 0.5 for _ in range(2)]
    got = table_flags._region_sums(table, groups, *weights), vectorised_flags(data)
    mp = pytest.MonkeyPatch()
    with mp.context() as m:
        m.setattr(table_flags, "SMALL", -1)
        expected = table_flags._region_sums(table, groups, *weights), vectorised_flags(data)
    assert [_bits(a) for a in got[0]] == [_bits(a) for a in expected[0]]
    assert got[1] == expected[1]


def test_a_small_frames_text_is_converted_once_for_frames_of_the_same_text(monkeypatch: pytest.MonkeyPatch) -> None:
    """The second frame of the same text takes slices of the cached array: no conversion, and each frame its own."""
    count = _counting_text_arrays(monkeypatch)
    columns = {f"u{i}": ["cached", f"text {i}", ""] for i in range(4)}
    first = frame_of(columns, 3)
    calls = count()
    second = frame_of({name: list(items) for name, items in columns.items()}, 3)  # equal strings, new lists
    assert calls == []
    pd.testing.assert_frame_equal(first, second, check_exact=True)
    first.loc[0, "u0"] = "changed"  # a frame's edit reaches neither the other frame nor a later one
    assert second["u0"].tolist() == ["cached", "text 0", ""]
    assert frame_of(columns, 3)["u0"].tolist() == ["cached", "text 0", ""]


def test_value_moments_are_contiguous_whether_or_not_taken_with_the_collectors() -> None:
    """The value columns are the same arrays either way (a strided view gave another NaN sign downstream)."""
    from nsightx._results.groupstats import moments

    values = np.array([1.0, -np.inf, 3.0, np.inf, 2.0, 5.0])
    ids = np.array([0, 0, 1, 1, 2, 2])
    joint = moments(np.column_stack([values, np.arange(6.0)]), ids, 3, True)
    with_collectors = dataframe._plain_moments(values, ids, 3, True, joint)
    alone = dataframe._plain_moments(values, ids, 3, True)
    for name, column in with_collectors.items():
        assert column.flags.c_contiguous, name
        assert _bits(column) == _bits(alone[name]), name
