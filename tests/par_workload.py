"""Functions profiled in spawned worker processes by test_parallel.py (importable by reference)."""

from __future__ import annotations

import os
import time

import nsightx


def sleepy(n: int) -> None:
    with nsightx.annotate("sleep"):
        time.sleep(0.01 * n)
    with nsightx.annotate("pid"):
        pass


def failing(n: int) -> None:
    if n == 3:
        raise RuntimeError(f"config {n} broke in worker {os.getpid()}")
    with nsightx.annotate("a"):
        pass


def timed(n: int) -> None:
    """A region whose time is set by the config: n * 10 ms of sleep."""
    with nsightx.annotate("sleep"):
        time.sleep(0.01 * n)


def hang_once(n: int, folder: str) -> None:
    """Like ``timed``; config 3's first attempt writes its pid to ``folder/in-flight`` and waits to be killed.

    The test kills that process; the engine's retry finds the file and measures normally.
    """
    with nsightx.annotate("sleep"):
        time.sleep(0.01 * n)
    marker = os.path.join(folder, "in-flight")
    if n == 3 and not os.path.exists(marker):
        with open(marker + ".tmp", "w") as fh:
            fh.write(str(os.getpid()))
        os.replace(marker + ".tmp", marker)
        time.sleep(60)  # killed long before this ends


def dies(n: int) -> None:
    """Config 2 ends its worker process at once (as a crash or the OOM killer would)."""
    if n == 2:
        os._exit(3)
    with nsightx.annotate("a"):
        pass
