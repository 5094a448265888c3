"""A spread sweep whose caller is stopped (Ctrl-C, SIGTERM) says what came back and where, and leaves no worker.

docs/reliability.md ("When a run fails"): the caller of a sweep spread over workers (``executor=``,
``parallel_devices``) prints one line on Ctrl-C or SIGTERM, how many configs came back and where their runs are
(the raw file, with ``output_prefix``), then ends as the signal ends it; a config still measuring in a worker is
ended with it. Before, the caller printed nothing, and after SIGTERM the pool's workers lived on, orphaned, until
their configs ended (after Ctrl-C the caller waited for them in the pool's shutdown).

The caller runs in a real subprocess; config ``n == 4`` reports through a FIFO that it runs and holds it open
while its worker lives (``par_workload.held_on_4``); the caller reports through its raw file that the other
three configs came back. Only then is it signalled: nothing here waits for a time to pass.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import par_workload
import pytest

import nsightx

_CALLER = """
import concurrent.futures as cf, sys
import nsightx, par_workload
if __name__ == "__main__":
    folder, engine, ns = sys.argv[1], sys.argv[2], sys.argv[3]
    options = dict(runs=2, warmup=0, backend="host", output_prefix=folder + "/out/")
    configs = [(int(n), folder) for n in ns.split(",")]
    if engine == "pool":
        profiled = nsightx.analyze.kernel(**options)(par_workload.held_on_4)
        with cf.ProcessPoolExecutor(2) as pool:
            profiled(configs=configs, executor=pool)
    else:
        nsightx.analyze.kernel(**options, parallel_devices=[0, 1])(par_workload.held_on_4)(configs=configs)
"""
WAIT = 120.0
"""Seconds to wait for what must happen anyway (a loaded 2-core machine); a test that is right never waits it."""


def _readable(fd: int) -> bool:
    return bool(select.select([fd], [], [], WAIT)[0])


def _runs_written(raw: Path) -> int:
    """Measured runs whose lines the caller wrote (header and ONCE lines aside)."""
    if not raw.exists():
        return 0
    lines = raw.read_text().splitlines()[1:]
    return sum(1 for line in lines if line.endswith("}") and '"config": -1' not in line)


def _wait_for_runs(raw: Path, caller: subprocess.Popen[str], runs: int) -> None:
    """Until the caller wrote ``runs`` runs: a condition the caller reports, looked at until it holds."""
    deadline = time.monotonic() + WAIT
    while _runs_written(raw) < runs:
        assert caller.poll() is None, f"the caller ended early: {caller.communicate()}"
        assert time.monotonic() < deadline, f"{raw} never held {runs} runs"
        time.sleep(0.05)  # looks again; the time only spaces the looks


@pytest.mark.parametrize(
    ("engine", "signum"),
    [("pool", signal.SIGTERM), ("pool", signal.SIGINT), ("devices", signal.SIGTERM)],
)
def test_a_stopped_spread_sweep_says_what_came_back_and_ends_its_workers(tmp_path, engine, signum):
    """Config 4 runs in a worker and configs 1 to 3 came back (6 runs in the raw file) when the caller gets the
    signal: it prints one line saying 3 of 4 configs came back, where and how to load them, ends as the signal
    ends a Python process, and config 4's worker is gone once the caller is (its FIFO reads end of file)."""
    raw = tmp_path / "out" / "raw_data-held_on_4-0.jsonl"
    returncode, stderr = _stopped(tmp_path, engine, signum, "1,4,2,3", lambda caller: _wait_for_runs(raw, caller, 6))
    assert returncode == -signum, stderr
    what = "terminated by SIGTERM" if signum == signal.SIGTERM else "interrupted"
    lines = [line for line in stderr.splitlines() if line.startswith("nsightx:")]
    assert lines == [
        f"nsightx: held_on_4 {what} after 3 of 4 config(s) came back (6 run(s)), saved in {raw}; "
        f"load them with nsightx.load({str(raw)!r})"
    ], stderr
    with pytest.warns(nsightx.IncompleteResultWarning, match="holds 6 of 8 planned runs"):
        loaded = nsightx.load(raw)
    assert sorted(set(loaded.runs_dataframe()["n"])) == [1, 2, 3]


@pytest.mark.parametrize(("engine", "signum"), [("pool", signal.SIGINT), ("devices", signal.SIGTERM)])
def test_a_spread_sweep_stopped_before_any_config_came_back_says_nothing_was_measured(tmp_path, engine, signum):
    """Regression (open24): its only config runs in a worker when the caller gets the signal. The caller says that
    nothing was measured, as a call in one process stopped in its first run does; before, it printed nothing and
    left the raw file's name reserved as an empty file, which ``nsightx.load`` refuses ("nsightx never writes an
    empty ... raw file")."""
    returncode, stderr = _stopped(tmp_path, engine, signum, "4", lambda caller: None)
    assert returncode == -signum, stderr
    what = "terminated by SIGTERM" if signum == signal.SIGTERM else "interrupted"
    raw = tmp_path / "out" / "raw_data-held_on_4-0.jsonl"
    lines = [line for line in stderr.splitlines() if line.startswith("nsightx:")]
    assert lines == [
        f"nsightx: held_on_4 {what} before any of 1 config(s) came back; nothing was measured, so no raw file was "
        f"kept ({raw})"
    ], stderr
    assert not raw.exists()


def _stopped(
    folder: Path, engine: str, signum: int, configs: str, ready: Callable[[subprocess.Popen[str]], None]
) -> tuple[int, str]:
    """Run the caller over ``configs`` (``n`` values, comma-separated; config 4 holds its worker), signal it once
    config 4 runs and ``ready`` returned, and check that config 4's worker is gone once the caller is (its FIFO
    reads end of file). The caller's exit status and its stderr."""
    for name in ("running", "release"):
        os.mkfifo(folder / name)
    script = folder / "caller.py"
    script.write_text(_CALLER)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(par_workload.__file__).parent), *sys.path])}
    running = os.open(folder / "running", os.O_RDONLY | os.O_NONBLOCK)  # no writer needed to open it
    caller = subprocess.Popen(
        [sys.executable, str(script), str(folder), engine, configs],
        env=env,
        start_new_session=True,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert _readable(running), "config 4 never started"
        assert os.read(running, 100).strip().isdigit()  # its worker's pid: it runs, and holds the FIFO open
        ready(caller)
        caller.send_signal(signum)
        _, stderr = caller.communicate(timeout=WAIT)
        assert _readable(running), "config 4's worker outlived its caller"
        assert os.read(running, 100) == b"", "config 4's worker outlived its caller"
    finally:
        os.close(running)
        try:
            os.killpg(caller.pid, signal.SIGKILL)  # only when something above failed: the caller and its workers
        except ProcessLookupError:
            pass
        caller.wait()
    return caller.returncode, stderr
