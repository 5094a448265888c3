"""The ncu worker: the shared run loop in a child under ncu, each measured region marked with an NVTX range.

Started by the ncu backend as ``ncu ... python -m nsightx_ncu._worker <spec.json>``. Loading the plan, the
channel to the parent (collectors and the thermal guard stay there), the runs file and the error file are
nsightx's (:func:`nsightx.ext.run_child`); what is ncu's is the session: one NVTX range per measured region, in
the ``nsightx`` domain, named so that the report can be read back run by run.

Warm-up runs (negative run index) open no range, so ncu's ``--nvtx-include`` filter leaves their kernels alone.
Ranges are process-wide start/end ranges by default (kernels launched by any thread while a region is open are
profiled); ``backend_options={"ncu_nvtx_ranges": "push_pop"}`` makes them per-thread push/pop ranges.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from typing import Any

from nsightx.ext import RegionId, RunOutput, Session, run_child
from nsightx_ncu._command import DOMAIN, range_name


class NvtxSession(Session):
    """In-worker session: each measured region becomes one NVTX range in the ``nsightx`` domain.

    Args:
        push: Called with a range name when a measured region opens (starts or pushes the range).
        pop: Called when it closes (ends or pops it).
    """

    def __init__(self, push: Callable[[str], Any], pop: Callable[[], Any]) -> None:
        self._push, self._pop = push, pop

    def region_enter(self, region: RegionId) -> None:
        """Open the region's NVTX range (measured runs only)."""
        if region.run >= 0:
            self._push(range_name(region))

    def region_exit(self, region: RegionId, failed: bool) -> None:
        """Close the region's NVTX range."""
        if region.run >= 0:
            self._pop()

    def finish_run(self, config: int, run: int) -> RunOutput:
        """Nothing to return: metric values are read from the report, in the parent."""
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


def session_from(options: Mapping[str, Any]) -> NvtxSession:
    """The worker's session for the spec's ``options`` (``nvtx_ranges``: the NVTX range kind)."""
    return NvtxSession(*nvtx_callables(str(options.get("nvtx_ranges", "start_end"))))


def main(argv: list[str] | None = None) -> int:
    """Run the plan described by the spec file named in ``argv[1]`` (exit status 0, or 3 when it failed)."""
    return run_child(argv, session_from)


if __name__ == "__main__":
    sys.exit(main())
