"""A sweep spread over workers against the same sweep in one process, on every engine, with the real host backend.

The reference is the call without ``executor=``/``parallel_devices=`` (docs/cluster.md: the spread result is "built
by the same code as a one-process call"; a ``ThreadPoolExecutor`` gives "the result a call without ``executor=``
gives, with ``Device`` and ``Host`` filled"). The workload is deterministic (``par_workload.regions``: which
regions a config opens depends on its value) and its collectors of every scope answer with the config index, run
and region they were asked for (``CollectContext``, docs/api.md "Collectors"). Host times are not predictable:
only what does not depend on them is compared, exactly: the frames' rows, parameters, ``NumRuns``, kernels, units,
collector columns; ``runs_dataframe()``'s (config, run, region) rows and collector cells; the environment's keys
(the spread adds ``executor``, ``Devices``, ``Hosts``, ``retried_configs``, ``failed_configs``); the raw file's
measured-run lines (the spread writes them as tasks come back: compared as a set); and ``save``/``load`` in both
formats.

Not compared: how many ONCE lines the raw file holds (one per call in one process; when spread, one per task that
came back before every task of a lower index, docs/cluster.md), only that each holds the ONCE collector's value.
Which task's ONCE values the spread result shows (the lowest config index's) is checked with a ONCE collector
whose value differs from task to task (``par_workload.TOKEN_COLLECTORS``).

What this found (hunt20h): every task's collectors were told config 0 (``ctx.config``), the index of its config
in the task's one-config plan, not in the sweep; (fix20b) the spread result showed the ONCE values of whichever
task finished last.
"""

from __future__ import annotations

import concurrent.futures as cf
import json
import os
import subprocess
import warnings
from pathlib import Path
from typing import Any

import pandas as pd
import par_workload
import pytest

import nsightx

distributed = pytest.importorskip("distributed")

SILENT = nsightx.VerbosityLevel.SILENT
CONFIGS = [(1, "x"), (2, "y"), (3, "x"), (4, "z"), (5, "y")]
RUNS = 3
TIMED = {
    "Value",
    "AvgValue",
    "MedianValue",
    "StdDev",
    "MinValue",
    "MaxValue",
    "CI95_Lower",
    "CI95_Upper",
    "RelativeStdDevPct",
    "StableMeasurement",
    "Flags",
    "Geomean",
}
"""Columns that follow from the host times."""
SPREAD_ONLY = {"executor", "Devices", "Hosts", "retried_configs", "failed_configs"}
"""Environment keys a spread sweep adds (docs/cluster.md, "What the result holds")."""
ENGINES = ["processes", "threads", "parallel_devices", "dask"]


@pytest.fixture(scope="module")
def client():
    cluster = distributed.LocalCluster(
        n_workers=2, processes=True, threads_per_worker=1, dashboard_address=":0", silence_logs=40
    )
    with cluster, distributed.Client(cluster) as c:
        yield c


def _profiled(
    folder: Path, function: Any = par_workload.regions, collectors: Any = None, **options: Any
) -> nsightx.ProfiledFunction:
    return nsightx.analyze.kernel(
        runs=RUNS,
        warmup=1,
        backend="host",
        verbosity=SILENT,
        output_prefix=f"{folder}/",
        info_collectors=par_workload.INDEXED_COLLECTORS if collectors is None else collectors,
        **options,
    )(function)


def _spread(
    engine: str, folder: Path, client: Any, function: Any = par_workload.regions, collectors: Any = None
) -> Any:
    """The sweep on ``engine``: its result, or the ``SweepError`` it raised."""
    try:
        if engine == "parallel_devices":
            return _profiled(folder, function, collectors, parallel_devices=[0, 1])(configs=CONFIGS)
        if engine == "dask":
            return _profiled(folder, function, collectors)(configs=CONFIGS, executor=client)
        pool = cf.ProcessPoolExecutor(2) if engine == "processes" else cf.ThreadPoolExecutor(2)
        with pool, warnings.catch_warnings():
            warnings.simplefilter("ignore", nsightx.ConcurrentCallWarning)  # the thread pool's, documented
            return _profiled(folder, function, collectors)(configs=CONFIGS, executor=pool)
    except nsightx.SweepError as e:
        return e


