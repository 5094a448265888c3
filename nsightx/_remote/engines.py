"""The engines a sweep's tasks run on: any ``concurrent.futures.Executor``, or a Dask ``distributed.Client``.

nsightx does not schedule: it hands each config to the engine as one task and takes the results in the order
they finish. What differs between engines is kept here, behind :class:`Engine`:

* A ``concurrent.futures`` executor (the local ``parallel_devices`` pool is one) runs a task once; a worker
  that dies fails its task.
* A Dask client submits each task with ``retries=1`` (a task that raised is run once more) and, when the
  backend measures a GPU, with ``resources={"GPU": 1}``, so that no two tasks share a GPU at once (workers must
  offer the resource: dask-cuda's ``LocalCUDACluster(resources={"GPU": 1})``, ``dask worker --resources
  GPU=1``). A task whose worker was lost is rescheduled on another worker by the scheduler itself (up to its
  ``distributed.scheduler.allowed-failures``, 3 by default, before it fails with ``KilledWorker``). Which
  tasks were run again is read from the scheduler's own bookkeeping at the end of the sweep.

``distributed`` is imported only when a Dask client is given.
"""

from __future__ import annotations

import concurrent.futures as cf
import uuid
import warnings
from collections.abc import Iterator
from typing import Any, Protocol

from nsightx._errors import ConfigError, ConfigTypeError
from nsightx._remote.localpool import DevicePool, kill_processes
from nsightx._remote.task import TaskOutput, run_task
from nsightx._run.exclusive import warn_once

Outcome = TaskOutput | BaseException
"""What one task ended with: its output, or the error that ended it."""


class Engine(Protocol):
    """Runs a sweep's tasks and yields their outcomes as they finish."""

    label: str
    """What ran the sweep, for the result's ``executor`` environment entry."""

    def submit(self, index: int, head: bytes, config: bytes) -> None:
        """Queue the task of config ``index``."""

    def completed(self) -> Iterator[tuple[int, Outcome]]:
        """Each submitted task's ``(index, outcome)``, in the order they finish."""

    def retried(self) -> list[int] | None:
        """Indices of the tasks the engine ran more than once (after all finished); ``None``: unknown."""

    def cancel(self, end_running: bool) -> None:
        """Drop the tasks not finished yet (the sweep stopped); with ``end_running``, end those running too.

        ``end_running`` is asked when the caller was stopped by Ctrl-C or SIGTERM: a task that runs on must
        not keep measuring (and holding its GPU) after the caller's stop. Where the engine cannot end a running
        task without taking what the user owns down with it (a Dask client), it only cancels.
        """


def is_dask_client(value: object) -> bool:
    """Whether ``value`` is a ``distributed.Client`` (checked without importing distributed)."""
    return any(c.__module__.startswith("distributed") and c.__name__ == "Client" for c in type(value).__mro__)


def check_executor(value: object) -> object:
    """``value`` when it can run a sweep (``None``, a ``concurrent.futures.Executor``, a Dask client).

    Raises:
        ConfigTypeError: it is anything else; the message names what is accepted.
    """
    if value is None or isinstance(value, cf.Executor) or is_dask_client(value):
        return value
    raise ConfigTypeError(
        f"executor must be a concurrent.futures.Executor (e.g. ProcessPoolExecutor()) or a Dask "
        f"distributed.Client, got {value!r} ({type(value).__module__}.{type(value).__qualname__})"
    )


def check_alone(executor: object, device: object, parallel_devices: object) -> None:
    """Refuse ``executor=`` together with ``device=`` or ``parallel_devices=``.

    Raises:
        ConfigError: both were given; the message says what each does.
    """
    if executor is None:
        return
    for option, value in (("parallel_devices", parallel_devices), ("device", device)):
        if value is not None:
            raise ConfigError(
                f"give executor= or {option}=, not both: with executor= each config is measured where the "
                f"executor runs it (on its worker's GPU), while {option}={value!r} chooses devices of this host; "
                "parallel_devices is itself a local executor"
            )


