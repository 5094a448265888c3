"""The run loop: the one place that decides what happens when, shared by every backend.

Per call: ONCE collectors. Per config: CONFIG collectors, then warm-up runs (measured and discarded), then the
measured runs. Per run: the thermal guard, the backend's run preparation (cache flush), RUN collectors, then
the user's function with the run state installed so that :func:`nsightx.annotate` can find it. Collectors with a
``start(ctx)``/``stop()`` pair are told when the call begins and ends (see :class:`_Collectors`).

Everything here between two runs sits on the measured path of a host-bound workload, and everything after a
deferred session's last wait on the path of the whole call, so the loop keeps that work small: collector answers
become rows while the GPU still works, and each run goes to the sink as plain tuples (:func:`_run_row`), made into
record objects only when something reads them. A run that is the user's call alone (the common case: a fixed
count, no guard, no run collector with something to say) goes through :meth:`_Sweep._plain_runs`; on the host
backend such a run, and one whose only extras are the thermal guard and RUN collectors (the nvml plugin's), goes
into a run block's columns (:meth:`_Sweep._block_runs`).
"""

from __future__ import annotations

import functools
import time
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from pydantic import TypeAdapter

from nsightx._enums import CollectionScope
from nsightx._errors import OutputError
from nsightx._results.baseline import check_baseline
from nsightx._results.records import (
    CollectorValue,
    Record,
    RunRecords,
    Scalar,
    new_collector_value,
    new_record,
)
from nsightx._results.rows import PLAIN_TYPES as _PLAIN_TYPES
from nsightx._results.rows import (
    CollectorRow,
    RunRow,
    RunValues,
    own_scalar,
    run_from_row,
    shared_rows,
    to_scalar,
    values_rows,
)
from nsightx._results.sink import Sink
from nsightx._run import backend as _backend
from nsightx._run import context as _context
from nsightx._run import exclusive as _exclusive
from nsightx._run import heap
from nsightx._run.adaptive import STOP_COLUMN, ConfigStopper, FixedRuns, StopRule
from nsightx._run.backend import Backend, RunOutput, Session
from nsightx._run.collectors import CollectContext, CollectorLike, CollectResult
from nsightx._run.device import use_device
from nsightx._run.environment import checked_environment
from nsightx._run.lazycall import refuse_lazy
from nsightx._run.plan import Plan
from nsightx._run.progress import Progress
from nsightx._run.thermal import NoGuard, make_guard
from nsightx._run.unreturned import ENVIRONMENT_KEY, warn_unreturned

BLOCK_MIN_RUNS = 128
"""A config's plain runs go into a run block (:meth:`_Sweep._block_runs`) only when at least this many remain.

A block saves ~1 us a run but costs ~90 us a config when the result is built (its columns are made and joined
with numpy, where a few rows are cheaper as Python lists: ``benchmarks/run_loop_cost.py --fixed``: the host 4x11
call went from 382 to 743 us with a block per config, against 3.7 -> 2.7 us a run at 10k runs)."""


class _Gathered(NamedTuple):
    """One collector's answer, kept as returned until its run is written (see :meth:`_Collectors.gather`)."""

    name: str
    scope: str
    config: int | None
    run: int | None
    annotation: str | None
    result: Any


_gathered: Callable[[tuple[Any, ...]], _Gathered] = functools.partial(tuple.__new__, _Gathered)
"""A :class:`_Gathered` from the tuple of its fields, without the generated ``__new__`` (a call before every run)."""

_FAILED = object()
"""The result of a collector that raised (its column is None for that run)."""

_RUN_SCOPE = CollectionScope.RUN
_RUN = _RUN_SCOPE.value

_run_clock: Callable[[], int] = time.perf_counter_ns
"""The host clock a run's start is read from: once a run, for the thermal guard and every RUN collector.

Each of them read it for itself before (the guard ``time.monotonic``, the nvml collector ``perf_counter_ns`` for
its sample's age and its sampler's demand, the temperature source for its freshness check): on a host whose
clock source makes every read a system call that was microseconds a run of a tiny kernel (issue 35). Both are
CLOCK_MONOTONIC on Linux; the guard's default clock is ``time.perf_counter``, this clock in seconds.
Region enter and exit keep their own reads: they time the region."""


def _copied(result: Any) -> Any:
    """A collector's answer as the run loop keeps it: a mapping copied into a dict, anything else as it is.

    A :class:`RunValues` is not copied: its shared mapping must not change once returned (see :class:`RunValues`).
    """
    if type(result) is RunValues:
        return result
    return dict(result) if type(result) is dict or isinstance(result, Mapping) else result


def _add_rows(
    out: list[Any], name: str, scope: str, config: int | None, run: int | None, annotation: str | None, result: Any
) -> None:
    """Append the rows of one collector's answer to ``out``: one per key of a mapping, else one named ``name``.

    A mapping's rows are built in one comprehension, :func:`to_scalar` called only for a value that is not a plain
    scalar already.
    """
    if result is _FAILED:
        out.append((name, scope, config, run, annotation, None))
    elif type(result) is RunValues:  # an ANNOTATION answer (a RUN one stays in the run's row as it is)
        out += values_rows(result, config, run, scope, annotation)
    elif type(result) is dict:  # _call copied every mapping into a dict
        plain, scalar = _PLAIN_TYPES, to_scalar
        out += [
            (k if type(k) is str else str(k), scope, config, run, annotation, v if type(v) in plain else scalar(v))
            for k, v in result.items()
        ]
    else:
        out.append((name, scope, config, run, annotation, to_scalar(result)))


