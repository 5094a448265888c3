"""What runs in a worker of a spread sweep: one config measured, its runs sent back (no result is built there).

The same task function runs in every engine: a ``parallel_devices`` worker process, a process of a
``concurrent.futures`` executor, a Dask worker. It records where it ran (host, device, worker) so the merged
result can name them per config. Tasks in one process run one at a time (:data:`_ONE_AT_A_TIME`): the run
state that :func:`nsightx.annotate` reports to is process-wide, and two measurements in one process would also
disturb each other's timing, so a worker with several threads measures its tasks in turn. (The profiled call a
task makes also takes the process's lock, :mod:`nsightx._run.exclusive`, so a task run in a thread of the
caller's own process, by a ``ThreadPoolExecutor``, waits for any other profiled call of that process too.)

The task measures into a :class:`~nsightx._remote.taskruns.TaskRuns` sink, which keeps each run as the run loop
hands it over (a compact row), and sends back those runs pickled, with the few facts the caller's result needs
beside them (:class:`Measured`: the plan as resolved here, the environment). The worker writes no file and builds
no result: the caller's sink receives the runs (and its raw file, with ``output_prefix``) as each task comes back,
and the caller builds the sweep's one result with the same builder as a call in one process.

A ``parallel_devices`` worker is set up by :func:`setup_worker` (its initializer) with the label of its device;
other workers are not set up and label themselves.
"""

from __future__ import annotations

import functools
import os
import pickle
import socket
import sys
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from nsightx._errors import BackendUnavailableError, MeasurementError
from nsightx._remote.taskruns import TaskRuns
from nsightx._results.records import Scalar
from nsightx._results.schema import PlanInfo
from nsightx._run import device as _device

_ONE_AT_A_TIME = threading.Lock()
"""Held while a task measures: one measurement per process at a time."""


@dataclass(frozen=True)
class WorkerSetup:
    """How a ``parallel_devices`` worker labels its rows."""

    label: str
    """The device label its rows get (``"<ordinal>:<uuid>"`` in the parent's numbering, or ``"<k>:cpu"``)."""


_SETUP: WorkerSetup | None = None
"""Set in a ``parallel_devices`` worker by :func:`setup_worker`; ``None`` elsewhere."""


@dataclass(frozen=True)
class Measured:
    """What the caller's result needs from a task beside its runs."""

    plan: PlanInfo
    """The plan as the worker resolved it (backend, metrics, options), holding the task's one config."""
    environment: Mapping[str, Scalar]
    """Where it was measured (GPU, clocks, host, versions), as a call in one process records it."""
    created: str
    """ISO 8601 time at which the measurement finished."""
    nsightx_version: str
    """Version of nsightx in the worker."""


class Worker(Protocol):
    """The profiled function as a task sees it (built in the worker from the spec that travelled)."""

    def measure_task(self, configs: list[tuple[Any, ...]], sink: TaskRuns) -> Measured:
        """Measure ``configs`` in this process into ``sink``; build no result and write no file."""
        ...


@dataclass(frozen=True)
class TaskOutput:
    """What a task sends back: its runs, what the result needs beside them, and where it was measured."""

    index: int
    """The config's index in the sweep."""
    runs: bytes
    """The config's runs, numbered as config ``index``, pickled (see :meth:`TaskRuns.payload`)."""
    measured: Measured
    """The plan and environment of the measurement."""
    host: str
    """Host name of the machine that measured."""
    device: str
    """Device label: ``"<ordinal>:<uuid>"`` for a GPU (as the worker sees it), ``"<worker>:cpu"`` for a CPU."""
    worker: str
    """The worker: a Dask worker's address, else ``"pid <n>"``."""


class TaskFailure(MeasurementError):
    """A config failed in its worker; carries where, so the sweep's message can name it.

    Attributes:
        where: E.g. ``"on device 1:cpu of host node3"``.
        detail: The error, as ``<type>: <message>`` (a string, so any error reaches the client intact).
    """

    def __init__(self, where: str, detail: str) -> None:
        super().__init__(where, detail)
        self.where = where
        self.detail = detail

    def __str__(self) -> str:
        return f"{self.where}: {self.detail}"


def setup_worker(cuda_visible: str | None, label: str) -> None:
    """Initializer of a ``parallel_devices`` worker: choose its GPU before any CUDA library loads."""
    global _SETUP
    if cuda_visible is not None:
        os.environ["CUDA_VISIBLE_DEVICES"] = cuda_visible
    _SETUP = WorkerSetup(label)


def run_task(head: bytes, config: bytes, index: int, needs_gpu: bool) -> TaskOutput:
    """Measure one config of a sweep in this process and return its runs (runs in the worker).

    Args:
        head: ``(make_worker, spec)`` pickled by :mod:`nsightx._remote.travel`: ``make_worker(spec)`` is the
            :class:`Worker`.
        config: The config's values, pickled the same way.
        index: The config's index in the sweep.
        needs_gpu: Whether the backend measures a GPU (the row's device is then this worker's first GPU).

    Raises:
        TaskFailure: measuring failed; the message says where and why.
    """
    with _ONE_AT_A_TIME:
        make_worker, spec = pickle.loads(head)
        values = pickle.loads(config)
        setup = _SETUP
        worker = _worker_name()
        device = setup.label if setup is not None else _device_label(needs_gpu, worker)
        host = socket.gethostname()
        runs = TaskRuns(index)
        try:
            measured = make_worker(spec).measure_task([values], runs)
        except Exception as e:
            raise TaskFailure(f"on device {device} of host {host}", f"{type(e).__name__}: {e}") from None
        return TaskOutput(index, runs.payload(), measured, host, device, _worker_address())


def _worker_name() -> str:
    """This worker's short name: a Dask worker's ``name``, else ``pid<n>``."""
    worker = _dask_worker()
    return str(worker.name) if worker is not None else f"pid{os.getpid()}"


def _worker_address() -> str:
    worker = _dask_worker()
    return str(worker.address) if worker is not None else f"pid {os.getpid()}"


def _dask_worker() -> Any:
    """The Dask worker running this task, or ``None`` outside one (distributed is not imported for that)."""
    if "distributed" not in sys.modules:
        return None
    from distributed import get_worker

    try:
        return get_worker()
    except ValueError:
        return None


def _device_label(needs_gpu: bool, worker: str) -> str:
    """The label of the device this worker measures: its first visible GPU, or its CPU."""
    if not needs_gpu:
        return f"{worker}:cpu"
    return _first_gpu(os.environ.get("CUDA_VISIBLE_DEVICES"))


@functools.cache
def _first_gpu(cuda_visible: str | None) -> str:
    """``"0:<uuid>"`` of the first GPU this process sees (cached per ``CUDA_VISIBLE_DEVICES``)."""
    try:
        gpus = _device.visible(cuda_visible)
    except BackendUnavailableError:
        return "gpu"
    return gpus[0].label if gpus else "gpu"