def engine_for(executor: object, needs_gpu: bool, name: str) -> Engine:
    """The engine that runs a sweep's tasks on ``executor`` (checked by :func:`check_executor`).

    A ``ThreadPoolExecutor`` is accepted, with a warning once per process: its tasks measure in this process,
    where one profiled call runs at a time (:mod:`nsightx._run.exclusive`), so its configs are measured one after
    the other, each under the lock, and the result is the one a call without ``executor=`` gives.
    """
    if is_dask_client(executor):
        return DaskEngine(executor, needs_gpu, name)
    assert isinstance(executor, cf.Executor)
    if isinstance(executor, cf.ThreadPoolExecutor):
        warn_once(
            "thread-pool",
            f"nsightx: executor= is a ThreadPoolExecutor: its tasks measure in this process, where one profiled "
            f"call runs at a time, so the configs of {name} are measured one after the other, as without "
            "executor=. To measure configs at once, give executor=ProcessPoolExecutor() (one GPU per worker), "
            "parallel_devices=[...] or a Dask client. (nsightx says this once per process.)",
            stacklevel=5,  # engine_for <- _spread <- _call <- ProfiledFunction.__call__ <- the caller
        )
    return FuturesEngine(executor, needs_gpu)


class FuturesEngine:
    """Tasks on a ``concurrent.futures.Executor``: each runs once, none is retried."""

    def __init__(self, executor: cf.Executor, needs_gpu: bool, label: str | None = None, owned: bool = False) -> None:
        self.executor = executor
        self.needs_gpu = needs_gpu
        self.owned = owned
        """Whether the sweep made the executor (``parallel_devices``): its workers then end on any stop."""
        self.label = label or f"{type(executor).__module__}.{type(executor).__qualname__}"
        self.futures: dict[cf.Future[TaskOutput], int] = {}

    def submit(self, index: int, head: bytes, config: bytes) -> None:
        """Queue the task of config ``index`` on the executor."""
        self.futures[self.executor.submit(run_task, head, config, index, self.needs_gpu)] = index

    def completed(self) -> Iterator[tuple[int, Outcome]]:
        """Outcomes in the order the executor finishes them."""
        for future in cf.as_completed(self.futures):
            index = self.futures[future]
            try:
                yield index, future.result()
            except BaseException as e:  # the task's outcome, handed to the sweep
                yield index, e

    def retried(self) -> list[int]:
        """None: a ``concurrent.futures`` executor runs each task once."""
        return []

    def cancel(self, end_running: bool) -> None:
        """Cancel the tasks that have not started; end the running ones when asked or when the pool is ours.

        A running task of a process pool can only be ended with its worker process, so the pool's worker
        processes are killed: a user's ``ProcessPoolExecutor`` is then broken (``BrokenProcessPool`` on its
        next use), as a Ctrl-C in a terminal (which reaches its workers too) leaves it. Without it, the caller
        of a stopped sweep would wait in the pool's shutdown for every running config, and after SIGTERM the
        workers would go on, orphaned, until their configs end. A thread pool's task cannot be ended: it runs to
        its end (measuring in this process, it ends with it under SIGTERM).
        """
        for future in self.futures:
            future.cancel()
        if (end_running or self.owned) and any(not f.done() for f in self.futures):
            kill_workers(self.executor)


