"""A RUN collector's :class:`~nsightx.ext.RunValues` answers give the result the values of the plain mapping.

Issue 35: the nvml plugin's answer before each run (a sample shared by ~100 runs, and its age) is kept in the
run's compact row as it is, not made into six rows per run; the result's collector columns are spread per
distinct shared mapping (:mod:`nsightx._results.sharedcolumns`), the run objects expand it when read. These tests
run the real host backend (and its session made deferred, as a GPU backend's) twice, once with a collector that
answers :class:`RunValues` and once with one that answers the same values as a plain dict, and compare everything
a reader sees: columns, run objects, records, both DataFrames, the raw JSONL and the saved files read back.
"""

from __future__ import annotations

import contextlib
import tempfile
import warnings
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np
import pandas as pd
from _sessions import DeferredHost
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from nsightx_host import METRIC, HostBackend

import nsightx
from nsightx._results import rowparts
from nsightx._results.rowparts import parts_from_rows
from nsightx._results.rows import RunValues, runs_from_rows, values_rows
from nsightx._results.sink import RunSink, read_raw
from nsightx._run.loop import run_loop
from nsightx._run.plan import Plan
from nsightx.ext import RunValues as PublicRunValues

SILENT = nsightx.VerbosityLevel.SILENT
OWN = "AgeMs"
KEYS = ["Clock", "Power", OWN, 7, "Temp"]  # the own name may be a shared key too; 7 is not a str
VALUES = st.one_of(
    st.none(),
    st.integers(-5, 5),
    st.floats(-1e6, 1e6, allow_nan=False),
    st.booleans(),
    st.text("ab", max_size=2),
    st.floats(-10, 10, allow_nan=False).map(np.float32),
)
SAMPLES = st.lists(st.dictionaries(st.sampled_from(KEYS), VALUES, max_size=5), min_size=1, max_size=3)


