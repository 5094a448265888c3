"""Runs with a thermal guard or RUN collectors go into the host session's run block, their values as columns.

Issue 35 (the 16 KiB op at most 1.10x the bare loop): the nvml plugin's RUN collector and the thermal guard took
every run off the run loop's plain path, and their seven values a run were copied into a mapping, made into rows
and read back into columns, ~9 us a run on a CPU (``benchmarks/run_loop_cost.py --nvml``). A RUN collector may
now return a :class:`~nsightx.ext.RunValues` (a shared mapping, not copied, and the run's own value), whose shared
values the loop converts once for all the runs that share them, and such runs go into a
:class:`~nsightx._results.runblock.RunBlock` with their values in two columns. These tests check, on the real host
backend and run loop, that the runs read back exactly as those the row path stores (objects and columns), that
the block is used, and that a run that raises leaves none of its values.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pytest
from _sessions import Cool
from nsightx_host import METRIC, HostSession

import nsightx
from nsightx._results.records import CollectorValue
from nsightx._results.runblock import RunBlock
from nsightx._results.sink import RunSink
from nsightx._results.store import RunParts
from nsightx._run import loop
from nsightx._run.loop import run_loop
from nsightx._run.plan import Plan
from nsightx._run.thermal import ThermalSettings


class Converted:
    """A value that is not a plain scalar: the loop makes it a float, counting how often."""

    calls = 0

    def __float__(self) -> float:
        Converted.calls += 1
        return 2.5


class Sampled:
    """A RUN collector like the nvml one: a shared mapping that changes every ``every`` runs, and an age."""

    name = "sampled"
    scope = nsightx.CollectionScope.RUN

    def __init__(self, every: int = 4) -> None:
        self.every = every
        self.shared: dict[str, Any] = {}

    def collect(self, ctx: Any) -> Mapping[str, Any]:
        from nsightx.ext import RunValues  # imported here: each test of this file fails alone where it is missing

        if ctx.run % self.every == 0:  # a new sample
            self.shared = {"Clock": 1900 + ctx.run, "Odd": Converted(), 7: "seven", "Reasons": None}
        return RunValues(self.shared, "AgeMs", ctx.run / 1000)


@pytest.fixture(autouse=True)
def blocks_from_one_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every config here opens a block, whatever its run count (the loop's default minimum is 128 runs)."""
    monkeypatch.setattr(loop, "BLOCK_MIN_RUNS", 1)


def clocks(ctx: Any) -> dict[str, Any]:
    return {"SM": 1980 + ctx.run, "Power": np.float32(0.5)}


def flaky(ctx: Any) -> float:
    if ctx.run == 3:
        raise RuntimeError("no reading")
    return float(ctx.run)


def plan(function: Any, runs: int = 12, configs: int = 2) -> Plan:
    """A guarded plan on the host backend with three RUN collectors (one returns :class:`RunValues`)."""
    collectors = (
        Sampled(),
        nsightx.InfoCollector("clocks", clocks, "run"),
        nsightx.InfoCollector("flaky", flaky, "run"),
    )
    return Plan(
        function=function,
        function_name="f",
        params=("i",),
        configs=tuple((i,) for i in range(configs)),
        runs=runs,
        warmup=1,
        metrics=(METRIC,),
        backend="host",
        needs_gpu=True,  # the host session measures no GPU, but the guard is built for such a plan
        thermal=ThermalSettings(source=Cool()),
        collectors=collectors,
    )


def work(i: int) -> None:
    with nsightx.annotate("a"):
        pass


class RowSink(RunSink):
    """A sink that opens no block: every run reaches it as a row (the path before run blocks held values)."""

    def open_block(self, config: int, first: int, record: Any) -> None:
        return None


class CountingHost(HostSession):
    """The host session, counting the runs it finished itself."""

    def __init__(self) -> None:
        super().__init__()
        self.finished = 0

    def finish_run(self, config: int, run: int) -> Any:
        self.finished += 1
        return super().finish_run(config, run)


def _columns(obj: Any) -> dict[str, Any]:
    """Every field of a columns dataclass as plain data (a Text as its strings, an array as dtype and list), but
    the regions' host times (which differ between two calls)."""
    out: dict[str, Any] = {}
    for name, value in vars(obj).items():
        if name == "host_ns" or value is None:
            out[name] = None if value is None else len(value)
        elif hasattr(value, "codes"):
            out[name] = (value.strings(), list(value.names))
        elif isinstance(value, np.ndarray):
            out[name] = (str(value.dtype), value.tolist())
        else:
            out[name] = [(type(v).__name__, v) for v in value]
    return out


def _run_both(function: Any, **kw: Any) -> tuple[RunSink, RunSink, CountingHost]:
    """The same plan into a sink with blocks and one without (each with its own collectors' state)."""
    block, rows, session = RunSink(), RowSink(), CountingHost()
    with pytest.warns(RuntimeWarning, match="flaky"):
        run_loop(plan(function, **kw), session, block)
    with pytest.warns(RuntimeWarning, match="flaky"):
        run_loop(plan(function, **kw), HostSession(), rows)
    return block, rows, session


