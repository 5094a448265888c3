"""The state of the run in progress, shared by the run loop and :func:`nsightx.annotate`.

It is process-global rather than thread-local on purpose: a region opened in one thread covers kernels that
other threads launch while it is open (autograd's backward, a thread the region starts), and annotations from
any thread belong to the current run. That is sound because only one profiled call runs at a time per process
(:mod:`nsightx._run.exclusive`): a call from another thread waits, a call from inside a call is refused.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from nsightx._errors import AnnotationError

if TYPE_CHECKING:  # kept out of import time: `import nsightx` must not load pydantic
    from nsightx._results.records import RegionId
    from nsightx._run.backend import Session


@dataclass
class RunState:
    """Bookkeeping for one run of the user's function."""

    session: Session
    config: int
    run: int
    on_annotation: Callable[[str], None] | None = None
    """Called when a region opens (ANNOTATION-scope collectors)."""
    used: set[str] = field(default_factory=set)
    open_name: str | None = None
    open_start: int = 0
    regions: list[tuple[str, int, bool]] = field(default_factory=list)
    """(annotation, host nanoseconds, failed) of each region closed in this run, in closing order."""
    lock: threading.Lock = field(default_factory=threading.Lock)

    def enter(self, name: str) -> RegionId:
        """Open region ``name``; nested or repeated names are errors."""
        with self.lock:
            if self.open_name is not None:
                raise AnnotationError(
                    f"Nested annotations are not supported. Cannot enter annotation '{name}' while another "
                    f"annotation is active. {self.open_name!r} is open: close it first or merge the regions"
                )
            if name in self.used:
                raise AnnotationError(
                    f"Annotation name '{name}' has already been used in this profiling run. Each annotation "
                    "must have a unique name. Give each region of one run its own name (e.g. add a suffix)"
                )
            self.used.add(name)
            self.open_name = name
        if self.on_annotation is not None:
            self.on_annotation(name)
        region = _region_id()(name, self.config, self.run)
        self.session.region_enter(region)
        self.open_start = time.perf_counter_ns()
        return region

    def exit(self, region: RegionId, failed: bool) -> None:
        """Close the region opened by :meth:`enter`."""
        end = time.perf_counter_ns()
        self.session.region_exit(region, failed)
        with self.lock:
            self.regions.append((region.annotation, end - self.open_start, failed))
            self.open_name = None


@functools.cache
def _region_id() -> type[RegionId]:
    """The record key class, imported on first use (not at ``import nsightx``: it loads pydantic).

    A cached call instead of an import statement in :meth:`RunState.enter`, which runs before every region.
    """
    from nsightx._results.records import RegionId

    return RegionId


_current: RunState | None = None


def current() -> RunState | None:
    """The run in progress, or ``None`` outside a profiled call."""
    return _current


def set_current(state: RunState | None) -> None:
    """Install (or clear) the run in progress. Only the run loop calls this."""
    global _current
    _current = state
