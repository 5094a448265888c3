"""Running ncu: one loop in the user's thread serves the worker's channel, routes its output and watches the clock.

The loop waits on everything at once (the channel's listening socket, each connected worker, ncu's stdout and
stderr) with a short timeout, so the parent never blocks on the worker: a worker that dies mid-request closes
its connection (end of file), ncu's exit is seen within :data:`POLL_S`, ``ncu_timeout_s`` kills the process
group, and Ctrl-C (which Python delivers to this thread) kills it too before it propagates. Collectors run here,
in the user's thread, as they do on in-process backends.

Only the worker this call started is served: the first line of every connection must be the worker's ``hello``
holding the call's secret (read from the spec in the private folder, compared in constant time). Any other
connection (another process of the same user that found the socket) is closed before anything is answered, so
it can neither read a collector value nor stop the sweep with a bad request.
"""

from __future__ import annotations

import hmac
import json
import os
import selectors
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from nsightx_ncu._channel import encode
from nsightx_ncu._echo import OutputRouter
from nsightx_ncu._serve import WorkerRequests

POLL_S = 0.25
"""Longest wait of the loop before it looks at the clock and at ncu's exit status again, seconds."""

DRAIN_S = 2.0
"""After ncu exits, how long its output is still read (a grandchild may hold the pipes open), seconds."""

MAX_SOCKET_PATH = 100
"""Longest socket path used as is (the system limit is 107 bytes); a longer one moves to a short folder."""

READ_BYTES = 1 << 16

MAX_HELLO_BYTES = 4096
"""Longest first line a connection may send before it has shown the secret; a longer one is closed."""


@dataclass(frozen=True)
class Outcome:
    """How ncu ended."""

    returncode: int
    """ncu's exit status (negative: killed by that signal)."""
    timed_out: bool
    """Killed at ``ncu_timeout_s``."""
    permission_denied: bool
    """ncu said ``ERR_NVGPUCTRPERM`` (the process group was then killed: nothing can be measured)."""


@dataclass
class _Connection:
    """One accepted connection: bytes received but not yet a whole line, and whether it showed the secret."""

    buffer: bytearray = field(default_factory=bytearray)
    trusted: bool = False


def admitted(message: Any, secret: str) -> bool:
    """Whether a connection's first message is the worker's ``hello`` holding this call's ``secret``."""
    if not isinstance(message, dict) or message.get("op") != "hello":
        return False
    given = message.get("secret")
    return bool(secret) and isinstance(given, str) and hmac.compare_digest(given.encode(), secret.encode())


@contextmanager
def listening(private: Path) -> Iterator[tuple[socket.socket, str]]:
    """A listening Unix-domain socket in the private folder (or in a new 0700 folder, if its path is too long).

    Yields:
        ``(listener, path)``; the socket file (and any extra folder) is removed afterwards.
    """
    folder = private
    extra: Path | None = None
    if len(str(private / "channel.sock").encode()) > MAX_SOCKET_PATH:
        extra = folder = Path(tempfile.mkdtemp(prefix="nsx-", dir="/tmp"))
        os.chmod(folder, 0o700)
    path = str(folder / "channel.sock")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        listener.bind(path)
        listener.listen(4)
        listener.setblocking(False)
        yield listener, path
    finally:
        listener.close()
        Path(path).unlink(missing_ok=True)
        if extra is not None:
            shutil.rmtree(extra, ignore_errors=True)


