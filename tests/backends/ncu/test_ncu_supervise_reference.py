"""What outlives ncu: nothing of the process group the backend started (CPU only, the fake ncu).

The reference is ``nsightx_ncu._supervise``'s promise: ncu runs in its own session "so its whole process group
can be killed", and the parent "never blocks on the worker". When ncu itself ends (the out-of-memory killer took
it, it crashed) while the worker it started still runs the user's function, the call must not return with that
worker still running: it would keep launching the user's GPU work behind the next measurement, write into a
folder the call deleted, and the error would call it dead while it is not.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import ncu_fake
import pytest
from nsightx_ncu._backend import NcuBackend

import nsightx
from nsightx._results.sink import RunSink

pytest.importorskip("cloudpickle")
pytest.importorskip("nvtx")
pytest.importorskip("ncu_report", reason="needs the ncu-report package (test dependency group)")

GONE_WITHIN_S = 30.0
"""Generous: a SIGKILLed process is gone at once, but CI is a loaded 2-core machine."""


@pytest.fixture(autouse=True)
def fake_ncu(monkeypatch, tmp_path):
    ncu_fake.use_fake_ncu(monkeypatch, tmp_path)


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie waiting for its parent to reap it does not)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    state = next((line.split()[1] for line in status.splitlines() if line.startswith("State:")), "")
    return state not in ("Z", "X")


def _gone(pid: int, within_s: float) -> bool:
    deadline = time.monotonic() + within_s
    while _alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads process states from /proc")
def test_a_worker_still_running_when_ncu_dies_does_not_outlive_the_call(monkeypatch, tmp_path):
    started = tmp_path / "worker.pid"
    monkeypatch.setenv("FAKE_NCU_CRASH_AFTER", str(started))
    marker = str(started)

    def work(n):
        import os as _os
        import time as _time

        with nsightx.annotate("slow"):
            with open(marker + ".tmp", "w") as fh:
                fh.write(str(_os.getpid()))
            _os.replace(marker + ".tmp", marker)  # the fake ncu kills itself once this exists
            _time.sleep(600)

    plan = ncu_fake.make_plan(work, ((1,),), runs=1, warmup=0)
    pid = 0
    try:
        with pytest.raises(nsightx.MeasurementError) as info:
            NcuBackend().execute(plan, RunSink())
        pid = int(started.read_text())
        assert "signal 9" in str(info.value)
        assert _gone(pid, GONE_WITHIN_S), "the ncu worker still runs the user's function after the call returned"
    finally:
        if pid and _alive(pid):
            os.kill(pid, signal.SIGKILL)  # the worker this test started (before the fix it was left running)