class _Collectors:
    """Calls collectors of one scope and turns their results into collector rows.

    RUN collectors are called when their run starts and their answers become
    :data:`~nsightx._results.rows.CollectorRow` tuples at once (:meth:`collect_run`: one tuple per value, cheaper
    than keeping the answer to convert later). ANNOTATION collectors are called when their region opens
    (:meth:`gather`), but their answers become rows only when the run is written (:meth:`materialize`): with a
    deferred session that happens before it waits for the GPU, so the conversion overlaps the GPU's queued work.

    A collector may also have ``start(ctx)`` and ``stop()`` methods (both optional, see
    :class:`~nsightx._run.collectors.CollectorLike`): :meth:`start` calls the first with a ONCE-scope context before
    anything else of the call, :meth:`stop` the second after everything, also when the call fails: after the wait
    for a deferred session's last runs too, so that a collector keeps what it runs (a sampler, a counter over
    the call) exactly as long as the sweep's GPU work (docs/plugins.md). The nvml
    plugin starts its background sampler there, so that ``collect`` before each run only copies a sample. A
    collector must not depend on them: called without them (a parent-side proxy asking for one value), its
    ``collect`` still returns a plain value.
    """

    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        self.by_scope: dict[CollectionScope, list[CollectorLike]] = {s: [] for s in CollectionScope}
        for c in plan.collectors:
            self.by_scope[CollectionScope(c.scope)].append(c)
        self._warned: set[tuple[str, str]] = set()
        self._started: list[CollectorLike] = []
        self._fields: dict[tuple[CollectionScope, int | None], dict[str, Any]] = {}
        """The context fields that stay the same for every call of a (scope, config), see :meth:`_context`."""
        self._config_contexts: dict[int, CollectContext] = {}
        """One RUN-scope context per config, its ``run`` ``None``, while :attr:`_run_fields_read` is False."""
        self._run_fields_read = True
        self._note_run_fields()

    def _note_run_fields(self) -> None:
        """Whether a RUN collector still asked reads the run's own fields of its context (see :meth:`_run_context`).

        False only when every one says ``reads_run_fields = False`` (exactly ``False``: a collector without the
        attribute reads them, as every collector did before it existed).
        """
        self._run_fields_read = any(
            getattr(c, "reads_run_fields", True) is not False for c in self.by_scope[CollectionScope.RUN]
        )

    def start(self) -> None:
        """Call ``start(ctx)`` of every collector that has one (a failure warns and leaves that one unstarted).

        A collector whose ``start`` returns ``False`` has nothing to say in this call (the nvml run collector where
        NVML does not work): it is still stopped at the end, but never asked for a value, so it costs no run
        anything.
        """
        ctx = self._context(CollectionScope.ONCE, None, None, None)
        for c in self.plan.collectors:
            start = getattr(c, "start", None)
            if start is None or not callable(getattr(c, "stop", None)):
                continue
            try:
                active = start(ctx)
            except Exception as e:  # not asked in this call: its column is empty, as a collect that raised leaves it
                self._warn(c, "in start()", e)
                self._replace(c, _Unstarted(c.name, c.scope, tuple(getattr(c, "columns", None) or ())))
                continue
            self._started.append(c)
            if active is False:
                for collectors in self.by_scope.values():
                    collectors[:] = [other for other in collectors if other is not c]
        self._note_run_fields()

    def _replace(self, c: CollectorLike, stand_in: CollectorLike) -> None:
        """Put ``stand_in`` where ``c`` is asked for values, in every scope."""
        for collectors in self.by_scope.values():
            collectors[:] = [stand_in if other is c else other for other in collectors]

    def stop(self) -> None:
        """Call ``stop()`` of every started collector, in reverse order; never raises."""
        started, self._started = self._started, []
        for c in reversed(started):
            try:
                c.stop()  # type: ignore[attr-defined]  # checked callable in start()
            except Exception as e:
                self._warn(c, "in stop()", e)

    def run(self, scope: CollectionScope, **where: Any) -> list[CollectorRow | CollectorValue]:
        """Call the collectors of ``scope`` and return their rows at once (ONCE and CONFIG scopes)."""
        return self.materialize(self.gather(scope, **where))

    def gather(self, scope: CollectionScope, **where: Any) -> list[_Gathered]:
        """Call the collectors of ``scope`` now; a mapping they return is copied, nothing else is converted."""
        collectors = self.by_scope[scope]
        if not collectors:
            return []
        config, run, annotation = where.get("config"), where.get("run"), where.get("annotation")
        ctx = self._context(scope, config, run, annotation)
        return [_Gathered(c.name, scope.value, config, run, annotation, self._call(c, ctx)) for c in collectors]

    def collect_run(self, config: int, run: int, now: int | None = None) -> list[CollectorRow]:
        """Call the RUN collectors for run ``run`` of ``config`` and return their values as rows, at once.

        ``now``: the run's start as the run loop read it (``run_start_ns`` of the collectors' context, see
        :meth:`_run_context`).

        This runs before every measured run, between two launches of a host-bound sweep: no keyword mapping is
        built, and the rows are made here, except for an answer that is a
        :class:`~nsightx._results.rows.RunValues`: that one is kept as it is (as :meth:`gather` keeps an answer)
        and made into rows by :meth:`materialize` when the run is written, off the measured path of a deferred
        session.
        """
        ctx = self._run_context(config, run, now)
        out: list[Any] = []
        for c in self.by_scope[_RUN_SCOPE]:
            result = self._call(c, ctx)
            if type(result) is RunValues:  # kept as it is: it stands for its rows (see RunRow)
                out.append(result)
            else:
                _add_rows(out, c.name, _RUN, config, run, None, result)
        return out

    def gather_run(self, config: int, run: int, now: int | None = None, into: list[Any] | None = None) -> list[Any]:
        """Call the RUN collectors for run ``run`` of ``config``; their answers are kept as returned.

        What a deferred session's runs take (:meth:`_Sweep._deferred_runs`): the answers become rows only when
        the runs are written (:meth:`materialize`, in :func:`_write_pending`), not between two runs. They are
        appended to ``into`` when given (the thermal guard's rows of the run: no second list is made and joined
        before every run), else to a new list; that list is returned. ``now``: as for :meth:`collect_run`.
        """
        ctx = None if self._run_fields_read else self._config_contexts.get(config)  # _run_context, inline
        if ctx is None:
            ctx = self._run_context(config, run, now)
        else:
            ctx.__dict__["run_start_ns"] = now
        out: list[Any] = [] if into is None else into
        for c in self.by_scope[_RUN_SCOPE]:
            try:  # what _call does, without its frame: this runs before every run of a GPU call
                result: Any = c.collect(ctx)
            except Exception as e:  # a collector must never cost a run
                self._warn(c, f"{_RUN} scope", e, stacklevel=4)
                result = _FAILED
            if type(result) is RunValues:  # stays as it is, also in the run's row (see RunRow)
                out.append(result)
            else:
                out.append(_gathered((c.name, _RUN, config, run, None, _copied(result))))
        return out

    def run_reader(self, config: int) -> tuple[CollectorLike, Callable[[int | None], Any]] | None:
        """The RUN collector and its per-config callable of the run's start, when that is all a run of ``config`` asks.

        That is one RUN collector, which reads no run field (``reads_run_fields = False``) and offers
        ``run_reader(ctx)`` (see :class:`~nsightx._run.collectors.CollectorLike`): the config's shared context is
        handed to it once, and its answer for a run is then one call of the run's start (the nvml plugin's, issue
        35). ``None`` otherwise (the loop calls ``collect`` as usual), also when ``run_reader`` raised (it warns) or
        answered ``None``.
        """
        collectors = self.by_scope[_RUN_SCOPE]
        offer = getattr(collectors[0], "run_reader", None) if len(collectors) == 1 else None
        if offer is None or self._run_fields_read:
            return None
        c = collectors[0]
        try:
            read = offer(self._run_context(config, 0, None))  # the config's shared context (its run is None)
        except Exception as e:  # as a collect that raised: the loop goes on without this path
            self._warn(c, "in run_reader()", e, stacklevel=4)
            return None
        return (c, read) if callable(read) else None

    def _run_context(self, config: int, run: int, now: int | None) -> CollectContext:
        """The context of a RUN collector call: one per run, or one per config when no collector reads the run's.

        A collector whose ``reads_run_fields`` is ``False`` (see
        :class:`~nsightx._run.collectors.CollectorLike`) reads only fields that are the same for every run of
        a config; when all of them do, they get one context per config (its ``run`` is ``None``) and no context
        is made before each run (~0.5 us a run). Either way its ``run_start_ns`` is ``now``, the run's start as
        the run loop read it (the shared context's is set in place: one store, no copy).
        """
        if self._run_fields_read:
            ctx = self._context(_RUN_SCOPE, config, run, None)
        else:
            shared = self._config_contexts.get(config)
            if shared is None:
                shared = self._config_contexts[config] = self._context(_RUN_SCOPE, config, None, None)
            ctx = shared
        ctx.__dict__["run_start_ns"] = now  # frozen for collectors; the loop's own field, set per run
        return ctx

    def collect_run_into(
        self, config: int, run: int, names: list[str], values: list[Scalar], now: int | None = None
    ) -> int:
        """:meth:`collect_run` into two columns: each row's name appended to ``names``, its value to ``values``.

        For a run whose values are stored as columns (a run block's): their scope, config and run are the run's,
        so only names and values are kept, and no row is made. Returns how many values were appended. ``now``:
        as for :meth:`collect_run`.
        """
        ctx = self._run_context(config, run, now)
        count = len(names)
        for c in self.by_scope[_RUN_SCOPE]:
            result = self._call(c, ctx)
            if type(result) is RunValues:
                keys, scalars = shared_rows(result)
                names += keys
                values += scalars
                names.append(result.name)
                values.append(own_scalar(result))
            elif type(result) is dict:
                plain, scalar = _PLAIN_TYPES, to_scalar
                names += [k if type(k) is str else str(k) for k in result]
                values += [v if type(v) in plain else scalar(v) for v in result.values()]
            else:
                names.append(c.name)
                values.append(None if result is _FAILED else to_scalar(result))
        return len(names) - count

    def _context(
        self, scope: CollectionScope, config: int | None, run: int | None, annotation: str | None
    ) -> CollectContext:
        """The context of one collector call: built from the fields kept per (scope, config), run and annotation set.

        It is made before every measured run, between two launches of a host-bound sweep, so it is not built
        through the dataclass constructor (~3 us on the H200's host for its nine frozen fields) but as a copy of
        the fields that stay the same for every run of the config (the same :class:`CollectContext`, equal to
        what the constructor makes: ``tests/core/run/test_collectors.py``).
        """
        key = (scope, config)
        fields = self._fields.get(key)
        if fields is None:
            plan = self.plan
            args = plan.configs[config] if config is not None else ()
            params: Mapping[str, Any] = dict(zip(plan.params, args, strict=False)) if config is not None else {}
            base = CollectContext(
                scope=scope,
                function=plan.function_name,
                args=args,
                params=params,  # one read-only mapping for all runs of the config
                config=config,
                device=plan.device,
                backend=plan.backend,
            )
            fields = self._fields[key] = dict(base.__dict__)
        ctx = object.__new__(CollectContext)
        state = ctx.__dict__
        state.update(fields)
        state["run"] = run
        state["annotation"] = annotation
        return ctx

    def materialize(self, items: list[Any]) -> list[CollectorRow | CollectorValue]:
        """Rows for ``items``: a :data:`~nsightx._results.rows.CollectorRow` tuple per value of a gathered answer.

        Rows, not :class:`CollectorValue` objects: a run's values are made into objects only when something reads
        them (see :mod:`nsightx._results.rows`); the nvml plugin's six values a run, built as objects, cost more
        than the rest of its work before a run (``benchmarks/run_loop_cost.py --nvml``). Gathered answers are converted;
        values already made (rows of the RUN collectors and the thermal guard, the stop rule's object, an earlier
        scope's) pass through unchanged. When none is a gathered answer (a run without ANNOTATION collectors and
        with no RUN answer to convert: the nvml plugin's run) ``items`` itself comes back: every caller copies it
        into the run's tuple, and a loop over a run's two or three items finds that out in half the time of a set
        of their types (~0.15 against ~0.27 us a run on a shared 2-core CPU, issue 35).
        """
        for item in items:
            if type(item) is _Gathered:
                break
        else:
            return items
        out: list[CollectorRow | CollectorValue] = []
        for item in items:
            if type(item) is _Gathered:
                _add_rows(out, *item)
            else:
                out.append(item)
        return out

    def _call(self, c: CollectorLike, ctx: CollectContext) -> Any:
        try:
            result: CollectResult = c.collect(ctx)
        except Exception as e:  # a collector must never cost a run
            self._warn(c, f"{ctx.scope.value} scope", e)
            return _FAILED
        return _copied(result)

    def _warn(self, c: CollectorLike, where: str, e: Exception, stacklevel: int = 5) -> None:
        key = (where, c.name)
        if key not in self._warned:
            self._warned.add(key)
            consequence = {
                "in start()": "Its collect() is not asked in this call and its column is None for every run "
                "(it is not stopped either).",
                "in stop()": "The values it gave are kept.",
            }.get(where, "Its column will be None for failed runs.")
            warnings.warn(
                f"Info collector '{c.name}' ({where}) raised {type(e).__name__}: {e}. {consequence} "
                "(nsightx warns once per collector and scope.)",
                RuntimeWarning,
                stacklevel=stacklevel,
            )