def _untimed(df: pd.DataFrame) -> pd.DataFrame:
    return df.drop(columns=[c for c in df.columns if c in TIMED or c == "Device"]).reset_index(drop=True)


def _run_lines(raw: str) -> tuple[dict[str, Any], list[str], list[str]]:
    """The raw file's header plan, its ONCE lines and its measured-run lines (times and sweep id left out)."""
    lines = [json.loads(line) for line in Path(raw).read_text().splitlines()]
    once, measured = [], []
    for line in lines[1:]:
        del line["sweep"]
        for record in line["records"]:
            del record["value"]
        for region in line["regions"]:
            del region["host_ns"]
        (once if line["config"] < 0 else measured).append(json.dumps(line, sort_keys=True))
    return lines[0]["plan"], once, sorted(measured)


def _expected_collectors(runs: pd.DataFrame, function: str = "regions") -> None:
    """The collector cells say the sweep's config index, run and region (docs/api.md, ``CollectContext``)."""
    for row in runs.itertuples():
        assert row.c_once == f"once {function}"
        assert row.c_config == f"config {row.Config} args {CONFIGS[row.Config]!r}", row
        assert row.c_run == row.Config * 100 + row.Run, row
        assert row.c_annotation == f"{row.Annotation} of config {row.Config} run {row.Run}", row


def _same(result: nsightx.ProfileResults, reference: nsightx.ProfileResults) -> None:
    pd.testing.assert_frame_equal(_untimed(result.to_dataframe()), _untimed(reference.to_dataframe()))
    pd.testing.assert_frame_equal(_untimed(result.runs_dataframe()), _untimed(reference.runs_dataframe()))


@pytest.mark.parametrize("engine", ENGINES)
def test_a_spread_sweep_holds_what_the_same_sweep_in_one_process_holds(engine, client, tmp_path):
    reference = _profiled(tmp_path / "one")(configs=CONFIGS)
    _expected_collectors(reference.runs_dataframe())
    result = _spread(engine, tmp_path / engine, client)
    assert isinstance(result, nsightx.ProfileResults), result
    _same(result, reference)
    env = result.environment
    # GitCommit is the caller's, as in one process (docs/cluster.md): the same on both sides, or absent from both
    assert set(env) == set(reference.environment) | SPREAD_ONLY
    assert env.get("GitCommit") == reference.environment.get("GitCommit")
    assert env["failed_configs"] == "" and env["retried_configs"] == ""
    assert result.to_dataframe()["Device"].notna().all()
    # the raw file: the same plan and measured runs; every ONCE line holds the ONCE value
    plan, once, measured = _run_lines(env["raw_data"])
    ref_plan, ref_once, ref_measured = _run_lines(reference.environment["raw_data"])
    assert plan == ref_plan and measured == ref_measured
    assert len(ref_once) == 1 and once and set(once) == set(ref_once)
    for loaded in (
        nsightx.load(env["raw_data"]),
        nsightx.load(result.save(tmp_path / "s.parquet")),
        nsightx.load(result.save(tmp_path / "s.json")),
    ):
        _same(loaded, reference)


@pytest.mark.parametrize("engine", ["processes", "dask"])
def test_collectors_of_a_task_are_told_the_configs_index_in_the_sweep(engine, client, tmp_path):
    """Regression (hunt20h): each task's collectors were told config 0, its index in the task's own plan."""
    result = _spread(engine, tmp_path, client)
    assert isinstance(result, nsightx.ProfileResults), result
    _expected_collectors(result.runs_dataframe())
    frame = result.to_dataframe()
    assert frame["c_config"].tolist() == [
        f"config {CONFIGS.index((n, t))} args {(n, t)!r}" for n, t in zip(frame["n"], frame["tag"], strict=True)
    ]


