"""The child's end of the channel to the user's process, and the proxy collectors that travel in the plan.

When a backend measures in another process (the ncu backend's worker under Nsight Compute), the user's function
runs in that child, but its info collectors, the thermal guard and the progress line stay in the user's process
(collector objects often hold NVML handles or other state that cannot be pickled, and their values must
describe the moment the child reaches, not a copy of the collector). The parent listens on a Unix-domain socket
in its private 0700 folder (:mod:`nsightx._remote.server`); the child connects once per start (ncu's
application replay starts it once per pass) and speaks JSON lines:

=====================================================  ==========================================================
worker sends                                           parent does, then answers
=====================================================  ==========================================================
``{"op": "hello", "pid": P, "secret": K}``             a new worker (pass) began; no answer. It must be the
                                                       first message, with the call's secret K (from the spec),
                                                       or the connection is closed unanswered
``{"op": "run", "config": C, "run": R}``               thermal guard; for a measured run (R >= 0) the RUN
                                                       collectors; answers ``{"values": [...]}``
``{"op": "collect", "scope": S, "config": C, ...}``    the collectors of scope S (once, config, annotation);
                                                       answers ``{"values": [...]}``
``{"op": "ran", "config": C, "run": R}``               run C/R finished (progress line); no answer
``{"op": "bye"}``                                      the run loop ended normally; no answer
=====================================================  ==========================================================

Each entry of ``values`` is ``[collector name, kind, value]`` with kind ``"value"`` (a scalar), ``"mapping"``
(column name to scalar) or ``"failed"`` (the collector raised; the parent already warned). An answer
``{"error": {"type": T, "message": M}}`` means the parent failed (a thermal timeout under
``thermal_mode="manual"``): the worker stops with :class:`ParentFailed`. When the parent is gone (end of file)
the worker stops with :class:`ParentGone`. Both derive from :class:`BaseException` on purpose, so the run loop's
``except Exception`` around collectors cannot swallow them.

One request per run and one per scope event: the ``run`` answer carries every RUN value, so the RUN proxies
read it from a cache instead of asking once each.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Mapping
from typing import Any

from nsightx._enums import CollectionScope
from nsightx._run.collectors import CollectContext, CollectResult

ENV_CHANNEL = "NSIGHTX_REMOTE_CHANNEL"
"""Set in the child's environment (to the socket path) so that a profiled call made inside it can be recognised."""


class ParentGone(BaseException):
    """The user's process closed the channel (it was interrupted or died): the worker must stop."""


class ParentFailed(BaseException):
    """The user's process reported an error for a request (e.g. a thermal timeout): the worker must stop.

    Args:
        kind: The parent's exception type name.
        message: Its message.
    """

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(f"{kind}: {message}")
        self.kind = kind
        self.message = message


def encode(message: Mapping[str, Any]) -> bytes:
    """One message as a JSON line (NaN and infinities allowed, as Python's json writes them)."""
    return json.dumps(message, separators=(",", ":")).encode("utf-8") + b"\n"


Entry = tuple[str, Any]
"""(kind, value) of one collector's answer, as the parent sent it."""