@dataclass
class _Unstarted:
    """What the run loop asks in place of a collector whose ``start(ctx)`` raised: nothing, its column None.

    A collector that could not start (its sampler, its library, its device handle) has nothing sound to say: its
    ``collect`` is not called in that call (a value read from a half-started collector would be a silent wrong
    answer, and asking it again every run would cost each run for nothing). Its column stays in the results, None
    for every run, as a ``collect`` that raised leaves it, so that code reading the column keeps working and the
    None says the value is missing. ``columns``: the columns the collector declared it fills (each is None).
    """

    name: str
    scope: Any
    columns: tuple[str, ...]
    reads_run_fields: bool = False

    def collect(self, ctx: CollectContext) -> Any:
        """``None`` for each declared column, else the loop's mark of a failed answer (its column None)."""
        return dict.fromkeys(self.columns) if self.columns else _FAILED


@dataclass
class CollectPolicy:
    """When the run loop writes its finished runs, and whether writing collects a deferred session first.

    An ordinary session's runs are written as each one finishes. A deferred session (see
    :attr:`~nsightx._run.backend.Session.deferred`) is collected once for many runs: when ``every`` runs are pending,
    at the end of a config once ``seconds`` have passed since the last collection, and at the end of the call
    (the run loop's final flush). An adaptive stop rule needs every run's values at once, so with one the session
    is collected after every run, by the run loop itself (:attr:`collects_each_run`).

    Example:
        >>> policy = CollectPolicy(deferred=True, needs_values=False, every=64, seconds=1.0, clock=lambda: 0.0)
        >>> policy.due(pending=3, config_done=False), policy.due(pending=64, config_done=False)
        (False, True)
    """

    deferred: bool
    """Whether the session hands its runs back only when collected."""
    needs_values: bool
    """Whether the stop rule reads every run's values (``runs="auto"``)."""
    every: int = 64
    """Most runs kept pending (bounds what a hard crash could lose)."""
    seconds: float = 1.0
    """At a config's end, collect once this much time has passed since the last collection."""
    clock: Callable[[], float] = time.perf_counter
    """Seconds, monotonic (tests pass a fake clock)."""
    _since: float = field(init=False, default=0.0)

    def __post_init__(self) -> None:
        self._since = self.clock()

    @classmethod
    def for_session(cls, session: Session, needs_values: bool) -> CollectPolicy:
        """The policy for ``session``, with the limits of :mod:`nsightx._run.backend` as they are now.

        Those are :data:`~nsightx._run.backend.COLLECT_EVERY` and :data:`~nsightx._run.backend.COLLECT_SECONDS`.
        """
        return cls(session.deferred, needs_values, _backend.COLLECT_EVERY, _backend.COLLECT_SECONDS)

    @property
    def collects_each_run(self) -> bool:
        """Whether the run loop collects the session after every run (deferred, with an adaptive rule)."""
        return self.deferred and self.needs_values

    @property
    def write_collects(self) -> bool:
        """Whether writing the pending runs collects the session's outputs first."""
        return self.deferred and not self.needs_values

    def due(self, pending: int, config_done: bool) -> bool:
        """Whether to write the ``pending`` runs now (``config_done``: the last run of a config just finished)."""
        if not self.write_collects:
            return True
        return pending >= self.every or (config_done and self.clock() - self._since >= self.seconds)

    def written(self) -> None:
        """Note that the pending runs were just written (and collected)."""
        self._since = self.clock()


