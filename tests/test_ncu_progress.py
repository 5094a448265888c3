"""The progress line of an ncu call, drawn in the parent from the worker's run file (CPU only).

A child process that appends run lines stands in for ncu and its worker: the boundary is the process and the
file, and everything on this side of it (the watcher, the polling loop, the progress line) is the real code.
"""

from __future__ import annotations

import io
import sys
import textwrap
from pathlib import Path

from nsightx_ncu._backend import Artifacts, NcuBackend
from nsightx_ncu._watch import RunFileWatcher

from nsightx._plan import Plan
from nsightx._progress import Progress


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def _plan(configs: int, runs: int) -> Plan:
    return Plan(function=lambda n: None, function_name="f", params=("n",),
                configs=tuple((i,) for i in range(configs)), runs=runs, warmup=0,
                metrics=("gpu__time_duration.sum",), backend="ncu")


def test_watcher_counts_measured_runs_and_waits_for_whole_lines(tmp_path: Path) -> None:
    path = tmp_path / "runs.jsonl"
    watcher = RunFileWatcher(path)
    assert watcher.poll() == 0  # no file yet
    path.write_bytes(b'{"config":-1,"run":-1}\n{"config":0,"run":0}\n{"config":0,"ru')
    assert watcher.poll() == 1  # the ONCE line is not a run, the half line not yet
    with path.open("ab") as fh:
        fh.write(b'n":1}\n')
    assert watcher.poll() == 2


def test_progress_line_follows_the_worker(tmp_path: Path) -> None:
    art = Artifacts(private=tmp_path, report=tmp_path / "r.ncu-rep", log=tmp_path / "r.log")
    child = textwrap.dedent(f"""
        import time
        with open({str(art.runs)!r}, "a") as fh:
            for r in range(4):
                fh.write('{{"config":%d,"run":%d}}\\n' % (r // 2, r % 2)); fh.flush(); time.sleep(0.3)
    """)
    stream = Tty()
    progress = Progress(_plan(2, 2), delay_s=0.0, stream=stream)
    rc, timed_out = NcuBackend._run([sys.executable, "-c", child], art, 30.0, progress)
    progress.close()
    assert (rc, timed_out) == (0, False)
    out = stream.getvalue()
    assert "f: [" in out and "4/4 runs, config 2/2" in out
    assert "1/4 runs" in out or "2/4 runs" in out  # drawn while the child was still running


def test_timeout_kills_the_worker(tmp_path: Path) -> None:
    art = Artifacts(private=tmp_path, report=tmp_path / "r.ncu-rep", log=tmp_path / "r.log")
    progress = Progress(_plan(1, 1), stream=io.StringIO())
    rc, timed_out = NcuBackend._run([sys.executable, "-c", "import time; time.sleep(30)"], art, 0.5, progress)
    assert timed_out and rc != 0
