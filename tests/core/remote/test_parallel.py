"""parallel_devices: the pool logic with the real host backend (one spawned worker per listed id)."""

from __future__ import annotations

import par_workload
import pytest

import nsightx
from nsightx import MeasurementError

SILENT = nsightx.VerbosityLevel.SILENT


def test_configs_spread_over_workers_and_merged(tmp_path):
    configs = [1, 2, 3, 4, 5, 6]
    profiled = nsightx.analyze.kernel(
        configs=configs,
        runs=3,
        backend="host",
        parallel_devices=[0, 1],
        verbosity=SILENT,
        output_prefix=str(tmp_path) + "/",
    )(par_workload.sleepy)
    res = profiled()
    df = res.to_dataframe()
    sleep = df[df["Annotation"] == "sleep"]
    assert sleep["n"].tolist() == configs and sleep["NumRuns"].tolist() == [3] * 6
    assert set(df["Device"]) == {"0:cpu", "1:cpu"}  # both workers took work
    # each config measured on one device only; its time grows with n, so configs were not mixed up
    means = sleep["AvgValue"].tolist()
    assert means == sorted(means)
    runs = res.runs_dataframe()
    assert set(runs.groupby("n")["Device"].nunique()) == {1}
    # the workers write no file: the caller's raw file and its one result are all there is
    files = sorted(p.name for p in tmp_path.iterdir())
    assert files == ["raw_data-sleepy-0.jsonl", "result-sleepy-0.parquet"]
    # the parent's raw file, written config by config, reads back with every config and its parameter value
    raw = nsightx.load(tmp_path / "raw_data-sleepy-0.jsonl").to_dataframe()
    assert raw[raw["Annotation"] == "sleep"]["n"].tolist() == configs
    assert raw.groupby("Annotation")["NumRuns"].sum().tolist() == [18, 18]
    assert nsightx.load(tmp_path / "result-sleepy-0.parquet").to_dataframe()["Device"].tolist() == df["Device"].tolist()


def test_failing_config_names_config_and_device():
    profiled = nsightx.analyze.kernel(
        configs=[1, 2, 3, 4], runs=1, backend="host", parallel_devices=[0, 1], verbosity=SILENT
    )(par_workload.failing)
    with pytest.raises(MeasurementError, match=r"config 2 \(3,\) failed on device [01]:cpu.*broke in worker"):
        profiled()


def test_all_needs_gpu_backend_on_cpu():
    profiled = nsightx.analyze.kernel(configs=[1], runs=1, backend="host", parallel_devices="all", verbosity=SILENT)(
        par_workload.sleepy
    )
    with pytest.raises(nsightx.ConfigError, match="needs a GPU backend"):
        profiled()


def test_a_dead_worker_fails_its_config_only_and_is_replaced():
    profiled = nsightx.analyze.kernel(
        configs=[1, 2, 3, 4], runs=1, backend="host", parallel_devices=[0, 1], verbosity=SILENT
    )(par_workload.dies)
    died = r"config 1 \(2,\) failed on device [01]:cpu: .*worker process died"
    with pytest.raises(nsightx.SweepError, match=died) as e:
        profiled()
    assert list(e.value.failed) == [1]
    measured = e.value.results.to_dataframe()
    assert measured["n"].tolist() == [1, 3, 4]
    assert e.value.results.environment["failed_configs"] == "1"
