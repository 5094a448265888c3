"""The parent's side of the channel: the user's real collectors, the thermal guard and the progress line.

:class:`WorkerRequests` answers the messages described in :mod:`nsightx._remote.channel`. It calls each collector
with the same :class:`~nsightx.ext.CollectContext` the in-process run loop would build, and applies the
same rules: a collector that raises warns once (per scope and name) and gives an empty value for that call;
the run goes on. :func:`worker_collectors` builds the proxies that take the collectors' place in the pickled plan.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from nsightx._enums import CollectionScope
from nsightx._remote.channel import ProxyCollector
from nsightx._results.rows import to_scalar
from nsightx._run.collectors import CollectContext, CollectorLike
from nsightx._run.plan import Plan
from nsightx._run.progress import Progress
from nsightx._run.thermal import PAUSE_COLUMN, Guard, NoGuard


def worker_collectors(plan: Plan, guard: Guard) -> tuple[ProxyCollector, ...]:
    """The proxies the worker's plan carries instead of ``plan.collectors`` (and of the guard's column).

    The guard's ``ThermalPauseS`` proxy comes first among the RUN ones, as the guard's value comes first in
    the in-process run loop.
    """
    proxies = []
    if not isinstance(guard, NoGuard):
        proxies.append(ProxyCollector(PAUSE_COLUMN, CollectionScope.RUN))
    for c in plan.collectors:
        columns = getattr(c, "columns", None)
        proxies.append(
            ProxyCollector(
                c.name, CollectionScope(c.scope), tuple(str(x) for x in columns) if isinstance(columns, tuple) else None
            )
        )
    return tuple(proxies)


@dataclass
class RunMark:
    """The run the worker announced last, and whether it finished."""

    config: int
    run: int
    finished: bool = False


@dataclass
class WorkerRequests:
    """Answers one execution's worker(s): collectors and guard in this process, progress on this terminal.

    Args:
        plan: The user's plan (with the real collectors).
        guard: The thermal guard built for it in this process.
        progress: The progress line (counts warm-up runs too, like the in-process one).
    """

    plan: Plan
    guard: Guard
    progress: Progress
    passes: int = 0
    """Workers that connected (ncu's application replay starts one per pass)."""
    clean_exits: int = 0
    """Workers that said goodbye after finishing their run loop."""
    last: RunMark | None = None
    """The run announced last (the one in progress if the worker died)."""
    failure: BaseException | None = None
    """An error of the parent's own (e.g. :class:`~nsightx.CoolingTimeoutError`), re-raised after the worker ends."""
    _by_scope: dict[CollectionScope, list[CollectorLike]] = field(default_factory=dict)
    _warned: set[tuple[str, str]] = field(default_factory=set)
    _runs_in_config: int = 0

    def __post_init__(self) -> None:
        for c in self.plan.collectors:
            self._by_scope.setdefault(CollectionScope(c.scope), []).append(c)

    def handle(self, message: Mapping[str, Any]) -> dict[str, Any] | None:
        """Answer one message (``None`` for notices, which get no answer)."""
        op = message.get("op")
        try:
            if op == "run":
                return self._run(int(message["config"]), int(message["run"]))
            if op == "collect":
                scope = CollectionScope(message["scope"])
                return {
                    "values": self._collect(scope, message.get("config"), message.get("run"), message.get("annotation"))
                }
        except Exception as e:  # the parent's own failure: stop the worker, re-raise here afterwards
            self.failure = e
            return {"error": {"type": type(e).__name__, "message": str(e)}}
        if op == "hello":
            self.passes += 1
            self.last = None
            self._runs_in_config = 0
            self.progress.done = 0  # application replay: each pass runs the whole sweep again
        elif op == "ran":
            if self.last is not None:
                self.last.finished = True
            self.progress.advance()
        elif op == "bye":
            self.clean_exits += 1
        return None

    def _run(self, config: int, run: int) -> dict[str, Any]:
        if self.last is not None and self.last.config != config:
            self.progress.skip(self.plan.runs - self._runs_in_config)  # runs="auto" stopped that config early
            self._runs_in_config = 0
        if self.last is None or self.last.config != config:
            self.progress.start_config(config)
        self.last = RunMark(config, run)
        self.guard.before_run()
        if run < 0:
            return {"values": []}
        self._runs_in_config += 1
        values = [[name, "value", value] for name, _, _, _, _, value in self.guard.take_values(config, run)]
        values += self._collect(CollectionScope.RUN, config, run, None)
        return {"values": values}

    def _collect(
        self, scope: CollectionScope, config: int | None, run: int | None, annotation: str | None
    ) -> list[list[Any]]:
        collectors = self._by_scope.get(scope, [])
        if not collectors:
            return []
        args = self.plan.configs[config] if config is not None else ()
        ctx = CollectContext(
            scope=scope,
            function=self.plan.function_name,
            args=args,
            params=dict(zip(self.plan.params, args, strict=False)),
            config=config,
            run=run,
            annotation=annotation,
            device=self.plan.device,
            backend=self.plan.backend,
        )
        return [self._call(c, ctx) for c in collectors]

    def _call(self, c: CollectorLike, ctx: CollectContext) -> list[Any]:
        try:
            result = c.collect(ctx)
        except Exception as e:  # a collector must never cost a run
            key = (ctx.scope.value, c.name)
            if key not in self._warned:
                self._warned.add(key)
                warnings.warn(
                    f"info collector {c.name!r} ({ctx.scope.value}) raised {type(e).__name__}: {e}; "
                    "its column is empty where it failed",
                    RuntimeWarning,
                    stacklevel=2,
                )
            return [c.name, "failed", None]
        if isinstance(result, Mapping):
            return [c.name, "mapping", {str(k): to_scalar(v) for k, v in result.items()}]
        return [c.name, "value", to_scalar(result)]
