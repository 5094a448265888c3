"""The child's loop: load the shipped plan, run the shared run loop on the backend's session, report back.

A backend that measures in another process starts a fresh Python there with the path of a JSON spec that
:class:`~nsightx._remote.call.RemoteCall` wrote in the call's private folder, and calls :func:`run_child` from
that process's ``main`` with a factory of its own session (the ncu backend's opens one NVTX range per measured
region). The spec names the pickled plan, the JSON-lines file this process's
:class:`~nsightx._results.sink.RunSink` writes (the runs the session measured, with the collector values), the
file a failure is described in, the backend's own options, and the parent's channel socket
(:mod:`nsightx._remote.channel`): the plan's collectors are proxies that ask the parent, and each run start
waits for the parent's thermal guard and RUN collectors (:class:`LinkedSession`).

The child's own diagnostics (a traceback) are printed with the :data:`TAG` prefix, so that a parent that routes
prefixed lines to its log (as the ncu backend does with ncu's ``==PROF==`` lines) keeps them off the user's
terminal, while what the user's function prints reaches it.
"""

from __future__ import annotations

import json
import sys
import traceback
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from nsightx._remote import channel as _channel
from nsightx._remote.channel import ParentLink
from nsightx._results.records import RegionId
from nsightx._results.sink import RunSink
from nsightx._run.backend import RunOutput, Session
from nsightx._run.device import use_device
from nsightx._run.loop import run_loop

EXIT_FAILED = 3
"""Exit status of a child whose user function (or set-up) raised; details are in the error file."""

TAG = "==NSIGHTX=="
"""Prefix of the child's own lines (a parent may route them to its log, like ncu's ``==PROF==`` lines)."""

SessionFactory = Callable[[Mapping[str, Any]], Session]
"""Builds the backend's session in the child from the ``options`` the parent put in the spec."""


class LinkedSession(Session):
    """The backend's session, with the parent asked before each run and told after it.

    The parent runs the thermal guard and, for a measured run, the RUN collectors before it answers
    :meth:`start_run`; :meth:`finish_run` moves its progress line. The run in progress is remembered so that the
    error file can name it.

    Args:
        inner: The backend's session.
        link: The channel to the parent (``None``: no parent to ask, as in unit tests).
    """

    def __init__(self, inner: Session, link: ParentLink | None) -> None:
        self.inner = inner
        self.deferred = inner.deferred
        self.host_timed = inner.host_timed  # then the loop hands region times over (region_timed), not enter/exit
        self._link = link
        self.config: int | None = None
        self.run: int | None = None

    def start_run(self, config: int, run: int) -> None:
        """Wait for the parent's guard and collectors, then let the backend's session prepare the run."""
        self.config, self.run = config, run
        if self._link is not None:
            self._link.start_run(config, run)
        self.inner.start_run(config, run)

    def region_enter(self, region: RegionId) -> None:
        """The backend's session sees the region open."""
        self.inner.region_enter(region)

    def region_exit(self, region: RegionId, failed: bool) -> None:
        """The backend's session sees the region close."""
        self.inner.region_exit(region, failed)

    def region_timed(self, name: str, config: int, run: int, ns: int, failed: bool) -> None:
        """A region of a :attr:`~nsightx._run.backend.Session.host_timed` backend session closed after ``ns``.

        Its ``timed_records`` is not taken over (it stays None here): the loop then calls :meth:`finish_run` for
        every run, which tells the parent the run ended.
        """
        self.inner.region_timed(name, config, run, ns, failed)

    def finish_run(self, config: int, run: int) -> RunOutput:
        """The backend's output for the run; the parent is told the run ended."""
        output = self.inner.finish_run(config, run)
        if self._link is not None:
            self._link.finish_run(config, run)
        return output

    def collect_runs(self) -> Mapping[tuple[int, int], RunOutput]:
        """The backend's deferred outputs."""
        return self.inner.collect_runs()

    def environment(self) -> Mapping[str, Any]:
        """The backend's environment."""
        return self.inner.environment()


def _write_error(path: Path, session: LinkedSession | None, exc: BaseException, stage: str) -> None:
    info = {
        "stage": stage,
        "config": None if session is None else session.config,
        "run": None if session is None else session.run,
        "type": type(exc).__name__,
        "message": str(exc),
        "traceback": "".join(traceback.format_exception(exc)),
    }
    path.write_text(json.dumps(info), encoding="utf-8")


def _print_traceback(exc: BaseException) -> None:
    """The traceback with :data:`TAG` on each line (a parent that routes those keeps it in its log)."""
    lines = "".join(traceback.format_exception(exc)).splitlines()
    print("\n".join(f"{TAG} {line}" for line in lines), file=sys.stderr, flush=True)


def _set_up(spec: Mapping[str, Any], make_session: SessionFactory) -> tuple[Any, LinkedSession, ParentLink | None]:
    """Connect to the parent, load the plan and build the session; the link is closed if a later step fails."""
    link: ParentLink | None = None
    try:
        if spec.get("channel"):
            link = ParentLink.connect(spec["channel"], str(spec.get("secret", "")))
            _channel.install(link)
        import cloudpickle

        plan = cloudpickle.loads(Path(spec["payload"]).read_bytes())
        session = LinkedSession(make_session(dict(spec.get("options") or {})), link)
    except BaseException:
        if link is not None:
            link.close(clean=False)
        raise
    return plan, session, link


def run_child(argv: list[str] | None, make_session: SessionFactory) -> int:
    """Run the plan described by the spec file named in ``argv[1]`` (``sys.argv`` when ``None``).

    Args:
        argv: The child's command line: its program, then the spec's path.
        make_session: Builds the backend's session from the spec's ``options``.

    Returns:
        0 on success, :data:`EXIT_FAILED` when the plan could not be loaded or the user's function raised (the
        error file says which, with the config and run).
    """
    args = sys.argv if argv is None else argv
    spec = json.loads(Path(args[1]).read_text(encoding="utf-8"))
    runs_path, error_path = Path(spec["runs"]), Path(spec["error"])
    # ncu's application replay starts the child once per pass: keep only the last pass's records.
    runs_path.unlink(missing_ok=True)
    error_path.unlink(missing_ok=True)
    try:
        plan, session, link = _set_up(spec, make_session)
    except BaseException as e:
        _write_error(error_path, None, e, "setup")
        _print_traceback(e)
        return EXIT_FAILED
    sink = RunSink(runs_path)
    clean = False
    try:
        with use_device(plan.device):
            run_loop(plan, session, sink)
        clean = True
    except BaseException as e:
        _write_error(error_path, session, e, "run")
        _print_traceback(e)
        return EXIT_FAILED
    finally:
        sink.close()
        if link is not None:
            link.close(clean=clean)
    return 0
