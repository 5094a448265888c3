"""The DataFrames built from the columnar view are the ones the row-by-row code built, column for column and bit
for bit.

``tests/fixtures/frames`` holds results (CUPTI activity and ncu reports the H200 recorded, run through the real
attribution and merge code; host-backend sweeps; results built from records to reach every column) and, for each,
``to_dataframe()`` and ``runs_dataframe()`` as the code of d6b4a1c wrote them (``generate.py`` there says how they
were made). Each is compared here as exact text: names, order, dtypes and every value (floats by ``repr``).
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from _frames import decode, dumps, encode, load_result

from nsightx._results import dataframe
from nsightx._results.results import ProfileResults

FRAMES = Path(__file__).parent / "fixtures" / "frames"
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
    if dumps(encode(actual)) != dumps(expected):
        want = decode(expected)
        assert list(actual.columns) == list(want.columns)
        assert actual.dtypes.astype(str).tolist() == want.dtypes.astype(str).tolist()
        pd.testing.assert_frame_equal(actual, want, check_exact=True)
        assert dumps(encode(actual)) == dumps(expected)  # None against NaN, 1 against 1.0, -0.0 against 0.0
