"""Issue 39: a sweep's workers send back only their runs; the caller's sink takes them and builds the result once.

Real host backend, a real local pool (``parallel_devices``), a real ``ThreadPoolExecutor`` and a real Dask
``LocalCluster``. What a task returns is checked on the engine itself (``run_task`` submitted as a sweep submits
it): its runs, numbered as their config, and no result. The sweep's result must equal the result the one builder
makes from the caller's raw file, which holds every run.
"""

from __future__ import annotations

import concurrent.futures as cf
import functools
import pickle
from pathlib import Path

import pandas as pd
import par_workload
import pytest

import nsightx
from nsightx._api.kernel import ProfiledFunction
from nsightx._api.sweep import SweepCall, _payloads
from nsightx._remote.localpool import DevicePool, Target
from nsightx._remote.task import TaskOutput, run_task
from nsightx._remote.taskruns import runs_of_payload
from nsightx._results.rows import runs_from_rows

SILENT = nsightx.VerbosityLevel.SILENT
CONFIGS = [1, 2, 3, 4]
RUNS = 3


def _profiled(tmp_path: Path, **options: object) -> nsightx.ProfiledFunction:
    return nsightx.analyze.kernel(
        configs=CONFIGS, runs=RUNS, backend="host", verbosity=SILENT, output_prefix=f"{tmp_path}/", **options
    )(par_workload.sleepy)


def _task(submit, tmp_path: Path, index: int) -> TaskOutput:
    """Run config ``index``'s task on an engine as a sweep does, and return what came back."""
    profiled = _profiled(tmp_path)
    spec = profiled.spec
    call = SweepCall(profiled.name, profiled.fn, profiled.shape.names, spec, "host", False)
    configs = tuple((n,) for n in CONFIGS)
    head, blobs = _payloads(call, configs, functools.partial(ProfiledFunction, profiled.fn, configs=None))
    out = submit(run_task, head, blobs[index], index, False)
    assert isinstance(out, TaskOutput)
    return out


def _check_task_output(out: TaskOutput, index: int, tmp_path: Path) -> None:
    """Only runs came back, numbered as config ``index``, and the worker wrote nothing."""
    runs = runs_from_rows(runs_of_payload(out.runs))  # type: ignore[arg-type]
    measured = [r for r in runs if r.config >= 0]
    assert [r.run for r in measured] == list(range(RUNS))
    assert {r.config for r in measured} == {index}
    assert {rec.config for r in measured for rec in r.records} == {index}
    assert not hasattr(out, "text") and not hasattr(out, "results")
    # what travels is the runs and a small header of facts: far below a built result of the same runs
    sent = len(pickle.dumps(out))
    assert sent < len(out.runs) + 4000
    assert list(tmp_path.iterdir()) == []  # the worker wrote no raw file and no result


def _frames_equal_to_raw(result: nsightx.ProfileResults) -> None:
    """The sweep's frame equals the frame the one builder makes from the caller's raw file (every run in it)."""
    raw_path = result.environment["raw_data"]
    rebuilt = nsightx.load(raw_path)
    assert sorted((r.config, r.run) for r in rebuilt.data.runs if r.config >= 0) == [
        (c, r) for c in range(len(CONFIGS)) for r in range(RUNS)
    ]
    ours, theirs = result.to_dataframe(), rebuilt.to_dataframe()
    shared = [c for c in ours.columns if c in theirs.columns and c not in ("Device", "Host")]
    assert {"AvgValue", "MedianValue", "NumRuns", "n", "Annotation"} <= set(shared)
    pd.testing.assert_frame_equal(ours[shared].reset_index(drop=True), theirs[shared].reset_index(drop=True))
    ours_runs, theirs_runs = result.runs_dataframe(), rebuilt.runs_dataframe()
    shared = [c for c in ours_runs.columns if c in theirs_runs.columns and c not in ("Device", "Host")]
    pd.testing.assert_frame_equal(ours_runs[shared].reset_index(drop=True), theirs_runs[shared].reset_index(drop=True))


def test_a_local_pool_task_returns_runs_not_a_result(tmp_path):
    with DevicePool([Target("0:cpu", None)]) as pool:
        out = _task(lambda *a: pool.submit(*a).result(), tmp_path, 2)
    assert out.device == "0:cpu"
    _check_task_output(out, 2, tmp_path)


def test_parallel_devices_sweep_keeps_every_run_in_the_callers_raw_file(tmp_path):
    result = _profiled(tmp_path, parallel_devices=[0, 1])()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["raw_data-sleepy-0.jsonl", "result-sleepy-0.parquet"]
    _frames_equal_to_raw(result)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # ConcurrentCallWarning, when the two threads overlap
def test_a_thread_pool_sweep_builds_the_result_once_from_the_runs(tmp_path):
    # Whether the pool's two threads meet in the call (and warn) depends on scheduling: not what is tested here.
    with cf.ThreadPoolExecutor(2) as pool:
        result = _profiled(tmp_path)(executor=pool)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["raw_data-sleepy-0.jsonl", "result-sleepy-0.parquet"]
    _frames_equal_to_raw(result)


def test_dask_task_returns_runs_and_the_sweep_matches_its_raw_file(tmp_path):
    distributed = pytest.importorskip("distributed")
    with (
        distributed.LocalCluster(
            n_workers=2, processes=True, threads_per_worker=1, dashboard_address=":0", silence_logs=40
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        out = _task(lambda *a: client.submit(*a, pure=False).result(), tmp_path, 1)
        _check_task_output(out, 1, tmp_path)
        result = _profiled(tmp_path)(executor=client)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["raw_data-sleepy-0.jsonl", "result-sleepy-0.parquet"]
    _frames_equal_to_raw(result)


def test_task_runs_are_numbered_as_their_config_in_either_form():
    """Rows from the run loop and objects from a backend that writes objects both travel as config ``index``."""
    from nsightx._remote.taskruns import TaskRuns
    from nsightx._results.records import CollectorValue, Record, RegionRun, RunRecords

    seen = []
    sink = TaskRuns(5)
    sink.check = seen.append
    value = CollectorValue(name="c", scope="run", config=0, run=0, value=1)
    once = (-1, -1, (), (), {}, (CollectorValue(name="o", scope="once", value=2),))
    pause = ("ThermalPauseS", "run", 0, 0, None, 0.0)  # the run loop hands collector values as rows
    row = (0, 0, (("a", 0, 0, "region", "t", float("nan"), "ns", 0),), (("a", 10, False),), {}, (value, pause))
    sink.add_run(once)
    sink.add_run(row)
    sink.add_run(row)  # handed over again after an interrupt: stored once
    rec = Record(annotation="a", config=0, run=1, kernel="k", metric="t", value=float("inf"))
    sink.write(RunRecords(0, 1, records=(rec,), regions=(RegionRun("a", 0, 1, 10),), collectors=(value,)))
    runs = runs_from_rows(runs_of_payload(sink.payload()))  # type: ignore[arg-type]
    assert [(r.config, r.run) for r in runs] == [(-1, -1), (5, 0), (5, 1)]
    assert {x.config for r in runs[1:] for x in (*r.records, *r.regions, *r.collectors)} == {5}
    assert runs[0].collectors[0].config is None
    assert runs[1].collectors[1] == CollectorValue("ThermalPauseS", "run", 5, 0, None, 0.0)
    assert str(runs[1].records[0].value) == "nan" and runs[2].records[0].value == float("inf")  # exact
    assert [r.config for r in seen] == [0] and sink.measured == 2  # checked as the task's plan numbers it