class Sampled:
    """A RUN collector like the nvml one: a sample shared by ``every`` runs, and an own value; raises at run ``fail``.

    With ``plain`` it answers the same values as a dict (what the result must hold either way).
    """

    scope = nsightx.CollectionScope.RUN

    def __init__(self, samples: list[dict[Any, Any]], every: int, fail: int, plain: bool) -> None:
        self.name, self.samples, self.every, self.fail, self.plain = "sampled", samples, every, fail, plain
        self.calls = 0

    def collect(self, ctx: Any) -> Mapping[Any, Any]:
        n, self.calls = self.calls, self.calls + 1
        if n == self.fail:
            raise RuntimeError("no reading")
        answer = RunValues(self.samples[(n // self.every) % len(self.samples)], OWN, np.float64(n / 8) if n % 3 else n)
        return dict(answer) if self.plain else answer


@contextlib.contextmanager
def session_of(deferred: bool) -> Iterator[None]:
    """The host backend's session, made deferred (its runs take a GPU backend's loop) when asked."""
    if not deferred:
        yield
        return

    @contextlib.contextmanager
    def session(self: Any, plan: Any) -> Iterator[Any]:
        yield DeferredHost()

    with mock.patch.object(HostBackend, "session", session):
        yield


def measure(tmp: Path, collector: Sampled, deferred: bool) -> Any:
    @nsightx.analyze.kernel(
        configs=[(1,), (2,)],
        runs=9,
        warmup=0,
        backend="host",
        info_collectors=[collector],
        output_prefix=f"{tmp}/",
        verbosity=SILENT,
    )
    def f(i: int) -> None:
        with nsightx.annotate("a"):
            pass

    with warnings.catch_warnings(), session_of(deferred):
        warnings.simplefilter("ignore")
        return f()


MEASURED = {"Value", "AvgValue", "MedianValue", "StdDev", "MinValue", "MaxValue", "CI95_Lower", "CI95_Upper"}
MEASURED |= {"RelativeStdDevPct", "StableMeasurement", "Flags", "Normalized", "Geomean"}
"""The columns made of the measured times (two calls measure different ones): the rest must be equal."""


def _frames_equal(a: pd.DataFrame, b: pd.DataFrame) -> None:
    assert list(a.columns) == list(b.columns)
    kept = [c for c in a.columns if c not in MEASURED]
    pd.testing.assert_frame_equal(a[kept], b[kept])


def _collectors(result: Any) -> list[tuple[Any, ...]]:
    return [(v.name, v.scope, v.config, v.run, v.annotation, v.value, type(v.value)) for v in result.collectors]


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(samples=SAMPLES, every=st.integers(1, 7), fail=st.integers(-1, 17), deferred=st.booleans())
def test_run_values_give_the_result_of_the_plain_mapping(
    tmp_path: Path, samples: list[dict[Any, Any]], every: int, fail: int, deferred: bool
) -> None:
    for threshold in (0, rowparts.SHARED_MIN_RUNS):  # the spread per shared mapping, and the rows of few runs
        with mock.patch.object(rowparts, "SHARED_MIN_RUNS", threshold):
            _same_result(tmp_path, samples, every, fail, deferred)


def _same_result(tmp_path: Path, samples: list[dict[Any, Any]], every: int, fail: int, deferred: bool) -> None:
    out = {}
    for plain in (False, True):
        folder = Path(tempfile.mkdtemp(dir=tmp_path))
        result = measure(folder, Sampled(samples, every, fail, plain), deferred)
        (raw,) = folder.glob("*.jsonl")
        out[plain] = (result, read_raw(raw), result.save(folder / "r.json"), result.save(folder / "r.parquet"))
    (a, raw_a, json_a, pq_a), (b, raw_b, json_b, pq_b) = out[False], out[True]
    cols_a, cols_b = a.columns.collectors, b.columns.collectors
    for field in ("name", "scope", "config", "run", "annotation", "value"):
        x, y = getattr(cols_a, field), getattr(cols_b, field)
        assert x == y and list(map(type, x)) == list(map(type, y)), field
    assert a.columns.runs.n_collectors.tolist() == b.columns.runs.n_collectors.tolist()
    assert [_collectors(r) for r in a.data.runs] == [_collectors(r) for r in b.data.runs]
    assert [_collectors(r) for r in raw_a] == [_collectors(r) for r in raw_b]
    assert [(r.annotation, r.config, r.run, r.metric) for r in a.records] == [
        (r.annotation, r.config, r.run, r.metric) for r in b.records
    ]
    _frames_equal(a.to_dataframe(), b.to_dataframe())
    _frames_equal(a.runs_dataframe(), b.runs_dataframe())
    for saved_a, saved_b in ((json_a, json_b), (pq_a, pq_b)):
        loaded_a, loaded_b = nsightx.load(saved_a), nsightx.load(saved_b)
        assert [_collectors(r) for r in loaded_a.data.runs] == [_collectors(r) for r in loaded_b.data.runs]
        _frames_equal(loaded_a.to_dataframe(), loaded_b.to_dataframe())


def test_the_compact_row_keeps_the_answer_and_its_readers_expand_it() -> None:
    sample = {"Clock": 1980, "Power": np.float32(0.5), 7: "seven", OWN: 1.0}
    rows = [
        (0, r, (), (), {}, (("pause", "run", 0, r, None, 0.0), RunValues(sample, OWN, np.float64(r / 4))))
        for r in range(3)
    ]
    expanded = [(*row[:5], (row[5][0], *values_rows(row[5][1], 0, row[1]))) for row in rows]
    assert runs_from_rows(rows) == runs_from_rows(expanded)
    for threshold in (0, rowparts.SHARED_MIN_RUNS):
        with mock.patch.object(rowparts, "SHARED_MIN_RUNS", threshold):
            a, b = parts_from_rows(rows), parts_from_rows(expanded)
        assert vars(a.collectors) == vars(b.collectors) and a.runs.n_collectors.tolist() == [5, 5, 5]
        assert a.collectors.name[:5] == ["pause", "Clock", "Power", "7", OWN] and type(a.collectors.value[2]) is float
    assert PublicRunValues is RunValues


def test_few_runs_expand_their_answers_and_many_are_spread_per_sample() -> None:
    sample = {"Clock": 1980, "Power": 0.5}

    def rows(n: int) -> list[Any]:
        return [(0, r, (), (), {}, (RunValues(sample, OWN, float(r)),)) for r in range(n)]

    with mock.patch.object(rowparts, "shared_collector_parts", wraps=rowparts.shared_collector_parts) as spread:
        few = parts_from_rows(rows(rowparts.SHARED_MIN_RUNS - 1))
        assert spread.call_count == 0
        many = parts_from_rows(rows(rowparts.SHARED_MIN_RUNS))
        assert spread.call_count == 1
    assert few.collectors.name == ["Clock", "Power", OWN] * (rowparts.SHARED_MIN_RUNS - 1)
    assert many.collectors.value[-3:] == [1980, 0.5, float(rowparts.SHARED_MIN_RUNS - 1)]


def test_a_deferred_calls_rows_keep_each_answer_as_it_was_returned() -> None:
    collector = Sampled([{"Clock": 1980, "Power": 0.5}], every=4, fail=-1, plain=False)
    answers: list[Any] = []
    collect = collector.collect

    def kept(ctx: Any) -> Any:
        answers.append(collect(ctx))
        return answers[-1]

    collector.collect = kept  # type: ignore[method-assign]
    plan = Plan(
        function=lambda i: None,
        function_name="f",
        params=("i",),
        configs=((1,),),
        runs=6,
        warmup=0,
        metrics=(METRIC,),
        backend="host",
        collectors=(collector,),
    )
    sink = RunSink()
    run_loop(plan, DeferredHost(), sink)
    items = sink.stored()._items
    assert [row[5] for row in items] == [(answer,) for answer in answers]  # no row per value at write time
    assert all(row[5][0] is answer for row, answer in zip(items, answers, strict=True))
    assert [len(run.collectors) for run in sink.runs] == [3] * 6


KINDS = st.sampled_from(["row", "object", "sample", "other"])
"""A run's entry: a collector row, a value object, or a :class:`RunValues` of the nvml-like or another own name."""
STRETCHES = st.lists(st.tuples(st.lists(KINDS, min_size=0, max_size=3), st.integers(1, 40)), min_size=1, max_size=5)
"""Stretches of runs that hold the same kinds of entries: (kinds, how many runs)."""


def _stretched_rows(stretches: list[tuple[list[str], int]], samples: list[dict[Any, Any]], every: int) -> list[Any]:
    """Compact runs made of ``stretches``; their samples change every ``every`` runs, each run's values its own."""
    from nsightx._results.records import new_collector_value

    rows: list[Any] = [(-1, -1, (), (), {}, (("Driver", "once", None, None, None, "580"),))]  # the ONCE values
    n = 0
    for kinds, count in stretches:
        for _ in range(count):
            config, run = n % 2, n
            sample = samples[(n // every) % len(samples)]
            entries: list[Any] = []
            for kind in kinds:
                if kind == "row":
                    entries.append(("ThermalPauseS", "run", config, run, None, n / 4))
                elif kind == "object":
                    entries.append(new_collector_value("obj", "config", config, None, None, n))
                else:
                    entries.append(RunValues(sample, OWN if kind == "sample" else "Other", np.float64(n / 8)))
            rows.append((config, run, (), (), {}, tuple(entries)))
            n += 1
    return rows


@settings(max_examples=40, deadline=None)
@given(stretches=STRETCHES, samples=SAMPLES, every=st.integers(1, 30))
def test_stretches_of_alike_runs_are_spread_as_tables_with_the_columns_of_their_rows(
    stretches: list[tuple[list[str], int]], samples: list[dict[Any, Any]], every: int
) -> None:
    # Issue 35: a call's runs that hold the same kinds of entries (the nvml plugin's guard row and sample answer)
    # are spread a place at a time (sharedcolumns._uniform_parts); the columns are those of the expanded rows.
    from nsightx._results import sharedcolumns

    rows = _stretched_rows(stretches, samples, every)
    expanded = [_expanded(row) for row in rows]
    with (
        mock.patch.object(rowparts, "SHARED_MIN_RUNS", 0),
        mock.patch.object(sharedcolumns, "UNIFORM_MIN_RUNS", 1),
        mock.patch.object(sharedcolumns, "_uniform_parts", wraps=sharedcolumns._uniform_parts) as table,
    ):
        a = parts_from_rows(rows)
    b = parts_from_rows(expanded)
    for field in ("name", "scope", "config", "run", "annotation", "value"):
        x, y = getattr(a.collectors, field), getattr(b.collectors, field)
        assert x == y and list(map(type, x)) == list(map(type, y)), field
    assert a.runs.n_collectors.tolist() == b.runs.n_collectors.tolist()
    if any(type(v) is RunValues for row in rows for v in row[5]):  # spread: each stretch tried as a table
        assert table.call_count >= 1


def test_a_deferred_nvml_like_calls_runs_are_spread_as_one_table() -> None:
    # The runs of a deferred call with a guard and a RunValues collector: the ONCE values, then one table.
    from nsightx._results import sharedcolumns

    rows = _stretched_rows([(["row", "sample"], 300)], [{"Clock": 1980, "Power": 0.5}], every=50)
    tables: list[tuple[int, bool]] = []
    real = sharedcolumns._uniform_parts

    def table(segment: Any, *args: Any) -> Any:
        out = real(segment, *args)
        tables.append((segment[0][1], out is not None))
        return out

    with mock.patch.object(sharedcolumns, "_uniform_parts", table):
        a = parts_from_rows(rows)
    assert tables == [(0, True)]  # runs 0 to 299 as one table; the ONCE values apart
    b = parts_from_rows([_expanded(row) for row in rows])
    assert vars(a.collectors) == vars(b.collectors) and a.runs.n_collectors.tolist() == [1] + [4] * 300


def _expanded(row: Any) -> Any:
    """``row`` with its :class:`RunValues` answers replaced by the rows they stand for."""
    config, run = row[0], row[1]
    values: list[Any] = []
    for v in row[5]:
        values.extend(values_rows(v, config, run) if type(v) is RunValues else [v])
    return (*row[:5], tuple(values))