def execute(
    backend: Backend, plan: Plan, sink: Sink, *, while_waiting: Sequence[Callable[[], None]] = ()
) -> Mapping[str, Scalar]:
    """The run stage: measure every run of ``plan`` with ``backend``, writing each run to ``sink``.

    A backend that measures elsewhere (it overrides :meth:`~nsightx._run.backend.Backend.execute`) runs itself;
    every other backend's session is driven by :func:`run_loop` on ``plan.device``.

    Args:
        backend: The backend that measures.
        plan: What to measure.
        sink: Receives every run.
        while_waiting: Work the caller would do after the run stage and that does not depend on what it measures
            (see :func:`run_loop`); a backend that measures elsewhere never runs it.

    Returns:
        The environment the backend measured in (GPU name, clocks, ...), with ``UnreturnedRuns`` when the
        session never handed some measured runs back (see :mod:`nsightx._run.unreturned`).

    Raises:
        PluginError: the backend's environment is not a mapping of str keys to scalars (see
            :mod:`nsightx._run.environment`); every run was written to ``sink`` before.
    """
    if backend.measures_elsewhere():
        return checked_environment(backend.name, backend.execute(plan, sink))
    with use_device(plan.device), backend.session(plan) as session:
        unreturned = run_loop(plan, session, sink, while_waiting=while_waiting)
        environment = checked_environment(backend.name, session.environment())
        if unreturned:
            environment[ENVIRONMENT_KEY] = unreturned
        return environment


def run_loop(
    plan: Plan,
    session: Session,
    sink: Sink,
    *,
    call: Callable[[Plan, int], Any] | None = None,
    while_waiting: Sequence[Callable[[], None]] = (),
) -> int:
    """Run every config (after ``plan.warmup`` discarded runs) until its stop rule says so, feeding ``sink``.

    A fixed ``runs=N`` makes exactly N measured runs per config; ``runs="auto"`` (``plan.stop_rule``) asks
    :mod:`nsightx._run.adaptive` after each run and records why the config stopped as a CONFIG-scope
    ``StopReason`` value on its last run.

    Args:
        plan: The plan to execute.
        session: The backend session that measures.
        sink: Receives one :class:`RunRecords` per measured run, as soon as it finishes.
        call: How to invoke the user's function for a config (defaults to ``plan.function(*config)``).
        while_waiting: Work that does not depend on the measurements, each called once, in order, while a deferred
            session's GPU works through the call's last runs: after the last run was launched, before the loop waits for
            its outputs (:func:`_write_pending`). The collectors are not stopped there but after the wait, as for any
            call (see :class:`_Collectors`). A session that is not deferred, or one collected after every run, never
            waits so: the work is not called here and the caller does it afterwards. Each must not raise (the caller
            keeps what failed and raises it where it would have): an error would end the run loop.

    The loop runs under the process's one-call-at-a-time lock (:mod:`nsightx._run.exclusive`): the profiled
    call that started it holds it; a loop started without one (the ncu worker's child) takes it here.

    Returns:
        How many measured runs a deferred session never handed back (written with no value; a warning said so
        once, see :mod:`nsightx._run.unreturned`): 0 for every other session.
    """
    with _exclusive.run_loop_guard(plan.function_name), heap.holding():  # no-ops under a profiled call
        collectors = _Collectors(plan)
        collectors.start()
        try:
            sweep = _Sweep(plan, session, sink, collectors, call or _call_user, while_waiting)
            sweep.run()
        finally:
            collectors.stop()
    return len(sweep.unreturned)