@pytest.mark.parametrize("engine", ["processes", "threads", "dask"])  # parallel_devices: test_parallel.py
def test_a_config_that_raises_halfway_leaves_the_others_whole_and_says_so(engine, client, tmp_path):
    """docs/cluster.md: a config that fails does not stop the others; ``SweepError`` names it, ``.results`` and
    the raw file hold every other config whole, ``failed_configs`` lists it. Config 3 (index 2) raises on its
    second call, after a measured run: that config is reported failed as a whole (the docs' unit is the config).
    """
    error = _spread(engine, tmp_path, client, par_workload.raises_on_second_call)
    assert isinstance(error, nsightx.SweepError), error
    assert list(error.failed) == [2] and "config 2 (3, 'x') failed" in str(error)
    assert "1 of 5 config(s) failed, 4 were measured" in str(error)
    kept = [c for i, c in enumerate(CONFIGS) if i != 2]
    partial = error.results
    assert partial is not None and partial.environment["failed_configs"] == "2"
    with pytest.warns(nsightx.IncompleteResultWarning, match="holds 12 of 15 planned runs"):
        loaded = nsightx.load(partial.environment["raw_data"])
    for result in (partial, loaded):
        frame = result.to_dataframe()
        assert sorted(set(zip(frame["n"], frame["tag"], strict=True))) == kept
        assert set(frame["NumRuns"]) == {RUNS}
        runs = result.runs_dataframe()
        assert sorted(set(runs["Config"])) == [0, 1, 3, 4]
        _expected_collectors(runs, "raises_on_second_call")


@pytest.mark.parametrize("engine", ["processes", "parallel_devices", "dask"])  # threads: one process, tokens race
def test_the_once_values_of_a_spread_sweep_are_those_of_its_lowest_config(engine, client, tmp_path):
    """Regression (fix20b): each task runs the ONCE collectors; the result showed the values of the task that
    finished last. docs/cluster.md: they are the lowest config index's (as the plan and environment are), in the
    frame, ``runs_dataframe()``, the saves and the raw file read back. Each task's ONCE token differs and every
    config's ``task_token`` names its own task's, so this holds whatever order the tasks finished in."""
    result = _spread(engine, tmp_path, client, collectors=par_workload.TOKEN_COLLECTORS)
    assert isinstance(result, nsightx.ProfileResults), result
    runs = result.runs_dataframe()
    tokens = dict(zip(runs["Config"], runs["task_token"], strict=True))
    assert len(set(tokens.values())) == len(CONFIGS)  # one task per config, each with its own ONCE token
    raw = result.environment["raw_data"]
    _, once, _ = _run_lines(raw)
    assert tokens[0] in once[-1]  # the raw file's last ONCE line is config 0's task's
    for shown in (
        result,
        nsightx.load(raw),
        nsightx.load(result.save(tmp_path / "s.parquet")),
        nsightx.load(result.save(tmp_path / "s.json")),
    ):
        assert set(shown.to_dataframe()["once_token"]) == {tokens[0]}
        assert set(shown.runs_dataframe()["once_token"]) == {tokens[0]}


def _repo(folder: Path, message: str) -> str:
    """A new git work tree at ``folder`` with one commit; its commit id."""
    folder.mkdir()
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false", "-C", str(folder)]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", message], check=True)
    return subprocess.run([*git, "rev-parse", "HEAD"], check=True, capture_output=True, text=True).stdout.strip()


@pytest.mark.parametrize("caller_in_git", [True, False], ids=["caller-commit", "caller-no-git"])
def test_a_spread_sweep_records_the_callers_commit_not_its_workers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caller_in_git: bool
) -> None:
    """Regression (files21): ``GitCommit`` was the commit of the lowest config's worker's current folder.

    The workers of a local process pool start in another work tree than the caller's folder (as a pool made
    elsewhere, or a Dask worker, does): the result must say the caller's commit, or none when the caller's folder
    is not in a git work tree, as the same call in one process does.
    """
    worker_commit = _repo(tmp_path / "workers", "the workers' tree")
    if caller_in_git:
        caller_commit = _repo(tmp_path / "caller", "the caller's tree")
    else:
        (tmp_path / "caller").mkdir()
        caller_commit = None
    monkeypatch.chdir(tmp_path / "caller")
    reference = _profiled(tmp_path / "one")(configs=CONFIGS[:2])
    with cf.ProcessPoolExecutor(2, initializer=os.chdir, initargs=(str(tmp_path / "workers"),)) as pool:
        assert pool.submit(os.getcwd).result() == str(tmp_path / "workers")
        result = _profiled(tmp_path / "spread")(configs=CONFIGS[:2], executor=pool)
    assert reference.environment.get("GitCommit") == caller_commit
    assert result.environment.get("GitCommit") == caller_commit != worker_commit
    back = nsightx.load(result.save(tmp_path / "s.json"))
    assert back.environment.get("GitCommit") == caller_commit
