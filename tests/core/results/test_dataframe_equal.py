"""The DataFrames built from the columnar view are the ones the row-by-row code built, column for column and bit
for bit.

``tests/fixtures/frames`` holds results (CUPTI activity and ncu reports the H200 recorded, run through the real
attribution and merge code; host-backend sweeps; results built from records to reach every column) and, for each,
``to_dataframe()`` and ``runs_dataframe()`` as the code of d6b4a1c wrote them (``generate.py`` there says how they
were made). Each is compared here as exact text: names, order, dtypes and every value (floats by ``repr``).

Since then the interval of the mean (``CI95_Lower``, ``CI95_Upper``) and ``StableMeasurement`` follow a new rule
(issue 37): those columns are taken out of the exact comparison and checked against the rule instead, the
interval against :func:`~nsightx._results.stats.mean_interval` of each row's values and ``StableMeasurement``
against the stored verdict with rows of fewer than ``FEW_RUNS`` runs made ``False``.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from _frames import decode, dumps, encode, load_result
from _paths import FIXTURES

from nsightx._results import dataframe
from nsightx._results.flags import FEW_RUNS
from nsightx._results.profileresults import ProfileResults
from nsightx._results.stats import mean_interval
from nsightx._results.table import table_of
from nsightx._results.table_flags import Groups

FRAMES = FIXTURES / "frames"
CASES = sorted(p.name.removesuffix(".frames.json") for p in FRAMES.glob("*.frames.json"))


def test_every_kind_of_result_is_covered():
    kinds = {name.split("_")[0] for name in CASES}
    assert {"cupti", "ncu", "host", "synthetic", "empty"} <= kinds
    assert len(CASES) >= 20


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("frame", ["to_dataframe", "runs_dataframe"])
@pytest.mark.parametrize("list_rows", [dataframe._SMALL, 0], ids=["small-as-lists", "all-as-arrays"])
def test_frames_equal_those_of_the_row_by_row_code(
    case: str, frame: str, list_rows: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both ways a column reaches pandas (a per-row list for a few rows, arrays beyond) give the same frame."""
    monkeypatch.setattr(dataframe, "_SMALL", list_rows)
    expected = json.loads((FRAMES / f"{case}.frames.json").read_text(encoding="utf-8"))[frame]
    results = ProfileResults(load_result(FRAMES / f"{case}.result.json"))
    actual = getattr(results, frame)()
    if frame == "to_dataframe" and not len(actual):  # since hunt22u a result of no runs has every documented column
        names = [col["name"] for col in expected]  # (test_misuse_reference): d6b4a1c's four come first, as they were
        assert list(actual.columns)[: len(names)] == names and len(actual.columns) > len(names)
        actual = actual[names]
    if frame == "to_dataframe" and len(actual):
        _check_new_rule(results, actual, expected)
        actual = actual.drop(columns=list(_NEW_RULE))
        expected = [col for col in expected if col["name"] not in _NEW_RULE]
    if dumps(encode(actual)) != dumps(expected):
        want = decode(expected)
        assert list(actual.columns) == list(want.columns)
        assert actual.dtypes.astype(str).tolist() == want.dtypes.astype(str).tolist()
        pd.testing.assert_frame_equal(actual, want, check_exact=True)
        assert dumps(encode(actual)) == dumps(expected)  # None against NaN, 1 against 1.0, -0.0 against 0.0


_NEW_RULE = ("CI95_Lower", "CI95_Upper", "StableMeasurement")
"""The aggregated columns whose rule changed since d6b4a1c (issue 37)."""


def _check_new_rule(results: ProfileResults, actual: pd.DataFrame, expected: list[dict[str, object]]) -> None:
    """The interval columns are the rule's on each row's values (failed runs, NaN, left out), normalised as the
    frame is; ``StableMeasurement`` the old verdict with rows under ``FEW_RUNS`` runs made ``False``; each column
    keeps its place and dtype."""
    stored = {col["name"]: col for col in expected}
    names = [str(c) for c in actual.columns]
    assert names == [col["name"] for col in expected]
    for name in _NEW_RULE:
        assert str(actual[name].dtype) == stored[name]["dtype"]
    t = table_of(results.data)
    groups = Groups.of(t)
    scale = actual["NormalizationValue"].to_numpy() if "NormalizationValue" in actual else np.ones(len(actual))
    for g in range(groups.count):
        values = t.value[groups.ids == g]
        lower, upper = mean_interval(values[~np.isnan(values)].tolist())  # NaN: a failed run, skipped
        with np.errstate(invalid="ignore", divide="ignore"):
            want = (np.float64(lower) / scale[g], np.float64(upper) / scale[g])  # normalised as the frame is
        got = (actual["CI95_Lower"].iloc[g], actual["CI95_Upper"].iloc[g])
        assert got == pytest.approx(want, rel=1e-9, abs=0.0, nan_ok=True), g
    old = decode([stored["StableMeasurement"]])["StableMeasurement"]
    want = old.mask(actual["NumRuns"].to_numpy() < FEW_RUNS, old.notna() & False)
    want = want.where(old.notna(), pd.NA).astype("boolean")
    pd.testing.assert_series_equal(actual["StableMeasurement"], want, check_names=False)
