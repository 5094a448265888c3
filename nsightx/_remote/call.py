"""The parent's half of running a plan in a child process: the contract a backend that measures elsewhere uses.

A backend whose measurement cannot happen in the user's process (the ncu backend: its child runs under Nsight
Compute) overrides ``Backend.execute`` and, through ``nsightx.ext``, uses three things from here:

1. :class:`RemoteCall` ``(plan, folder, ...)``: builds the thermal guard and the progress line in this process,
   replaces the plan's collectors with proxies (:mod:`nsightx._remote.serve`), and pickles that plan into
   ``folder`` (a private 0700 folder the backend made) with :mod:`nsightx._remote.payload`, so that a value that
   cannot travel is named (:class:`~nsightx._remote.travel.UnpicklableError`) before any process starts.
2. ``with call.serving():`` listens on the channel's socket in ``folder`` and writes the child's spec there,
   with a random per-call secret (the parent serves only a connection whose first message holds it). Inside,
   the backend starts ``call.command(module)`` (its own child module, whose ``main`` calls :func:`run_child
   <nsightx._remote.child.run_child>` with a session factory) in ``call.env()``, under whatever tool it
   needs, and drives a ``selectors`` loop in which it first calls ``call.register(sel)``: a ready key whose
   ``data`` is not ``None`` belongs to the channel and goes to ``key.data.serve(key.fileobj)``.
3. After the child ended: :meth:`RemoteCall.runs` (what the child's sink wrote), :meth:`RemoteCall.error`
   (the child's failure, with the config and run), :attr:`RemoteCall.failure` (the parent's own, e.g. a thermal
   timeout: re-raise it), :meth:`RemoteCall.died_at` (the run a child that vanished was in), and
   :meth:`RemoteCall.cleanup`.

The child's environment (:func:`child_env`) carries this process's ``sys.path``, so nsightx, the backend's
package and any module a by-reference function lives in import there, and marks the child
(:meth:`RemoteCall.inside_child`), so that a profiled call started by the child's import of the user's module
is refused with a clear message instead of recursing.
"""

from __future__ import annotations

import dataclasses
import json
import os
import secrets
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from nsightx._remote.channel import ENV_CHANNEL
from nsightx._remote.payload import dump_plan
from nsightx._remote.serve import WorkerRequests, worker_collectors
from nsightx._remote.server import ChannelServer, listening
from nsightx._remote.travel import Destination
from nsightx._results.records import RunRecords
from nsightx._results.sink import read_raw
from nsightx._run.plan import Plan, ThermalSettings
from nsightx._run.progress import Progress
from nsightx._run.thermal import make_guard


def child_env(base: Mapping[str, str] | None = None, channel: str | None = None) -> dict[str, str]:
    """A child's environment: ``base`` (this process's by default) with this process's ``sys.path`` in ``PYTHONPATH``.

    That makes nsightx, the backend's package and any module a by-reference pickled function lives in importable
    there. ``channel`` (the parent's socket) is also set as ``NSIGHTX_REMOTE_CHANNEL``, which marks the child.
    """
    env = dict(os.environ if base is None else base)
    entries = [os.path.abspath(p or os.getcwd()) for p in sys.path]
    existing = env.get("PYTHONPATH", "")
    env["PYTHONPATH"] = os.pathsep.join([*dict.fromkeys(entries), *([existing] if existing else [])])
    env["PYTHONUNBUFFERED"] = "1"
    if channel is not None:
        env[ENV_CHANNEL] = channel
    return env


