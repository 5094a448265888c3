"""Spread sweeps when things are unusual or go wrong, against the same sweep in one process (host backend).

The reference is the call without ``executor=`` (docs/cluster.md: the spread result is "built by the same code as
a one-process call"; "a config that fails does not stop the others"). Host times are not predictable, so only what
does not depend on them is compared, as in ``test_sweep_reference.py``.

What this found (hunt22e): every task checked its own first run as if it were the sweep's first, so a later config
that opens no region (measured, with no values, in one process) failed with "nothing was measured ... config 0",
naming the wrong index, and a later config without the ``normalize_against`` baseline failed with advice to name
another annotation, where one process builds the result and ``to_dataframe()`` says that config lacks the baseline.
Now only config 0's task makes the checks that depend on which regions its run opened.

Also checked here, found right: duplicate and unordered configs, one config, more workers than configs, a config
that fails in its own task only, and the raw file and saves of such sweeps read back.
"""

from __future__ import annotations

import concurrent.futures as cf
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pandas as pd
import par_workload
import pytest
import test_sweep_reference
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import nsightx

distributed = pytest.importorskip("distributed")

SILENT = nsightx.VerbosityLevel.SILENT
TIMED = test_sweep_reference.TIMED | {"NormalizationValue", "Device", "Host"}
"""Columns that follow from the host times, or name where a config was measured."""


@pytest.fixture(scope="module")
def engines():
    """A process pool and a Dask cluster of this process's threads (both real engines), shared by the tests."""
    cluster = distributed.LocalCluster(
        n_workers=2, processes=False, threads_per_worker=1, dashboard_address=":0", silence_logs=40
    )
    with cf.ProcessPoolExecutor(3) as pool, cluster, distributed.Client(cluster) as client:
        yield {"processes": pool, "dask": client}


def _profiled(folder: Path, function: Any, **options: Any) -> nsightx.ProfiledFunction:
    return nsightx.analyze.kernel(
        runs=2,
        warmup=0,
        backend="host",
        verbosity=SILENT,
        output_prefix=f"{folder}/",
        info_collectors=par_workload.INDEXED_COLLECTORS,
        **options,
    )(function)


def _untimed(df: pd.DataFrame) -> pd.DataFrame:
    return df.drop(columns=[c for c in df.columns if c in TIMED]).reset_index(drop=True)


def _same(result: nsightx.ProfileResults, reference: nsightx.ProfileResults) -> None:
    pd.testing.assert_frame_equal(_untimed(result.to_dataframe()), _untimed(reference.to_dataframe()))
    pd.testing.assert_frame_equal(_untimed(result.runs_dataframe()), _untimed(reference.runs_dataframe()))


@pytest.mark.parametrize("engine", ["processes", "dask"])
def test_a_later_config_that_opens_no_region_is_measured_as_in_one_process(engine, engines, tmp_path):
    """Regression (hunt22e): config 1 (even ``n``) opens no region; its task failed with AnnotationError."""
    configs = [(1, "x"), (2, "y"), (3, "z"), (4, "w")]
    profiled = _profiled(tmp_path, par_workload.no_region_for_even)
    reference = profiled(configs=configs)
    result = profiled(configs=configs, executor=engines[engine])
    assert isinstance(result, nsightx.ProfileResults)
    assert result.environment["failed_configs"] == ""
    _same(result, reference)
    assert sorted(set(result.to_dataframe()["n"])) == [1, 3]
    _same(nsightx.load(result.save(tmp_path / "s.json")), reference)


@pytest.mark.parametrize("engine", ["processes", "dask"])
def test_a_later_config_without_the_baseline_is_reported_as_in_one_process(engine, engines, tmp_path):
    """Regression (hunt22e): config 1 lacks the ``normalize_against`` annotation; its task failed saying that
    ``base`` was no annotation of the function. One process measures every config, and the frame names the config.
    """
    configs = [(1, "x"), (2, "y"), (3, "z")]
    profiled = _profiled(tmp_path, par_workload.baseline_but_for_2, normalize_against="base")
    reference = profiled(configs=configs)
    result = profiled(configs=configs, executor=engines[engine])
    assert result.environment["failed_configs"] == ""
    message = "no baseline value for config 1 / host__time_duration.sum"
    for shown in (reference, result):
        with pytest.raises(nsightx.ConfigError, match=message):
            shown.to_dataframe()
    pd.testing.assert_frame_equal(_untimed(result.runs_dataframe()), _untimed(reference.runs_dataframe()))


@pytest.mark.parametrize("engine", ["processes", "dask"])
def test_a_first_config_that_opens_no_region_fails_alone_naming_config_0(engine, engines, tmp_path):
    """Config 0 is the sweep's first run: as in one process it is refused (AnnotationError, naming config 0);
    spread, the others are still measured (docs/cluster.md) and the raw file holds exactly them."""
    configs = [(2, "y"), (1, "x"), (3, "z")]
    profiled = _profiled(tmp_path, par_workload.no_region_for_even)
    with pytest.raises(nsightx.AnnotationError, match=r"config 0 \(2, 'y'\)"):
        profiled(configs=configs)
    with pytest.raises(nsightx.SweepError) as caught:
        profiled(configs=configs, executor=engines[engine])
    error = caught.value
    assert list(error.failed) == [0] and "AnnotationError" in error.failed[0] and "config 0 (2, 'y')" in str(error)
    partial = error.results
    assert partial is not None and partial.environment["failed_configs"] == "0"
    assert sorted(partial.to_dataframe()["n"]) == [1, 3]
    with pytest.warns(nsightx.IncompleteResultWarning):
        loaded = nsightx.load(partial.environment["raw_data"])
    _same(loaded, partial)