class _Sweep:
    """The body of :func:`run_loop`, between the collectors' start and stop: every config, every run."""

    def __init__(
        self,
        plan: Plan,
        session: Session,
        sink: Sink,
        collectors: _Collectors,
        call: Callable[[Plan, int], Any],
        while_waiting: Sequence[Callable[[], None]] = (),
    ) -> None:
        self.plan, self.session, self.sink, self.collectors = plan, session, sink, collectors
        self.runner = _Runner(plan, session, collectors, call)
        self.rule: StopRule = plan.stop_rule or FixedRuns(plan.runs)
        self.policy = CollectPolicy.for_session(session, needs_values=not isinstance(self.rule, FixedRuns))
        self.progress = Progress(plan)
        self.pending: list[_Pending] = []
        self.checked_baseline = plan.normalize_against is None
        self.hand = _hand_over(sink)
        incremental = type(session).completed_runs is not Session.completed_runs
        self.build_ahead: Callable[[], None] | None = getattr(sink, "build_ahead", None) if incremental else None
        """What builds the result's columns of the runs written so far, while a session that hands its runs back
        one by one still waits (a session that hands back a mapping has no wait left once its runs are written)."""
        rule, batched = self.rule, self.policy.write_collects  # batched: a fixed count (see CollectPolicy)
        self.last_run = (len(plan.configs) - 1, rule.runs - 1) if type(rule) is FixedRuns and batched else None
        """The call's last run when its pending runs are written in batches (a fixed count: the batches end there)."""
        self.waiting: list[Callable[[], None]] = list(while_waiting)
        """What the write of the call's last run does before it waits (see :meth:`_waiting`), then emptied."""
        self.unreturned: list[tuple[int, int]] = []
        """(config, run) of each measured run the deferred session left out of its collections, its output empty."""
        self.expect: Callable[[list[RunRow]], None] | None = getattr(sink, "expect_runs", None)
        self.blocked: Callable[[int], None] | None = getattr(sink, "note_blocked", None)
        """What is told how long the last wait blocked after the work done in it (a sink's ``note_blocked``: whether
        that work was hidden by the GPU decides whether the next call does it, see ``nsightx._api.aheadpolicy``)."""
        """What takes the rows of the runs about to be collected, outputs left out, before the work done while
        waiting (a :class:`~nsightx._results.sink.RunSink`'s ``expect_runs``: its frame work reads them there)."""

    def run(self) -> None:
        """ONCE collectors, then each config; what was measured is written even when a run raises.

        Not when the sink itself failed (:class:`~nsightx.OutputError`, a full disk): its file takes nothing more.
        """
        once = [
            new_collector_value(*v) if isinstance(v, tuple) else v for v in self.collectors.run(CollectionScope.ONCE)
        ]
        if once:  # written as a run object: its values as objects
            self.sink.write(RunRecords(-1, -1, collectors=tuple(once)))
        try:
            for ci in range(len(self.plan.configs)):
                self._config(ci)
            self._write(collect=self.policy.write_collects)
            if self.unreturned:  # told once, after the call's last collection (not when a run or the session failed)
                measured = self.progress.done - len(self.plan.configs) * self.plan.warmup
                warn_unreturned(self.plan.backend, self.unreturned, measured)
        except OutputError:
            self.pending.clear()  # the sink's file takes nothing more (its error counts what it holds)
            raise
        finally:
            self.progress.close()
            if self.pending:  # a run raised: keep what the deferred session already measured
                try:
                    self._write(collect=self.session.deferred)
                except Exception as e:
                    warnings.warn(
                        f"could not collect or write the last {len(self.pending)} run(s) after a failure: {e}",
                        RuntimeWarning,
                        stacklevel=4,
                    )

    def _config(self, ci: int) -> None:
        """CONFIG collectors, the warm-up runs, then measured runs until the stop rule says why it stops."""
        progress, runner = self.progress, self.runner
        progress.start_config(ci)
        config_values = self.collectors.run(CollectionScope.CONFIG, config=ci)
        for r in range(-self.plan.warmup, 0):
            runner.run(ci, r)
            progress.advance()
        stopper = self.rule.start_config()
        observe = None if type(stopper).observe is ConfigStopper.observe else stopper.observe
        fixed = self.rule.runs if type(self.rule) is FixedRuns else None  # the count alone decides: no call
        policy, pending = self.policy, self.pending
        each_run, batched = policy.collects_each_run, policy.write_collects
        plain = fixed is not None and not (each_run or batched or observe or self.rule.records_reason)
        deferred = fixed is not None and batched and not (observe or self.rule.records_reason or runner.asks_annotation)
        r, reason = 0, None
        while reason is None:
            if r == 1 and deferred:  # run 0 went this way: config values, baseline check
                r = self._deferred_runs(ci, 1, fixed)  # type: ignore[arg-type]  # deferred: fixed is an int
                break
            if r == 1 and plain and runner.blockable:  # run 0 went this way: config values, baseline check
                few = fixed - 1 < BLOCK_MIN_RUNS  # type: ignore[operator]  # plain: fixed is an int
                block = None if runner.plain or few else self._open_block(ci, 1)  # run values: a block, or this loop
                if block is not None or runner.plain:  # plain: fixed is an int
                    stop: int = fixed  # type: ignore[assignment]
                    r = self._plain_runs(ci, 1, stop) if block is None else self._block_runs(ci, 1, stop, block)
                    break
            state, output, values = runner.run(ci, r)
            progress.advance()
            if each_run:
                output = _collected(self.session.collect_runs(), (ci, r), output, self.unreturned)
            if observe is not None:
                observe(_records_of(output))
            if fixed is None:
                reason = stopper.stop_reason(r + 1)
            elif r + 1 >= fixed:
                reason = "runs"
            if r == 0 and config_values:
                values = config_values + values
            if reason is not None and self.rule.records_reason:
                values.append((STOP_COLUMN, CollectionScope.CONFIG.value, ci, None, None, reason))
            if not batched:
                self._write_run(ci, r, state, output, values)
            else:
                pending.append((ci, r, state, output, values))
                if policy.due(len(pending), config_done=reason is not None):
                    self._write(collect=True)
            if not self.checked_baseline:
                check_baseline(self.plan.normalize_against, state.used, self.plan.function_name, "its first run opened")
                self.checked_baseline = True
            r += 1
        progress.skip(self.rule.max_runs - r)

    def _plain_runs(self, ci: int, start: int, stop: int) -> int:
        """Runs ``start`` to ``stop - 1`` of config ``ci``, where a run is the call, its output and its write alone.

        That is the common case (a fixed run count, a session that hands each run back as it finishes, no thermal
        guard, no run preparation, no run or annotation collector with something to say) and the one on the host
        backend beside an empty region, where everything here is most of a run's cost (issue 35): what
        :meth:`_Runner.run` and :meth:`_write_run` do for such a run, with what stays the same for every run
        looked up once, the user's function called here rather than through :func:`_call_user`, and the row of
        an output of record rows alone (the host session's) built here. The heap's checkpoints are told of the
        written runs in batches that end where one is due (:func:`~nsightx._run.heap.until_checkpoint`), and a
        progress line that is not shown of the finished runs at the end. Returns ``stop``.
        """
        block = self._open_block(ci, start) if stop - start >= BLOCK_MIN_RUNS else None
        if block is not None:
            return self._block_runs(ci, start, stop, block)
        runner, hand, pending, context, progress = self.runner, self.hand, self.pending, _context, self.progress
        session, plan, new_state = self.session, self.plan, _context.RunState
        finish, shown, advance = session.finish_run, progress.enabled, progress.advance
        user = runner.invoke is _call_user  # the user's function is called here, with the config's arguments
        function, args, invoke = plan.function, plan.configs[ci], runner.invoke
        finished = told = unwritten = 0  # runs finished; of those, told to heap.kept; 1 if the last write raised
        due = heap.until_checkpoint()
        try:
            for r in range(start, stop):
                state = new_state(session, ci, r)
                previous = context._current  # restored, not cleared (see _Runner.run)
                context._current = state
                try:
                    result = function(*args) if user else invoke(plan, ci)
                    if user and result is not None:
                        _returned(plan, result, stacklevel=3)
                finally:
                    context._current = previous
                state.end()  # a region still open, or closed on another thread, fails the run here
                output = finish(ci, r)
                finished += 1
                if shown:
                    advance()
                try:
                    if output.records:
                        hand(_run_row(ci, r, state, output, ()))
                    else:  # what _run_row makes of it: the session's rows as they are
                        rows: Any = output.record_rows
                        hand((ci, r, rows, tuple(state.regions), output.region_attributes, ()))
                except BaseException:
                    unwritten = 1
                    pending.append((ci, r, state, output, []))
                    raise
                if finished - told >= due:
                    heap.kept(finished - told)
                    told, due = finished, heap.until_checkpoint()
        finally:
            if finished - unwritten > told:
                heap.kept(finished - unwritten - told)
            if not shown:
                progress.done += finished
        return stop

    def _deferred_runs(self, ci: int, start: int, stop: int) -> int:
        """Runs ``start`` to ``stop - 1`` of config ``ci`` with a deferred session (a GPU backend's), a fixed count.

        What the general loop of :meth:`_config` does for such a run, with what stays the same for every run looked
        up once: the guard's check, the run's preparation (the session's cache flush), the guard's value and the
        RUN collectors' answers kept as returned (:meth:`_Runner.deferred_values`), the user's function, the
        session's ``finish_run``; then the run waits in :attr:`pending` until :meth:`CollectPolicy.due` says the
        pending runs are written (``policy.every`` of them, or the config's end). The answers become rows in
        :func:`_write_pending`, before it waits for the GPU (issue 35: the nvml plugin's values cost ~3.5 us a run
        on the measured path when made into rows between two runs). A run that raises is not pending: the runs
        before it are written by :meth:`run`'s clean-up, as from the general loop. Returns ``stop``.
        """
        runner, plan, session, pending, progress = self.runner, self.plan, self.session, self.pending, self.progress
        context, new_state, due = _context, _context.RunState, self.policy.due
        before, values_of = runner.deferred_values(ci)
        clock = _run_clock if before is not None or values_of is not None else None
        now: int | None = None
        start_run = session.start_run if runner.prepares else None
        finish, shown, advance = session.finish_run, progress.enabled, progress.advance
        user = runner.invoke is _call_user  # the user's function is called here, with the config's arguments
        function, args, invoke = plan.function, plan.configs[ci], runner.invoke
        finished = 0
        try:
            for r in range(start, stop):
                if clock is not None:  # the run's one read of the host clock (see _run_clock)
                    now = clock()
                    if before is not None and before(now):
                        now = clock()  # it paused for cooling: the run starts now
                if start_run is not None:
                    start_run(ci, r)
                state = new_state(session, ci, r)
                values = values_of(ci, r, now) if values_of is not None else []
                previous = context._current  # restored, not cleared (see _Runner.run)
                context._current = state
                try:
                    result = function(*args) if user else invoke(plan, ci)
                    if user and result is not None:
                        _returned(plan, result, stacklevel=3)
                finally:
                    context._current = previous
                state.end()  # a region still open, or closed on another thread, fails the run here
                pending.append((ci, r, state, finish(ci, r), values))
                finished += 1
                if shown:
                    advance()
                if r + 1 < stop and due(len(pending), config_done=False):
                    self._write(collect=True)
        finally:
            if not shown:
                progress.done += finished
        if due(len(pending), config_done=True):
            self._write(collect=True)
        return stop

    def _open_block(self, ci: int, start: int) -> Any:
        """A run block of the sink for runs ``start``... of config ``ci``, when the session and the sink allow one.

        That is a :attr:`~nsightx._run.backend.Session.timed_records` session (the host backend) and a sink that
        keeps its runs in memory (see :meth:`~nsightx._results.sink.RunSink.open_block`); else ``None``.
        """
        session = self.session
        record = session.timed_records
        open_block = getattr(self.sink, "open_block", None)
        if record is None or not session.host_timed or open_block is None:
            return None
        return open_block(ci, start, record)

    def _block_runs(self, ci: int, start: int, stop: int, block: Any) -> int:
        """:meth:`_plain_runs` for a session whose records are its regions' times: the runs go into ``block``.

        Each run's regions go straight into the block's columns (:class:`~nsightx._run.context.ColumnRunState`),
        and the run is stored once its count is appended: no call of the session, no row, no object per run
        (issue 35). A run that raises is not counted, so its regions are not part of the block (the block is cut
        back to its counted runs at the end, however the loop ends). The heap's checkpoints come after the same runs
        as in :meth:`_plain_runs`: they free the cycles the user's function dropped. Returns ``stop``.

        Runs with a thermal guard or RUN collectors come here too (the nvml plugin's): before each, the guard's
        check and the run's values, as :meth:`_Runner.run` makes them, into the block's value columns (names and
        values: no row per value; a run that raises leaves none), the rest of the run as for a plain one.
        """
        plan, context, progress, new_state = self.plan, _context, self.progress, _context.ColumnRunState
        session, shown, advance = self.session, progress.enabled, progress.advance
        user = self.runner.invoke is _call_user  # the user's function is called here, with the config's arguments
        function, args, invoke = plan.function, plan.configs[ci], self.runner.invoke
        names, append = block.names, block.counts.append
        columns = (names, block.host_ns, block.failed)
        before, values_into = self.runner.run_values()
        clock = _run_clock if before is not None or values_into is not None else None
        now: int | None = None
        value_names, value_scalars, count_values = block.value_names, block.values, block.n_values.append
        mark = finished = told = 0
        due = heap.until_checkpoint()
        try:
            for r in range(start, stop):
                if clock is not None:  # the run's one read of the host clock (see _run_clock)
                    now = clock()
                    if before is not None and before(now):
                        now = clock()  # it paused for cooling: the run starts now
                if values_into is not None:
                    k = values_into(ci, r, value_names, value_scalars, now)
                state = new_state(session, ci, r, columns)
                previous = context._current  # restored, not cleared (see _Runner.run)
                context._current = state
                try:
                    result = function(*args) if user else invoke(plan, ci)
                    if user and result is not None:
                        _returned(plan, result, stacklevel=3)
                finally:
                    context._current = previous
                state.end()  # a region still open, or closed on another thread, fails the run here
                if values_into is not None:
                    count_values(k)
                append(len(names) - mark)  # the run is stored
                mark = len(names)
                finished += 1
                if shown:
                    advance()
                if finished - told >= due:
                    heap.kept(finished - told)
                    told, due = finished, heap.until_checkpoint()
        finally:
            block.seal()
            if finished > told:
                heap.kept(finished - told)
            if not shown:
                progress.done += finished
        return stop

    def _write_run(self, ci: int, r: int, state: _context.RunState, output: RunOutput, values: list[Any]) -> None:
        """Write one finished run at once (every session that is not collected in batches).

        What :func:`_write_pending` does for one run, without its bookkeeping: a run whose write raised is left in
        :attr:`pending`, so that the clean-up after the error hands it over again, as it does for a batch.
        """
        rows = tuple(self.collectors.materialize(values)) if values else ()
        try:
            self.hand(_run_row(ci, r, state, output, rows))
        except BaseException:
            self.pending.append((ci, r, state, output, list(rows)))
            raise
        heap.kept(1)

    def _write(self, *, collect: bool) -> None:
        if self.pending:
            written = len(self.pending)
            _write_pending(
                self.session,
                self.hand,
                self.pending,
                self.collectors,
                collect=collect,
                unreturned=self.unreturned if collect else None,
                build_ahead=self.build_ahead,
                waiting=self._waiting() if collect else (),
                expect=self.expect,
                blocked=self.blocked,
            )
            self.policy.written()
            heap.kept(written)

    def _waiting(self) -> list[Callable[[], None]]:
        """The work to do while the session waits, when the pending runs end with the call's last run; else none.

        Then every run was launched and none is launched again: the caller's ``while_waiting`` work is done while
        the GPU still works, each once.
        """
        last = self.pending[-1]
        if self.last_run is None or not self.waiting or (last[0], last[1]) != self.last_run:
            return []
        waiting, self.waiting = self.waiting, []
        return waiting


