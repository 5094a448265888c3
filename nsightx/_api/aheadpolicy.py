"""Whether a decorated function's next call computes the frame's pieces during its GPU wait (issue 35).

The pieces (:mod:`nsightx._results.frameahead`) are speculative work: computed during the wait, they cost
several times what they save in ``to_dataframe()`` (2-core VM, session 20: ~1.0 ms of work against ~0.26 ms saved
for the 4x11 sweep, ``benchmarks/results/logs/2026-12-06/frame-policy-s20-30.json`` and ``frame-ahead-s20.json``),
which pays only while the GPU still has queued work to hide them behind. A
sweep of large kernels leaves ~30 ms of it; a call of many tiny kernels, whose launches are slower than the GPU,
leaves almost none, and there the work was a net cost of the call (H100, the 16 KiB op, session 20). The run loop
measures how long it blocked on the session's outputs after the work (the sink's ``blocked_ns``); each function
keeps its own verdict:

- after a call that did the work: keep doing it while the loop then blocked for at least :data:`KEEP_FACTOR`
  times the work's cost (the work was hidden with room to spare);
- after a call that did not: do it again when the loop blocked for at least :data:`RESUME_FACTOR` times the cost
  last measured (the GPU's waits became long enough again).

A function's first call does the work (nothing is known yet). Calls without a wait (host backend) change nothing.
"""

from __future__ import annotations

KEEP_FACTOR = 2
"""The wait left after the work, in multiples of its cost, that keeps it on for the next call."""
RESUME_FACTOR = 3
"""The wait of a call that skipped the work, in multiples of its last cost, that turns it on again."""


class AheadPolicy:
    """One decorated function's verdict: compute the frame's pieces during the wait of its next call or not."""

    def __init__(self) -> None:
        self.enabled = True
        """Whether the next call computes them."""
        self.cost_ns = 0
        """What computing them cost when last measured (0: never)."""

    def update(self, ahead_ns: int | None, blocked_ns: int | None) -> None:
        """Learn from a call: what the pieces cost (None: not computed) and how long the loop then blocked.

        ``blocked_ns`` is None for a call without a wait (nothing is learnt).
        """
        if blocked_ns is None:
            return
        if ahead_ns is not None:
            self.cost_ns = ahead_ns
            self.enabled = blocked_ns >= KEEP_FACTOR * ahead_ns
        elif not self.enabled:
            self.enabled = blocked_ns >= RESUME_FACTOR * self.cost_ns
