"""Running ncu: one loop in the user's thread serves the worker's channel, routes its output and watches the clock.

The loop waits on everything at once (the channel of the :class:`~nsightx.ext.RemoteCall`, which nsightx serves,
and ncu's stdout and stderr) with a short timeout, so the parent never blocks on the worker: a worker that dies
mid-request closes its connection (end of file), ncu's exit is seen within :data:`POLL_S`, ``ncu_timeout_s``
kills the process group, what is left of the group when ncu ends (a worker still running after ncu was killed)
is killed too, and Ctrl-C (which Python delivers to this thread) kills it too before it propagates.
Collectors run here, in the user's thread, as they do on in-process backends.
"""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from nsightx.ext import RemoteCall
from nsightx_ncu._echo import OutputRouter

POLL_S = 0.25
"""Longest wait of the loop before it looks at the clock and at ncu's exit status again, seconds."""

DRAIN_S = 2.0
"""After ncu exits, how long its output is still read (a grandchild may hold the pipes open), seconds."""

READ_BYTES = 1 << 16


@dataclass(frozen=True)
class Outcome:
    """How ncu ended."""

    returncode: int
    """ncu's exit status (negative: killed by that signal)."""
    timed_out: bool
    """Killed at ``ncu_timeout_s``."""
    permission_denied: bool
    """ncu said ``ERR_NVGPUCTRPERM`` (the process group was then killed: nothing can be measured)."""


def supervise(
    cmd: list[str],
    *,
    call: RemoteCall,
    log: Path,
    timeout_s: float | None,
    show_tool_lines: bool = False,
) -> Outcome:
    """Run ``cmd`` (ncu and the worker) to its end, serving the call's channel and routing the output.

    Args:
        cmd: The ncu command line.
        call: The remote call the worker belongs to, inside ``call.serving()`` (its channel and environment).
        log: Where every byte ncu and the worker print goes.
        timeout_s: Kill the process group after this many seconds (``None``: never).
        show_tool_lines: Echo ncu's own ``==PROF==`` lines too.

    Returns:
        How ncu ended.
    """
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    sel = selectors.DefaultSelector()
    with _open_log(log) as log_file:
        router = OutputRouter(log_file, show_tool_lines=show_tool_lines)
        proc = _start(cmd, call.env())
        assert proc.stdout is not None and proc.stderr is not None  # both are pipes
        pipes = {proc.stdout.fileno(): "stdout", proc.stderr.fileno(): "stderr"}
        call.register(sel)
        for fd in pipes:
            sel.register(fd, selectors.EVENT_READ, None)
        try:
            timed_out = _pump(proc, sel, pipes, deadline, router)
            if proc.returncode is None:  # ncu ended, unreaped: nothing it started (a worker left running) outlives it
                kill_group(proc)
        except BaseException:
            kill_group(proc)
            raise
        finally:
            sel.close()
            router.close()
            proc.stdout.close()
            proc.stderr.close()
        rc = proc.wait()
    return Outcome(returncode=rc, timed_out=timed_out, permission_denied=router.permission_denied)


def _open_log(log: Path) -> BinaryIO:
    """Open the claimed (empty) log for writing, never through a symbolic link put in its place."""
    fd = os.open(log, os.O_WRONLY | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0))
    return os.fdopen(fd, "wb")


def _start(cmd: list[str], env: Mapping[str, str]) -> subprocess.Popen[bytes]:
    """Start ncu in its own session (so its whole process group can be killed), output on two pipes."""
    return subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        env=dict(env),
        start_new_session=True,
    )


def _pump(
    proc: subprocess.Popen[bytes],
    sel: selectors.BaseSelector,
    pipes: dict[int, str],
    deadline: float | None,
    router: OutputRouter,
) -> bool:
    """Serve whatever is ready until ncu ended and its pipes drained, or it must be killed.

    A ready key with ``data`` belongs to the channel (nsightx serves it); one without is ncu's output.

    Returns:
        Whether ncu was killed at the deadline (a permission refusal kills it too, without a time-out).
    """
    exited_at: float | None = None
    while True:
        now = time.monotonic()
        if deadline is not None and now >= deadline:
            kill_group(proc)
            return True
        if router.permission_denied:
            kill_group(proc)
            return False
        if _ended(proc):
            exited_at = now if exited_at is None else exited_at
            if not pipes or now - exited_at >= DRAIN_S:
                return False
        wait = POLL_S if deadline is None else max(min(POLL_S, deadline - now), 0.0)
        for key, _ in sel.select(wait):
            if key.data is not None:
                key.data.serve(key.fileobj)
            else:
                _read_output(key.fd, sel, pipes, router)


def _ended(proc: subprocess.Popen[bytes]) -> bool:
    """Whether ncu ended, leaving it unreaped (a zombie) so that its process group stays its own until killed.

    Reaping ncu here (``proc.poll()``) would free its process id, and the group of that id, while a worker it left
    running may still be in that group; :func:`kill_group` reaps it after killing the group.
    """
    if proc.returncode is not None:
        return True
    if not hasattr(os, "waitid"):  # macOS before Python 3.13
        return proc.poll() is not None
    try:
        return os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return proc.poll() is not None


def _read_output(fd: int, sel: selectors.BaseSelector, pipes: dict[int, str], router: OutputRouter) -> None:
    """Route what ncu printed on one pipe; forget the pipe at its end."""
    data = os.read(fd, READ_BYTES)
    if data:
        router.feed(pipes[fd], data)  # type: ignore[arg-type]  # "stdout" or "stderr"
    else:
        sel.unregister(fd)
        del pipes[fd]


def kill_group(proc: subprocess.Popen[bytes]) -> None:
    """Kill ncu and the worker it started (they share the process group made for ncu), and reap ncu.

    Also called once ncu ended (unreaped, see :func:`_ended`): a worker that ncu left running, because ncu was
    killed or crashed, is killed with the group rather than left behind measuring nothing.
    """
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        proc.kill()
    proc.wait()
