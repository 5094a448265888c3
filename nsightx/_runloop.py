"""The run loop: the one place that decides what happens when, shared by every backend.

Per call: ONCE collectors. Per config: CONFIG collectors, then warm-up runs (measured and discarded), then the
measured runs. Per run: the thermal guard, the backend's run preparation (cache flush), RUN collectors, then
the user's function with the run state installed so that :func:`nsightx.annotate` can find it.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from typing import Any

from nsightx import _context
from nsightx._backend import Session
from nsightx._collectors import CollectContext, CollectorLike, CollectResult
from nsightx._enums import CollectionScope
from nsightx._errors import ConfigError
from nsightx._plan import Plan
from nsightx._progress import Progress
from nsightx._records import CollectorValue, RegionRun, RunRecords, Scalar
from nsightx._sink import RunSink
from nsightx._thermal import make_guard


class _Collectors:
    """Calls collectors of one scope and turns their results into :class:`CollectorValue` rows."""

    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        self.by_scope: dict[CollectionScope, list[CollectorLike]] = {s: [] for s in CollectionScope}
        for c in plan.collectors:
            self.by_scope[CollectionScope(c.scope)].append(c)
        self._warned: set[tuple[str, str]] = set()

    def run(self, scope: CollectionScope, **where: Any) -> list[CollectorValue]:
        collectors = self.by_scope[scope]
        if not collectors:
            return []
        config = where.get("config")
        args = self.plan.configs[config] if config is not None else ()
        ctx = CollectContext(
            scope=scope,
            function=self.plan.function_name,
            args=args,
            params=dict(zip(self.plan.params, args, strict=False)),
            config=config,
            run=where.get("run"),
            annotation=where.get("annotation"),
            device=self.plan.device,
            backend=self.plan.backend,
        )
        out: list[CollectorValue] = []
        for c in collectors:
            for name, value in self._call(c, ctx).items():
                out.append(CollectorValue(name=name, scope=scope.value, value=value, **where))
        return out

    def _call(self, c: CollectorLike, ctx: CollectContext) -> Mapping[str, Scalar]:
        try:
            result: CollectResult = c.collect(ctx)
        except Exception as e:  # a collector must never cost a run
            key = (ctx.scope.value, c.name)
            if key not in self._warned:
                self._warned.add(key)
                warnings.warn(
                    f"info collector {c.name!r} ({ctx.scope.value}) raised {type(e).__name__}: {e}; "
                    "its column is empty where it failed",
                    RuntimeWarning,
                    stacklevel=4,
                )
            return {c.name: None}
        if isinstance(result, Mapping):
            return {str(k): _scalar(v) for k, v in result.items()}
        return {c.name: _scalar(result)}


def _scalar(value: object) -> Scalar:
    if value is None or isinstance(value, bool | int | float | str):
        return value
    try:
        return float(value)  # type: ignore[arg-type]  # numpy scalars, 0-d tensors
    except (TypeError, ValueError):
        return str(value)


def run_loop(
    plan: Plan,
    session: Session,
    sink: RunSink,
    *,
    call: Callable[[Plan, int], Any] | None = None,
) -> None:
    """Run every config ``plan.runs`` times (after ``plan.warmup`` discarded runs), feeding ``sink``.

    Args:
        plan: The plan to execute.
        session: The backend session that measures.
        sink: Receives one :class:`RunRecords` per measured run, as soon as it finishes.
        call: How to invoke the user's function for a config (defaults to ``plan.function(*config)``).
    """
    collectors = _Collectors(plan)
    guard = make_guard(plan)
    invoke = call or _call_user
    progress = Progress(plan)
    once = collectors.run(CollectionScope.ONCE)
    if once:
        sink.write(RunRecords(config=-1, run=-1, collectors=tuple(once)))
    checked_baseline = plan.normalize_against is None
    try:
        for ci in range(len(plan.configs)):
            config_values = collectors.run(CollectionScope.CONFIG, config=ci)
            for r in range(-plan.warmup, plan.runs):
                guard.before_run()
                session.start_run(ci, r)
                run_values = list(config_values) if r == 0 else []
                if r >= 0:
                    run_values += collectors.run(CollectionScope.RUN, config=ci, run=r)
                state = _context.RunState(session=session, config=ci, run=r)
                if r >= 0 and collectors.by_scope[CollectionScope.ANNOTATION]:
                    state.on_annotation = _annotation_hook(collectors, run_values, ci, r)
                _context.set_current(state)
                try:
                    invoke(plan, ci)
                finally:
                    _context.set_current(None)
                output = session.finish_run(ci, r)
                progress.advance()
                if r < 0:
                    continue
                regions = tuple(
                    RegionRun(
                        annotation=reg.annotation,
                        config=ci,
                        run=r,
                        host_ns=reg.host_ns,
                        failed=reg.failed,
                        attributes=output.region_attributes.get(reg.annotation, {}),
                    )
                    for reg in state.regions
                )
                sink.write(
                    RunRecords(
                        config=ci, run=r, records=tuple(output.records), regions=regions,
                        collectors=tuple(run_values),
                    )
                )
                if not checked_baseline:
                    _check_baseline(plan, state.used)
                    checked_baseline = True
    finally:
        progress.close()


def _annotation_hook(
    collectors: _Collectors, sink: list[CollectorValue], config: int, run: int
) -> Callable[[str], None]:
    def hook(name: str) -> None:
        sink.extend(collectors.run(CollectionScope.ANNOTATION, config=config, run=run, annotation=name))

    return hook


def _call_user(plan: Plan, config: int) -> None:
    result = plan.function(*plan.configs[config])
    if result is not None:
        warnings.warn(
            f"{plan.function_name} returned {type(result).__name__}; the return value of a profiled function "
            "is ignored (the decorated call returns ProfileResults)",
            RuntimeWarning,
            stacklevel=3,
        )


def _check_baseline(plan: Plan, seen: set[str]) -> None:
    if plan.normalize_against not in seen:
        names = ", ".join(sorted(seen)) or "none"
        raise ConfigError(
            f"normalize_against={plan.normalize_against!r} names no annotation of {plan.function_name}; "
            f"the first run opened: {names}"
        )
