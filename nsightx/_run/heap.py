"""Keep what a profiled call has measured out of the cyclic garbage collector's rescans.

Every measured run leaves a few container objects behind (its :class:`~nsightx._results.records.RunRecords`, its
records and regions), and the collector walks every live container again at each full collection. A full
collection comes each time the objects that survived since the last one reach a quarter of the older ones, so
in a long call the kept runs were walked again and again: on d6b4a1c the collector took 17% of a 10,000-run call
and 33% of a 300,000-run one (issue 35). Those runs are finished and hold no reference cycle; nothing is gained
by walking them.

:func:`holding` brackets a call; inside it the run loop calls :func:`kept` as it writes runs. Every
:data:`FREEZE_EVERY` runs, between two runs, :func:`checkpoint` collects the young generations (``gc.collect(1)``,
~0.2 ms on a CI CPU: it walks what was made since the last checkpoint) and then moves every object the process
holds to the collector's permanent generation (``gc.freeze()``, constant time), which no collection walks.
Collections go on as usual for everything made after a checkpoint and walk only that.

What it changes for the user's objects:

* Reference counting frees everything that is not in a cycle, as always, frozen or not.
* A reference cycle the user's code drops is freed as before, by a young collection or at the latest by the next
  checkpoint, which collects the young generations between two runs, when the run's own objects are gone.
* A cycle that is in the oldest generation at a checkpoint (state the user keeps across runs, or objects alive
  when a collection promoted them there) and is dropped later in the call waits until the call ends:
  :func:`holding` then unfreezes everything, and the next full collection frees it.
* A call of fewer than :data:`FREEZE_EVERY` runs changes nothing. After a longer one, the objects are back
  where the collector keeps its old objects; its next full collection walks them once, as it would have.

Nothing is done when the collector is disabled, or when something in the process already froze objects
(``gc.get_freeze_count()`` is not 0: a server that freezes before forking): ``gc.unfreeze()`` would release
those too, so the call then runs with the collector as it found it. The GPU machine's Python is such a process
(375 objects frozen at start-up, before any import; found in session 18): there no call freezes, and only
:func:`before_wait`'s young collection applies. Code that freezes objects itself inside a
profiled call finds them unfrozen when the call ends.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

FREEZE_EVERY = 1000
"""Runs written between two checkpoints: a call of fewer runs is never frozen, and in a longer one a collection
walks at most about this many runs' objects (and what the user's code made since)."""

_active = False
"""Whether the outermost :func:`holding` of this process freezes (one profiled call at a time per process)."""

_since = 0
"""Runs written since the last :func:`checkpoint`."""

_froze = False
"""Whether a :func:`checkpoint` of the present :func:`holding` froze the heap (a call of many runs)."""


@contextmanager
def holding() -> Iterator[None]:
    """Freeze the objects of the call as it keeps runs (see :func:`kept`), and unfreeze them all at the end.

    Nested uses (the run loop inside a profiled call) join the outermost one. Only the thread holding the
    process's one-call-at-a-time lock (:mod:`nsightx._run.exclusive`) enters it.
    """
    global _active, _since, _froze
    if _active or not gc.isenabled() or gc.get_freeze_count():
        yield
        return
    _active, _since, _froze = True, 0, False
    try:
        yield
    finally:
        _active = _froze = False
        gc.unfreeze()


def kept(runs: int) -> None:
    """Note that ``runs`` more runs were stored; every :data:`FREEZE_EVERY` of them, :func:`checkpoint`."""
    global _since
    if not _active:
        return
    _since += runs
    if _since >= FREEZE_EVERY:
        checkpoint()


def until_checkpoint() -> int:
    """How many more runs :func:`kept` may be told of before the one that reaches the next checkpoint.

    A loop that writes many runs counts them itself and calls :func:`kept` once they reach this number (and with
    what it counted when it stops), so the checkpoints come after the same runs as with a call per run. Outside a
    freezing :func:`holding`, a count that no call reaches.
    """
    return FREEZE_EVERY - _since if _active else 1 << 62


def checkpoint() -> None:
    """Collect the young generations, then freeze every object the process holds (only inside :func:`holding`)."""
    global _since, _froze
    _since = 0
    if _active:
        gc.collect(1)
        gc.freeze()
        _froze = True


CHECKPOINT_BEFORE_WAIT = True
"""Whether :func:`before_wait` checkpoints (a switch for ``benchmarks/call_phases.py``'s comparison)."""


def before_wait() -> None:
    """A :func:`checkpoint` while a deferred call's GPU works through its last runs (the run loop's while_waiting).

    Whatever the call made so far (the runs' rows, the user's tensors of the launches) sits in the young
    generations, and the next collection that walks them came after the wait, inside the work on the critical
    path: on the H100 the cupti session's decode after the wait met a collection of ~0.6 ms in most calls of the
    4x11 sweep (``benchmarks/call_phases.py`` with and without ``--gc-off``, session 18). Collected and frozen here,
    that walk happens while the GPU is still busy, and the collections after the wait walk only what is made
    after it. Nothing is done when the collector is disabled. Where :func:`holding` does not freeze (something
    else froze objects first: the GPU machine's Python starts with 375 objects frozen, session 18), the young
    generations are still collected here, without the freeze: what survives moves to the oldest generation, which
    only a full collection walks.
    """
    if not CHECKPOINT_BEFORE_WAIT or not gc.isenabled():
        return
    if _active:
        checkpoint()
    else:
        gc.collect(1)


def settle() -> None:
    """Freeze, without collecting first, what was made with the collector paused (in a call that froze before).

    The run loop hands the sink compact rows; the call makes the runs' objects from them all at once when it reads
    them, with the collector paused (``RunSink.runs``): three objects or more per run. The first collection after
    the pause would walk all of them (0.3 to 0.5 us a run of a host-bound call, ``benchmarks/run_loop_cost.py``),
    so the call freezes them before the collector resumes, as the checkpoints froze the runs' rows. Young garbage
    cycles the user's code left then wait for the end of the call (which is near: the result is being built),
    like the cycles that were old at a checkpoint. A call that never reached a checkpoint is left as it is.
    """
    if _active and _froze:
        gc.freeze()