class ParentLink:
    """The worker's connection to the parent: blocking requests, one-way notices, a cache of the last answer.

    Args:
        sock: A connected stream socket.
    """

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self._reader = sock.makefile("rb")
        self._key: tuple[Any, ...] | None = None
        self._values: dict[str, Entry] = {}

    @classmethod
    def connect(cls, path: str, secret: str) -> ParentLink:
        """Connect to the parent's socket at ``path`` and say hello with the call's ``secret``.

        The parent closes a connection whose first message is not this hello with the right secret.
        """
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect(path)
        link = cls(sock)
        link.notify({"op": "hello", "pid": os.getpid(), "secret": secret})
        return link

    def notify(self, message: Mapping[str, Any]) -> None:
        """Send a message that needs no answer."""
        try:
            self._sock.sendall(encode(message))
        except OSError as e:
            raise ParentGone(f"the nsightx parent process is gone ({e})") from e

    def request(self, message: Mapping[str, Any]) -> dict[str, Any]:
        """Send ``message`` and wait for the answer.

        Raises:
            ParentGone: The parent closed the channel.
            ParentFailed: The parent answered with an error.
        """
        self.notify(message)
        try:
            line = self._reader.readline()
        except OSError as e:
            raise ParentGone(f"the nsightx parent process is gone ({e})") from e
        if not line:
            raise ParentGone("the nsightx parent process closed the channel")
        answer: dict[str, Any] = json.loads(line)
        error = answer.get("error")
        if error is not None:
            raise ParentFailed(str(error.get("type")), str(error.get("message")))
        return answer

    def start_run(self, config: int, run: int) -> None:
        """Tell the parent run ``run`` of ``config`` is about to start; keep the RUN values it answers with."""
        answer = self.request({"op": "run", "config": config, "run": run})
        self._store((CollectionScope.RUN.value, config, run, None), answer)

    def finish_run(self, config: int, run: int) -> None:
        """Tell the parent the run finished (it draws the progress line)."""
        self.notify({"op": "ran", "config": config, "run": run})

    def value(self, name: str, ctx: CollectContext) -> Entry:
        """The answer of the parent's collector ``name`` for the moment ``ctx`` describes.

        The first proxy of a scope event asks for every collector of that scope at once; the others (and the
        RUN proxies, whose values came with :meth:`start_run`) read the cached answer.
        """
        scope = CollectionScope(ctx.scope).value
        key = (scope, ctx.config, ctx.run, ctx.annotation)
        if key != self._key:
            answer = self.request(
                {"op": "collect", "scope": scope, "config": ctx.config, "run": ctx.run, "annotation": ctx.annotation}
            )
            self._store(key, answer)
        return self._values.get(name, ("failed", None))

    def _store(self, key: tuple[Any, ...], answer: Mapping[str, Any]) -> None:
        self._key = key
        self._values = {str(name): (str(kind), value) for name, kind, value in answer.get("values", ())}

    def close(self, *, clean: bool) -> None:
        """Say goodbye (when the run loop ended normally) and close the socket."""
        try:
            if clean:
                self.notify({"op": "bye"})
        except ParentGone:
            pass
        finally:
            self._reader.close()
            self._sock.close()


_link: ParentLink | None = None


def install(link: ParentLink | None) -> None:
    """Make ``link`` the one the proxies of this process use (the child calls this once)."""
    global _link
    _link = link


def current() -> ParentLink:
    """The installed link.

    Raises:
        ParentGone: No link is installed (a proxy was called outside a child).
    """
    if _link is None:
        raise ParentGone("a proxy collector was called outside a child of nsightx (no channel to the parent)")
    return _link


class ProxyCollector:
    """Stands in for one of the parent's collectors inside the child: same name, scope and columns.

    It is all that travels in the pickled plan (a name, a scope, a tuple of strings); calling it asks the
    parent, where the real collector runs.

    Args:
        name: The real collector's name (or a guard column such as ``ThermalPauseS``).
        scope: Its scope.
        columns: The columns a mapping-returning collector fills, when it declares them.
    """

    def __init__(self, name: str, scope: CollectionScope, columns: tuple[str, ...] | None = None) -> None:
        self.name = name
        self.scope = scope
        self.columns = columns

    def __repr__(self) -> str:
        return f"ProxyCollector({self.name!r}, scope={self.scope.value!r})"

    def collect(self, ctx: CollectContext) -> CollectResult:
        """The parent's answer: its scalar, its mapping, or ``{name: None}`` when the real collector raised."""
        kind, value = current().value(self.name, ctx)
        if kind == "failed":
            return {self.name: None}
        if kind == "mapping":
            return dict(value)
        result: CollectResult = value
        return result