CONFIG_POOL = [(1, "x"), (2, "y"), (3, "x"), (4, "z")]


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    picks=st.lists(st.sampled_from(CONFIG_POOL), min_size=1, max_size=5), engine=st.sampled_from(["processes", "dask"])
)
def test_duplicate_unordered_or_few_configs_give_the_one_process_result(picks, engine, engines, tmp_path_factory):
    """Random config lists (duplicates, any order, one config, fewer configs than workers) on both engines."""
    folder = tmp_path_factory.mktemp("sweep")
    profiled = _profiled(folder, par_workload.regions)
    reference = profiled(configs=picks)
    result = profiled(configs=picks, executor=engines[engine])
    _same(result, reference)
    runs = result.runs_dataframe()
    assert sorted(set(runs["Config"])) == list(range(len(picks)))
    for row in runs.itertuples():
        assert row.c_config == f"config {row.Config} args {picks[row.Config]!r}"
    _same(nsightx.load(result.environment["raw_data"]), reference)
    _same(nsightx.load(result.save(folder / "s.parquet")), reference)


def test_a_sweep_whose_every_config_fails_says_none_was_measured(engines, tmp_path):
    """docs/cluster.md: ``.results`` is ``None`` when no config was measured; the message said it held them. No raw
    file is left (open24: the name reserved for it was left as an empty file, which ``nsightx.load`` refuses)."""
    profiled = _profiled(tmp_path, par_workload.failing)
    with pytest.raises(nsightx.SweepError) as caught:
        profiled(configs=[(3,), (3,)], executor=engines["processes"])
    error = caught.value
    assert error.results is None and sorted(error.failed) == [0, 1]
    assert "2 of 2 config(s) failed, 0 were measured (the exception's .results is None)" in str(error)
    assert list(tmp_path.iterdir()) == []


_KILLED_CALLER = """
import concurrent.futures as cf, sys
import nsightx, par_workload
if __name__ == "__main__":
    profiled = nsightx.analyze.kernel(runs=2, warmup=0, backend="host", verbosity=nsightx.VerbosityLevel.SILENT,
        output_prefix=sys.argv[1] + "/", info_collectors=par_workload.INDEXED_COLLECTORS)(par_workload.blocks_on_4)
    with cf.ProcessPoolExecutor(2) as pool:
        profiled(configs=[(1, "x"), (4, "w"), (2, "y"), (3, "z")], executor=pool)
"""
KILLED_CONFIGS = [(1, "x"), (4, "w"), (2, "y"), (3, "z")]


def test_the_raw_file_of_a_spread_sweep_killed_halfway_loads_exactly_the_configs_that_came_back(tmp_path):
    """docs/cluster.md: the caller writes each config's runs as its task comes back, so a sweep that stops keeps
    every config that came back. The caller (and its pool) is killed with SIGKILL while config 1 never ends: the
    raw file loads exactly configs 0, 2 and 3, as the same configs measured in one process."""
    script = tmp_path / "caller.py"
    script.write_text(_KILLED_CALLER)
    out = tmp_path / "out"
    out.mkdir()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(par_workload.__file__).parent), *sys.path])}
    caller = subprocess.Popen([sys.executable, str(script), str(out)], env=env, start_new_session=True)
    raw = out / "raw_data-blocks_on_4-0.jsonl"
    try:
        deadline = time.monotonic() + 120  # generous: a loaded 2-core machine; the loop ends as soon as it is there
        while time.monotonic() < deadline and caller.poll() is None:
            if raw.exists() and sum(1 for line in raw.read_text().splitlines() if '"config": -1' not in line) > 6:
                break  # the header and 3 configs x 2 runs (ONCE lines aside)
            time.sleep(0.1)
        assert caller.poll() is None, "the caller ended before it was killed"
    finally:
        os.killpg(caller.pid, signal.SIGKILL)
        caller.wait()
    with pytest.warns(nsightx.IncompleteResultWarning, match="holds 6 of 8 planned runs"):
        loaded = nsightx.load(raw)
    reference = _profiled(tmp_path / "one", par_workload.regions)(configs=[(1, "x"), (2, "y"), (3, "z")])
    frame = _untimed(loaded.to_dataframe())
    assert sorted(set(zip(frame["n"], frame["tag"], strict=True))) == [(1, "x"), (2, "y"), (3, "z")]
    collectors = [c for c in frame.columns if c.startswith("c_")]  # they say the function and sweep index
    want = _untimed(reference.to_dataframe()).drop(columns=collectors)
    pd.testing.assert_frame_equal(frame.drop(columns=collectors), want)
    assert set(frame["c_once"]) == {"once blocks_on_4"}
    runs = loaded.runs_dataframe()
    assert sorted(set(runs["Config"])) == [0, 2, 3]
    for row in runs.itertuples():
        assert row.c_config == f"config {row.Config} args {KILLED_CONFIGS[row.Config]!r}", row
        assert row.c_run == row.Config * 100 + row.Run, row