_Pending = tuple[int, int, _context.RunState, RunOutput, "list[Any] | tuple[Any, ...]"]
"""(config, run, run state, output, collector rows and gathered answers) of a run not yet written: a tuple only
when nothing in it is left to make into rows (see :meth:`_Runner._read_values`)."""


def _write_pending(
    session: Session,
    hand: Callable[[RunRow], None],
    pending: list[_Pending],
    collectors: _Collectors,
    *,
    collect: bool,
    build_ahead: Callable[[], None] | None = None,
    waiting: Sequence[Callable[[], None]] = (),
    expect: Callable[[list[RunRow]], None] | None = None,
    blocked: Callable[[int], None] | None = None,
    unreturned: list[tuple[int, int]] | None = None,
) -> None:
    """Write finished runs to the sink (collecting a deferred session's outputs first), then forget them.

    Collector answers become rows before the session is collected, while the GPU still works. After the wait, the
    runs are built directly from values this loop and the backend made (H200, a 44-run call: 3.4 -> 2.3 ms,
    ``benchmarks/results/2026-12-04-s7-call-timeline-*``); only a third party's mapping goes through pydantic.

    The session is collected through :meth:`~nsightx._run.backend.Session.completed_runs`: each run is written as
    soon as its output and those of the runs before it came back, while the session waits for the later ones (a GPU
    session: while the GPU works through them), so what is left after the last wait is one run's write. The runs
    go to the sink in ``pending`` order whatever order the session hands them back in; a session that hands back
    only a mapping (:meth:`~nsightx._run.backend.Session.collect_runs`) has every run written after its one wait,
    as before. ``build_ahead`` (the sink's :meth:`~nsightx._results.sink.RunSink.build_ahead`, given only for a
    session that hands runs back one by one) is called after each config's last run but the last one written
    here: the result's columns of that config are then built during the wait too.

    A run leaves ``pending`` as soon as the sink took it, so the clean-up after an error hands over only the runs
    not written yet, each once, with the output already collected for it (a deferred session hands an output
    back only once: collected again, a run would be written without its measurements). ``waiting``: work done
    before the session is asked for its outputs, while the GPU still works (see :func:`_wait_work`); after it, the
    time spent blocked on the session's outputs goes to ``blocked``; a run left out with no value, to ``unreturned``.
    """
    materialize = collectors.materialize
    rows = [values if isinstance(values, tuple) else tuple(materialize(values)) for *_, values in pending]
    _wait_work(waiting, expect, pending, rows)  # before completed_runs: the default one waits for every run at once
    if collect and build_ahead is None and type(session).completed_runs is Session.completed_runs:
        _write_collected(session, hand, pending, rows, blocked if waiting else None, unreturned)
        return
    arriving = _Timed(session.completed_runs() if collect else iter([]), bool(waiting and blocked))
    outputs: dict[tuple[int, int], RunOutput] = {}  # what came back so far
    ahead, last, done = build_ahead if collect else None, len(pending) - 1, 0
    try:
        for (ci, r, state, output, _), values in zip(pending, rows, strict=True):
            key = (ci, r)
            while key not in outputs and _arrive(arriving, outputs):
                pass
            hand(_run_row(ci, r, state, _collected(outputs, key, output, unreturned), values))
            if ahead is not None and done < last and pending[done + 1][0] != ci:  # a config's last run: its columns
                ahead()
            done += 1
        for _ in arriving:  # runs after the last pending one (warm-ups): read, then discarded
            pass
        if waiting and blocked is not None:
            blocked(arriving.ns)
    finally:
        _keep_unwritten(pending, rows, done, arriving, outputs)


