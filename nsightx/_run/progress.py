r"""A progress line on stderr for sweeps that take more than a couple of seconds.

Silent under ``VerbosityLevel.SILENT`` and when stderr is not a terminal (CI logs, pipes, files), except in a
Jupyter notebook: there stderr is the kernel's stream, not a TTY, yet the notebook redraws a ``\r`` line in
place, so the line shows in the cell's output. It shows itself only once the sweep has run for ``delay_s``, so
short sweeps print nothing. Under ``runs="auto"`` the total counts every config at ``max_runs`` and shrinks as
configs stop early, so the estimate only improves.

The line counts calls of the function, warm-up calls included (they take time too, so the estimate needs them),
and says so: ``f: [####] 15/15 calls (3 warm-up), config 3/3`` for 3 configs x 4 runs after 1 warm-up each, where
the summary line says ``3 config(s) x 4 run(s)``. It used to say ``15/15 runs``: three runs more than were
measured.
"""

from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING, TextIO

from nsightx._enums import VerbosityLevel

if TYPE_CHECKING:
    from nsightx._run.plan import Plan


DELAY_S = 2.0
"""Seconds a sweep runs before the progress line appears."""


class Progress:
    """Counts calls (warm-up included) and redraws one line on stderr at most 10 times a second."""

    def __init__(self, plan: Plan, *, delay_s: float | None = None, stream: TextIO | None = None) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.total = len(plan.configs) * (plan.runs + plan.warmup)
        self.warmup = len(plan.configs) * plan.warmup
        """Warm-up calls among :attr:`total` (none measured)."""
        self.configs = len(plan.configs)
        self.label = plan.function_name
        self.done = 0
        self.config = 0
        self.enabled = plan.verbosity > VerbosityLevel.SILENT and _is_terminal(self.stream)
        self.start = time.monotonic()
        self.delay_s = DELAY_S if delay_s is None else delay_s
        self._last = 0.0
        self._shown = False

    def start_config(self, index: int) -> None:
        """Config ``index`` (0-based) begins."""
        self.config = index

    def advance(self) -> None:
        """One run finished."""
        self.done += 1
        if not self.enabled:
            return
        now = time.monotonic()
        if now - self.start < self.delay_s or (now - self._last < 0.1 and self.done < self.total):
            return
        self._draw(now)

    def _draw(self, now: float) -> None:
        self._last = now
        self._shown = True
        frac = min(self.done / max(self.total, 1), 1.0)
        bar = "#" * int(frac * 30)
        eta = (now - self.start) / max(frac, 1e-9) * (1 - frac)
        warmup = f" ({self.warmup} warm-up)" if self.warmup else ""
        self.stream.write(
            f"\r{self.label}: [{bar:<30}] {self.done}/{self.total} calls{warmup}, config "
            f"{self.config + 1}/{self.configs}, ~{eta:.0f}s left "
        )
        self.stream.flush()

    def update(self, done: int) -> None:
        """Set the count of finished runs (for a run loop in another process, e.g. the ncu worker)."""
        if done != self.done:
            self.done = done - 1
            self.config = min(done // max(self.total // max(self.configs, 1), 1), self.configs - 1)
            self.advance()

    def skip(self, runs: int) -> None:
        """A config stopped ``runs`` short of its most runs (``runs="auto"``): shrink the total."""
        self.total -= max(runs, 0)

    def close(self) -> None:
        """Draw the final counts and end the line, if one was drawn."""
        if self._shown:
            self._draw(time.monotonic())
            self.stream.write("\n")
            self.stream.flush()


def _is_terminal(stream: TextIO) -> bool:
    if _is_notebook_stream(stream):
        return True
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # closed or replaced streams
        return False


def _is_notebook_stream(stream: TextIO) -> bool:
    """True for the stream a Jupyter kernel (ipykernel) puts in place of stderr.

    Checked without importing ipykernel: outside a kernel the module is not loaded, so this is false.
    """
    iostream = sys.modules.get("ipykernel.iostream")
    out_stream = getattr(iostream, "OutStream", None)
    return isinstance(out_stream, type) and isinstance(stream, out_stream)
