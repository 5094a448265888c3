"""The CSV files a call writes, as ``pandas.read_csv`` reads them, against the frames they claim to be.

docs/api.md (``output_csv``), README.md and docs/plugins.md say ``profiled_data-<f>-<n>.csv`` is the per-run frame
(``runs_dataframe()``) and ``processed_data-<f>-<n>.csv`` the aggregated one (``to_dataframe()``). Here random
results are built through the real code (``build_results``, the shapes of ``test_frame_reference``, with
parameters of every type, text with commas, quotes, line breaks and non-ASCII letters among them), written by
``ProfileResults.write_outputs`` under a tag that ``allocate`` reserved, and read back with pandas:

- ``read_csv(path, dtype=str, keep_default_na=False)`` gives the text of every cell: the header is the frame's
  columns in order, there is one line per row in order, and each cell is the naive text of the frame's value
  (empty for None and NaN, ``True``/``False``, the integer's digits, a float's digits that parse back to the very
  same float, text unchanged);
- plain ``read_csv(path)`` gives every float column of the frame back bit for bit (NaN and infinities included).

CSV has no types: text that looks like a number, or like ``NA``/``None``/empty, is read by plain ``read_csv`` as a
number or NaN. The docs say nothing about that, so it is not checked here beyond the text read.
"""

from __future__ import annotations

import math
import os
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_frame_reference import TIME, Shape, build, shapes

import nsightx
from nsightx._results.output import allocate

EXAMPLES = int(os.environ.get("NSIGHTX_CSV_REFERENCE_EXAMPLES", "100"))
"""Examples per run (300 while hunting)."""
TEXTS = ["a", "é", "日本", "", "1", "None", "NA", "x y", "a,b", 'say "hi"', "two\nlines", "cr\rhere", " pad ", "2.5"]
PARAM_VALUES = {
    "int": st.integers(-5, 10**6),
    "bigint": st.sampled_from([2**63 - 1, 2**63, 2**70, -(2**63), 2**53 + 1]),
    "float": st.sampled_from([0.5, 1.0, -0.0, math.nan, math.inf, -math.inf, 1e300, 0.1, 1 / 3, 5e-324]),
    "str": st.sampled_from(TEXTS),
    "bool": st.booleans(),
    "none": st.none(),
}
NAMES = ("n", "dtype", "tile", "size")
COLLECTOR_NAMES = ("Power, W", 'say "hi"', "two\nlines", "cr\rhere", "温度", " pad ")
"""Names a collector may have: its column's header needs quoting, or holds a line break or non-ASCII letters."""


@st.composite
def csv_shapes(draw: Any) -> Shape:
    """A random result whose parameters hold values of one or two random types each."""
    shape = draw(shapes())
    names = draw(st.lists(st.sampled_from(NAMES), min_size=1, max_size=3, unique=True))
    columns = []
    for _ in names:
        kinds = draw(st.lists(st.sampled_from(sorted(PARAM_VALUES)), min_size=1, max_size=2, unique=True))
        columns.append([draw(PARAM_VALUES[draw(st.sampled_from(kinds))]) for _ in shape.configs])
    shape.params = tuple(names)
    shape.configs = [tuple(col[c] for col in columns) for c in range(len(shape.configs))]
    if shape.normalize is not None and draw(st.booleans()):
        shape.normalize = None
    _odd_collectors(draw, shape)
    return shape


def _odd_collectors(draw: Any, shape: Shape) -> None:
    """Give some collectors odd names, and their text values odd text."""
    collectors = {}
    for i, (name, (scope, values)) in enumerate(shape.collectors.items()):
        if name.endswith("text") and draw(st.booleans()):
            values = {w: v if v is None else draw(st.sampled_from(TEXTS)) for w, v in values.items()}
        if name.startswith("C") and draw(st.booleans()):
            name = f"{draw(st.sampled_from(COLLECTOR_NAMES))}{i}"
        collectors[name] = (scope, values)
    shape.collectors = collectors


def cell_text_matches(text: str, value: Any) -> bool:
    """Whether ``text`` is the naive CSV text of a frame cell ``value``."""
    if value is None or value is pd.NA or (isinstance(value, float | np.floating) and math.isnan(value)):
        return text == ""
    if isinstance(value, bool | np.bool_):
        return text == str(bool(value))
    if isinstance(value, int | np.integer):
        return text == str(int(value))
    if isinstance(value, float | np.floating):
        try:
            back = float(text)
        except ValueError:
            return False
        return back == float(value) and math.copysign(1.0, back) == math.copysign(1.0, float(value))
    if isinstance(value, str):
        return text == value
    return text == str(value)


