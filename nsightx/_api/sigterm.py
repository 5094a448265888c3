"""SIGTERM during a measured call: the same one-line report as Ctrl-C, then the process ends as SIGTERM ends it.

A batch system (Slurm, Kubernetes, systemd, ``timeout``) stops a job with SIGTERM. Python's default for it is to
die at once, without a word, so a sweep stopped that way used to leave its raw file and no hint of it.
:func:`reported_sigterm` installs a handler for the duration of the measurement that raises
:class:`Terminated` in the main thread; the call's stop path prints its line (how many runs are saved, where,
how to load them) like for ``KeyboardInterrupt``, closes the raw file, and then the handler that was there
before is put back and the signal sent again, so the process ends as SIGTERM would have ended it (exit status
``-15`` to a parent, ``143`` in a shell), and a parent that waits for that status still sees it.

The handler is installed only where it cannot change anything else: in the main thread (Python runs signal
handlers there only, and ``signal.signal`` refuses other threads), and only while SIGTERM has its default action.
A program that set its own handler, or ignores SIGTERM, keeps its choice.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType


class Terminated(BaseException):  # like KeyboardInterrupt: a signal, not an error
    """SIGTERM arrived during a measured call (a ``BaseException``: ``except Exception`` must not swallow it).

    It is raised in the main thread to unwind the call through its stop path; the process then ends by SIGTERM.
    """


class _Handler:
    """The SIGTERM handler of one call: raises :class:`Terminated` inside the block, re-sends the signal after."""

    def __init__(self) -> None:
        self.active = True

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        """Put the default back first: a second SIGTERM during the clean-up ends the process at once."""
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        if not self.active:  # arrived as the block was being left: end as SIGTERM would have
            signal.raise_signal(signal.SIGTERM)
            return
        raise Terminated(f"terminated by signal {signum} (SIGTERM)")


@contextmanager
def reported_sigterm() -> Iterator[None]:
    """Turn SIGTERM into :class:`Terminated` inside the block; after it, end the process by SIGTERM.

    Does nothing off the main thread or when SIGTERM's handler is not the default one. On leaving the block the
    default handler is restored; when the block ended by :class:`Terminated` (its stop line printed, its files
    closed), the signal is raised again, which ends the process with SIGTERM's status. Should the process
    survive that (SIGTERM blocked), :class:`Terminated` goes on up.
    """
    if threading.current_thread() is not threading.main_thread() or signal.getsignal(signal.SIGTERM) is not (
        signal.SIG_DFL
    ):
        yield
        return
    handler = _Handler()
    signal.signal(signal.SIGTERM, handler)
    try:
        yield
    except Terminated:
        handler.active = False
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.raise_signal(signal.SIGTERM)
        raise
    finally:
        handler.active = False
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


def stop_cause(error: BaseException) -> str:
    """How a stop line names what stopped a call: ``interrupted``, ``terminated by SIGTERM`` or ``stopped by X``."""
    if isinstance(error, KeyboardInterrupt):
        return "interrupted"
    if isinstance(error, Terminated):
        return "terminated by SIGTERM"
    return f"stopped by {type(error).__name__}"
