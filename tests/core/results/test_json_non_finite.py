"""A collector's NaN or infinity survives the .json save and the raw file (fix20, found by hunt20b).

pydantic writes a non-finite float as ``null`` by default, and ``null`` is how a collector that raised is stored:
after a .json round trip (or a load of the raw file) a RUN collector answering inf then 5.0 showed ``_Avg`` and
``_Max`` 5.0 instead of inf; the Parquet file kept it. Those values are now written as JSON's ``NaN``,
``Infinity`` and ``-Infinity`` tokens (:data:`nsightx._results.schema.NON_FINITE_AS_TOKENS`), which every
nsightx version reads as those floats; a collector that raised stays ``null`` (None), a str collector answering
``"NaN"`` stays the string, and a measured NaN stays ``null`` as every version wrote it (read back as NaN).

A measured inf or -inf (a derived metric dividing by zero, a backend's value) was still written as ``null`` and
came back NaN (files21); it is now written as the ``Infinity``/``-Infinity`` token too, in the .json result and the
raw file, which 87b97cb and d6b4a1c read as those floats.
"""

from __future__ import annotations

import math
import warnings
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import nsightx
from nsightx import CollectionScope, InfoCollector
from nsightx._results.records import CollectorValue, Record, RegionRun, RunRecords
from nsightx._results.sink import RunSink, read_runs

SILENT = nsightx.VerbosityLevel.SILENT
RAISE = object()
"""An answer that stands for a collector that raised."""


def call(answers: list[Any], folder: Path) -> Any:
    """One config, a run per answer; a RUN collector ``P`` gives the answers in order (``RAISE``: it raises)."""
    left = iter(answers)

    def power(ctx: Any) -> Any:
        answer = next(left)
        if answer is RAISE:
            raise RuntimeError("no reading")
        return answer

    @nsightx.analyze.kernel(
        configs=[1],
        runs=len(answers),
        warmup=0,
        backend="host",
        info_collectors=[InfoCollector("P", power, CollectionScope.RUN)],
        output_prefix=f"{folder}/",
        verbosity=SILENT,
    )
    def f(x: int) -> None:
        with nsightx.annotate("a"):
            pass

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # the raising collector's warning
        return f()


def values(result: Any) -> list[Any]:
    """Every collector value of ``result``, in run order (NaN as the string ``"<nan>"``, to compare)."""
    out = []
    for run in result.data.runs:
        for c in run.collectors:
            out.append("<nan>" if isinstance(c.value, float) and math.isnan(c.value) else c.value)
    return out


def loaded(path: Path) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a collector with mixed types
        return nsightx.load(path)


def test_a_collectors_nan_and_infinities_survive_the_json_save_and_the_raw_file(tmp_path: Path) -> None:
    result = call([math.inf, 5.0, -math.inf, math.nan, "NaN", RAISE, 2], tmp_path)
    want = [math.inf, 5.0, -math.inf, "<nan>", "NaN", None, 2]
    assert values(result) == want
    saved = result.save(tmp_path / "saved.json")
    (raw,) = tmp_path.glob("raw_data-*.jsonl")
    for path in (saved, raw, result.save(tmp_path / "saved.parquet")):
        assert values(loaded(path)) == want, path.name
    text = saved.read_text()
    assert '"value":Infinity}' in text and '"value":-Infinity}' in text and '"value":NaN}' in text
    assert '"value":"NaN"}' in text and '"value":null}' in text  # the string, and the collector that raised


def test_a_run_collector_answering_inf_then_five_shows_inf_after_a_json_round_trip(tmp_path: Path) -> None:
    result = call([math.inf, 5.0], tmp_path)
    (raw,) = tmp_path.glob("raw_data-*.jsonl")
    for source in (result, loaded(result.save(tmp_path / "r.json")), loaded(raw)):
        row = source.to_dataframe().iloc[0]
        assert (row["P_Avg"], row["P_Max"], row["P_Min"]) == (math.inf, math.inf, 5.0)


