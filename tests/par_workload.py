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


def _ctx_once(ctx: nsightx.CollectContext) -> str:
    return f"once {ctx.function}"


def _ctx_config(ctx: nsightx.CollectContext) -> str:
    return f"config {ctx.config} args {ctx.args}"


def _ctx_run(ctx: nsightx.CollectContext) -> int:
    return (ctx.config or 0) * 100 + (ctx.run or 0)


def _ctx_annotation(ctx: nsightx.CollectContext) -> str:
    return f"{ctx.annotation} of config {ctx.config} run {ctx.run}"


INDEXED_COLLECTORS = [
    nsightx.InfoCollector("c_once", _ctx_once, nsightx.CollectionScope.ONCE),
    nsightx.InfoCollector("c_config", _ctx_config, nsightx.CollectionScope.CONFIG),
    nsightx.InfoCollector("c_run", _ctx_run, nsightx.CollectionScope.RUN),
    nsightx.InfoCollector("c_annotation", _ctx_annotation, nsightx.CollectionScope.ANNOTATION),
]
"""Collectors whose values say which config index, run and region they were asked for (deterministic)."""


def regions(n: int, tag: str) -> None:
    """Region ``a`` always, ``b`` for an odd ``n``: configs differ in their regions, not only in their values."""
    with nsightx.annotate("a"):
        pass
    if n % 2:
        with nsightx.annotate("b"):
            pass


_CALLS: dict[int, int] = {}


def raises_on_second_call(n: int, tag: str) -> None:
    """Like ``regions``; config ``n == 3`` raises on its second call in a process (its first run was measured)."""
    regions(n, tag)
    _CALLS[n] = _CALLS.get(n, 0) + 1
    if n == 3 and _CALLS[n] >= 2:
        raise RuntimeError(f"config {n} broke on call {_CALLS[n]}")


_ONCE_CALLS: list[str] = []
"""This process's ONCE tokens, in the order they were given."""


def _once_token(ctx: nsightx.CollectContext) -> str:
    """A token no other task of the sweep gives: this process's pid and how many ONCE calls it had."""
    _ONCE_CALLS.append(f"{os.getpid()}:{len(_ONCE_CALLS)}")
    return _ONCE_CALLS[-1]


def _task_token(ctx: nsightx.CollectContext) -> str:
    """The ONCE token of the task this config runs in: the last one this (one-task-at-a-time) process gave."""
    return _ONCE_CALLS[-1]


TOKEN_COLLECTORS = [
    nsightx.InfoCollector("once_token", _once_token, nsightx.CollectionScope.ONCE),
    nsightx.InfoCollector("task_token", _task_token, nsightx.CollectionScope.CONFIG),
]
"""A ONCE value that differs from task to task of a spread sweep, and per config the one of its own task."""


def no_region_for_even(n: int, tag: str) -> None:
    """Region ``a`` for an odd ``n`` only: a config with an even ``n`` opens no region (measured, no values)."""
    if n % 2:
        with nsightx.annotate("a"):
            pass


def baseline_but_for_2(n: int, tag: str) -> None:
    """Regions ``base`` (but for ``n == 2``) and ``a``: config ``n == 2`` has no ``normalize_against`` baseline."""
    if n != 2:
        with nsightx.annotate("base"):
            pass
    with nsightx.annotate("a"):
        pass


def blocks_on_4(n: int, tag: str) -> None:
    """Like ``regions``; config ``n == 4`` never ends (its sweep's caller is killed while it runs)."""
    regions(n, tag)
    if n == 4:
        time.sleep(600)


def held_on_4(n: int, folder: str) -> None:
    """Like ``regions``; config ``n == 4`` reports that it runs, then waits for the test (both through FIFOs).

    It opens ``folder/running`` for writing (which blocks until the test opens it to read), writes its pid and
    keeps it open while it lives: the test's read ends (end of file) only when this process is gone. Then it
    blocks on ``folder/release`` until the test opens that for writing (never, when its sweep's caller is
    stopped: the worker must be ended with it).
    """
    regions(n, folder)
    if n == 4:
        alive = open(os.path.join(folder, "running"), "w")  # open while this process lives
        alive.write(f"{os.getpid()}\n")
        alive.flush()
        with open(os.path.join(folder, "release")) as release:
            release.read()
        alive.close()
