"""The parent's listening end of the channel: a private socket, the secret check, and each connection served.

The child's messages are described in :mod:`nsightx._remote.channel`; :class:`~nsightx._remote.serve.WorkerRequests`
answers them. This module is the transport in between, written to be driven by the caller's own ``selectors``
loop (the one that also watches the child process and its output), so the parent never blocks on the child: a
child that dies mid-request closes its connection (end of file) and the loop goes on.

Only the child this call started is served: the first line of every connection must be the child's ``hello``
holding the call's secret (read by the child from its spec in the private folder, compared here in constant
time). Any other connection (another process of the same user that found the socket) is closed before anything
is answered, so it can neither read a collector value nor stop the sweep with a bad request.
"""

from __future__ import annotations

import hmac
import json
import os
import selectors
import shutil
import socket
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nsightx._remote.channel import encode
from nsightx._remote.serve import WorkerRequests

MAX_SOCKET_PATH = 100
"""Longest socket path used as is (the system limit is 107 bytes); a longer one moves to a short folder."""

READ_BYTES = 1 << 16

MAX_HELLO_BYTES = 4096
"""Longest first line a connection may send before it has shown the secret; a longer one is closed."""


def admitted(message: Any, secret: str) -> bool:
    """Whether a connection's first message is the child's ``hello`` holding this call's ``secret``."""
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


@dataclass
class _Connection:
    """One accepted connection: bytes received but not yet a whole line, and whether it showed the secret."""

    buffer: bytearray = field(default_factory=bytearray)
    trusted: bool = False


class ChannelServer:
    """Serves the channel from the caller's ``selectors`` loop: new connections and each connection's lines.

    Everything it registers carries the server itself as the key's ``data``, so the loop hands a ready key whose
    ``data`` is a :class:`ChannelServer` to :meth:`serve` and handles its own files (the child's output) itself.

    Args:
        listener: The listening socket (see :func:`listening`).
        requests: Answers the child's messages.
        secret: What a connection's first message (the child's ``hello``) must hold to be served.
    """

    def __init__(self, listener: socket.socket, requests: WorkerRequests, secret: str) -> None:
        self._listener = listener
        self._requests = requests
        self._secret = secret
        self._connections: dict[socket.socket, _Connection] = {}
        self._sel: selectors.BaseSelector | None = None

    def register(self, sel: selectors.BaseSelector) -> None:
        """Watch the listening socket (and, later, each accepted connection) with ``sel``."""
        self._sel = sel
        sel.register(self._listener, selectors.EVENT_READ, self)

    def serve(self, fileobj: Any) -> None:
        """Handle one ready file of this server: accept a connection, or answer what a connection sent."""
        if fileobj is self._listener:
            self._accept()
        else:
            self._serve_connection(fileobj)

    def close(self) -> None:
        """Close every connection still open (the listening socket belongs to :func:`listening`)."""
        for conn in list(self._connections):
            self._close(conn)

    def _accept(self) -> None:
        try:
            conn, _ = self._listener.accept()
        except BlockingIOError:
            return
        conn.setblocking(True)
        self._connections[conn] = _Connection()
        if self._sel is not None:
            self._sel.register(conn, selectors.EVENT_READ, self)

    def _close(self, conn: socket.socket) -> None:
        if self._sel is not None:
            try:
                self._sel.unregister(conn)
            except (KeyError, ValueError):  # the selector was closed first
                pass
        del self._connections[conn]
        conn.close()

    def _serve_connection(self, conn: socket.socket) -> None:
        """Read what a connection sent and answer each whole line; close it at its end or if it lacks the secret."""
        state = self._connections[conn]
        try:
            data = conn.recv(READ_BYTES)
        except OSError:
            data = b""
        if not data:  # the child ended (or died): nothing more will come on this connection
            self._close(conn)
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
                if not admitted(message, self._secret):
                    self._close(conn)  # not the child this call started: nothing read, nothing sent
                    return
                state.trusted = True
            if not isinstance(message, dict):
                continue
            answer = self._requests.handle(message)
            if answer is not None:
                try:
                    conn.sendall(encode(answer))
                except OSError:
                    return  # the child died while waiting; its end of file comes next
        if not state.trusted and len(state.buffer) > MAX_HELLO_BYTES:
            self._close(conn)
