"""The aggregated frame handed to pandas as blocks is ``pd.DataFrame(dict)``'s frame (issue 35).

:func:`~nsightx._results.framebuild.frame_of` builds the blocks itself only for the kinds of column whose dtype it
knows beforehand; these tests compare it with ``pd.DataFrame`` on each kind (and on the kinds it leaves to pandas),
and check that ``to_dataframe()`` still hands out frames whose changes stay their own.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from _paths import FIXTURES

import nsightx
from nsightx._results import dataframe, framebuild
from nsightx._results.dataframe import _scalar
from nsightx._results.framebuild import frame_of

N = 3


def _kinds() -> dict[str, object]:
    """One column of each kind the aggregated frame holds (and a few it does not)."""
    return {
        "ints": np.array([1, -2, 2**62], dtype=np.int64),
        "floats": np.array([1.5, np.nan, -np.inf]),
        "bools": np.array([True, False, True]),
        "text_objects": np.array(["a", "bb", ""], dtype=object),
        "text_list": ["x", "y", "x"],
        "int_list": [1, 2, 3],
        "float_list": [0.1, 2.0, 1e300],
        "bool_list": [True, True, False],
        "nullable": pd.arrays.BooleanArray(np.array([True, False, False]), np.array([False, True, False])),
        "str_array": pd.array(["p", "q", "r"], dtype=pd.Series(["s"]).dtype),
        "none_scalar": _scalar(None, N),
        "none_list": [None] * N,
        "text_scalar": _scalar("cupti", N),
        "int_scalar": _scalar(7, N),
        "more_floats": np.array([3.0, 4.0, 5.0]),
        "more_ints": np.array([0, 0, 1], dtype=np.int64),
    }


def _same(actual: pd.DataFrame, expected: pd.DataFrame) -> None:
    pd.testing.assert_frame_equal(actual, expected, check_exact=True)
    assert actual.dtypes.tolist() == expected.dtypes.tolist()
    assert actual.columns.dtype == expected.columns.dtype
    assert type(actual.index) is type(expected.index)
    for name in expected.columns:
        assert type(actual[name].array) is type(expected[name].array), name


def test_every_kind_gives_pandas_frame() -> None:
    columns = _kinds()
    _same(frame_of(columns, N), pd.DataFrame(columns))


@pytest.mark.parametrize("name", list(_kinds()))
def test_each_kind_alone_gives_pandas_frame(name: str) -> None:
    columns = {name: _kinds()[name], "Value": np.arange(N, dtype=np.float64)}
    _same(frame_of(columns, N), pd.DataFrame(columns))


@pytest.mark.parametrize(
    "odd",
    [
        ["a", None, "c"],  # text with a missing value: pandas decides
        [1, "b", 2.0],  # mixed types
        [2**64, 1, 2],  # beyond int64
        [1.0, float("nan"), 2.0],
        np.array([1, 2, 3], dtype=np.int32),
        np.array(["a", 1, None], dtype=object),
        pd.Series([1.0, 2.0, 3.0], index=[2, 1, 0]),  # aligned on its index
    ],
    ids=["text-none", "mixed", "uint64", "float-nan-list", "int32", "objects", "series-index"],
)
def test_other_columns_are_left_to_pandas(odd: object) -> None:
    columns = {**_kinds(), "odd": odd}
    _same(frame_of(columns, N), pd.DataFrame(columns))


def test_frame_owns_its_data() -> None:
    """Changing an input array after the frame was built does not change the frame (pd.DataFrame copies too)."""
    values = np.array([1.0, 2.0, 3.0])
    frame = frame_of({"AvgValue": values, "Metric": ["m", "m", "m"]}, N)
    values[0] = 99.0
    assert frame["AvgValue"].tolist() == [1.0, 2.0, 3.0]


def test_without_block_building_the_frame_is_pandas(monkeypatch: pytest.MonkeyPatch) -> None:
    """An older pandas (no block hand-over) gets ``pd.DataFrame(dict)`` itself."""
    monkeypatch.setattr(framebuild, "_text_dtype", lambda: None)
    columns = _kinds()
    _same(frame_of(columns, N), pd.DataFrame(columns))


def test_fixture_frame_is_built_from_blocks_and_equals_pandas(monkeypatch: pytest.MonkeyPatch) -> None:
    """The H100 result's aggregated frame takes the block path, and equals the frame pandas builds of its dict."""
    seen: list[dict[str, object]] = []
    real = framebuild._blocks

    def spy(columns, n, text):  # type: ignore[no-untyped-def]
        blocks = real(columns, n, text)
        seen.append(dict(columns))
        assert blocks is not None, "the fixture's frame fell back to pd.DataFrame"
        return blocks

    monkeypatch.setattr(framebuild, "_blocks", spy)
    frame = nsightx.load(FIXTURES / "gpu-results" / "cupti-triton-axpb.parquet").to_dataframe()
    assert len(seen) == 1
    _same(frame, pd.DataFrame(seen[0]))


def _spied_blocks(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, object]]:
    """The columns of each frame ``frame_of`` builds from then on; each must take the block path."""
    seen: list[dict[str, object]] = []
    real = framebuild._blocks

    def spy(columns, n, text):  # type: ignore[no-untyped-def]
        blocks = real(columns, n, text)
        seen.append(dict(columns))
        assert blocks is not None, "the frame fell back to pd.DataFrame"
        return blocks

    monkeypatch.setattr(framebuild, "_blocks", spy)
    return seen


