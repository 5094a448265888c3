"""A call without ``output_prefix`` stopped while its result is built says that its measured runs are lost.

Every run was measured, nothing was written anywhere: with ``output_prefix`` the stop line says where the runs are;
without it the user used to get no word at all (SIGTERM ended the process silently), so a measurement that had
finished looked as if it had never run. Real subprocesses on the host backend: the child says when it is inside the
build (from its ``derive_metric``) and only then is it signalled.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

import nsightx

CHILD = """
import sys, time
import nsightx

calls = {"n": 0}

def derive(t, n):
    if calls["n"] == 6:  # every run done (the first run's check calls it too, earlier): the result is being built
        print("building", flush=True)
        time.sleep(300)  # not a synchronisation: it waits to be signalled
    return t

@nsightx.analyze.kernel(configs=[(1,), (2,), (3,)], runs=2, warmup=0, backend="host", derive_metric=derive)
def victim(n):
    calls["n"] += 1
    with nsightx.annotate("work"):
        sum(range(n))

victim()
print("not stopped", flush=True)
"""

LOST = (
    "while its result was built, after all 6 run(s) were measured; they were not saved anywhere "
    "(give output_prefix='out/' to keep the runs of a sweep that stops)"
)


@pytest.mark.parametrize(("sig", "what"), [(signal.SIGTERM, "terminated by SIGTERM"), (signal.SIGINT, "interrupted")])
def test_a_stop_while_the_result_is_built_says_the_runs_are_lost(tmp_path: Path, sig: int, what: str) -> None:
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    proc = subprocess.Popen(
        [sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line == "building\n", (line, proc.communicate(timeout=120))  # else it ended early: say how
        proc.send_signal(sig)
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == -sig, stderr
    assert "not stopped" not in stdout
    lines = [line for line in stderr.splitlines() if line.startswith("nsightx:")]
    assert lines == [f"nsightx: victim {what} {LOST}"], stderr
    assert list(tmp_path.iterdir()) == [script]  # nothing was written


def test_an_error_while_the_result_is_built_says_the_same(capsys: pytest.CaptureFixture[str]) -> None:
    calls = [0]

    def derive(t: float, n: int) -> float:
        if calls[0] == 4:  # every run done: the result is being built
            raise ValueError("bad formula")
        return t

    @nsightx.analyze.kernel(configs=[(1,), (2,)], runs=2, warmup=0, backend="host", derive_metric=derive)
    def victim(n: int) -> None:
        calls[0] += 1
        with nsightx.annotate("work"):
            sum(range(n))

    with pytest.raises(Exception, match="bad formula") as raised:
        victim()
    err = capsys.readouterr().err.replace(LOST.replace("6", "4"), "LOST")
    assert [line for line in err.splitlines() if line.startswith("nsightx:")] == [
        f"nsightx: victim stopped by {type(raised.value).__name__} LOST"
    ], err
