"""Keep what a profiled call has measured out of the cyclic garbage collector's rescans.

Every measured run leaves a few container objects behind (its :class:`~nsightx._results.records.RunRecords`, its
records and regions), and the collector walks every live container again at each full collection. A full
collection comes each time the objects that survived since the last one reach a quarter of the older ones, so
in a long call the kept runs were walked again and again: on d6b4a1c the collector took 17% of a 10,000-run call
and 33% of a 300,000-run one (issue 35). Those runs are finished and hold no reference cycle; nothing is gained
by walking them.

:func:`holding` brackets a call; inside it the run loop calls :func:`kept` as it writes runs. Every
:data:`FREEZE_EVERY` runs, between two runs, :func:`checkpoint` collects the young generations (``gc.collect(1)``,
~0.2 ms on a CI CPU: it walks what was made since the last checkpoint, frees the cycles dropped there and moves
what survives to the oldest generation). What follows depends on the process, in one of two modes.

**Freeze mode** (nothing frozen in the process when the call starts, the usual case): the checkpoint then moves
every object the process holds to the collector's permanent generation (``gc.freeze()``, constant time), which
no collection walks. Collections go on as usual for everything made after a checkpoint and walk only that; the
call ends with ``gc.unfreeze()``. What it changes for the user's objects:

* Reference counting frees everything that is not in a cycle, as always, frozen or not.
* A reference cycle the user's code drops is freed as before, by a young collection or at the latest by the next
  checkpoint, which collects the young generations between two runs, when the run's own objects are gone.
* A cycle that is in the oldest generation at a checkpoint (state the user keeps across runs, or objects alive
  when a collection promoted them there) and is dropped later in the call waits until the call ends:
  :func:`holding` then unfreezes everything, and the next full collection frees it.
* A call of fewer than :data:`FREEZE_EVERY` runs changes nothing. After a longer one, the objects are back
  where the collector keeps its old objects; its next full collection walks them once, as it would have.
* Code that freezes objects itself inside a profiled call finds them unfrozen when the call ends.

**Pause mode** (something in the process froze objects before the call: ``gc.get_freeze_count()`` is not 0, as
in a server that freezes before forking, or the GPU machine's Python, which starts with 375 objects frozen before
any import, session 18): ``gc.unfreeze()`` would release those too, so the call freezes nothing. Instead the
collector is disabled for the whole call (the run loop and the user's code between checkpoints; other threads of
the process too, as for any ``gc.disable()``), so that no automatic collection walks the kept runs; the
checkpoints' young collections still run, and what survives them sits in the oldest generation, which only a
full collection walks, and none comes while the collector is disabled. What it changes for the user's objects:

* Reference counting frees everything that is not in a cycle, as always.
* A reference cycle the user's code drops waits for the next checkpoint: at most :data:`FREEZE_EVERY` runs
  (memory held by such garbage grows with that many runs' worth). One dropped after the last checkpoint, or one
  that a checkpoint had moved to the oldest generation, waits for the first full collection after the call.
* A long call (one that reached a checkpoint) ends with one more young collection, of what was made since the
  last checkpoint (the last runs, the result), before the collector is enabled again; a shorter call only
  enables it. The frozen objects are left as they were, and so are the collector's thresholds.
* Code that enables the collector inside a profiled call gets the automatic collections back for the rest of it;
  code that disables it finds it enabled when the call ends.

Nothing is done at all when the collector is disabled when the call starts.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

FREEZE_EVERY = 1000
"""Runs written between two checkpoints: a call of fewer runs is never frozen, and in a longer one a collection
walks at most about this many runs' objects (and what the user's code made since)."""

_active = False
"""Whether the outermost :func:`holding` of this process acts (one profiled call at a time per process)."""

_paused = False
"""Whether the present :func:`holding` disabled the collector instead of freezing (objects were frozen before it)."""

_since = 0
"""Runs written since the last :func:`checkpoint`."""

_froze = False
"""Whether a :func:`checkpoint` of the present freezing :func:`holding` froze the heap (a call of many runs)."""

_long = False
"""Whether the present :func:`holding` was told of :data:`FREEZE_EVERY` runs or more (a checkpoint came)."""


@contextmanager
def holding() -> Iterator[None]:
    """Keep the call's runs out of the collector's rescans (freeze or pause mode: see the module), undone at the end.

    Nested uses (the run loop inside a profiled call) join the outermost one. Only the thread holding the
    process's one-call-at-a-time lock (:mod:`nsightx._run.exclusive`) enters it. Nothing is done when the
    collector is disabled.
    """
    global _active, _paused, _since, _froze, _long
    if _active or not gc.isenabled():
        yield
        return
    _active, _paused, _since, _froze, _long = True, gc.get_freeze_count() != 0, 0, False, False
    if _paused:
        gc.disable()
    try:
        yield
    finally:
        _end()


def _end() -> None:
    """Undo what :func:`holding` did: unfreeze (freeze mode), or collect the young once and enable (pause mode)."""
    global _active, _paused, _froze, _long
    paused, long = _paused, _long
    _active = _paused = _froze = _long = False
    if not paused:
        gc.unfreeze()
        return
    try:
        if long:  # the last runs and the result, walked once here rather than by two automatic collections
            gc.collect(1)
    finally:
        gc.enable()  # it was enabled when the call started (else holding did nothing)


def kept(runs: int) -> None:
    """Note that ``runs`` more runs were stored; every :data:`FREEZE_EVERY` of them, :func:`checkpoint`."""
    global _since, _long
    if not _active:
        return
    _since += runs
    if _since >= FREEZE_EVERY:
        _long = True
        checkpoint()


def until_checkpoint() -> int:
    """How many more runs :func:`kept` may be told of before the one that reaches the next checkpoint.

    A loop that writes many runs counts them itself and calls :func:`kept` once they reach this number (and with
    what it counted when it stops), so the checkpoints come after the same runs as with a call per run. Outside an
    acting :func:`holding`, a count that no call reaches.
    """
    return FREEZE_EVERY - _since if _active else 1 << 62


def checkpoint() -> None:
    """Collect the young generations, then (freeze mode) freeze every object the process holds.

    Only inside an acting :func:`holding`. In pause mode the collection is all: what survives it moves to the
    oldest generation, which no automatic collection walks while the collector is disabled.
    """
    global _since, _froze
    _since = 0
    if _active:
        gc.collect(1)
        if not _paused:
            gc.freeze()
            _froze = True


CHECKPOINT_BEFORE_WAIT = True
"""Whether :func:`before_wait` checkpoints (a switch for ``benchmarks/call_phases.py``'s comparison)."""


def before_wait() -> None:
    """A :func:`checkpoint` while a deferred call's GPU works through its last runs (the run loop's while_waiting).

    Whatever the call made so far (the runs' rows, the user's tensors of the launches) sits in the young
    generations, and the next collection that walks them came after the wait, inside the work on the critical
    path: on the H100 the cupti session's decode after the wait met a collection of ~0.6 ms in most calls of the
    4x11 sweep (``benchmarks/call_phases.py`` with and without ``--gc-off``, session 18). Collected here (and
    frozen, in freeze mode), that walk happens while the GPU is still busy, and the collections after the wait
    walk only what is made after it. In pause mode (something else froze objects first: the GPU machine's Python
    starts with 375 objects frozen, session 18) no automatic collection comes after the wait anyway, and this
    young collection frees the call's dropped cycles while the GPU works, as a checkpoint does; it does not make
    the call long (:func:`holding`'s last collection is a long call's). Outside a :func:`holding` (a loop driven
    without one), the young generations are collected if the collector is enabled, and nothing is done if not.
    """
    if not CHECKPOINT_BEFORE_WAIT:
        return
    if _active:
        checkpoint()
    elif gc.isenabled():
        gc.collect(1)


def settle() -> None:
    """Freeze, without collecting first, what was made with the collector paused (in a call that froze before).

    The run loop hands the sink compact rows; the call makes the runs' objects from them all at once when it reads
    them, with the collector paused (``RunSink.runs``): three objects or more per run. The first collection after
    the pause would walk all of them (0.3 to 0.5 us a run of a host-bound call, ``benchmarks/run_loop_cost.py``),
    so a freezing call freezes them before the collector resumes, as the checkpoints froze the runs' rows. Young
    garbage cycles the user's code left then wait for the end of the call (which is near: the result is being
    built), like the cycles that were old at a checkpoint. A call that never reached a checkpoint is left as it is.
    In pause mode nothing is done here: the collector stays disabled until the call ends, and a long call's last
    young collection (:func:`holding`) walks these objects once and moves them to the oldest generation.
    """
    if _active and _froze:
        gc.freeze()
