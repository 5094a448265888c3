"""A progress line on stderr for sweeps that take more than a couple of seconds.

Silent under ``VerbosityLevel.SILENT`` and when stderr is not a terminal; it shows itself only once the sweep
has run for ``delay_s`` so short sweeps print nothing.
"""

from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING

from nsightx._enums import VerbosityLevel

if TYPE_CHECKING:
    from nsightx._plan import Plan


class Progress:
    """Counts runs (warm-up included) and redraws one line on stderr at most 10 times a second."""

    def __init__(self, plan: Plan, *, delay_s: float = 2.0) -> None:
        self.total = len(plan.configs) * (plan.runs + plan.warmup)
        self.label = plan.function_name
        self.done = 0
        self.enabled = plan.verbosity > VerbosityLevel.SILENT and sys.stderr.isatty()
        self.start = time.monotonic()
        self.delay_s = delay_s
        self._last = 0.0
        self._shown = False

    def advance(self) -> None:
        """One run finished."""
        self.done += 1
        if not self.enabled:
            return
        now = time.monotonic()
        if now - self.start < self.delay_s or (now - self._last < 0.1 and self.done < self.total):
            return
        self._last = now
        self._shown = True
        frac = self.done / max(self.total, 1)
        bar = "#" * int(frac * 30)
        eta = (now - self.start) / max(frac, 1e-9) * (1 - frac)
        sys.stderr.write(f"\r{self.label}: [{bar:<30}] {self.done}/{self.total} runs, ~{eta:.0f}s left ")
        sys.stderr.flush()

    def skip(self, runs: int) -> None:
        """A config stopped ``runs`` short of its most runs (``runs="auto"``): shrink the total."""
        self.total -= max(runs, 0)

    def close(self) -> None:
        """End the line, if one was drawn."""
        if self._shown:
            sys.stderr.write("\n")
            sys.stderr.flush()