def check_csv(path: Path, frame: pd.DataFrame) -> None:
    """``path`` read by pandas is ``frame``: header, rows in order, every cell's text, float columns exactly."""
    text = pd.read_csv(path, dtype=str, keep_default_na=False)
    assert list(text.columns) == [str(c) for c in frame.columns], (list(text.columns), list(frame.columns))
    assert len(text) == len(frame), (path.name, len(text), len(frame))
    for j, column in enumerate(frame.columns):
        got, want = text.iloc[:, j].tolist(), frame.iloc[:, j].tolist()
        bad = [(i, g, w) for i, (g, w) in enumerate(zip(got, want, strict=True)) if not cell_text_matches(g, w)]
        assert not bad, (path.name, column, bad[:5])
    if frame.empty:
        return
    plain = pd.read_csv(path)
    for j, column in enumerate(frame.columns):
        if frame.dtypes.iloc[j].kind == "f":
            got_f, want_f = plain.iloc[:, j].to_numpy(dtype=float), frame.iloc[:, j].to_numpy(dtype=float)
            assert np.array_equal(got_f, want_f, equal_nan=True), (path.name, column, got_f, want_f)


def written(res: nsightx.ProfileResults, folder: Path) -> tuple[Path, Path]:
    """Write ``res``'s files as a call does, and return its (per-run, aggregated) CSV paths."""
    location = allocate(f"{folder}/", "bench")
    res.write_outputs(location, csv=True)
    return location.path("profiled_data", "csv"), location.path("processed_data", "csv")


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(csv_shapes())
def test_pandas_reads_each_csv_as_the_frame_it_claims_to_be(tmp_path_factory: Any, shape: Shape) -> None:
    res = build(shape)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a NaN or zero baseline of ``normalize_against``
        try:
            frame = res.to_dataframe()
        except nsightx.ConfigError:
            return  # no baseline value to normalise against: the call raises before writing (test_frame_reference)
        profiled, processed = written(res, tmp_path_factory.mktemp("out"))
    check_csv(profiled, res.runs_dataframe())
    check_csv(processed, frame)


def _one_config(value: Any, collector: str = "Load") -> nsightx.ProfileResults:
    shape = Shape([(value,)], ("n",), runs=2, annotations=("gemm",), metrics=(TIME,), combine=False, derive=False)
    shape.regions = {("gemm", 0, r): [{TIME: 1.0 + r}] for r in range(2)}
    shape.collectors = {collector: ("run", {(0, r): "x" for r in range(2)})}
    return build(shape)


@pytest.mark.parametrize("value", ["cr\rhere", "a\r", "\r\n", "x\r\ny"])
def test_a_text_parameter_with_a_carriage_return_stays_in_its_row(tmp_path: Path, value: str) -> None:
    res = _one_config(value)
    profiled, processed = written(res, tmp_path)
    for path, rows in ((profiled, 2), (processed, 1)):
        frame = pd.read_csv(path, dtype=str, keep_default_na=False)
        assert len(frame) == rows, path.name  # was 4 and 2: a bare \r ended the line, and the row split in two
        assert frame["n"].tolist() == [value] * rows


def test_a_collector_named_with_a_carriage_return_keeps_the_header_one_line(tmp_path: Path) -> None:
    res = _one_config(1, collector="cr\rname")
    profiled, processed = written(res, tmp_path)
    for path, frame in ((profiled, res.runs_dataframe()), (processed, res.to_dataframe())):
        assert list(pd.read_csv(path).columns) == list(frame.columns)  # the header was cut at the \r
        check_csv(path, frame)


def test_a_host_call_writes_csvs_that_read_back_as_its_frames(tmp_path: Path) -> None:
    """Through the host backend and ``output_prefix``: the files the call wrote, against the frames it returned."""
    texts = ["a,b", 'q"uote', "two\nlines", "cr\rhere", "日本", "", "None"]

    @nsightx.analyze.kernel(
        configs=[(t, i % 2 == 0, 2**63 + i, 0.1 * i) for i, t in enumerate(texts)],
        runs=2,
        warmup=0,
        backend="host",
        output_prefix=f"{tmp_path}/",
        output_csv=True,
        info_collectors=[nsightx.InfoCollector("Load", lambda ctx: ctx.run / 3, "run")],
        verbosity=nsightx.VerbosityLevel.SILENT,
    )
    def sweep(label: str, flag: bool, big: int, scale: float) -> None:
        with nsightx.annotate("a"):
            sum(range(10))

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = sweep()
    check_csv(tmp_path / "profiled_data-sweep-0.csv", result.runs_dataframe())
    check_csv(tmp_path / "processed_data-sweep-0.csv", result.to_dataframe())


def test_a_call_stopped_halfway_writes_no_csv_and_no_result(tmp_path: Path) -> None:
    """docs/reliability.md: a stopped sweep's completed runs are in the raw file; no file claims a whole sweep."""

    @nsightx.analyze.kernel(
        configs=[(1,), (2,), (3,)],
        runs=2,
        warmup=0,
        backend="host",
        output_prefix=f"{tmp_path}/",
        output_csv=True,
        verbosity=nsightx.VerbosityLevel.SILENT,
    )
    def sweep(n: int) -> None:
        with nsightx.annotate("a"):
            if n == 2:
                raise RuntimeError("stop")

    with pytest.raises(RuntimeError, match="stop"):
        sweep()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["raw_data-sweep-0.jsonl"]
    with pytest.warns(nsightx.IncompleteResultWarning, match="holds 2 of 6 planned runs"):
        assert len(nsightx.load(tmp_path / "raw_data-sweep-0.jsonl").runs_dataframe()) == 2
