"""Info collectors: values gathered around the measurement (clocks, versions, temperatures, ...).

Three sources give the same object: ``info_collectors=[...]`` on the decorator, callables decorated with
:func:`nsightx.experimental.collect`, and plugins that register collectors through the
``nsightx_register_collectors`` hook. Each collector receives a typed :class:`CollectContext`; callables made
with ``collect`` can instead use nsight-python's positional convention.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Protocol, runtime_checkable

from nsightx._enums import CollectionScope
from nsightx._errors import ConfigError, ConfigTypeError
from nsightx._results.records import Scalar


@dataclass(frozen=True)
class CollectContext:
    """What a collector knows when it is called. Fields that do not apply to the scope are ``None``."""

    scope: CollectionScope
    """The scope of this call."""
    function: str
    """Name of the profiled function."""
    args: tuple[Any, ...] = ()
    """The config's positional arguments (config, run and annotation scopes)."""
    params: Mapping[str, Any] = field(default_factory=dict)
    """The same arguments keyed by parameter name."""
    config: int | None = None
    """Config index."""
    run: int | None = None
    """Run index (negative for warm-up runs, whose values are discarded)."""
    annotation: str | None = None
    """Annotation name (annotation scope)."""
    device: int | None = None
    """CUDA device ordinal being profiled, when known."""
    backend: str = ""
    """Name of the backend measuring."""
    run_start_ns: int | None = None
    """When the run starts, on the host clock ``time.perf_counter_ns`` (CLOCK_MONOTONIC), RUN scope only.

    The run loop reads the clock once as a run starts and hands that one read to the thermal guard and to every
    RUN collector, so that a collector needs no read of its own (where the clock source is slow, each read costs
    microseconds of a host-bound run, issue 35). ``None`` in other scopes, and in a context made outside a run
    loop: a collector that wants the time then reads the clock itself."""


CollectResult = Scalar | Mapping[str, Scalar]


@runtime_checkable
class CollectorLike(Protocol):
    """Anything with a name, a scope and ``collect(ctx)`` is a collector (plugins may ship their own class).

    Optional, not part of the protocol check: ``start(ctx)`` and ``stop()``. When a collector has both, the run
    loop calls ``start`` with a ONCE-scope context before anything else of a profiled call and ``stop`` after
    everything, also when the call fails, so a collector can keep a resource exactly as long as a sweep (the
    nvml plugin runs a sampler thread there). ``collect`` must still work without them, returning plain
    values: a caller may ask one value at a time (e.g. a proxy in another process). A ``start`` that raises
    warns once; that collector is then neither asked nor stopped in the call, its column None for every run.

    ``start`` may return ``False`` (exactly ``False``; ``None`` and anything else mean "go on as usual") to say
    that the collector has nothing to say in this call, as the nvml run collector where NVML does not work: the
    run loop then never calls its ``collect`` in the call, so it costs no run anything, and still calls ``stop``
    at the end. It adds no column then, as a ``collect`` returning an empty mapping would not.

    A RUN collector may return a :class:`~nsightx._results.rows.RunValues` (a mapping shared by many runs, not
    copied, and one value of the run's own): the run loop keeps its shared values converted once for all the runs
    that share them (see :class:`nsightx._results.rows.RunValues`).

    Optional too: a RUN collector whose ``reads_run_fields`` attribute is exactly ``False`` says that its
    ``collect`` reads only context fields that are the same for every run of a config (scope, function, args,
    params, config, device, backend), not ``run``. When every RUN collector of a call says so, the run loop hands
    them one context per config, whose ``run`` is ``None``, instead of making one before every run (the nvml
    plugin's run collector reads only ``device`` and ``run_start_ns``). Without the attribute a collector gets a
    context per run. ``run_start_ns`` is set for every run, also in a context shared by a config's runs: that
    one is updated in place before each run, so a collector reads it during its ``collect`` call, not later.

    Optional too, for such a collector: ``run_reader(ctx)``, given a config's shared context once, returns a
    callable of the run's start (``run_start_ns``, possibly ``None``) that answers exactly as ``collect`` would
    with that context, or ``None`` when it has no such path now. When a deferred session's runs ask this one RUN
    collector alone, the run loop calls that callable before each run instead of ``collect`` (the nvml plugin's:
    no context written, nothing looked up per run, issue 35). ``collect`` must still work without it.
    """

    name: str
    scope: CollectionScope

    def collect(self, ctx: CollectContext) -> CollectResult:
        """Return a value, or a mapping of column name to value."""
        ...


_NO_ARGUMENT: Any = object()
"""``InfoCollector.collect()`` called with no argument (nsight-python's form for a ONCE collector)."""


