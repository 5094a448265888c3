"""A call's columns gathered config by config during the GPU wait are those of all its runs read at once (issue 35).

The sink's ``build_ahead`` (the run loop calls it at each config's end while a deferred session still waits)
gathers the runs stored since into one Python list per column (``rowgather.Gather``); after the last wait only the
last config's runs are gathered and each list is converted once, with no join of pieces. The columns must be those
of ``RunParts.of`` the run objects, field for field and dtype for dtype, whatever the runs hold: the nvml plugin's
``RunValues`` answers (expanded, or spread per shared mapping from ``SHARED_MIN_RUNS`` runs), failed regions,
several regions and records a run (rows or objects), region attributes, a run block, the ONCE values' run object.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_small_parts_paths import _same

from nsightx._results import rowgather, rowparts
from nsightx._results.records import RunRecords, new_collector_value, new_record
from nsightx._results.rowparts import parts_from_rows
from nsightx._results.rows import RunValues, runs_from_rows
from nsightx._results.sink import RunSink
from nsightx._results.store import RunParts

ONCE = RunRecords(-1, -1, collectors=(new_collector_value("Driver", "once", None, None, None, "580"),))


def _run(c: int, r: int, regions: int, records: int, answer: bool, sample: dict[str, Any]) -> Any:
    """One run as the run loop hands it: its regions (the last fails every fifth run), records, values."""
    names = ["gemm", "copy", "reduce"][:regions]
    region_rows = tuple((name, 1000 * c + r + i, r % 5 == 4 and i == regions - 1) for i, name in enumerate(names))
    recs: list[Any] = []
    for name in names:
        for k in range(records):
            row = (name, c, r, f"k{k}", "gpu__time_duration.sum", float(c * 100 + r + k), "ns", k)
            recs.append(new_record(*row) if (r + k) % 2 else row)  # GPU backends hand objects, the host rows
    values: tuple[Any, ...] = (("ThermalPauseS", "run", c, r, None, 0.0),)
    if answer:
        values += (RunValues(sample, "AgeMs", r * 0.25),)
    if r == 1:
        values += (new_collector_value("Extra", "config", c, None, None, 3),)
    attributes = {names[0]: {"kernel_count": records, "span_ns": r}} if names and r % 3 == 0 else {}
    return (c, r, tuple(recs), region_rows, attributes, values)


def _sweep(configs: int, runs: int, regions: int = 1, records: int = 1, answers: bool = True) -> list[Any]:
    """The rows of a sweep; an nvml sample is shared by three runs, as the plugin's sampler shares it."""
    samples = [{"Clock": 1980 + i, "Power": 150.5 + i, "Reasons": "none"} for i in range(runs)]
    return [_run(c, r, regions, records, answers, samples[r // 3]) for c in range(configs) for r in range(runs)]


def _fed(rows: list[Any], ahead: bool) -> RunSink:
    """A sink fed as the run loop feeds a deferred session's runs: each config's end noted (``build_ahead``)."""
    sink = RunSink()
    sink.write(ONCE)
    for row, following in zip(rows, [*rows[1:], None], strict=True):
        sink.add_run(row)
        if ahead and following is not None and following[0] != row[0]:
            sink.build_ahead()
    return sink


def _check(parts: RunParts, items: list[Any]) -> None:
    """``parts`` are the columns of the run objects ``items`` stand for, and those read all at once."""
    want = RunParts.of(runs_from_rows(items))
    _same(parts, want)
    assert list(map(type, parts.collectors.value)) == list(map(type, want.collectors.value))
    _same(parts, parts_from_rows(items))


SHAPES = [
    (4, 11, 1, 1, True),  # the matmul sweep (44 runs), the nvml plugin's answers
    (4, 11, 1, 1, False),  # the same without NVML
    (3, 5, 3, 2, True),  # several regions and records a run
    (2, 70, 1, 1, True),  # 140 runs: their answers spread per shared mapping
    (3, 80, 2, 1, False),  # 240 runs, once built in pieces and joined
    (3, 80, 3, 2, True),  # 1,440 records: read through their combinations (more than store.SMALL)
    (1, 7, 1, 1, True),  # one config: nothing to gather ahead
    (3, 4, 0, 0, True),  # runs without a region
]


@pytest.mark.parametrize(("configs", "runs", "regions", "records", "answers"), SHAPES)
def test_columns_gathered_during_the_wait_are_those_of_all_runs_at_once(
    configs: int, runs: int, regions: int, records: int, answers: bool
) -> None:
    rows = _sweep(configs, runs, regions, records, answers)
    sink = _fed(rows, ahead=True)
    ahead = 1 + (configs - 1) * runs  # the ONCE run and every config's runs but the last one's
    spread = answers and ahead >= rowparts.SHARED_MIN_RUNS  # answers spread: read all at once, after the wait
    assert sink._ahead.upto == (0 if spread or configs == 1 else ahead)
    _check(sink.stored().parts(), _fed(rows, ahead=False)._items)


@pytest.mark.parametrize(("configs", "runs", "answers"), [(4, 11, True), (3, 80, False)])
def test_after_the_wait_only_the_last_config_is_gathered_and_nothing_is_joined(
    monkeypatch: pytest.MonkeyPatch, configs: int, runs: int, answers: bool
) -> None:
    sink = _fed(_sweep(configs, runs, answers=answers), ahead=True)
    gathered: list[int] = []
    real = rowgather.Gather.add

    def counted(self: rowgather.Gather, items: Any, spread_from: int) -> None:
        gathered.append(len(items))
        real(self, items, spread_from)

    monkeypatch.setattr(rowgather.Gather, "add", counted)
    monkeypatch.setattr(rowparts, "concat_parts", None)  # a join would raise
    parts = sink.stored().parts()
    assert gathered == [runs]  # the last config's runs
    assert len(parts.runs.config) == 1 + configs * runs


def test_a_run_block_among_the_runs_gives_the_columns_of_all_at_once() -> None:
    rows = _sweep(3, 4, answers=False)
    sink = RunSink()
    sink.write(ONCE)
    for row in rows[:4]:
        sink.add_run(row)
    sink.build_ahead()
    block = sink.open_block(1, 0, ("host", "host_time_ns", "ns"))
    assert block is not None
    for r in range(4):
        block.names.append("gemm")
        block.host_ns.append(500 + r)
        block.failed.append(r == 2)
        block.counts.append(1)
    sink.build_ahead()
    for row in rows[8:]:
        sink.add_run(row)
    assert sink._ahead.upto == 5  # the ONCE run and config 0; not past the block
    _check(sink.stored().parts(), list(sink._items))


_REGION = st.tuples(st.sampled_from(["a", "b", "c", "é"]), st.integers(0, 10**12), st.booleans())
_RECORD = st.tuples(
    st.sampled_from(["a", "b"]),
    st.sampled_from(["k1", "k2"]),
    st.sampled_from(["m", "n"]),
    st.floats(allow_nan=False),
    st.sampled_from(["ns", None]),
    st.integers(0, 2),
    st.booleans(),
)
_VALUE = st.one_of(
    st.tuples(st.just("row"), st.sampled_from(["P", "Q"]), st.one_of(st.integers(), st.floats(allow_nan=False))),
    st.tuples(st.just("object"), st.sampled_from(["P", "R"]), st.sampled_from(["x", 1, 2.5, True])),
    st.tuples(st.just("answer"), st.integers(0, 2), st.floats(0, 9)),
)
_RUN = st.tuples(
    st.lists(_REGION, max_size=3),
    st.lists(_RECORD, max_size=3),
    st.lists(_VALUE, max_size=3),
    st.dictionaries(st.sampled_from(["a", "b", "z"]), st.dictionaries(st.sampled_from(["x", "y"]), st.integers())),
    st.booleans(),
)
SAMPLES = [{"Clock": 1980, "Power": 150.5}, {"Clock": 1410, "Reasons": "none"}, {}]


def _random_row(c: int, r: int, spec: Any) -> Any:
    regions, records, values, attributes, as_object = spec
    recs = tuple(
        new_record(a, c, r, k, m, v, u, s) if obj else (a, c, r, k, m, v, u, s) for a, k, m, v, u, s, obj in records
    )
    vals: list[Any] = []
    for kind, x, y in values:
        if kind == "row":
            vals.append((x, "run", c, r, None, y))
        elif kind == "object":
            vals.append(new_collector_value(x, "annotation", c, r, "a", y))
        else:
            vals.append(RunValues(SAMPLES[x], "AgeMs", y))
    row = (c, r, recs, tuple(regions), attributes, tuple(vals))
    return runs_from_rows([row])[0] if as_object else row  # a run written as an object, now and then


@settings(max_examples=150, deadline=None)
@given(
    layout=st.lists(st.lists(_RUN, max_size=6), min_size=1, max_size=4),
    ahead=st.lists(st.integers(0, 30), max_size=5),
    spread_from=st.sampled_from([3, 10, 128]),
    small=st.sampled_from([4, 512]),
)
def test_random_layouts_gathered_at_any_points_are_the_columns_of_all_at_once(
    layout: list[list[Any]], ahead: list[int], spread_from: int, small: int
) -> None:
    rows = [_random_row(c, r, spec) for c, runs in enumerate(layout) for r, spec in enumerate(runs)]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(rowparts, "SHARED_MIN_RUNS", spread_from)
        patch.setattr(rowgather, "SMALL", small)  # 4: the records of most layouts are many
        sink = RunSink()
        sink.write(ONCE)
        for i, row in enumerate(rows):
            if type(row) is tuple:
                sink.add_run(row)
            else:
                sink.write(row)
            if i in ahead:
                sink.build_ahead()
        _check(sink.stored().parts(), list(sink._items))


def test_columns_handed_out_stay_as_they_are_when_more_runs_are_gathered() -> None:
    """``finish`` hands its lists over (no copy); a later ``add`` extends copies of them, not the columns."""
    rows = _sweep(3, 4, regions=2)
    gather = rowgather.Gather()
    gather.add(rows[:6], rowparts.SHARED_MIN_RUNS)
    first = gather.finish()
    assert first is not None
    gather.add(rows[6:], rowparts.SHARED_MIN_RUNS)
    second = gather.finish()
    assert second is not None
    _check(first, rows[:6])
    _check(second, rows)
