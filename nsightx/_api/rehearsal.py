"""The frame rehearsed during a GPU call's wait: the function's previous small result framed again, and dropped.

Issue 35 times the user's ``f().to_dataframe()``. A deferred GPU call waits ~30 ms for its last runs, then
collects them, builds the result and the frame: about 2.5 ms of Python on a GPU host. Inside a call the frame's
assembly took ~150 us against ~63 us for the same work in a warm loop (session 24): after the wait the frame meets
cold code and caches. A rehearsal runs every stage of ``to_dataframe()`` on data of the same shape while the GPU
still works, so that the real frame after the wait finds them warm: the frame of a new result over the columns of
the function's previous call (:meth:`Rehearsal.keep`), which the loop of a user who calls the function repeatedly
has. On the 2-core VM, with a simulated 30 ms wait, it took 11-42 us off the frame (``benchmarks/frame_stages.py
--rehearse``); ``benchmarks/call_phases.py --rehearse-ab`` measures it on a GPU.

It is speculative work, like the frame's pieces (:mod:`nsightx._results.frameahead`), and shares their policy:
it runs only in calls that compute the pieces (:mod:`.aheadpolicy`, whose measured cost includes it), so a call
whose GPU wait cannot hide it (many tiny kernels) stops doing it. Only results of at most
:data:`~nsightx._results.sink.AHEAD_MAX_RUNS` runs are kept (their columns: a few KiB). It reads the kept
columns only, changes nothing of any result, and never raises.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from nsightx._results.profileresults import ProfileResults
from nsightx._results.schema import ResultData
from nsightx._results.sink import AHEAD_MAX_RUNS
from nsightx._results.store import ResultColumns

ENABLED = True
"""Whether calls rehearse (``benchmarks/call_phases.py`` turns it off for its A/B)."""


class Rehearsal:
    """One decorated function's kept columns, and the frame rehearsed from them (see the module docstring)."""

    def __init__(self) -> None:
        self._kept: tuple[ResultData, ResultColumns, Sequence[tuple[Any, ...]] | None] | None = None
        self.ns: int | None = None
        """What the last rehearsal cost (None: none ran since :meth:`take_ns`)."""

    def keep(self, result: ProfileResults) -> None:
        """Keep ``result``'s shell, columns and configs for the next call's rehearsal when it is small."""
        columns = result._columns  # a call's result is made from columns (None: from objects; not kept)
        if columns is None or len(columns.runs.config) > AHEAD_MAX_RUNS:
            self._kept = None
        else:
            self._kept = (result._shell, columns, result._configs)

    def __call__(self) -> None:
        """Frame the kept columns again and drop the frame (the run loop's ``while_waiting``; never raises)."""
        kept = self._kept
        if kept is None or not ENABLED:
            return
        start = time.perf_counter_ns()
        try:
            ProfileResults.from_columns(*kept).to_dataframe()
        except Exception:  # a rehearsal: the real frame meets the same input, and its own error
            self._kept = None
        self.ns = time.perf_counter_ns() - start

    def take_ns(self) -> int:
        """What the rehearsal of this call cost (0 when none ran), for the ahead policy; resets it."""
        ns, self.ns = self.ns or 0, None
        return ns
