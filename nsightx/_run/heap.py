"""Keep what a profiled call has measured out of the cyclic garbage collector's rescans.

Every measured run leaves a few container objects behind (its :class:`~nsightx._results.records.RunRecords`, its
records and regions), and the collector walks every live container again at each full collection. A full
collection comes each time the objects that survived since the last one reach a quarter of the older ones, so
in a long call the kept runs were walked again and again: on d6b4a1c the collector took 17% of a 10,000-run call
and 33% of a 300,000-run one (issue 35). Those runs are finished and hold no reference cycle; nothing gained by
walking them.

:func:`holding` brackets a call; inside it the run loop calls :func:`kept` as it writes runs, and every
:data:`FREEZE_EVERY` runs the objects the process holds are moved to the collector's permanent generation
(``gc.freeze()``, constant time), which no collection walks. Collections go on as usual for everything made
after that, so a reference cycle made by the user's code is still found, by the next collection after it. Only
a cycle that is unreachable at the moment of a freeze waits longer: before each freeze the young generations
are collected (``gc.collect(1)``, which frees the cycles of the last few thousand allocations), so what waits
is a cycle already in the oldest generation; :func:`holding` ends with ``gc.unfreeze()``, after which the next
full collection frees it. Reference counting frees everything that is not in a cycle as always, frozen or not.

Nothing is done when the collector is disabled, or when something in the process already froze objects
(``gc.get_freeze_count()`` is not 0: a server that freezes before forking): ``gc.unfreeze()`` would release
those too, so the call then runs with the collector as it found it.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

FREEZE_EVERY = 1000
"""Runs written between two freezes: a full collection then walks at most this many runs' objects (and what the
user's code keeps), and the young collection before each freeze (~0.1 ms) costs ~0.1 us a run."""

_active = False
"""Whether the outermost :func:`holding` of this process freezes (one profiled call at a time per process)."""

_since = 0
"""Runs written since the last freeze."""


@contextmanager
def holding() -> Iterator[None]:
    """Freeze the objects of the call as it keeps runs (see :func:`kept`), and unfreeze them all at the end.

    Nested uses (the run loop inside a profiled call) join the outermost one. Only the thread holding the
    process's one-call-at-a-time lock (:mod:`nsightx._run.exclusive`) enters it.
    """
    global _active, _since
    if _active or not gc.isenabled() or gc.get_freeze_count():
        yield
        return
    _active, _since = True, 0
    try:
        yield
    finally:
        _active = False
        gc.unfreeze()


def kept(runs: int) -> None:
    """Note that ``runs`` more runs were stored; every :data:`FREEZE_EVERY` of them, freeze what the process holds."""
    global _since
    if not _active:
        return
    _since += runs
    if _since >= FREEZE_EVERY:
        freeze()


def freeze() -> None:
    """Collect the young generations, then move every tracked object to the permanent generation (if active)."""
    global _since
    if not _active:
        return
    _since = 0
    gc.collect(1)
    gc.freeze()