class InfoCollector:
    """A named callable run at a given scope.

    Args:
        name: Column name (a mapping return value adds one column per key instead).
        callback: The function to call.
        scope: When to call it.
        legacy_args: If True, call ``callback`` the nsight-python way: ONCE with no arguments, CONFIG and RUN
            with the config arguments trimmed to its arity, ANNOTATION with ``(annotation, *config)``.
            If False, call it with one :class:`CollectContext`. Left out (``None``), the callback's signature
            decides: one that cannot take exactly one argument (``def version()``, ``def size(m, n)``) or that
            takes ``*args`` is called the nsight-python way, as ``nsight.InfoCollector`` calls it; any other
            (``lambda ctx: ...``, a builtin) gets the context.

    Example:
        >>> InfoCollector("clock", lambda ctx: 1980, CollectionScope.RUN).scope
        <CollectionScope.RUN: 'run'>
    """

    def __init__(
        self,
        name: str,
        callback: Callable[..., Any],
        scope: CollectionScope | str,
        *,
        legacy_args: bool | None = None,
    ) -> None:
        if not isinstance(name, str) or not name:
            raise ConfigTypeError(f"collector name must be a non-empty str, got {name!r}")
        if not callable(callback):
            raise ConfigTypeError(f"collector {name!r}: callback must be callable, got {type(callback).__name__}")
        self.name = name
        self.callback = callback
        self.scope = parse_scope(scope, collector=name)
        self.legacy_args = not _takes_context(callback) if legacy_args is None else legacy_args

    def __repr__(self) -> str:
        return f"InfoCollector({self.name!r}, scope={self.scope.value!r})"

    def collect(self, ctx: Any = _NO_ARGUMENT, *more: Any) -> CollectResult:
        """Call the callback with the context (or nsight-python's positional arguments).

        Called with anything but one :class:`CollectContext` (``collect()``, ``collect(10, 20)``), it is
        nsight-python's ``InfoCollector.collect(*args)``: the callback gets no argument at ONCE scope, else those
        arguments as they are, whatever ``legacy_args`` says.
        """
        if not isinstance(ctx, CollectContext) or more:
            given = () if ctx is _NO_ARGUMENT else (ctx, *more)
            return self.callback() if self.scope is CollectionScope.ONCE else self.callback(*given)
        if not self.legacy_args:
            return self.callback(ctx)
        if self.scope is CollectionScope.ONCE:
            return self.callback()
        args: tuple[Any, ...] = ctx.args
        if self.scope is CollectionScope.ANNOTATION:
            args = (ctx.annotation, *args)
        return self.callback(*_trim_to_arity(self.callback, args))


class SweepIndexed:
    """A collector of one task of a spread sweep, which sees its config's index in the sweep.

    A task measures one config with a plan that holds that config alone, so its run loop numbers it config 0;
    the caller renumbers the runs (:mod:`nsightx._remote.taskruns`), and this wrapper does the same for what the
    collector is told: ``ctx.config`` is ``index``, as in a call in one process (a collector that keys a value
    on the config index answered config 0's value for every config). Everything else of the collector
    (``start``/``stop``, ``reads_run_fields``, ``columns``, ``run_reader``) is the wrapped one's.

    Args:
        inner: The collector.
        index: The config's index in the sweep.
    """

    def __init__(self, inner: CollectorLike, index: int) -> None:
        self.inner = inner
        self.index = index
        self.name = inner.name
        self.scope = inner.scope

    def __repr__(self) -> str:
        return f"SweepIndexed({self.inner!r}, index={self.index})"

    def collect(self, ctx: CollectContext) -> CollectResult:
        """The wrapped collector's answer, asked with the sweep's config index."""
        return self.inner.collect(self._in_sweep(ctx))

    def _in_sweep(self, ctx: CollectContext) -> CollectContext:
        return ctx if ctx.config is None else replace(ctx, config=ctx.config + self.index)

    def __getattr__(self, attr: str) -> Any:
        inner = self.__dict__.get("inner")  # not set yet while an unpickled copy is built
        if inner is None:
            raise AttributeError(attr)
        value = getattr(inner, attr)  # only what this class does not define itself
        if attr == "run_reader" and callable(value):
            return lambda ctx: value(self._in_sweep(ctx))
        return value


