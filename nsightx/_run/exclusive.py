"""One profiled call at a time per process, and no profiled call inside another.

The state of the run in progress (:mod:`nsightx._run.context`) is process-wide on purpose: a region covers the
kernels and regions of threads the region itself starts (autograd's backward, a ``threading.Thread``). Two
profiled calls measuring at once in one process would therefore mix their regions, and on one GPU they would
also disturb each other's timing. So a profiled call holds one process-wide lock from its plan to its result:

* a call started from another thread while one is in progress waits for it to finish, and says so once per
  process with a :class:`~nsightx._errors.ConcurrentCallWarning` naming the call it waits for and its thread;
* a call started from the thread that holds the lock (a profiled function called inside a profiled function,
  or recursion) raises :class:`~nsightx._errors.NestedCallError` before doing anything, naming both functions.

:func:`enter`/:func:`leave` bracket the outermost call (``ProfiledFunction.__call__`` when it measures in this
process); :func:`run_loop_guard` lets a run loop started without one (the ncu worker's child, a backend driving
:func:`~nsightx._run.loop.run_loop` itself) take the lock too. A sweep spread over an executor only checks for
nesting (:func:`check_not_nested`): its tasks take the lock where they measure.
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from nsightx._errors import ConcurrentCallWarning, NestedCallError


@dataclass(frozen=True)
class Owner:
    """The profiled call that holds the process's lock."""

    function: str
    """Name of the profiled function."""
    thread_id: int
    """``threading.get_ident()`` of the thread that called it."""
    thread_name: str
    """That thread's name (for messages)."""


_LOCK = threading.Lock()
"""Held by the profiled call in progress, from its plan to its result."""

_owner: Owner | None = None
"""Who holds :data:`_LOCK`; set and cleared only by the holding thread."""

_warned: set[str] = set()
"""Keys of the once-per-process warnings already given (tests clear it)."""

_warned_lock = threading.Lock()

_waiting = 0
"""How many profiled calls wait for :data:`_LOCK` now (see :func:`waiting`)."""

_waiting_lock = threading.Lock()


def current_owner() -> Owner | None:
    """The profiled call in progress in this process, or ``None``."""
    return _owner


def waiting() -> int:
    """How many profiled calls of this process wait for the one in progress (for diagnostics and tests)."""
    return _waiting


def check_not_nested(function: str) -> None:
    """Refuse a profiled call of ``function`` from the thread whose profiled call is in progress.

    Raises:
        NestedCallError: this thread is inside a profiled call (nested or recursive); nothing has run.
    """
    owner = _owner  # only this thread could set it to itself, so the read needs no lock
    if owner is not None and owner.thread_id == threading.get_ident():
        raise NestedCallError(outer=owner.function, inner=function)


def enter(function: str, *, stacklevel: int = 2) -> None:
    """Start the profiled call of ``function``: wait for the one in progress in another thread, then hold the lock.

    Every :func:`enter` that returns must be paired with one :func:`leave` (``try``/``finally``).

    Args:
        function: Name of the profiled function (named in the messages of other callers).
        stacklevel: Where the warning points, counted as ``warnings.warn`` counts from here (2: the caller).

    Raises:
        NestedCallError: this thread already holds the lock; nothing has run.
    """
    global _owner
    check_not_nested(function)
    if not _LOCK.acquire(blocking=False):
        owner = _owner  # may have just been cleared: then the wait below is short
        if owner is not None:
            warn_once(
                "wait",
                f"nsightx: the profiled call of {function} (thread {threading.current_thread().name!r}) waits for "
                f"the profiled call of {owner.function} (thread {owner.thread_name!r}) to finish: one profiled "
                "call runs at a time per process, because regions are process-wide and two measurements disturb "
                "each other. Measure in separate processes to run them at once (executor=ProcessPoolExecutor(), "
                "parallel_devices). A thread that a profiled function starts and joins must not call a profiled "
                "function (it would wait forever): call the undecorated one, fn.__wrapped__. (nsightx says this "
                "once per process.)",
                stacklevel=stacklevel,
            )
        _count_waiting(+1)
        try:
            _LOCK.acquire()
        finally:
            _count_waiting(-1)
    _owner = Owner(function, threading.get_ident(), threading.current_thread().name)


def _count_waiting(step: int) -> None:
    global _waiting
    with _waiting_lock:
        _waiting += step


def leave() -> None:
    """End the profiled call started by :func:`enter` in this thread."""
    global _owner
    _owner = None
    _LOCK.release()


@contextmanager
def run_loop_guard(function: str) -> Iterator[None]:
    """Hold the lock around a run loop, unless this thread's profiled call already holds it.

    ``ProfiledFunction.__call__`` holds it from plan to result, so its loop passes through; a loop started
    without a profiled call around it (the ncu worker's child process, a backend calling ``run_loop`` itself)
    takes it here, so that a profiled call inside its function is refused as nested there too.
    """
    owner = _owner
    if owner is not None and owner.thread_id == threading.get_ident():
        yield
        return
    enter(function, stacklevel=5)  # run_loop's caller
    try:
        yield
    finally:
        leave()


def warn_once(key: str, message: str, *, stacklevel: int) -> None:
    """Give the :class:`ConcurrentCallWarning` ``message`` unless one with ``key`` was given in this process.

    ``stacklevel`` counts as ``warnings.warn`` counts from the caller of this function.
    """
    with _warned_lock:
        if key in _warned:
            return
        _warned.add(key)
    warnings.warn(message, ConcurrentCallWarning, stacklevel=stacklevel + 1)
