"""The host session's plain runs go straight into a run block's columns, and read back as the same runs.

Issue 35 (the run loop at 3 us a run beside an empty region): a tuple row per run, the session's output and its
record row cost a third of such a run, and reading them back into columns most of the rest of the call. These tests
check, on the real host backend and run loop, that such runs now go into a
:class:`~nsightx._results.runblock.RunBlock` (no session call per run), that they read back as the runs the loop
stored before, column for column and as objects, and that a run that raises loses no earlier run; the time it
saves is measured by ``benchmarks/run_loop_cost.py``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from nsightx_host import METRIC, HostSession

import nsightx
from nsightx._results.rowparts import parts_from_rows
from nsightx._results.rows import runs_from_rows
from nsightx._results.sink import RunSink
from nsightx._results.store import RunParts
from nsightx._run import loop
from nsightx._run.loop import run_loop
from nsightx._run.plan import Plan

SILENT = nsightx.VerbosityLevel.SILENT


@pytest.fixture(autouse=True)
def blocks_from_one_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every config here opens a block, whatever its run count (the loop's default minimum is 128 runs)."""
    monkeypatch.setattr(loop, "BLOCK_MIN_RUNS", 1)


def plan(function: object, runs: int, configs: int = 1) -> Plan:
    """A plan on the host backend, without collectors (every measured run after the first is a plain one)."""
    return Plan(
        function=function,  # type: ignore[arg-type]
        function_name="f",
        params=("i",),
        configs=tuple((i,) for i in range(configs)),
        runs=runs,
        warmup=1,
        metrics=(METRIC,),
        backend="host",
        needs_gpu=False,
    )


class CountingHost(HostSession):
    """The host session, counting the calls a run makes of it."""

    def __init__(self) -> None:
        super().__init__()
        self.timed = self.finished = 0

    def region_timed(self, name: str, config: int, run: int, ns: int, failed: bool) -> None:
        self.timed += 1
        super().region_timed(name, config, run, ns, failed)

    def finish_run(self, config: int, run: int) -> Any:
        self.finished += 1
        return super().finish_run(config, run)


def regions(i: int) -> None:
    """Two regions, the second swallowing a failure on every third call of config 1."""
    with nsightx.annotate("a"):
        pass
    with nsightx.annotate("b", ignore_failures=True):
        if i == 1 and regions.calls % 3 == 0:  # type: ignore[attr-defined]
            raise ValueError("swallowed")
    regions.calls += 1  # type: ignore[attr-defined]


def _columns(obj: Any) -> dict[str, Any]:
    """Every field of a columns dataclass as plain data (a Text as its strings, names and codes, with dtypes)."""
    out: dict[str, Any] = {}
    for name, value in vars(obj).items():
        if hasattr(value, "codes"):
            out[name] = (value.strings(), list(value.names), str(value.codes.dtype), value.codes.tolist())
        elif isinstance(value, np.ndarray):
            out[name] = (str(value.dtype), value.tolist())
        else:
            out[name] = value
    return out


def test_plain_host_runs_call_the_session_for_no_run_but_the_first_and_read_back_as_before() -> None:
    regions.calls = 0  # type: ignore[attr-defined]
    session, sink = CountingHost(), RunSink()
    run_loop(plan(regions, runs=30, configs=2), session, sink)
    # per config: the warm-up run and run 0 go through the session, runs 1.. into a block
    assert (session.finished, session.timed) == (4, 8)
    stored = sink.stored()
    assert len(stored) == 60 and stored.measured() == 60 and sink.measured == 60
    got, want = stored.parts(), RunParts.of(runs_from_rows(list(stored._items)))
    for part in ("runs", "records", "regions", "collectors"):
        assert _columns(getattr(got, part)) == _columns(getattr(want, part)), part
    runs = sink.runs
    assert [(r.config, r.run) for r in runs] == [(c, r) for c in range(2) for r in range(30)]
    for run in runs:
        assert [g.annotation for g in run.regions] == ["a", "b"]
        live = [g for g in run.regions if not g.failed]  # a failed region has no record (docs/api.md)
        assert [(x.annotation, x.config, x.run, x.kernel, x.metric, x.unit, x.seq) for x in run.records] == [
            (g.annotation, run.config, run.run, "region", METRIC, "ns", 0) for g in live
        ]
        assert [x.value for x in run.records] == [float(g.host_ns) for g in live]
    failed = [(r.config, r.run) for r in runs if r.regions[1].failed]
    assert failed and all(c == 1 for c, _ in failed)


def test_a_call_on_a_block_gives_the_frame_a_call_writing_its_runs_line_by_line_gives(tmp_path: Path) -> None:
    def f(n: int) -> None:
        with nsightx.annotate("a"):
            pass

    def call(**kwargs: Any) -> Any:
        decorated = nsightx.analyze.kernel(configs=[(1,), (2,)], runs=40, backend="host", verbosity=SILENT, **kwargs)
        return decorated(f)()

    in_memory, on_file = call(), call(output_prefix=str(tmp_path / "out-"))
    a, b = in_memory.to_dataframe(), on_file.to_dataframe()
    assert list(a.columns) == list(b.columns) and len(a) == 2
    timed = ("Value", "StdDev", "CI95", "Geomean")  # the times of two calls differ, nothing else
    same = [c for c in a.columns if not any(t in c for t in timed)]
    assert "NumRuns" in same and "Annotation" in same
    assert a[same].astype(str).equals(b[same].astype(str))
    assert a["NumRuns"].tolist() == [40, 40] and len(in_memory.data.runs) == len(on_file.data.runs) == 80


def test_a_run_that_raises_keeps_every_earlier_run_and_none_of_its_own_regions() -> None:
    calls = [0]

    def f(i: int) -> None:
        calls[0] += 1
        with nsightx.annotate("a"):
            pass
        if calls[0] == 7:  # measured run 5 (after the warm-up run)
            with nsightx.annotate("b"):
                pass
            raise RuntimeError("boom")

    sink = RunSink()
    with pytest.raises(RuntimeError, match="boom"):
        run_loop(plan(f, runs=20), HostSession(), sink)
    runs = sink.runs
    assert [r.run for r in runs] == [0, 1, 2, 3, 4]
    assert all([g.annotation for g in r.regions] == ["a"] for r in runs)
    assert parts_from_rows(runs).regions.n == 5


def test_a_sink_with_a_file_or_an_unchecked_first_run_opens_no_block(tmp_path: Path) -> None:
    assert RunSink(tmp_path / "raw.jsonl").open_block(0, 1, ("region", METRIC, "ns")) is None
    assert RunSink(on_first=lambda run: None).open_block(0, 1, None) is None
    block = RunSink().open_block(0, 1, None)
    assert block is not None and len(block) == 0 and block.rows() == []


def test_a_config_of_fewer_runs_than_the_minimum_opens_no_block(monkeypatch: pytest.MonkeyPatch) -> None:
    """Below ``BLOCK_MIN_RUNS`` a config's runs are handed over one by one (a block costs more than it saves)."""
    monkeypatch.setattr(loop, "BLOCK_MIN_RUNS", 128)
    regions.calls = 0  # type: ignore[attr-defined]
    session, sink = CountingHost(), RunSink()
    run_loop(plan(regions, runs=127, configs=2), session, sink)
    assert session.finished == 2 * 128  # every run, warm-ups included, went through the session
    session, sink = CountingHost(), RunSink()
    run_loop(plan(regions, runs=129, configs=1), session, sink)
    assert session.finished < 129
