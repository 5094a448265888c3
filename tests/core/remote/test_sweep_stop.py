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
from pathlib import Path

import par_workload
import pytest

import nsightx

_CALLER = """
import concurrent.futures as cf, sys
import nsightx, par_workload
if __name__ == "__main__":
    folder, engine = sys.argv[1], sys.argv[2]
    options = dict(runs=2, warmup=0, backend="host", output_prefix=folder + "/out/")
    configs = [(1, folder), (4, folder), (2, folder), (3, folder)]
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
    folder = tmp_path
    for name in ("running", "release"):
        os.mkfifo(folder / name)
    script = tmp_path / "caller.py"
    script.write_text(_CALLER)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(par_workload.__file__).parent), *sys.path])}
    running = os.open(folder / "running", os.O_RDONLY | os.O_NONBLOCK)  # no writer needed to open it
    caller = subprocess.Popen(
        [sys.executable, str(script), str(folder), engine],
        env=env,
        start_new_session=True,
        stderr=subprocess.PIPE,
        text=True,
    )
    raw = folder / "out" / "raw_data-held_on_4-0.jsonl"
    try:
        assert _readable(running), "config 4 never started"
        assert os.read(running, 100).strip().isdigit()  # its worker's pid: it runs, and holds the FIFO open
        _wait_for_runs(raw, caller, 6)
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
    assert caller.returncode == -signum, stderr
    what = "terminated by SIGTERM" if signum == signal.SIGTERM else "interrupted"
    lines = [line for line in stderr.splitlines() if line.startswith("nsightx:")]
    assert lines == [
        f"nsightx: held_on_4 {what} after 3 of 4 config(s) came back (6 run(s)), saved in {raw}; "
        f"load them with nsightx.load({str(raw)!r})"
    ], stderr
    with pytest.warns(nsightx.IncompleteResultWarning, match="holds 6 of 8 planned runs"):
        loaded = nsightx.load(raw)
    assert sorted(set(loaded.runs_dataframe()["n"])) == [1, 2, 3]