def parse_scope(scope: CollectionScope | str, collector: str | None = None) -> CollectionScope:
    """Turn a scope or its string value into a :class:`CollectionScope`, with a clear error.

    Args:
        scope: A :class:`CollectionScope` or its value (``"once"``, ``"config"``, ``"run"``, ``"annotation"``).
        collector: The collector's name, when known (the message then starts with nsight-python's sentence for
            a collector entry; without it, with its sentence for ``experimental.collect``).

    Raises:
        ConfigError: An unknown scope.
    """
    if isinstance(scope, CollectionScope):
        return scope
    try:
        return CollectionScope(str(scope).lower())
    except ValueError:
        accepted = ", ".join(repr(s.value) for s in CollectionScope)
        their = (
            f"Invalid collection scope {scope!r}. Expected one of {accepted} or a CollectionScope."
            if collector is None
            else f"Invalid scope {scope!r} for collector {collector!r}. Expected one of "
            f"{sorted(s.value for s in CollectionScope)} or a CollectionScope."
        )
        raise ConfigError(f"{their} Use nsightx.CollectionScope.RUN (or another member) or its value") from None


def _takes_context(callback: Callable[..., Any]) -> bool:
    """Whether ``callback`` is written for one :class:`CollectContext` rather than nsight-python's arguments.

    A callback that cannot be called with exactly one positional argument (no parameter, or two required ones)
    is nsight-python's (a context call could only raise), and so is one with ``*args`` (nsight-python's own
    example, ``def sum_args(*args)``). One required positional parameter is taken as the context, nsightx's form;
    a signature that cannot be read (some builtins) too.
    """
    try:
        params = list(inspect.signature(callback).parameters.values())
    except (TypeError, ValueError):
        return True
    if any(p.kind is p.VAR_POSITIONAL for p in params):
        return False
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    required = [p for p in positional if p.default is p.empty]
    keyword_required = [p for p in params if p.kind is p.KEYWORD_ONLY and p.default is p.empty]
    return len(required) == 1 and not keyword_required


def _trim_to_arity(callback: Callable[..., Any], args: tuple[Any, ...]) -> tuple[Any, ...]:
    try:
        sig = inspect.signature(callback)
    except (TypeError, ValueError):
        return args
    params = list(sig.parameters.values())
    if any(p.kind is p.VAR_POSITIONAL for p in params):
        return args
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return args[: len(positional)]


def as_collector(item: object) -> CollectorLike:
    """Normalise one entry of ``info_collectors`` into a collector object.

    Accepts a collector object, a ``(name, callable, scope)`` tuple, or a callable decorated with
    :func:`nsightx.experimental.collect`.
    """
    if isinstance(item, tuple):
        if len(item) != 3:
            raise ConfigError(
                f"Tuple-format info collector must be (name, callback, scope); got {item!r}. "
                "Give three items, e.g. ('temp', read_temp, 'run')"
            )
        name, callback, scope = item
        if not isinstance(name, str) or not name or not callable(callback):
            raise ConfigTypeError(
                f"Tuple-format info collector must be (str name, callable callback, scope); got {item!r}. "
                "The name must be a non-empty str and the callback callable"
            )
        return InfoCollector(name, callback, scope, legacy_args=True)
    marked = getattr(item, "__nsightx_collector__", None)
    if isinstance(marked, InfoCollector):
        return marked
    if isinstance(item, CollectorLike):
        parse_scope(item.scope, collector=getattr(item, "name", None))
        return item
    their = (
        f"Collector function {getattr(item, '__name__', item)} is missing "
        "@nsight.experimental.collect(scope=...) decorator"
        if callable(item)
        else f"Invalid collector type: {type(item)}. Expected tuple (name, callback, scope) or decorated function."
    )
    raise ConfigTypeError(
        f"{their.rstrip('.')}. info_collectors entry {item!r} is not a collector; pass an InfoCollector, a "
        "(name, callable, scope) tuple, or a function decorated with @nsightx.experimental.collect(scope=...)"
    )


def collect(_func: Callable[..., Any] | None = None, *, scope: CollectionScope | str) -> Any:
    """Mark a function as an info collector with the given scope (nsight-python's ``experimental.collect``).

    Works as ``@collect(scope="run")`` or as a direct call ``collect(fn, scope="run")``. The function keeps
    working as before; the collector named after it is attached as ``fn.__nsightx_collector__``.

    Raises:
        ConfigError: ``scope`` is not one of once, config, run, annotation.
        ConfigTypeError: the decorated object is not callable.
    """
    parsed = parse_scope(scope)

    def mark(func: Callable[..., Any]) -> Callable[..., Any]:
        if not callable(func):
            raise ConfigTypeError(f"collect can only decorate a callable; got {type(func).__name__} {func!r}")
        name = getattr(func, "__name__", type(func).__name__)
        func.__nsightx_collector__ = InfoCollector(name, func, parsed, legacy_args=True)  # type: ignore[attr-defined]
        return func

    return mark(_func) if _func is not None else mark