def supervise(
    cmd: list[str],
    *,
    env: Mapping[str, str],
    log: Path,
    listener: socket.socket,
    requests: WorkerRequests,
    secret: str,
    timeout_s: float | None,
    show_tool_lines: bool = False,
) -> Outcome:
    """Run ``cmd`` (ncu and the worker) to its end, serving the channel and routing the output.

    Args:
        cmd: The ncu command line.
        env: The worker's environment.
        log: Where every byte ncu and the worker print goes.
        listener: The channel's listening socket (see :func:`listening`).
        requests: Answers the worker's messages.
        secret: What a connection's first message (the worker's ``hello``) must hold to be served.
        timeout_s: Kill the process group after this many seconds (``None``: never).
        show_tool_lines: Echo ncu's own ``==PROF==`` lines too.

    Returns:
        How ncu ended.
    """
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    sel = selectors.DefaultSelector()
    connections: dict[socket.socket, _Connection] = {}
    with _open_log(log) as log_file:
        router = OutputRouter(log_file, show_tool_lines=show_tool_lines)
        proc = _start(cmd, env)
        assert proc.stdout is not None and proc.stderr is not None  # both are pipes
        pipes = {proc.stdout.fileno(): "stdout", proc.stderr.fileno(): "stderr"}
        sel.register(listener, selectors.EVENT_READ, None)
        for fd in pipes:
            sel.register(fd, selectors.EVENT_READ, None)
        try:
            timed_out = _pump(
                proc,
                sel,
                pipes,
                deadline,
                router,
                lambda key: _serve_one(key.fileobj, sel, listener, pipes, connections, router, requests, secret),
            )
        except BaseException:
            kill_group(proc)
            raise
        finally:
            for conn in connections:
                conn.close()
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
    serve: Callable[[selectors.SelectorKey], None],
) -> bool:
    """Serve whatever is ready until ncu ended and its pipes drained, or it must be killed.

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
        if proc.poll() is not None:
            exited_at = now if exited_at is None else exited_at
            if not pipes or now - exited_at >= DRAIN_S:
                return False
        wait = POLL_S if deadline is None else max(min(POLL_S, deadline - now), 0.0)
        for key, _ in sel.select(wait):
            serve(key)


def _serve_one(
    fileobj: Any,
    sel: selectors.BaseSelector,
    listener: socket.socket,
    pipes: dict[int, str],
    connections: dict[socket.socket, _Connection],
    router: OutputRouter,
    requests: WorkerRequests,
    secret: str,
) -> None:
    """Handle one ready file: a new connection, a connection's message(s), or output."""
    if fileobj is listener:
        try:
            conn, _ = listener.accept()
        except BlockingIOError:
            return
        conn.setblocking(True)
        connections[conn] = _Connection()
        sel.register(conn, selectors.EVENT_READ, None)
        return
    if isinstance(fileobj, int):
        data = os.read(fileobj, READ_BYTES)
        if data:
            router.feed(pipes[fileobj], data)  # type: ignore[arg-type]  # "stdout" or "stderr"
        else:
            sel.unregister(fileobj)
            del pipes[fileobj]
        return
    _serve_connection(fileobj, sel, connections, requests, secret)


def _close(conn: socket.socket, sel: selectors.BaseSelector, connections: dict[socket.socket, _Connection]) -> None:
    sel.unregister(conn)
    del connections[conn]
    conn.close()


def _serve_connection(
    conn: socket.socket,
    sel: selectors.BaseSelector,
    connections: dict[socket.socket, _Connection],
    requests: WorkerRequests,
    secret: str,
) -> None:
    """Read what a connection sent and answer each whole line; close it at its end or if it lacks the secret."""
    state = connections[conn]
    try:
        data = conn.recv(READ_BYTES)
    except OSError:
        data = b""
    if not data:  # the worker ended (or died): nothing more will come on this connection
        _close(conn, sel, connections)
        return
    state.buffer += data
    while (end := state.buffer.find(b"\n")) >= 0:
        line = bytes(state.buffer[:end])
        del state.buffer[: end + 1]
        try:
            message = json.loads(line)
        except ValueError:
            message = None  # not ours (nothing else should write here); never let it stop the measurement
        if not state.trusted:
            if not admitted(message, secret):
                _close(conn, sel, connections)  # not the worker this call started: nothing read, nothing sent
                return
            state.trusted = True
        if not isinstance(message, dict):
            continue
        answer = requests.handle(message)
        if answer is not None:
            try:
                conn.sendall(encode(answer))
            except OSError:
                return  # the worker died while waiting; its end of file comes next
    if not state.trusted and len(state.buffer) > MAX_HELLO_BYTES:
        _close(conn, sel, connections)


def kill_group(proc: subprocess.Popen[bytes]) -> None:
    """Kill ncu and the worker it started (they share the process group made for ncu), and reap ncu."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        proc.kill()
    proc.wait()