def test_run_values_reads_as_the_plain_mapping_it_stands_for() -> None:
    from nsightx.ext import RunValues

    shared = {"Clock": 1980, "Temp": 41}
    values = RunValues(shared, "AgeMs", 0.25)
    assert dict(values) == {"Clock": 1980, "Temp": 41, "AgeMs": 0.25} and len(values) == 3
    assert list(values) == ["Clock", "Temp", "AgeMs"] and values["AgeMs"] == 0.25 and values.shared is shared
    assert isinstance(values, Mapping) and "Temp" in values and "Power" not in values
    overridden = RunValues(shared, "Temp", 50)  # its own value wins, listed last
    assert list(overridden.items()) == [("Clock", 1980), ("Temp", 50)] and len(overridden) == 2


def test_guarded_runs_with_run_collectors_go_into_a_block_and_read_as_the_row_path_runs() -> None:
    block, rows, session = _run_both(work)
    # per config the warm-up run and run 0 go through the session; runs 1.. into a block, values and all
    assert session.finished == 4
    assert sum(type(item) is RunBlock for item in block._items) == 2
    assert not any(type(item) is RunBlock for item in rows._items)
    got, want = block.stored().parts(), rows.stored().parts()
    for part in ("runs", "records", "regions", "collectors"):
        mine, theirs = _columns(getattr(got, part)), _columns(getattr(want, part))
        if part == "records":  # the records' values are the regions' times, which differ between two calls
            mine["value"], theirs["value"] = len(mine["value"]), len(theirs["value"])
        assert mine == theirs, part
    a, b = block.runs, rows.runs
    assert [(r.config, r.run, r.collectors) for r in a] == [(r.config, r.run, r.collectors) for r in b]
    run5 = a[5].collectors
    assert [v.name for v in run5] == ["ThermalPauseS", "Clock", "Odd", "7", "Reasons", "AgeMs", "SM", "Power", "flaky"]
    assert run5[1:6] == (
        CollectorValue("Clock", "run", 0, 5, None, 1904),
        CollectorValue("Odd", "run", 0, 5, None, 2.5),
        CollectorValue("7", "run", 0, 5, None, "seven"),
        CollectorValue("Reasons", "run", 0, 5, None, None),
        CollectorValue("AgeMs", "run", 0, 5, None, 0.005),
    )
    assert a[3].collectors[-1] == CollectorValue("flaky", "run", 0, 3, None, None)  # it raised: None, as before
    assert type(a[5].collectors[7].value) is float  # the numpy scalar made a float, as before


def test_a_shared_mapping_is_converted_once_for_all_the_runs_that_share_it() -> None:
    Converted.calls = 0
    block = RunSink()
    with pytest.warns(RuntimeWarning, match="flaky"):
        run_loop(plan(work, runs=12, configs=1), HostSession(), block)
    assert Converted.calls == 3  # runs 0-3, 4-7 and 8-11 share one mapping each
    assert [v.value for r in block.runs for v in r.collectors if v.name == "Odd"] == [2.5] * 12


def test_a_run_that_raises_leaves_none_of_its_values_in_the_block() -> None:
    calls = [0]

    def f(i: int) -> None:
        calls[0] += 1
        with nsightx.annotate("a"):
            pass
        if calls[0] == 8:  # measured run 6 (after the warm-up run), its values already taken
            raise RuntimeError("boom")

    sink = RunSink()
    with pytest.raises(RuntimeError, match="boom"), pytest.warns(RuntimeWarning, match="flaky"):
        run_loop(plan(f, configs=1), HostSession(), sink)
    [held] = [item for item in sink._items if type(item) is RunBlock]
    assert len(held) == 5 and held.n_values.tolist() == [9] * 5 and len(held.values) == len(held.value_names) == 45
    runs = sink.runs
    assert [r.run for r in runs] == [0, 1, 2, 3, 4, 5]
    assert [len(r.collectors) for r in runs] == [9] * 6
    parts = RunParts.of(runs)
    assert parts.collectors.run == [r for r in range(6) for _ in range(9)]


def test_a_deferred_run_without_answers_to_convert_hands_its_values_list_back_as_it_is() -> None:
    # Why: materialize runs for every run of a GPU call; the nvml plugin's run (the guard's row and a RunValues)
    # has nothing to convert, and the list is copied into the run's tuple by every caller anyway (issue 35).
    from nsightx.ext import RunValues

    collectors = loop._Collectors(plan(work))
    shared = {"Temperature": 41}
    values: list[Any] = [("ThermalPauseS", "run", 0, 2, None, 0.0), RunValues(shared, "AgeMs", 0.25)]
    assert collectors.materialize(values) is values
    assert values == [("ThermalPauseS", "run", 0, 2, None, 0.0), RunValues(shared, "AgeMs", 0.25)]


def test_gather_run_keeps_run_values_and_turns_the_other_answers_and_a_failure_into_rows() -> None:
    # gather_run calls each collector itself (no _call frame a run): the same answers and rows as _call gives.
    from nsightx.ext import RunValues

    collectors = loop._Collectors(plan(work))
    with pytest.warns(RuntimeWarning, match="'flaky' \\(run scope\\) raised RuntimeError: no reading"):
        gathered = collectors.gather_run(1, 3, 123, [("ThermalPauseS", "run", 1, 3, None, 0.0)])
    assert gathered[0] == ("ThermalPauseS", "run", 1, 3, None, 0.0)
    assert type(gathered[1]) is RunValues
    rows = collectors.materialize(gathered)
    assert rows[0] == ("ThermalPauseS", "run", 1, 3, None, 0.0)
    assert rows[2:] == [
        ("SM", "run", 1, 3, None, 1983),
        ("Power", "run", 1, 3, None, 0.5),
        ("flaky", "run", 1, 3, None, None),
    ]
