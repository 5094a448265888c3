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
