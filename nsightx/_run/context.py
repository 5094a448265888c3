"""The state of the run in progress, shared by the run loop and :func:`nsightx.annotate`.

It is process-global rather than thread-local on purpose: a region opened in one thread covers kernels that
other threads launch while it is open (autograd's backward, a thread the region starts), and annotations from
any thread belong to the current run. That is sound because only one profiled call runs at a time per process
(:mod:`nsightx._run.exclusive`): a call from another thread waits, a call from inside a call is refused.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from nsightx._errors import AnnotationError

if TYPE_CHECKING:  # kept out of import time: `import nsightx` must not load pydantic
    from nsightx._results.records import RegionId
    from nsightx._run.backend import Session

_tuple_new = tuple.__new__
_clock = time.perf_counter_ns
_get_ident = threading.get_ident
_ENDED = -1
"""What :attr:`RunState.open_thread` holds once the run ended with a region open (no thread has this ident)."""


class RunState:
    """Bookkeeping for one run of the user's function.

    One is made before every run, between two runs of a host-bound sweep, so it is a plain slotted class whose
    constructor sets its fields directly (0.27 against 0.56 us for the dataclass with a new lock each run that it
    replaces, on a shared 2-core CI CPU).

    Regions may open from any thread, one at a time: :meth:`enter` takes the run's one token (:attr:`idle`, a
    list that holds it while no region is open) and :meth:`exit` puts it back. Taking it is ``list.pop``, one step
    that no other thread can cut in half, so exactly one of two threads opening a region at once gets it and the
    other is told a region is open; a lock held around the check cost 0.1 us more a region (issue 35).

    A region belongs to the thread that opened it: closed on another thread, it is refused (an
    :class:`~nsightx.AnnotationError` in the closing thread, and the run fails with it as it ends), and a
    region still open when the user's function returns fails the run (:meth:`end`). Either way the outcome is
    fixed when the function returns, not by when a deferred session reads the run or when a thread the function
    left running gets to close its region.

    Args:
        session: The backend session measuring the run.
        config: Config index.
        run: Run index (negative for warm-up runs).
        on_annotation: Called with the name when a region opens (ANNOTATION-scope collectors).
    """

    __slots__ = (
        "config",
        "idle",
        "on_annotation",
        "open_name",
        "open_start",
        "open_thread",
        "refused",
        "regions",
        "run",
        "session",
        "used",
    )

    def __init__(
        self,
        session: Session,
        config: int,
        run: int,
        on_annotation: Callable[[str], None] | None = None,
    ) -> None:
        self.session = session
        self.config = config
        self.run = run
        self.on_annotation = on_annotation
        self.idle = [True]
        """Holds the run's one token while no region is open (see the class docstring)."""
        self.used: set[str] = set()
        """Names of the regions opened in this run."""
        self.open_name: str | None = None
        self.open_start = 0
        self.open_thread = 0
        """Ident of the thread that opened the open region (:data:`_ENDED` once the run ended with it open)."""
        self.refused: AnnotationError | None = None
        """The first region closed on another thread than its own in this run (:meth:`end` raises it)."""
        self.regions: list[tuple[str, int, bool]] = []
        """(annotation, host nanoseconds, failed) of each region closed in this run, in closing order."""

    def enter(self, name: str) -> RegionId | None:
        """Open region ``name``; nested or repeated names are errors.

        Returns:
            The region's key, for :meth:`exit`; None for a :attr:`~nsightx._run.backend.Session.host_timed`
            session, which is never handed one.
        """
        try:
            self.idle.pop()  # the token: only the thread that got it goes on, until exit puts it back
        except IndexError:
            if self.open_name is None and self.open_thread == _ENDED:
                raise AnnotationError(
                    f"annotation {name!r} was opened after run {self.run} of config {self.config} ended (on a "
                    "thread the profiled function left running); it belongs to no run. Join the threads that open "
                    "regions before the function returns"
                ) from None
            raise AnnotationError(
                f"Nested annotations are not supported. Cannot enter annotation '{name}' while another "
                f"annotation is active. {self.open_name!r} is open: close it first or merge the regions"
            ) from None
        used = self.used
        if name in used:
            self.idle.append(True)
            raise AnnotationError(
                f"Annotation name '{name}' has already been used in this profiling run. Each annotation "
                "must have a unique name. Give each region of one run its own name (e.g. add a suffix)"
            )
        used.add(name)
        self.open_name = name
        self.open_thread = _get_ident()
        if self.on_annotation is not None:
            self.on_annotation(name)
        session = self.session
        if session.host_timed:  # told the time when the region closes (see exit): no key, no call now
            self.open_start = _clock()
            return None
        region: RegionId = _tuple_new(_REGION_ID or _region_id(), (name, self.config, self.run))
        session.region_enter(region)
        self.open_start = _clock()
        return region

    def exit(self, region: RegionId | None, failed: bool) -> None:
        """Close the region opened by :meth:`enter` (``region``: what it returned).

        The region is noted, then marked closed, and the token handed back last: only the thread that opened it
        closes it, and no other thread opens one before the token is back.

        A :attr:`~nsightx._run.backend.Session.host_timed` session (``region`` is None) is handed the time read
        here, so the region is timed by one pair of clock reads, not two.
        """
        end = _clock()
        if _get_ident() != self.open_thread:
            self._refuse(region, end - self.open_start)
            return
        ns = end - self.open_start
        if region is None:
            name: str = self.open_name  # type: ignore[assignment]  # open: enter set it, only exit clears it
            self.session.region_timed(name, self.config, self.run, ns, failed)
        else:
            name = region[0]
            self.session.region_exit(region, failed)
        self.regions.append((name, ns, failed))
        self.open_name = None
        self.idle.append(True)

    def end(self) -> None:
        """Close the run as its function returned: no region may open or close in it from now on.

        Takes the run's token for good, so a region that a thread the function left running opens later is
        refused, and a deferred session's later read of the run finds exactly the regions closed by now.

        Raises:
            AnnotationError: A region is still open (the run ended before the thread that opened it closed it),
                or one was closed on another thread than it opened on.
        """
        try:
            self.idle.pop()
        except IndexError:
            opener = self.open_thread
            self.open_thread = _ENDED  # its close, when it comes, is dropped (see _refuse): the run is over
            raise AnnotationError(
                f"region {self.open_name!r} was still open when run {self.run} of config {self.config} ended: "
                f"thread {_thread_name(opener)} opened it and had not closed it when the profiled function "
                "returned. Join the threads that open regions before the function returns"
            ) from None
        self.open_thread = _ENDED
        if self.refused is not None:
            raise self.refused

    def _refuse(self, region: RegionId | None, ns: int) -> None:
        """A region closes on another thread than the one that opened it, or after its run ended.

        After the run ended (:meth:`end` found it open and raised) the close is dropped: the run is over and the
        call fails with that error. On another thread, the region is closed with the session as failed (so a
        backend ends what it began for it) and not kept; the error is raised here and again by :meth:`end`.

        Raises:
            AnnotationError: The region was closed on another thread than the one that opened it.
        """
        opener, name = self.open_thread, self.open_name
        if opener == _ENDED:
            return
        error = AnnotationError(
            f"region {name!r} was opened on thread {_thread_name(opener)} and closed on thread "
            f"{_thread_name(_get_ident())} (run {self.run} of config {self.config}); a region must close on the "
            "thread that opened it, so the run fails. Open and close each region in one thread (a `with "
            "annotate(...)` block)"
        )
        if self.refused is None:
            self.refused = error
        if not isinstance(self, ColumnRunState):  # that state's session is never told of regions
            if region is None:
                self.session.region_timed(name, self.config, self.run, ns, True)  # type: ignore[arg-type]
            else:
                self.session.region_exit(region, True)
        self.open_name = None
        self.idle.append(True)
        raise error


