"""executor=: sweeps on a real Dask LocalCluster and a concurrent.futures pool, with the real host backend.

The workload's time is set by its config (n * 10 ms of sleep), so a config measured on a worker must read what
it reads in this process, and configs that got mixed up would be 10 ms apart.
"""

from __future__ import annotations

import concurrent.futures as cf
import os
import signal
import socket
import threading
import time

import par_workload
import pytest

import nsightx
from nsightx._remote.engines import DaskEngine
from nsightx._remote.travel import UnpicklableError

distributed = pytest.importorskip("distributed")

SILENT = nsightx.VerbosityLevel.SILENT
CONFIGS = [1, 2, 3, 4, 5, 6, 7, 8]
STEP_NS = 10e6
"""Each config sleeps n times this long in its region (``par_workload.timed``)."""


def _same_measurement(n: int, far: float, near: float) -> bool:
    """Whether a config's remote and local medians measure the same sleep, allowing for a loaded machine.

    A sleep never returns early, so both medians are at least n x 10 ms: a value from a smaller config fails.
    Beside other jobs on a 2-core runner a median of 3 sleeps has overshot by 6 ms; the two sides may differ by
    5 ms plus a fifth of the sleep.
    """
    expected = n * STEP_NS
    return far >= expected and near >= expected and abs(far - near) < 5e6 + 0.2 * expected


def _cluster() -> distributed.LocalCluster:
    return distributed.LocalCluster(
        n_workers=2, processes=True, threads_per_worker=1, dashboard_address=":0", silence_logs=40
    )


@pytest.fixture(scope="module")
def client():
    with _cluster() as cluster, distributed.Client(cluster) as c:
        yield c


def _medians(results: nsightx.ProfileResults) -> dict:
    df = results.to_dataframe()
    return dict(zip(df["n"], df["MedianValue"], strict=True))


def test_dask_sweep_matches_a_local_run(client, tmp_path):
    profiled = nsightx.analyze.kernel(runs=3, backend="host", verbosity=SILENT, output_prefix=f"{tmp_path}/")(
        par_workload.timed
    )
    remote = profiled(configs=CONFIGS, executor=client)
    local = profiled(configs=CONFIGS)
    far, near = _medians(remote), _medians(local)
    assert list(far) == CONFIGS
    for n in CONFIGS:
        assert _same_measurement(n, far[n], near[n]), (n, far[n], near[n])
    df = remote.to_dataframe()
    assert set(df["Device"]) == {"0:cpu", "1:cpu"}  # Dask worker names 0 and 1, both took work
    assert set(df["Host"]) == {socket.gethostname()}
    env = remote.environment
    assert env["executor"] == "distributed.Client" and env["retried_configs"] == "" and env["failed_configs"] == ""
    # the raw file written on the client as results arrived reads back with every config
    raw = nsightx.load(env["raw_data"]).to_dataframe()
    assert sorted(raw["n"]) == CONFIGS and set(raw["NumRuns"]) == {3}
    saved = nsightx.load(tmp_path / "result-timed-0.parquet").to_dataframe()
    assert saved["Device"].tolist() == df["Device"].tolist() and saved["Host"].tolist() == df["Host"].tolist()


def test_a_config_that_raises_is_retried_once_then_reported(client):
    profiled = nsightx.analyze.kernel(configs=[1, 2, 3, 4], runs=1, backend="host", verbosity=SILENT, executor=client)(
        par_workload.failing
    )
    failure = r"config 2 \(3,\) failed on device [01]:cpu of host .*broke in worker"
    with pytest.raises(nsightx.SweepError, match=failure) as e:
        profiled()
    assert list(e.value.failed) == [2]
    partial = e.value.results
    assert partial is not None
    assert sorted(partial.to_dataframe()["n"]) == [1, 2, 4]
    assert partial.environment["failed_configs"] == "2"
    assert partial.environment["retried_configs"] == "2"  # Dask ran it twice (retries=1) before giving up