def test_measured_nan_stays_null_and_reads_back_as_nan(tmp_path: Path) -> None:
    """A failed region's measured values stay null (not the ``NaN`` token): such a result stays strict JSON."""

    @nsightx.analyze.kernel(configs=[(1,), (2,)], runs=2, warmup=0, backend="host", verbosity=SILENT)
    def f(n: int) -> None:
        with nsightx.annotate("a", ignore_failures=True):
            if n == 2:
                raise ValueError("on purpose")

    with pytest.warns(RuntimeWarning):
        res = f()
    path = res.save(tmp_path / "r.json")
    text = path.read_text()
    assert text.count('"value":null,"unit":') == 2 and "NaN" not in text and "Infinity" not in text
    back = nsightx.load(path)
    assert [math.isnan(v.value) for v in back.data.values] == [False, False, True, True]
    again = back.save(tmp_path / "again.json").read_text()  # a loaded result: its text is scanned, not its columns
    assert again.count('"value":null,"unit":') == 2 and "NaN" not in again


def test_a_raw_line_keeps_a_non_finite_attribute_and_collector_value_and_writes_a_measured_nan_as_null(
    tmp_path: Path,
) -> None:
    run = RunRecords(
        0,
        0,
        (Record("a", 0, 0, "region", "m", math.nan, "ns", 0),),
        (RegionRun("a", 0, 0, 5, False, {"x": math.inf, "y": "NaN"}),),
        (CollectorValue("P", "run", 0, 0, None, -math.inf), CollectorValue("Q", "run", 0, 0, None, None)),
    )
    sink = RunSink(tmp_path / "raw.jsonl")
    sink.write(run)
    sink.close()
    line = (tmp_path / "raw.jsonl").read_text()
    assert '"value":null,"unit":"ns"' in line and '"x":Infinity' in line and '"value":-Infinity}' in line
    _, (back,) = read_runs(tmp_path / "raw.jsonl")
    assert math.isnan(back.records[0].value)
    assert back.regions[0].attributes == {"x": math.inf, "y": "NaN"}
    assert [c.value for c in back.collectors] == [-math.inf, None]


def test_a_measured_infinity_survives_the_json_save_in_every_frame(tmp_path: Path) -> None:
    """Regression (files21): a derived metric's inf and -inf were written as ``null`` and came back NaN."""

    def derive(t: float, n: int) -> dict[str, Any]:
        return {"up": (math.inf, "x"), "down": (-math.inf, "x"), "none": (math.nan, "x"), "t": (t, "ns")}

    @nsightx.analyze.kernel(configs=[1], runs=2, warmup=0, backend="host", derive_metric=derive, verbosity=SILENT)
    def f(n: int) -> None:
        with nsightx.annotate("a"):
            pass

    result = f()
    path = result.save(tmp_path / "r.json")
    text = path.read_text()
    assert text.count('"value":Infinity,"unit":') == 2 and text.count('"value":-Infinity,"unit":') == 2
    assert text.count('"value":null,"unit":') == 2 and '"value":NaN' not in text  # NaN stays null
    back = nsightx.load(path)
    for frame in ("to_dataframe", "runs_dataframe"):
        pd.testing.assert_frame_equal(getattr(back, frame)(), getattr(result, frame)(), check_exact=True)
    runs = back.runs_dataframe().set_index("Metric")["Value"]
    assert (runs["up"] == math.inf).all() and (runs["down"] == -math.inf).all() and runs["none"].isna().all()
    assert back.save(tmp_path / "again.json").read_text() == text  # a loaded result writes the same file


def test_a_measured_infinity_in_a_raw_line_reads_back_as_infinity(tmp_path: Path) -> None:
    """Regression (files21): a backend's inf in a raw run line was written as ``null`` and read back as NaN."""
    records = tuple(
        Record("a", 0, 0, f"k{i}", "m", v, "ns", i) for i, v in enumerate([math.inf, -math.inf, math.nan, 1.5])
    )
    sink = RunSink(tmp_path / "raw.jsonl")
    sink.write(RunRecords(0, 0, records, (RegionRun("a", 0, 0, 5, False),)))
    sink.close()
    line = (tmp_path / "raw.jsonl").read_text()
    assert '"value":Infinity,"unit"' in line and '"value":-Infinity,"unit"' in line and '"value":null,"unit"' in line
    _, (back,) = read_runs(tmp_path / "raw.jsonl")
    got = [v if not math.isnan(v) else "<nan>" for v in (r.value for r in back.records)]
    assert got == [math.inf, -math.inf, "<nan>", 1.5]
