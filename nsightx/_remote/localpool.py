"""The local executor behind ``parallel_devices``: one spawned worker process per device, tasks to the first free.

:class:`DevicePool` is a ``concurrent.futures.Executor``, so a ``parallel_devices`` sweep runs through the same
path as ``executor=`` (:mod:`nsightx._api.sweep`). Each worker is a single-process pool pinned to its GPU with
CUDA_VISIBLE_DEVICES (set by its initializer before anything in it touches CUDA), so a config never shares its
GPU with another measurement. One thread per device takes the next queued task as soon as its worker is free,
so fast and slow configs balance out. A worker that dies fails the task it was running (the error says so, with
the ``__main__`` guard hint) and is replaced by a fresh process for the tasks after it.
"""

from __future__ import annotations

import concurrent.futures as cf
import multiprocessing
import queue
import threading
from collections.abc import Callable, Sequence
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from typing import Any, TypeVar

from nsightx._remote.task import TaskFailure, setup_worker

T = TypeVar("T")

DIED_HINT = (
    " (its worker process died; if the worker printed that the script needs an "
    '`if __name__ == "__main__":` guard, add one around the code that runs the sweep)'
)


@dataclass(frozen=True)
class Target:
    """One device of the pool and how its worker is set up."""

    label: str
    """The device label of its rows (``"<ordinal>:<uuid>"`` or ``"<k>:cpu"``)."""
    cuda_visible: str | None
    """CUDA_VISIBLE_DEVICES of its worker (the GPU's UUID); ``None`` for a CPU worker."""


_Job = tuple["cf.Future[Any]", Callable[..., Any], tuple[Any, ...], dict[str, Any]]


class DevicePool(cf.Executor):
    """A ``concurrent.futures.Executor`` with one pinned worker process per device.

    Example:
        >>> with DevicePool([Target("0:cpu", None)]) as pool:  # doctest: +SKIP
        ...     pool.submit(pow, 2, 5).result()
        32
    """

    def __init__(self, targets: Sequence[Target]) -> None:
        self.targets = tuple(targets)
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._ctx = multiprocessing.get_context("spawn")
        self._closed = False
        self._killed = False
        self._pools: dict[str, cf.ProcessPoolExecutor] = {}
        """Each device's worker pool now (a pool whose worker died is replaced)."""
        self._threads = [threading.Thread(target=self._serve, args=(t,), daemon=True) for t in self.targets]
        for thread in self._threads:
            thread.start()

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> cf.Future[T]:
        """Queue ``fn(*args, **kwargs)`` for the first device whose worker is free."""
        if self._closed:
            raise RuntimeError("cannot submit to a DevicePool after shutdown")
        future: cf.Future[T] = cf.Future()
        self._jobs.put((future, fn, args, kwargs))
        return future

    def _start(self, target: Target) -> cf.ProcessPoolExecutor:
        return cf.ProcessPoolExecutor(
            1,
            mp_context=self._ctx,
            initializer=setup_worker,
            initargs=(target.cuda_visible, target.label),
        )

    def _serve(self, target: Target) -> None:
        """In one thread per device: run queued jobs in that device's worker until shutdown."""
        pool = self._pools[target.label] = self._start(target)
        try:
            while (job := self._jobs.get()) is not None:
                future, fn, args, kwargs = job
                if not future.set_running_or_notify_cancel():
                    continue
                try:
                    future.set_result(pool.submit(fn, *args, **kwargs).result())
                except BrokenProcessPool as e:
                    future.set_exception(TaskFailure(f"on device {target.label}", f"{e}{DIED_HINT}"))
                    pool.shutdown(wait=False)
                    if self._killed:  # killed on purpose (kill_workers): no fresh worker for a stopped sweep
                        break
                    pool = self._pools[target.label] = self._start(target)  # a lost worker costs its task only
                except BaseException as e:  # the job's outcome, handed to whoever waits on its future
                    future.set_exception(e)
        finally:
            pool.shutdown(wait=True)

    def kill_workers(self) -> None:
        """Kill every device's worker process at once (a stopped sweep): their tasks fail, none is replaced.

        Queued jobs not started are cancelled; the device threads end (the pool is closed). Used when the caller
        was stopped: a config still measuring must not run on after it (see
        :meth:`nsightx._remote.engines.FuturesEngine.cancel`).
        """
        self._killed = True
        self.shutdown(wait=False, cancel_futures=True)
        for pool in list(self._pools.values()):
            kill_processes(pool)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Stop the device threads (after the queued jobs, or cancelling them) and their workers."""
        if self._closed:
            return
        self._closed = True
        if cancel_futures:
            while True:
                try:
                    job = self._jobs.get_nowait()
                except queue.Empty:
                    break
                if job is not None:
                    job[0].cancel()
        for _ in self._threads:
            self._jobs.put(None)
        if wait:
            for thread in self._threads:
                thread.join()


def kill_processes(pool: cf.ProcessPoolExecutor) -> None:
    """Kill the worker processes of ``pool`` at once (SIGKILL), with the tasks they run.

    ``ProcessPoolExecutor.kill_workers`` from Python 3.14, else its processes one by one (the pool's own table
    of them: the only way before 3.14). SIGKILL, not SIGTERM: a task's measurement turns SIGTERM into its own stop
    line (:mod:`nsightx._api.sigterm`), which in a worker would report runs that the caller reports on, and the
    task's result is not wanted any more.
    """
    kill = getattr(pool, "kill_workers", None)
    if callable(kill):
        kill()
        return
    processes: dict[int, Any] = getattr(pool, "_processes", None) or {}
    for process in list(processes.values()):
        if process.is_alive():
            process.kill()