def test_a_worker_killed_mid_sweep_costs_only_a_retry(tmp_path):
    configs = [(n, str(tmp_path)) for n in CONFIGS]
    profiled = nsightx.analyze.kernel(runs=2, backend="host", verbosity=SILENT, output_prefix=f"{tmp_path}/out/")(
        par_workload.hang_once
    )
    with _cluster() as cluster, distributed.Client(cluster) as c:
        pids = set(c.run(os.getpid).values())
        done: dict = {}
        sweep = threading.Thread(target=lambda: done.update(r=profiled(configs=configs, executor=c)))
        sweep.start()
        marker = tmp_path / "in-flight"
        deadline = time.monotonic() + 30
        while not marker.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        pid = int(marker.read_text())
        assert pid in pids  # config 3 is in flight, hanging, in that worker process
        os.kill(pid, signal.SIGKILL)
        sweep.join(60)
        assert not sweep.is_alive()
    results = done["r"]
    df = results.to_dataframe()
    assert df["n"].tolist() == CONFIGS and set(df["NumRuns"]) == {2}
    retried = results.environment["retried_configs"].split(",")
    assert "2" in retried and len(retried) <= 2  # config 3 (index 2), and at most the one queued behind it
    assert results.environment["failed_configs"] == ""
    raw = nsightx.load(results.environment["raw_data"]).to_dataframe()
    assert sorted(raw["n"]) == CONFIGS


def test_process_pool_executor(tmp_path):
    with cf.ProcessPoolExecutor(2) as pool:
        results = nsightx.analyze.kernel(configs=[1, 2, 3], runs=2, backend="host", verbosity=SILENT, executor=pool)(
            par_workload.timed
        )()
    df = results.to_dataframe()
    assert df["n"].tolist() == [1, 2, 3] and set(df["NumRuns"]) == {2}
    assert all(d.startswith("pid") and d.endswith(":cpu") for d in df["Device"])
    assert results.environment["executor"] == "concurrent.futures.process.ProcessPoolExecutor"
    medians = df["MedianValue"].tolist()
    assert medians == sorted(medians)


def test_an_unpicklable_closure_is_named_before_any_task():
    lock = threading.Lock()

    def work(n):
        with nsightx.annotate("a"), lock:
            pass

    with cf.ThreadPoolExecutor(1) as pool:
        profiled = nsightx.analyze.kernel(configs=[1], runs=1, backend="host", verbosity=SILENT)(work)
        with pytest.raises(UnpicklableError, match="cannot send work to the sweep's workers: closure variable `lock`"):
            profiled(executor=pool)


def test_executor_values_and_combinations_are_checked():
    with pytest.raises(nsightx.ConfigTypeError, match=r"executor must be a concurrent.futures.Executor .* got 'dask'"):
        nsightx.analyze.kernel(executor="dask")
    with cf.ThreadPoolExecutor(1) as pool:
        with pytest.raises(nsightx.ConfigError, match="give executor= or parallel_devices=, not both"):
            nsightx.analyze.kernel(executor=pool, parallel_devices=[0, 1])
        profiled = nsightx.analyze.kernel(configs=[1], backend="host", device=0)(par_workload.timed)
        with pytest.raises(nsightx.ConfigError, match="give executor= or device=, not both"):
            profiled(executor=pool)
    with pytest.raises(TypeError, match="executor must be"):
        profiled(executor=42)
    with pytest.raises(nsightx.ConfigError, match=r"Keyword arguments are not supported yet: \['runs'\]"):
        profiled(runs=3)


def test_a_gpu_sweep_needs_workers_with_a_gpu_resource(client):
    with pytest.raises(nsightx.ConfigError, match=r"none of the 2 worker.* offers a 'GPU' resource"):
        DaskEngine(client, needs_gpu=True, name="f")
    DaskEngine(client, needs_gpu=False, name="f")  # CPU backends ask for no resource


def test_a_named_backend_is_checked_by_the_workers_not_the_client():
    """A client without a GPU (a login node) may name a GPU backend; each worker checks it where it runs."""
    if _cupti_available():
        pytest.skip("cupti is available here: the workers would measure")
    with cf.ProcessPoolExecutor(1) as pool:
        profiled = nsightx.analyze.kernel(configs=[1, 2], runs=1, backend="cupti", verbosity=SILENT)(par_workload.timed)
        unavailable = r"config 0 \(1,\) failed .*backend 'cupti' is not available"
        with pytest.raises(nsightx.SweepError, match=unavailable) as e:
            profiled(executor=pool)
    assert sorted(e.value.failed) == [0, 1] and e.value.results is None
    with pytest.raises(nsightx.BackendUnavailableError, match="backend 'cupti' is not available"):
        profiled()  # in this process it is checked here, as before


def _cupti_available() -> bool:
    from nsightx._pluginhost.plugins import default_host

    host = default_host()
    host.load()
    return host.backend("cupti").availability().available
