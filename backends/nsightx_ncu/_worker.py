"""The worker: runs the shared run loop under ncu and marks every measured region with an NVTX range.

Started by the ncu backend as ``ncu ... python -m nsightx_ncu._worker <spec.json>``. The spec names the
pickled plan, the JSON-lines file the worker's :class:`~nsightx.ext.RunSink` writes (host times and
collector values; metric values come from the report, in the parent), the file a failure is described in, and
the parent's channel socket (:mod:`nsightx_ncu._channel`): the plan's collectors are proxies that ask the
parent, and each run start waits for the parent's thermal guard and RUN collectors.

Warm-up runs (negative run index) open no range, so ncu's ``--nvtx-include`` filter leaves their kernels alone.
Ranges are process-wide start/end ranges by default (kernels launched by any thread while a region is open are
profiled); ``backend_options={"ncu_nvtx_ranges": "push_pop"}`` makes them per-thread push/pop ranges.
The worker's own diagnostics (a traceback) are printed with a ``==NSIGHTX==`` prefix: like ncu's ``==PROF==``
lines they stay in the log, while what the user's function prints reaches the user's terminal.
"""

from __future__ import annotations

import json
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from nsightx.ext import RegionId, RunOutput, Session
from nsightx_ncu import _channel
from nsightx_ncu._channel import ParentLink
from nsightx_ncu._command import DOMAIN, range_name

EXIT_FAILED = 3
"""Exit status of a worker whose user function (or set-up) raised; details are in the error file."""


class NvtxSession(Session):
    """In-worker session: each measured region becomes one NVTX range in the ``nsightx`` domain.

    Args:
        push: Called with a range name when a measured region opens (starts or pushes the range).
        pop: Called when it closes (ends or pops it).
        link: The channel to the parent (``None``: no parent to tell, as in unit tests).
    """

    def __init__(self, push: Callable[[str], Any], pop: Callable[[], Any], link: ParentLink | None = None) -> None:
        self._push, self._pop = push, pop
        self._link = link
        self.config: int | None = None
        self.run: int | None = None

    def start_run(self, config: int, run: int) -> None:
        """Remember which run is in progress (named in the error file if it fails) and wait for the parent.

        The parent runs the thermal guard and, for a measured run, the RUN collectors before it answers.
        """
        self.config, self.run = config, run
        if self._link is not None:
            self._link.start_run(config, run)

    def region_enter(self, region: RegionId) -> None:
        """Open the region's NVTX range (measured runs only)."""
        if region.run >= 0:
            self._push(range_name(region))

    def region_exit(self, region: RegionId, failed: bool) -> None:
        """Close the region's NVTX range."""
        if region.run >= 0:
            self._pop()

    def finish_run(self, config: int, run: int) -> RunOutput:
        """Tell the parent (progress line); nothing to return: metric values are read from the report."""
        if self._link is not None:
            self._link.finish_run(config, run)
        return RunOutput()


def nvtx_callables(kind: str) -> tuple[Callable[[str], Any], Callable[[], Any]]:
    """Push and pop functions for the chosen NVTX range kind, from the ``nvtx`` package.

    Args:
        kind: ``start_end`` (process-wide ranges, the default) or ``push_pop`` (per-thread stack).

    Returns:
        ``(open, close)`` callables.

    Raises:
        ValueError: ``kind`` is neither.
    """
    if kind not in ("start_end", "push_pop"):
        raise ValueError(f"unknown NVTX range kind {kind!r}; expected 'start_end' or 'push_pop'")
    import nvtx

    if kind == "push_pop":

        def push(name: str) -> None:
            nvtx.push_range(message=name, domain=DOMAIN)

        def pop() -> None:
            nvtx.pop_range(domain=DOMAIN)

        return push, pop

    open_ranges: list[Any] = []

    def start(name: str) -> None:
        open_ranges.append(nvtx.start_range(message=name, domain=DOMAIN))

    def end() -> None:
        nvtx.end_range(open_ranges.pop())

    return start, end


def _write_error(path: Path, session: NvtxSession | None, exc: BaseException, stage: str) -> None:
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
    """The traceback into the log only: each line carries the prefix the parent keeps off the user's terminal."""
    lines = "".join(traceback.format_exception(exc)).splitlines()
    print("\n".join(f"{TAG} {line}" for line in lines), file=sys.stderr, flush=True)


TAG = "==NSIGHTX=="
"""Prefix of the worker's own lines (the parent routes them to the log, like ncu's ``==PROF==`` lines)."""


def main(argv: list[str] | None = None) -> int:
    """Run the plan described by the spec file named in ``argv[1]``.

    Returns:
        0 on success, :data:`EXIT_FAILED` when the plan could not be loaded or the user's function raised.
    """
    args = sys.argv if argv is None else argv
    spec = json.loads(Path(args[1]).read_text(encoding="utf-8"))
    runs_path, error_path = Path(spec["runs"]), Path(spec["error"])
    # Application replay starts the worker once per pass: keep only the last pass's host-side records.
    runs_path.unlink(missing_ok=True)
    error_path.unlink(missing_ok=True)
    session: NvtxSession | None = None
    link: ParentLink | None = None
    try:
        if spec.get("channel"):
            link = ParentLink.connect(spec["channel"], str(spec.get("secret", "")))
            _channel.install(link)
        import cloudpickle

        from nsightx.ext import RunSink, run_loop

        plan = cloudpickle.loads(Path(spec["payload"]).read_bytes())
        push, pop = nvtx_callables(spec.get("nvtx_ranges", "start_end"))
        session = NvtxSession(push, pop, link)
    except BaseException as e:
        _write_error(error_path, session, e, "setup")
        _print_traceback(e)
        if link is not None:
            link.close(clean=False)
        return EXIT_FAILED
    sink = RunSink(runs_path)
    clean = False
    try:
        from nsightx.ext import use_device

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


if __name__ == "__main__":
    sys.exit(main())
