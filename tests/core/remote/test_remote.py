"""Running the loop in another process through the public contract (``nsightx.ext.RemoteCall`` and ``run_child``).

A small backend written against ``nsightx.ext`` only, the way a third-party backend that measures elsewhere
would be: its ``execute`` runs the plan in a real child process (``tests/remote_child.py``) and serves the
channel from its own ``selectors`` loop. The info collectors and the thermal guard stay in the test's process and
are proxied back; the child's failure comes back with its config and run. Nothing is a double.
"""

from __future__ import annotations

import os
import selectors
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

import pytest

import nsightx
from nsightx.ext import (
    Availability,
    Backend,
    Capabilities,
    CollectionScope,
    InfoCollector,
    MeasurementError,
    Plan,
    RemoteCall,
    Scalar,
    Sink,
    ThermalSettings,
    child_env,
)

pytest.importorskip("cloudpickle")

METRIC = "child__time_duration.sum"
CHILD_DEADLINE_S = 300.0
"""Generous: the child is a fresh Python importing nsightx on a loaded CI machine."""


def _serve_until_exit(call: RemoteCall, proc: subprocess.Popen[bytes]) -> None:
    """Serve the channel until the child ended and everything it sent was read (killed after the deadline)."""
    deadline = time.monotonic() + CHILD_DEADLINE_S
    with selectors.DefaultSelector() as sel:
        call.register(sel)
        while True:
            ended = proc.poll() is not None
            ready = sel.select(0 if ended else 0.2)
            for key, _ in ready:
                key.data.serve(key.fileobj)
            if ended and not ready:
                return
            if time.monotonic() > deadline:
                proc.kill()
                proc.wait()
                raise AssertionError(f"the child did not end within {CHILD_DEADLINE_S} s")


class ElsewhereBackend(Backend):
    """Host time of each region, measured in a child process."""

    name: ClassVar[str] = "elsewhere"
    capabilities: ClassVar[Capabilities] = Capabilities(
        metrics=frozenset({METRIC}), default_metrics=(METRIC,), needs_gpu=False, per_device=False
    )

    @classmethod
    def availability(cls) -> Availability:
        """Always: the child needs only Python."""
        return Availability(available=True)

    def execute(self, plan: Plan, sink: Sink) -> Mapping[str, Scalar]:
        """Run ``plan`` in ``python -m remote_child`` and write the runs it measured to ``sink``."""
        folder = Path(tempfile.mkdtemp(prefix="nsightx-test-remote-"))
        os.chmod(folder, 0o700)
        try:
            call = RemoteCall(
                plan, folder, where="the test's child", in_process="use backend='host'", options={"metric": METRIC}
            )
            try:
                with call.serving():
                    proc = subprocess.Popen(call.command("remote_child"), env=call.env())
                    _serve_until_exit(call, proc)
                if call.failure is not None:
                    raise call.failure
                for run in call.runs():
                    sink.write(run)
                error = call.error()
                if error is not None or proc.returncode != 0:
                    raise MeasurementError(f"the child failed (exit {proc.returncode}): {error}")
            finally:
                call.cleanup()
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        return {"GPU": None}


def _plan(fn: Any, **kw: Any) -> Plan:
    args: dict[str, Any] = {
        "function": fn,
        "function_name": fn.__name__,
        "params": ("n",),
        "configs": ((1,), (2,)),
        "runs": 2,
        "warmup": 1,
        "metrics": (METRIC,),
        "backend": "elsewhere",
        "verbosity": nsightx.VerbosityLevel.SILENT,
        "thermal": ThermalSettings(mode="off"),
    }
    args.update(kw)
    return Plan(**args)


class _Runs:
    """A sink that keeps the runs in memory."""

    def __init__(self) -> None:
        self.runs: list[Any] = []

    def write(self, run: Any) -> None:
        self.runs.append(run)


def test_a_backend_runs_the_loop_in_a_child_and_its_collectors_stay_here():
    def work(n):
        with nsightx.annotate("a"):
            sum(range(1000 * n))

    asked = []

    def where(ctx):
        asked.append((ctx.config, ctx.run))
        return os.getpid()

    collector = InfoCollector("parent_pid", where, CollectionScope.RUN)
    sink = _Runs()
    ElsewhereBackend().execute(_plan(work, collectors=(collector,)), sink)
    assert [(r.config, r.run) for r in sink.runs] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    for run in sink.runs:
        assert [(rec.metric, rec.annotation) for rec in run.records] == [(METRIC, "a")]
        assert run.records[0].value > 0
        child_pid = run.regions[0].attributes["child_pid"]
        assert child_pid != os.getpid()  # measured in the child ...
        values = {c.name: c.value for c in run.collectors}
        assert values == {"parent_pid": os.getpid()}  # ... while the collector ran here
    assert asked == [(0, 0), (0, 1), (1, 0), (1, 1)]  # measured runs only, each asked of the parent once


def test_the_childs_failure_names_its_config_and_run_and_keeps_the_runs_before_it():
    def work(n):
        with nsightx.annotate("a"):
            if n == 2:
                raise ValueError("no 2 here")

    sink = _Runs()
    with pytest.raises(MeasurementError, match=r"'stage': 'run', 'config': 1, 'run': -1.*ValueError.*no 2 here"):
        ElsewhereBackend().execute(_plan(work), sink)
    assert [(r.config, r.run) for r in sink.runs] == [(0, 0), (0, 1)]


def test_a_value_that_cannot_travel_is_named_before_the_child_starts(tmp_path):
    import threading

    lock = threading.Lock()

    def work(n):
        with lock:
            pass

    call_folder = tmp_path / "call"
    call_folder.mkdir()
    with pytest.raises(MeasurementError, match="cannot send work to the test's child: closure variable `lock`"):
        RemoteCall(_plan(work), call_folder, where="the test's child", in_process="use backend='host'")
    assert list(call_folder.iterdir()) == []  # nothing written, nothing started


def test_a_child_knows_it_is_one():
    assert not RemoteCall.inside_child()
    probe = "from nsightx.ext import RemoteCall; print(RemoteCall.inside_child())"
    env = {**child_env(), "NSIGHTX_REMOTE_CHANNEL": "/nonexistent/channel.sock"}
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "True"