def test_columns_of_none_are_built_as_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    """A column of None only (an ndarray or a list) stays objects in a block, as pandas keeps it, not a fallback."""
    seen = _spied_blocks(monkeypatch)
    columns = {"GPU": _scalar(None, N), "Clock": [None] * N, "Value": np.arange(N, dtype=np.float64)}
    frame = frame_of(columns, N)
    assert len(seen) == 1
    _same(frame, pd.DataFrame(columns))
    assert frame["GPU"].dtype == object and frame["Clock"].tolist() == [None] * N
    frame.loc[0, "GPU"] = "changed"
    assert columns["GPU"][0] is None  # the frame's objects are its own


def test_host_result_frame_is_built_from_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    """A host backend result (no GPU, no rated clocks: columns of None) takes the block path and equals pandas."""
    silent = nsightx.VerbosityLevel.SILENT

    @nsightx.analyze.kernel(configs=[(1,), (2,)], runs=3, warmup=0, backend="host", verbosity=silent)
    def work(n: int) -> None:
        with nsightx.annotate("work"):
            sum(range(n))

    result = work()
    seen = _spied_blocks(monkeypatch)
    frame = result.to_dataframe()
    assert len(seen) == 1
    assert frame["GPU"].isna().all()
    _same(frame, pd.DataFrame(seen[0]))


def test_to_dataframe_copies_stay_their_own() -> None:
    """What a user does to one ``to_dataframe()`` frame (values, names, labels) does not reach the next."""
    result = nsightx.load(FIXTURES / "gpu-results" / "cupti-triton-axpb.parquet")
    first = result.to_dataframe()
    expected = first.copy()
    first.loc[0, "AvgValue"] = -1.0
    first.iloc[1, first.columns.get_loc("Annotation")] = "changed"
    first.index.name = "row"
    first.columns.name = "column"
    first["Extra"] = 1
    first.attrs["note"] = "mine"
    second = result.to_dataframe()
    _same(second, expected)
    assert second.index.name is None and second.columns.name is None and not second.attrs
    third = nsightx.load(FIXTURES / "gpu-results" / "cupti-triton-axpb.parquet").to_dataframe()
    assert third.columns.name is None  # the column labels are not shared between frames either


def _host_result() -> nsightx.ProfileResults:
    """A fresh host backend result of 2 configs x 3 runs."""

    @nsightx.analyze.kernel(configs=[(1,), (2,)], runs=3, warmup=0, backend="host", verbosity=0)
    def work(n: int) -> None:
        with nsightx.annotate("work"):
            sum(range(n))

    return work()


def test_first_to_dataframe_hands_out_its_frame_uncopied(monkeypatch: pytest.MonkeyPatch) -> None:
    """The first call of a fresh result copies nothing (issue 35's ``f().to_dataframe()``); the later ones do."""
    copies: list[int] = []
    real = dataframe.frame_copy
    monkeypatch.setattr(dataframe, "frame_copy", lambda frame: copies.append(1) or real(frame))
    result = nsightx.load(FIXTURES / "gpu-results" / "sweep-cupti.parquet")
    first = result.to_dataframe()
    assert copies == []
    _same(result.to_dataframe(), first)
    _same(result.to_dataframe(), first)
    assert len(copies) == 2


def _edit_every_column(frame: pd.DataFrame) -> None:
    """Write into every column of ``frame`` in place, then change its labels and shape as a user might."""
    for i, dtype in enumerate(frame.dtypes.tolist()):
        if dtype == np.bool_:
            value: object = not frame.iat[0, i]
        elif dtype.kind in "if":
            value = -1
        elif isinstance(dtype, pd.BooleanDtype):
            value = pd.NA
        else:
            value = "changed"
        frame.iat[0, i] = value
    frame["Extra"] = 1
    frame.insert(0, "Front", 0)  # every block's column positions move
    del frame["GPU"]
    frame.columns = ["Renamed", *frame.columns[1:]]
    frame.index = frame.index[::-1]
    frame.index.name = "row"
    frame.attrs["note"] = "mine"


@pytest.mark.parametrize("kind", ["fixture", "host"])
def test_edits_of_the_first_frame_never_reach_later_ones(kind: str) -> None:
    """The first frame is the user's own (no copy kept of it): what they write into it stays out of the next ones."""

    def make() -> nsightx.ProfileResults:
        if kind == "host":
            return _host_result()
        return nsightx.load(FIXTURES / "gpu-results" / "sweep-cupti.parquet")

    result = make()
    first = result.to_dataframe()
    expected = first.copy(deep=True)
    if kind == "fixture":
        _same(expected, make().to_dataframe())  # what a result that nobody touched gives
    _edit_every_column(first)
    second = result.to_dataframe()
    _same(second, expected)
    _edit_every_column(second)
    _same(result.to_dataframe(), expected)
    assert first.iat[0, 1] == "changed" and first["Extra"].tolist() == [1] * len(first)  # the edits held
    assert "GPU" not in second.columns and second.index.name == "row"


@pytest.mark.parametrize("kind", ["str", "int", "float", "bool", "NoneType"])
def test_scalar_dtype_is_what_setting_the_value_gives(kind: str) -> None:
    """The probe of one-item lists gives the dtype ``frame[name] = value`` gives, and a list of the value too."""
    sample = dataframe._SAMPLES[kind]
    holder = pd.DataFrame(index=pd.RangeIndex(2))
    holder["value"] = sample
    assert dataframe._scalar_dtype(kind) == holder["value"].dtype
    assert pd.DataFrame({"value": [sample, sample]})["value"].dtype == holder["value"].dtype
    _same(pd.DataFrame({"value": dataframe._scalar(sample, 2)}), holder)


def test_text_dtype_is_the_frames_dtype_of_a_list_of_strings() -> None:
    assert framebuild._text_dtype() == pd.DataFrame({"s": ["a", "b"]})["s"].dtype
