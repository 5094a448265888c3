"""The progress line of an ncu call, drawn in the parent from the worker's channel messages (CPU only).

The messages are fed to the real :class:`~nsightx._remote.serve.WorkerRequests` as the worker sends them; the
end-to-end path (the real worker under the fake ncu) is covered in test_ncu_channel.py.
"""

from __future__ import annotations

import io

from nsightx._remote.serve import WorkerRequests
from nsightx._run.plan import Plan, ThermalSettings
from nsightx._run.progress import Progress
from nsightx._run.thermal import NoGuard


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def _plan(configs: int, runs: int, warmup: int = 0) -> Plan:
    return Plan(
        function=lambda n: None,
        function_name="f",
        params=("n",),
        configs=tuple((i,) for i in range(configs)),
        runs=runs,
        warmup=warmup,
        metrics=("gpu__time_duration.sum",),
        backend="ncu",
        thermal=ThermalSettings(mode="off"),
    )


def _sweep(requests: WorkerRequests, configs: int, runs: int, warmup: int) -> None:
    requests.handle({"op": "hello", "pid": 1})
    for c in range(configs):
        for r in range(-warmup, runs):
            assert requests.handle({"op": "run", "config": c, "run": r}) == {"values": []}
            assert requests.handle({"op": "ran", "config": c, "run": r}) is None


def test_progress_line_follows_the_worker_messages() -> None:
    stream = Tty()
    plan = _plan(2, 2, warmup=1)
    progress = Progress(plan, delay_s=0.0, stream=stream)
    requests = WorkerRequests(plan, NoGuard(), progress)
    _sweep(requests, 2, 2, 1)
    progress.close()
    out = stream.getvalue()
    assert "f: [" in out and "6/6 calls (2 warm-up), config 2/2" in out  # warm-up runs count, as in process
    assert requests.passes == 1 and requests.last is not None and requests.last.finished


def test_application_replay_passes_restart_the_count() -> None:
    stream = Tty()
    plan = _plan(1, 2)
    progress = Progress(plan, delay_s=0.0, stream=stream)
    requests = WorkerRequests(plan, NoGuard(), progress)
    _sweep(requests, 1, 2, 0)
    _sweep(requests, 1, 2, 0)
    progress.close()
    assert requests.passes == 2 and progress.done == 2
    assert "3/2" not in stream.getvalue()