class RemoteCall:
    """One execution of ``plan`` in a child process, seen from the user's process.

    Args:
        plan: The user's plan (with the real collectors).
        folder: A private (0700) folder of this call: the payload, the spec, the child's runs and error file and
            the channel's socket go there.
        where: How errors name the child, e.g. ``"the ncu worker"`` (``cannot send f to the ncu worker``).
        in_process: The way out that avoids pickling, e.g. ``"measure in process with backend='cupti'"``.
        label: The progress line's label (the function's name by default).
        options: What the child's session factory receives (JSON values).
        changes: Fields of the child's plan to replace (e.g. the backend's resolved ``metrics``).

    Raises:
        UnpicklableError: A value the function uses, or a config argument, cannot be sent to the child.
    """

    def __init__(
        self,
        plan: Plan,
        folder: Path,
        *,
        where: str,
        in_process: str,
        label: str | None = None,
        options: Mapping[str, Any] | None = None,
        changes: Mapping[str, Any] | None = None,
    ) -> None:
        self.plan = plan
        self.folder = folder
        self.options = dict(options or {})
        guard = make_guard(plan)  # here, in the user's process, like the collectors
        child_plan = dataclasses.replace(
            plan,
            **{
                "output_dir": None,
                **dict(changes or {}),
                "collectors": worker_collectors(plan, guard),
                "thermal": ThermalSettings(mode="off"),
            },
        )
        self.payload.write_bytes(dump_plan(child_plan, Destination(where, in_process), stacklevel=2))
        progress = Progress(plan)
        progress.label = label or plan.function_name
        self._requests = WorkerRequests(plan, guard, progress)
        self._server: ChannelServer | None = None
        self._channel: str | None = None

    @property
    def payload(self) -> Path:
        """The pickled plan."""
        return self.folder / "plan.pkl"

    @property
    def spec(self) -> Path:
        """The JSON spec the child is given (its only argument)."""
        return self.folder / "spec.json"

    @property
    def runs_file(self) -> Path:
        """The JSON lines the child's sink writes."""
        return self.folder / "runs.jsonl"

    @property
    def error_file(self) -> Path:
        """The child's failure description, if it failed."""
        return self.folder / "error.json"

    @staticmethod
    def inside_child() -> bool:
        """Whether this process is the child of a remote call (a profiled call here would start another)."""
        return bool(os.environ.get(ENV_CHANNEL))

    @contextmanager
    def serving(self) -> Iterator[None]:
        """Listen on the channel and write the child's spec; on leaving, close the channel and the progress line."""
        secret = secrets.token_hex(32)  # only the child started for this call may talk: it reads this in the spec
        try:
            with listening(self.folder) as (listener, channel):
                self._channel = channel
                self._write_spec(channel, secret)
                self._server = ChannelServer(listener, self._requests, secret)
                try:
                    yield
                finally:
                    self._server.close()
                    self._server = None
        finally:
            self._requests.progress.close()

    def _write_spec(self, channel: str, secret: str) -> None:
        """Where the plan, runs and error go, the session's options, the channel and its secret.

        The spec lies in the private folder: the secret reaches the child without going through its command
        line (readable by every user) or its environment (inherited by every process the user's function starts).
        """
        spec = {
            "payload": str(self.payload),
            "runs": str(self.runs_file),
            "error": str(self.error_file),
            "options": self.options,
            "channel": channel,
            "secret": secret,
        }
        self.spec.write_text(json.dumps(spec), encoding="utf-8")

    def register(self, sel: Any) -> None:
        """Watch the channel with the caller's ``selectors`` selector (inside :meth:`serving`).

        Keys it registers carry the server as ``data``: hand them to ``key.data.serve(key.fileobj)``.
        """
        if self._server is None:
            raise RuntimeError("RemoteCall.register() is called inside `with call.serving():`")
        self._server.register(sel)

    def command(self, module: str) -> list[str]:
        """The child's command line: this Python running ``module`` (``-m``) with the spec's path."""
        return [sys.executable, "-m", module, str(self.spec)]

    def env(self, base: Mapping[str, str] | None = None) -> dict[str, str]:
        """The child's environment (:func:`child_env`) with the channel set (inside :meth:`serving`)."""
        return child_env(base, self._channel)

    def runs(self) -> list[RunRecords]:
        """The runs the child's sink wrote (none when it wrote no file)."""
        return read_raw(self.runs_file) if self.runs_file.exists() else []

    def error(self) -> dict[str, Any] | None:
        """The child's failure: ``stage`` (``"setup"`` or ``"run"``), ``config``, ``run``, ``type``, ``message``."""
        if not self.error_file.exists():
            return None
        try:
            data = json.loads(self.error_file.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            return {"type": "unknown", "message": "the worker's error file could not be read"}
        return data if isinstance(data, dict) else None

    @property
    def failure(self) -> BaseException | None:
        """The parent's own error while serving (e.g. :class:`~nsightx.CoolingTimeoutError`): re-raise it."""
        return self._requests.failure

    def died_at(self) -> tuple[int, int] | None:
        """``(config, run)`` a child was in when it ended without finishing it or saying goodbye, else ``None``."""
        last = self._requests.last
        if last is not None and not last.finished and self._requests.clean_exits < self._requests.passes:
            return last.config, last.run
        return None

    def cleanup(self) -> None:
        """Delete the payload, spec, runs and error files (the folder is the caller's)."""
        for path in (self.payload, self.spec, self.runs_file, self.error_file):
            path.unlink(missing_ok=True)
