"""The run loop hands the sink each run in compact form; the run objects are made only when something reads them.

Issue 35: beside an empty region on the host backend, building a ``RunRecords``, a ``RegionRun`` and a ``Record``
as each run finished was ~1.4 us of a ~8 us run. The loop now hands a :class:`~nsightx._results.sink.RunSink`
plain tuples (a ``RunRow``), and the host backend its records as tuples (``RunOutput.record_rows``). These tests
check that nothing changes for whoever reads the runs (the same objects, the same raw-file lines, each run once)
and that the objects are indeed not made while the runs are measured. The time is measured by
``benchmarks/run_loop_cost.py``.
"""

from __future__ import annotations

import dataclasses
import gc
from pathlib import Path

import pytest
from nsightx_host import HostSession

import nsightx
from nsightx._results.records import CollectorValue, Record, RegionRun, RunRecords
from nsightx._results.runblock import RunBlock
from nsightx._results.sink import RunSink
from nsightx._run.backend import RunOutput
from nsightx._run.loop import run_loop
from nsightx._run.plan import Plan

REC = Record("work", 1, 2, "gemm", "gpu__time_duration.sum", 3.5, "ns", 1)
COL = CollectorValue("GPUClockMHz", "run", 1, 2, None, 1980.0)
ROW = (
    1,
    2,
    (("work", 1, 2, "region", "host__time_duration.sum", 9.0, "ns", 0), REC),
    (("work", 99, False), ("idle", 7, True)),
    {"work": {"kernel_count": 2}},
    (COL,),
)
"""A compact run: a record as a row and one as an object, a region with attributes and one without."""
RUN = RunRecords(
    1,
    2,
    (Record("work", 1, 2, "region", "host__time_duration.sum", 9.0, "ns", 0), REC),
    (RegionRun("work", 1, 2, 99, False, {"kernel_count": 2}), RegionRun("idle", 1, 2, 7, True, {})),
    (COL,),
)
"""What :data:`ROW` stands for, built through the constructors."""


def plan(**kw: object) -> Plan:
    base: dict[str, object] = dict(
        function=work,
        function_name="work",
        params=("n",),
        configs=((1,), (2,), (3,)),
        runs=5,
        warmup=1,
        metrics=("host__time_duration.sum",),
        backend="host",
        needs_gpu=False,
    )
    base.update(kw)
    return Plan(**base)  # type: ignore[arg-type]


def work(n: int) -> None:
    with nsightx.annotate("a"):
        pass


def test_a_run_row_becomes_the_run_object_built_field_by_field() -> None:
    from nsightx._results.rows import run_from_row, runs_from_rows

    built = run_from_row(ROW)
    assert built == RUN
    assert type(built) is RunRecords and type(built.records) is tuple and type(built.regions) is tuple
    assert [type(r) for r in built.records] == [Record, Record] and [type(g) for g in built.regions] == [RegionRun] * 2
    assert built.records[1] is REC  # a record handed over as an object stays that object
    assert hash(built.records[0]) == hash(RUN.records[0])
    with pytest.raises(dataclasses.FrozenInstanceError):
        built.records[0].value = 1.0  # type: ignore[misc]
    assert runs_from_rows([ROW, RUN, ROW]) == [RUN, RUN, RUN]


def live(cls: type) -> int:
    """How many instances of ``cls`` the collector sees (the record types are containers it tracks)."""
    return sum(1 for o in gc.get_objects() if type(o) is cls)


def test_the_run_loop_makes_no_run_object_until_the_runs_are_read() -> None:
    before = {cls: live(cls) for cls in (RunRecords, RegionRun, Record)}
    sink = RunSink()
    run_loop(plan(), HostSession(), sink)
    assert sink.measured == 15
    assert {cls: live(cls) - n for cls, n in before.items()} == {RunRecords: 0, RegionRun: 0, Record: 0}
    runs = sink.runs
    assert [(r.config, r.run) for r in runs] == [(c, r) for c in range(3) for r in range(5)]
    assert {cls: live(cls) - n for cls, n in before.items()} == {RunRecords: 15, RegionRun: 15, Record: 15}
    assert sink.runs is runs and all(a is b for a, b in zip(sink.runs, runs, strict=True))  # made once


def test_runs_of_the_plain_path_read_as_those_of_the_full_path() -> None:
    """A run collector sends every run the full way (_Runner.run, _write_run); without one they go the plain way."""
    plain, full = RunSink(), RunSink()
    run_loop(plan(), HostSession(), plain)
    tag = nsightx.InfoCollector("tag", lambda ctx: ctx.run, "run")
    run_loop(plan(collectors=(tag,)), HostSession(), full)

    def shape(runs: list[RunRecords]) -> list[object]:
        return [
            (
                r.config,
                r.run,
                [(x.annotation, x.config, x.run, x.kernel, x.metric, x.unit, x.seq, type(x.value)) for x in r.records],
                [(g.annotation, g.config, g.run, g.failed, g.attributes, type(g.host_ns)) for g in r.regions],
            )
            for r in runs
        ]

    assert shape(plain.runs) == shape(full.runs)
    assert shape(plain.runs)[0] == (
        0,
        0,
        [("a", 0, 0, "region", "host__time_duration.sum", "ns", 0, float)],
        [("a", 0, 0, False, {}, int)],
    )
    assert [r.collectors for r in plain.runs] == [()] * 15
    assert [c.value for r in full.runs for c in r.collectors] == list(range(5)) * 3