def _thread_name(ident: int) -> str:
    """``'name' (ident)`` of a live thread, or the ident of one that has ended."""
    for thread in threading.enumerate():
        if thread.ident == ident:
            return f"{thread.name!r} ({ident})"
    return f"{ident} (ended)"


class ColumnRunState(RunState):
    """A run whose regions go straight into the columns of a run block (:mod:`nsightx._results.runblock`).

    For a :attr:`~nsightx._run.backend.Session.timed_records` session (the host backend) in a run that is the
    user's call alone, the run loop keeps each region's name, host time and failure flag itself: :meth:`exit`
    appends them to the three columns it was given, and calls the session not at all, so that no row or object is
    made for the run (issue 35). Its :attr:`regions` stays empty. A region that closes after its run ended (in a
    thread the run left behind) is dropped, as a region of a finished run always was.

    Args:
        session: The backend session measuring the run (``host_timed``: it is never handed a region key).
        config: Config index.
        run: Run index.
        columns: The block's names (a list), host nanoseconds and failure flags (``append`` taking an int).
    """

    __slots__ = ("columns",)

    def __init__(self, session: Session, config: int, run: int, columns: tuple[Any, Any, Any]) -> None:
        self.session = session
        self.config = config
        self.run = run
        self.on_annotation = None
        self.idle = [True]
        self.used = set()
        self.open_name = None
        self.open_start = 0
        self.open_thread = 0
        self.refused = None
        self.regions = []
        self.columns = columns

    def exit(self, region: RegionId | None, failed: bool) -> None:
        """Close the region opened by :meth:`enter`: its name, time and flag go to the columns, then the token back."""
        ns = _clock() - self.open_start
        if _get_ident() != self.open_thread:
            self._refuse(None, ns)
            return
        if _current is self:  # else its run has ended: the region belongs to no run
            names, times, fails = self.columns
            names.append(self.open_name)
            times.append(ns)
            fails.append(failed)
        self.open_name = None
        self.idle.append(True)


_REGION_ID: type[RegionId] | None = None
"""The record key class once :func:`_region_id` has imported it."""


def _region_id() -> type[RegionId]:
    """The record key class, imported on first use (not at ``import nsightx``: it loads pydantic).

    :meth:`RunState.enter` builds each key with ``tuple.__new__`` on this class: the same named tuple as
    ``RegionId(name, config, run)``, without the Python-level ``__new__`` of a named tuple (~0.3 us a region).
    """
    global _REGION_ID
    from nsightx._results.records import RegionId

    _REGION_ID = RegionId
    return RegionId


_current: RunState | None = None


def current() -> RunState | None:
    """The run in progress, or ``None`` outside a profiled call."""
    return _current


def set_current(state: RunState | None) -> None:
    """Install (or clear) the run in progress. Only the run loop calls this."""
    global _current
    _current = state
