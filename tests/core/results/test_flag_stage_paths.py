"""The small-result paths of the flags, spread and stability stages give the frames the earlier paths gave (issue 35).

For a few hundred rows the frame now judges ``launch_bound`` in one Python pass over the region executions (three
attributes read together), lets the ``unstable`` rule reuse the ``CI95`` interval when its summaries are the
spread's, gathers the clock values in the collectors' pass and makes the ``clock_varied`` rule's run clocks in the
throttling verdict's pass. Each test here runs the new path and the earlier one (numpy's region sums, the interval
made twice, ``run_clocks`` of its own) and asks for the same frame, column for column and bit for bit, on every
committed result and on results hypothesis makes (uneven groups, NaN and infinite values, failed regions,
throttled and idle runs, launch-bound regions with and without the backend's own verdict).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_table_flags import plan as _plan

import nsightx
from nsightx._results import dataframe, table_flags
from nsightx._results.dataframe import _throttled_items, aggregate
from nsightx._results.flags import flags_cell, row_flags, run_clocks
from nsightx._results.profileresults import build_results
from nsightx._results.records import CollectorValue, Record, RegionRun, RunRecords
from nsightx._results.table import table_of
from nsightx.columns import CLOCK_EVENT_REASONS, MEASURED_SM_CLOCK

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
RESULTS = sorted(
    [
        *FIXTURES.glob("frames/*.result.json"),
        *FIXTURES.glob("results/*/result.json"),
        *FIXTURES.glob("gpu-results/*.parquet"),
    ]
)
TIME = "gpu__time_duration.sum"


def _earlier_frame(data: Any) -> pd.DataFrame:
    """The aggregated frame by the earlier paths: numpy's flag stages, no interval or run clocks handed over."""
    real = table_flags.flag_cells
    mp = pytest.MonkeyPatch()
    with mp.context() as m:
        m.setattr(table_flags, "SMALL", -1)  # every flag stage takes its numpy path
        m.setattr(dataframe, "flag_cells", lambda d, t, g, v, s=None, w=None, *_: real(d, t, g, v, s, w))
        return aggregate(data, table=_fresh_table(data))


def _fresh_table(data: Any) -> Any:
    """A table of ``data`` with nothing cached from an earlier frame (the columns are read again)."""
    from nsightx._results.store import ResultColumns
    from nsightx._results.table import ResultTable

    return ResultTable(ResultColumns.of(data.runs, data.values))


def _bits(frame: pd.DataFrame) -> list[Any]:
    """Each column's dtype and values, floats by their bits (NaN signs and payloads, negative zero)."""
    out: list[Any] = []
    for name in frame.columns:
        column = frame[name]
        if column.dtype == np.float64:
            out.append((name, "float64", column.to_numpy().view(np.uint64).tolist()))
        else:
            out.append((name, str(column.dtype), [repr(v) for v in column.tolist()]))
    return out


def _assert_same(got: pd.DataFrame, expected: pd.DataFrame) -> None:
    pd.testing.assert_frame_equal(got, expected, check_exact=True)
    assert _bits(got) == _bits(expected)


@pytest.mark.parametrize("path", RESULTS, ids=lambda p: str(p.relative_to(FIXTURES)))
def test_fixture_frames_are_the_earlier_paths(path: Path) -> None:
    data = nsightx.load(path).data
    _assert_same(aggregate(data, table=_fresh_table(data)), _earlier_frame(data))


def test_the_sweep_takes_the_new_paths(monkeypatch: pytest.MonkeyPatch) -> None:
    """The sweep of issue 35 (events: no verdict of the backend's own) is judged by the one-pass path."""
    data = nsightx.load(FIXTURES / "gpu-results" / "sweep-events.parquet").data
    calls: list[str] = []
    real_launch, real_intervals = table_flags._small_launch_bound, table_flags.mean_intervals
    monkeypatch.setattr(table_flags, "_small_launch_bound", lambda *a: calls.append("small") or real_launch(*a))
    monkeypatch.setattr(table_flags, "mean_intervals", lambda *a: calls.append("interval") or real_intervals(*a))
    aggregate(data, table=_fresh_table(data))
    assert calls == ["small"]  # and the unstable rule reused the frame's interval


_ATTRIBUTES = st.fixed_dictionaries(
    {},
    optional={
        "launch_bound": st.sampled_from([True, False, "yes", 1]),
        "device_ns": st.sampled_from([0, -1.0, "x", True, math.nan, 800.0, 5000, 9000.5]),
        "span_ns": st.sampled_from([0.0, None, 700.0, 6000.0]),
        "launch_ns": st.sampled_from([0, math.nan, 100, 4000, 9999]),
        "kernel_count": st.sampled_from([1, 2, 1.0, "2"]),
    },
)
_VALUES = st.one_of(
    st.sampled_from([math.nan, -math.nan, math.inf, -math.inf, 0.0, -0.0, 4999.0, 5000.0, 5001.0]),
    st.floats(100.0, 1e6),
)
_CLOCKS = st.sampled_from([1980.0, 1975.0, 1700.0, 1980, math.nan, math.inf, "n/a", True, None])
_REASONS = st.sampled_from(["none", "gpu_idle", "sw_power_cap", "gpu_idle|hw_slowdown", "", None, 3])