def test_a_row_is_written_to_the_raw_file_as_its_run_object_is(tmp_path: Path) -> None:
    as_row, as_object = RunSink(tmp_path / "row.jsonl"), RunSink(tmp_path / "object.jsonl")
    try:
        as_row.add_run(ROW)
        as_row.add_run(ROW)  # handed over again (the loop's clean-up after an interrupt): stored once
        as_object.write(RUN)
    finally:
        as_row.close()
        as_object.close()
    assert (tmp_path / "row.jsonl").read_bytes() == (tmp_path / "object.jsonl").read_bytes()
    assert as_row.runs == [RUN] and as_row.measured == 1


def test_a_run_handed_over_again_is_stored_once_in_either_form() -> None:
    sink = RunSink()
    sink.add_run(ROW)
    sink.add_run(ROW)
    sink.write(RUN)
    assert sink.measured == 1
    assert sink.runs == [RUN]
    sink.add_run(ROW)  # now after an object
    other = (ROW[0], ROW[1] + 1, *ROW[2:])
    sink.add_run(other)
    assert [(r.config, r.run) for r in sink.runs] == [(1, 2), (1, 3)]


class RowSession(HostSession):
    """A backend session that hands one record back as an object and one as a row, with region attributes."""

    def finish_run(self, config: int, run: int) -> RunOutput:
        timed = super().finish_run(config, run)
        mine = Record("a", config, run, "k", "m", 1.0, None, 0)
        return RunOutput(
            [mine], {"a": {"kernel_count": 1}}, [*timed.record_rows, ("a", config, run, "k2", "m", 2.0, None, 1)]
        )


def test_a_session_may_hand_back_records_as_rows_beside_objects() -> None:
    sink = RunSink()
    run_loop(plan(metrics=("m",), runs=2), RowSession(), sink)
    first = sink.runs[0]
    assert [(r.kernel, r.metric, r.value, r.seq) for r in first.records][::2] == [
        ("k", "m", 1.0, 0),
        ("k2", "m", 2.0, 1),
    ]
    assert [r.metric for r in first.records] == ["m", "host__time_duration.sum", "m"]
    assert all(type(r) is Record for r in first.records)
    assert first.regions[0].attributes == {"kernel_count": 1}


class _Cool:
    """A temperature source far from slowdown: the thermal guard never pauses."""

    def read(self) -> object:
        from nsightx._run.thermal import ThermalReading

        return ThermalReading(temperature_c=40.0, slowdown_c=89.0)


def test_collector_and_guard_values_reach_the_sink_as_rows_and_read_as_the_objects() -> None:
    """Before every run the nvml plugin's values and the guard's pause were made into ``CollectorValue`` objects,
    seven a run; they are now handed over as plain tuples and become the same objects only when read."""
    from nsightx._run.thermal import ThermalSettings

    clocks = nsightx.InfoCollector("clocks", lambda ctx: {"SM": 1980 + ctx.run, "Reasons": "none"}, "run")
    guarded = plan(collectors=(clocks,), needs_gpu=True, thermal=ThermalSettings(source=_Cool()))
    before = live(CollectorValue)
    sink = RunSink()
    run_loop(guarded, HostSession(), sink)
    assert live(CollectorValue) == before  # none made while the runs were measured
    rows = [row for item in sink._items for row in (item.rows() if type(item) is RunBlock else [item])]
    values = [row[5] for row in rows]
    assert all(type(v) is tuple for run in values for v in run)
    runs = sink.runs
    assert runs[1].collectors == (
        CollectorValue("ThermalPauseS", "run", 0, 1, None, 0.0),
        CollectorValue("SM", "run", 0, 1, None, 1981),
        CollectorValue("Reasons", "run", 0, 1, None, "none"),
    )
    assert all(type(v) is CollectorValue for r in runs for v in r.collectors)


def test_collector_rows_and_objects_in_one_run_read_as_objects_and_as_columns() -> None:
    from nsightx._results.rowparts import parts_from_rows
    from nsightx._results.rows import runs_from_rows
    from nsightx._results.store import RunParts

    row = (*ROW[:5], (("ThermalPauseS", "run", 1, 2, None, 0.5), COL))
    [built] = runs_from_rows([row])
    assert built.collectors == (CollectorValue("ThermalPauseS", "run", 1, 2, None, 0.5), COL)
    assert type(built.collectors[0]) is CollectorValue and built.collectors[1] is COL
    got, want = parts_from_rows([row, RUN]).collectors, RunParts.of([built, RUN]).collectors
    assert vars(got) == vars(want)