def _write_collected(
    session: Session,
    hand: Callable[[RunRow], None],
    pending: list[_Pending],
    rows: list[tuple[Any, ...]],
    blocked: Callable[[int], None] | None,
    unreturned: list[tuple[int, int]] | None,
) -> None:
    """What :func:`_write_pending` does for a session that hands its runs back as one mapping (cupti's way).

    Its :meth:`~nsightx._run.backend.Session.collect_runs` is asked once and each run written from that mapping:
    the same runs, outputs and order as through the default ``completed_runs`` (which yields the mapping's items),
    without a generator step, a wait's clock reads and a look-up loop per run after the GPU wait (issue 35).
    ``blocked``: told how long ``collect_runs`` took (when the work done while waiting is judged by it).
    """
    outputs: Mapping[tuple[int, int], RunOutput] = {}
    done = 0
    try:
        t0 = time.perf_counter_ns() if blocked is not None else 0
        outputs = session.collect_runs()
        ns = time.perf_counter_ns() - t0 if blocked is not None else 0
        get = outputs.get
        for (ci, r, state, output, _), values in zip(pending, rows, strict=True):
            got = get((ci, r))
            if got is None:
                got = _collected(outputs, (ci, r), output, unreturned)
            hand(_run_row(ci, r, state, got, values))
            done += 1
        if blocked is not None:
            blocked(ns)
    finally:
        _keep_unwritten(pending, rows, done, iter(()), outputs if type(outputs) is dict else dict(outputs))


def _keep_unwritten(
    pending: list[_Pending],
    rows: list[tuple[Any, ...]],
    done: int,
    arriving: Iterator[tuple[tuple[int, int], RunOutput]],
    outputs: dict[tuple[int, int], RunOutput],
) -> None:
    """Forget the first ``done`` pending runs (written); the others keep what was collected for them, and more.

    Those are left when a write raised: the session's later outputs are read too (:func:`_drain`), so that the
    clean-up after the error writes each run once, with its output.
    """
    if done < len(pending):
        _drain(arriving, outputs)
        pending[done:] = [
            (ci, r, state, outputs.get((ci, r), output), list(values))
            for (ci, r, state, output, _), values in zip(pending[done:], rows[done:], strict=True)
        ]
    del pending[:done]


def _collected(
    outputs: Mapping[tuple[int, int], RunOutput],
    key: tuple[int, int],
    output: RunOutput,
    unreturned: list[tuple[int, int]] | None,
) -> RunOutput:
    """Run ``key``'s output in a collection, else ``output`` (``finish_run``'s: for a deferred session nothing).

    A run never handed back whose ``output`` holds no value either is noted in ``unreturned`` (when given: the
    outputs are a collection's, not those of a loop that did not collect).
    """
    got = outputs.get(key)
    if got is not None:
        return got
    if unreturned is not None and not (output.records or output.record_rows):
        unreturned.append(key)
    return output


def _wait_work(
    waiting: Sequence[Callable[[], None]],
    expect: Callable[[list[RunRow]], None] | None,
    pending: list[_Pending],
    rows: list[tuple[Any, ...]],
) -> None:
    """The work done while the GPU still works (see :meth:`_Sweep._waiting`), each once, in order.

    ``expect`` (the sink's ``expect_runs``) is handed the pending runs' rows first, their outputs left out (no
    records, no attributes): the regions and collector values the rows will hold, the same objects.
    """
    if waiting and expect is not None:
        expect([(ci, r, (), tuple(state.regions), {}, v) for (ci, r, state, *_), v in zip(pending, rows, strict=True)])
    for work in waiting:
        work()


class _Timed(Iterator[tuple[tuple[int, int], RunOutput]]):
    """A session's completed runs, with the time spent waiting for them (:attr:`ns`): how long the loop blocked.

    Timed only when ``timed`` (the call's last wait, whose work is judged by it): two clock reads a run, which a
    GPU run's path otherwise keeps to the minimum (``tests/plugins/nvml/test_nvml_clock_reads.py``).
    """

    def __init__(self, runs: Iterator[tuple[tuple[int, int], RunOutput]], timed: bool) -> None:
        self._runs = runs
        self._timed = timed
        self.ns = 0

    def __next__(self) -> tuple[tuple[int, int], RunOutput]:
        if not self._timed:
            return next(self._runs)
        t0 = time.perf_counter_ns()
        try:
            return next(self._runs)
        finally:
            self.ns += time.perf_counter_ns() - t0


def _arrive(arriving: Iterator[tuple[tuple[int, int], RunOutput]], outputs: dict[tuple[int, int], RunOutput]) -> bool:
    """Wait for the session's next completed run and keep its output in ``outputs``; False when none is left."""
    item = next(arriving, None)
    if item is None:
        return False
    outputs[item[0]] = item[1]
    return True


def _drain(arriving: Iterator[tuple[tuple[int, int], RunOutput]], outputs: dict[tuple[int, int], RunOutput]) -> None:
    """After a write raised: keep every output the session still hands back, as a collection before any write did.

    Only the write's error reaches the caller: a session that fails now (or failed already, and so stopped the
    writes) has its runs written without their outputs by the clean-up, as after a failed collection.
    """
    try:
        while _arrive(arriving, outputs):
            pass
    except Exception:  # the error being raised already is the one to report
        pass


def _hand_over(sink: Sink) -> Callable[[RunRow], None]:
    """How the loop hands ``sink`` a finished run: compact, to a sink that takes rows; else as a :class:`RunRecords`.

    A :class:`~nsightx._results.sink.RunSink` keeps the rows as they are until something asks for the run objects
    (see :data:`~nsightx._results.rows.RunRow`); any other sink gets the objects, built at once.
    """
    add_run: Callable[[RunRow], None] | None = getattr(sink, "add_run", None)
    if add_run is not None:
        return add_run
    write = sink.write
    return lambda row: write(run_from_row(row))


def _run_row(
    ci: int, r: int, state: _context.RunState, output: RunOutput, values: tuple[CollectorRow | CollectorValue, ...]
) -> RunRow:
    """One run in compact form, from its regions, the backend's output and its collector values.

    No object per record or region is made here: with a deferred session this runs for every run of the call
    after the wait for the GPU, and on the host backend between two runs. Records a backend handed back in another
    form than :class:`Record` (mappings, subclasses) are validated now, so that a bad one fails at its run.
    """
    records: Any = output.records
    if records:
        if not _RECORD_ONLY.issuperset(map(type, records)):
            records = _records_adapter().validate_python(records)
        records = (*records, *output.record_rows)  # a copy: the backend's list is not kept
    else:
        records = output.record_rows  # handed over by the session (the host session's list of the run)
    return (ci, r, records, tuple(state.regions), output.region_attributes, values)


def _records_of(output: RunOutput) -> list[Record]:
    """Every record of ``output`` as a :class:`Record` (its record rows made into objects), for a stop rule."""
    if not output.record_rows:
        return output.records
    return [*output.records, *(new_record(*row) for row in output.record_rows)]


_RECORD_ONLY = frozenset({Record})
"""A run's records need no validation when every one is exactly a :class:`Record`."""


@functools.cache
def _records_adapter() -> TypeAdapter[list[Record]]:
    """Validates records a backend handed back in another form than :class:`Record` (mappings, subclasses)."""
    return TypeAdapter(list[Record])