@st.composite
def _results(draw: st.DrawFn) -> Any:
    """A small result: every combination of evidence the flag stages read, groups of uneven sizes."""
    configs, runs = draw(st.integers(1, 3)), draw(st.integers(1, 6))
    names = ["a", "b", "c"][: draw(st.integers(1, 3))]
    out = []
    for c in range(configs):
        for r in range(runs):
            records, regions, collectors = [], [], []
            for a in names:
                failed = draw(st.booleans()) and draw(st.booleans())
                attrs = draw(_ATTRIBUTES)
                host = draw(st.integers(100, 9000))
                regions.append(RegionRun(annotation=a, config=c, run=r, host_ns=host, failed=failed, attributes=attrs))
                if failed or not draw(st.integers(0, 5)):  # a missing value: groups of uneven sizes
                    continue
                unit = draw(st.sampled_from(["ns", None]))
                for metric in (TIME, "bytes"):
                    value = draw(_VALUES)
                    records.append(
                        Record(annotation=a, config=c, run=r, kernel=f"k{a}", metric=metric, value=value, unit=unit)
                    )
            for _ in range(draw(st.integers(0, 2))):
                collectors.append(
                    CollectorValue(name=MEASURED_SM_CLOCK, scope="run", config=c, run=r, value=draw(_CLOCKS))
                )
            if draw(st.booleans()):
                collectors.append(
                    CollectorValue(name=CLOCK_EVENT_REASONS, scope="run", config=c, run=r, value=draw(_REASONS))
                )
            out.append(
                RunRecords(
                    config=c, run=r, records=tuple(records), regions=tuple(regions), collectors=tuple(collectors)
                )
            )
    env = {"GPU": "X", "SerializesKernels": draw(st.booleans()) and draw(st.booleans())}
    return build_results(_plan(configs, runs, draw(st.sampled_from(["none", "all"]))), out, env).data


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=_results())
def test_random_frames_are_the_earlier_paths_and_the_rules(data: Any) -> None:
    frame = aggregate(data, table=_fresh_table(data))
    if not len(frame):
        return
    _assert_same(frame, _earlier_frame(data))
    rules = [flags_cell(f) for f in row_flags(data, dataframe.throttled_runs(data)).values()]
    assert frame["Flags"].tolist() == rules


def test_clock_values_are_gathered_as_before() -> None:
    for path in RESULTS:
        table = table_of(nsightx.load(path).data)
        c = table.columns.collectors
        wanted = (MEASURED_SM_CLOCK, CLOCK_EVENT_REASONS)
        earlier = [
            (n, cfg, r or 0, v)
            for n, s, cfg, r, v in zip(c.name, c.scope, c.config, c.run, c.value, strict=True)
            if s == "run" and n in wanted and cfg is not None
        ]
        assert [(type(v), v) for v in table.clock_values] == [(type(v), v) for v in earlier], path


_ITEMS = st.lists(
    st.tuples(
        st.sampled_from([MEASURED_SM_CLOCK, CLOCK_EVENT_REASONS]),
        st.integers(0, 2),
        st.integers(0, 3),
        st.one_of(_CLOCKS, _REASONS, st.floats(allow_nan=True, allow_infinity=True)),
    ),
    max_size=30,
)


@settings(max_examples=300, deadline=None)
@given(items=_ITEMS)
def test_run_clocks_from_the_verdicts_pass_are_run_clocks(items: list[tuple[str, int, int, Any]]) -> None:
    clocks: dict[tuple[int, int], float] = {}
    verdicts = _throttled_items(items, clocks)
    assert verdicts == _throttled_items(items)
    expected = run_clocks(items)
    assert sorted((k, v.hex()) for k, v in clocks.items()) == sorted((k, v.hex()) for k, v in expected.items())


def test_attributes_are_read_together_as_one_at_a_time() -> None:
    for path in RESULTS:
        regs = table_of(nsightx.load(path).data).regions
        names = ("device_ns", "span_ns", "launch_ns", "kernel_count")
        together = regs.attribute_lists(names)
        for name, got in zip(names, together, strict=True):
            assert (
                np.array(got, dtype=np.float64).view(np.uint64).tolist()
                == regs.attribute(name).view(np.uint64).tolist()
            ), (path, name)