class DaskEngine:
    """Tasks on a Dask cluster: ``retries=1``, one ``GPU`` resource per task of a GPU backend."""

    label = "distributed.Client"

    def __init__(self, client: Any, needs_gpu: bool, name: str) -> None:
        self.client = client
        self.needs_gpu = needs_gpu
        self.prefix = f"nsightx-{name}-{uuid.uuid4().hex[:8]}"
        self.futures: dict[Any, int] = {}
        if needs_gpu:
            _check_gpu_resources(client)

    def submit(self, index: int, head: bytes, config: bytes) -> None:
        """Submit the task of config ``index``: retried once, one GPU when the backend needs one."""
        future = self.client.submit(
            run_task,
            head,
            config,
            index,
            self.needs_gpu,
            key=f"{self.prefix}-{index}",
            retries=1,
            resources={"GPU": 1} if self.needs_gpu else None,
        )
        self.futures[future] = index

    def completed(self) -> Iterator[tuple[int, Outcome]]:
        """Outcomes in the order the cluster finishes them."""
        from distributed import as_completed

        for future in as_completed(list(self.futures)):
            index = self.futures[future]
            try:
                yield index, future.result()
            except BaseException as e:  # the task's outcome (KilledWorker, CancelledError, ...)
                yield index, e

    def retried(self) -> list[int] | None:
        """The tasks the scheduler ran again: lost with their worker, or retried after raising.

        ``None`` (with a warning) when the scheduler does not answer (older versions could refuse functions
        with ``distributed.scheduler.pickle: false``): the sweep's values do not depend on it.
        """
        by_key = {str(f.key): i for f, i in self.futures.items()}
        try:
            counts = self.client.run_on_scheduler(_attempts_reader(), list(by_key))
        except Exception as e:
            warnings.warn(
                f"nsightx could not ask the Dask scheduler which tasks it retried ({type(e).__name__}: {e}); the "
                "result's retried_configs says 'unknown'",
                RuntimeWarning,
                stacklevel=2,
            )
            return None
        return sorted(by_key[k] for k, (lost, retries_left) in counts.items() if lost > 0 or retries_left < 1)

    def cancel(self, end_running: bool) -> None:
        """Cancel the tasks not finished yet; the client stays open (it is the user's).

        Dask cannot end a task that a worker runs already: the scheduler forgets it, and the worker's thread
        runs it to its end and drops its result.
        """
        self.client.cancel(list(self.futures))


def kill_workers(executor: cf.Executor) -> None:
    """End the worker processes of a process pool at once, with the tasks they run; other executors: nothing.

    The local :class:`~nsightx._remote.localpool.DevicePool` kills its own; a ``ProcessPoolExecutor`` has its
    processes killed (:func:`~nsightx._remote.localpool.kill_processes`).
    """
    if isinstance(executor, DevicePool):
        executor.kill_workers()
    elif isinstance(executor, cf.ProcessPoolExecutor):
        kill_processes(executor)


def _attempts_reader() -> Any:
    """A function for ``run_on_scheduler``: per key, (times its worker was lost, retries left).

    It is made inside this function so that it travels by value: the scheduler need not have nsightx.
    """

    def attempts(keys: list[str], dask_scheduler: Any = None) -> dict[str, tuple[int, int]]:
        out = {}
        for key in keys:
            ts = dask_scheduler.tasks.get(key)
            if ts is not None:
                out[key] = (int(ts.suspicious), int(ts.retries))
        return out

    return attempts


def _check_gpu_resources(client: Any) -> None:
    """Refuse a GPU sweep on a cluster whose workers offer no ``GPU`` resource (its tasks would wait forever).

    A cluster with no worker yet (one still starting, e.g. under dask-jobqueue) is not refused.
    """
    try:
        info = client.scheduler_info(n_workers=-1)  # newer distributed lists only 5 workers by default
    except TypeError:  # older distributed: no such argument, every worker listed
        info = client.scheduler_info()
    workers = info.get("workers", {})
    if workers and not any(w.get("resources", {}).get("GPU", 0) >= 1 for w in workers.values()):
        raise ConfigError(
            f"none of the {len(workers)} worker(s) of this Dask cluster offers a 'GPU' resource, and each task "
            "of a GPU backend asks for one (so that no two share a GPU); start the workers with one GPU "
            "resource each: LocalCUDACluster(resources={'GPU': 1}), `dask cuda worker --resources GPU=1` or "
            "`dask worker --resources GPU=1` with CUDA_VISIBLE_DEVICES set per worker"
        )