_ValuesInto = Callable[[int, int, list[str], list[Scalar], int | None], int]
"""Appends the values of run (config, run), started at the given host time, to a name and a value column; returns
how many."""
_Before = Callable[[int | None], bool]
"""The guard's check before a run, handed the run's start (see :meth:`~nsightx._run.thermal.Guard.before_run`)."""
_ValuesOf = Callable[[int, int, int | None], list[Any]]
"""The values of run (config, run), started at the given host time: rows and answers kept as returned."""


class _Runner:
    """One run of the user's function: thermal guard, run preparation, RUN collectors, the call itself.

    Built after the collectors started (:meth:`_Collectors.start`), so it knows which scopes still have a collector
    to ask: a run asks none of those that have nothing to say in this call, and without a thermal guard it makes
    no guard call either.
    """

    def __init__(
        self, plan: Plan, session: Session, collectors: _Collectors, invoke: Callable[[Plan, int], Any]
    ) -> None:
        self.plan = plan
        self.session = session
        self.collectors = collectors
        self.invoke = invoke
        self.guard = make_guard(plan)
        self.guarded = type(self.guard) is not NoGuard
        self.asks_run = bool(collectors.by_scope[CollectionScope.RUN])
        self.asks_annotation = bool(collectors.by_scope[CollectionScope.ANNOTATION])
        self.prepares = type(session).start_run is not Session.start_run
        """Whether the session prepares its runs (the host session does not: no call then)."""
        self.blockable = not (self.prepares or self.asks_annotation)
        """Whether a measured run is the user's call, after the guard's check and the RUN values at most (see
        :meth:`_Sweep._block_runs`)."""
        self.plain = self.blockable and not (self.guarded or self.asks_run)
        """Whether a measured run is the call of the user's function alone (see :meth:`_Sweep._plain_runs`)."""

    def run_values(self) -> tuple[_Before | None, _ValuesInto | None]:
        """What a measured run calls before it starts, as :meth:`run` calls it, each ``None`` when there is none.

        The guard's check, and what appends the run's values (the guard's, then the RUN collectors') to a name and
        a value column and returns how many (see :meth:`_Collectors.collect_run_into`). Both take the run's start,
        read once by the caller (see :data:`_run_clock`).
        """
        guard, collect = self.guard, self.collectors.collect_run_into
        if not self.guarded:
            return None, collect if self.asks_run else None
        take, asks_run = guard.take_values, self.asks_run

        def values_into(ci: int, r: int, names: list[str], values: list[Scalar], now: int | None) -> int:
            rows = take(ci, r)
            for row in rows:  # the pause: one row
                names.append(row[0])
                values.append(row[5])
            return len(rows) + collect(ci, r, names, values, now) if asks_run else len(rows)

        return guard.before_run, values_into

    def deferred_values(self, ci: int) -> tuple[_Before | None, _ValuesOf | None]:
        """What a measured run of config ``ci`` of a deferred session calls before it starts, ``None`` if nothing.

        The guard's check, and what returns the run's values: the guard's rows, then the RUN collectors' answers
        as returned (:meth:`_Collectors.gather_run`), made into rows when the run is written. Both take the run's
        start, read once by the caller (see :data:`_run_clock`). When the one RUN collector answers through a
        per-config callable (:meth:`_Collectors.run_reader`: the nvml plugin's), the values come from
        :meth:`_read_values` instead.
        """
        reader = self.collectors.run_reader(ci) if self.asks_run else None
        if reader is not None:
            return (self.guard.before_run if self.guarded else None), self._read_values(*reader)
        gather = self.collectors.gather_run
        if not self.guarded:
            return None, gather if self.asks_run else None
        take = self.guard.take_values
        if not self.asks_run:
            return self.guard.before_run, lambda ci, r, now: take(ci, r)

        def values_of(ci: int, r: int, now: int | None) -> list[Any]:
            return gather(ci, r, now, take(ci, r))

        return self.guard.before_run, values_of

    def _read_values(self, c: CollectorLike, read: Callable[[int | None], Any]) -> _ValuesOf:
        """What returns a deferred run's values when the one RUN collector ``c`` answers through ``read``.

        What :meth:`_Collectors.gather_run` does after the guard's rows, with no context written and no loop over
        the collectors: the answer as :meth:`_Collectors.gather_run` keeps it (a :class:`RunValues` as it is,
        anything else as a gathered answer, a raise as a failed one, with its warning). A run whose values are
        the guard's rows and a :class:`RunValues` gets them as a tuple: nothing is left to make into rows, so
        :func:`_write_pending` takes the tuple as the run's values without asking :meth:`_Collectors.materialize`.
        """
        name, warn, take = c.name, self.collectors._warn, self.guard.take_values if self.guarded else None

        def values_of(ci: int, r: int, now: int | None) -> Any:
            try:
                result = read(now)
            except Exception as e:  # a collector must never cost a run
                warn(c, f"{_RUN} scope", e, stacklevel=4)
                result = _FAILED
            if type(result) is RunValues:  # nearly every run: nothing left to convert
                return (*take(ci, r), result) if take is not None else (result,)
            rows = take(ci, r) if take is not None else []
            rows.append(_gathered((name, _RUN, ci, r, None, _copied(result))))
            return rows

        return values_of

    def run(self, ci: int, r: int) -> tuple[_context.RunState, RunOutput, list[Any]]:
        """Run config ``ci`` once (``r < 0``: a warm-up run, whose collectors are skipped).

        The host clock is read once as the run starts, for the guard and the RUN collectors (see
        :data:`_run_clock`), and again only when the guard paused.
        """
        session = self.session
        now = _run_clock() if self.guarded or (r >= 0 and self.asks_run) else None
        if self.guarded and self.guard.before_run(now):
            now = _run_clock()  # it paused for cooling: the run starts now
        if self.prepares:
            session.start_run(ci, r)
        run_values: list[Any] = []
        state = _context.RunState(session, ci, r)
        if r >= 0:
            if self.guarded:
                run_values += self.guard.take_values(ci, r)
            if self.asks_run:
                run_values += self.collectors.collect_run(ci, r, now)
            if self.asks_annotation:
                state.on_annotation = functools.partial(self._annotation, run_values, ci, r)
        previous = _context.current()  # restored, not cleared: None except for a loop run inside a run
        _context.set_current(state)
        try:
            self.invoke(self.plan, ci)
        finally:
            _context.set_current(previous)
        state.end()
        return state, session.finish_run(ci, r), run_values

    def _annotation(self, run_values: list[Any], ci: int, r: int, name: str) -> None:
        """Ask the ANNOTATION collectors as region ``name`` of run ``r`` of config ``ci`` opens."""
        run_values.extend(self.collectors.gather(CollectionScope.ANNOTATION, config=ci, run=r, annotation=name))


def _call_user(plan: Plan, config: int) -> None:
    """Call the user's function with the arguments of config ``config``; warn if it returned something."""
    result = plan.function(*plan.configs[config])
    if result is not None:
        _returned(plan, result, stacklevel=4)


def _returned(plan: Plan, result: object, stacklevel: int) -> None:
    """Warn that the profiled function returned a value, which the decorated call does not hand back.

    Raises:
        ConfigError: the value is a coroutine or a generator: the call did none of its work (see
            :mod:`~nsightx._run.lazycall`).
    """
    refuse_lazy(plan.function_name, result)
    warnings.warn(
        f"Function '{plan.function_name}' returns a value, but the return value for a function which is "
        "decorated with nsight.analyze.kernel is ignored and instead the ProfileResults object is returned. "
        f"(It returned {type(result).__name__}; keep what you need in an undecorated helper.)",
        RuntimeWarning,
        stacklevel=stacklevel,
    )
