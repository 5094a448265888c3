"""``nsightx.measure``: one call that measures a callable, as Triton's ``do_bench(fn)`` does.

``nsightx.measure(lambda: a @ b, runs=50)`` is ``analyze.kernel`` applied to a function with no parameters whose
one annotated region is the whole call of ``fn``: the same backend choice (``backend="auto"``, or the active tool),
the same run loop, warm-up, collectors and statistics, and the same :class:`~nsightx.ProfileResults`. A call that
launches several kernels is one region: their values are added (``combine_kernel_metrics=operator.add``).
"""

from __future__ import annotations

import inspect
import operator
from collections.abc import Callable
from typing import Any

from nsightx._api.kernel import kernel
from nsightx._enums import VerbosityLevel
from nsightx._errors import ConfigError, ConfigTypeError
from nsightx._results.profileresults import ProfileResults
from nsightx._run.annotate import annotate
from nsightx._run.lazycall import refuse_lazy

ELSEWHERE = ("configs", "parallel_devices", "executor")
"""``analyze.kernel`` options that measure a sweep or measure elsewhere: not a single call in this process."""


LAZY = {
    "an async function": "a coroutine without running it",
    "a generator function": "a generator without running it",
    "an async generator function": "an async generator without running it",
}
"""Callables whose call does none of their work, and what the call makes instead."""


def _lazy_kind(fn: object) -> str | None:
    """Which kind of :data:`LAZY` callable ``fn`` is, if any (a ``functools.partial`` of one too)."""
    if inspect.isasyncgenfunction(fn):
        return "an async generator function"
    if inspect.iscoroutinefunction(fn):
        return "an async function"
    if inspect.isgeneratorfunction(fn):
        return "a generator function"
    return None


def _name(fn: Callable[[], object]) -> str:
    """The region's name: the function's, ``lambda`` for a lambda, ``call`` for a callable without a name."""
    name = getattr(fn, "__name__", None)
    if not isinstance(name, str) or not name:
        return "call"
    return "lambda" if name == "<lambda>" else name


def _check(fn: object, options: dict[str, Any]) -> None:
    """Refuse what cannot be measured as one call, before any work.

    Raises:
        ConfigTypeError: ``fn`` is not callable.
        ConfigError: ``fn`` needs arguments, is an async or generator function, or an option is for sweeps
            (``configs``, ``parallel_devices``, ``executor``).
    """
    if not callable(fn):
        raise ConfigTypeError(
            f"measure takes a callable with no arguments, e.g. nsightx.measure(lambda: a @ b); got "
            f"{type(fn).__name__} {fn!r}"
        )
    try:
        inspect.signature(fn).bind()
    except TypeError:
        raise ConfigError(
            f"measure calls {_name(fn)} with no arguments, and its signature is {inspect.signature(fn)}; give "
            f"the values in a lambda: nsightx.measure(lambda: {_name(fn)}(...))"
        ) from None
    except ValueError:  # no signature to read (some builtins): called as it is
        pass
    lazy = _lazy_kind(fn)
    if lazy:
        raise ConfigError(
            f"measure times the work of each call of fn, and calling {_name(fn)} ({lazy}) only creates "
            f"{LAZY[lazy]}: nothing of its body would be measured; give a callable that does the work, e.g. "
            "nsightx.measure(lambda: asyncio.run(main())) or lambda: list(gen())"
        )
    sweep = [o for o in ELSEWHERE if o in options]
    if sweep:
        raise ConfigError(
            f"measure times one call in this process, so it takes no {', '.join(sweep)}; for a sweep, decorate "
            "the function with @nsightx.analyze.kernel(configs=[...], ...) and annotate its region"
        )


def measure(
    fn: Callable[[], object], /, *, runs: int | str = 10, name: str | None = None, **options: Any
) -> ProfileResults:
    """Measure ``fn()`` on the best backend available here: the whole call is the region.

    Args:
        fn: A callable taking no argument, e.g. ``lambda: a @ b``.
        runs: Measured runs (after ``warmup``, 1 by default), or ``"auto"``: until the 95% confidence interval of
            the mean is within ``target_ci_pct`` (1%) of it.
        name: The region's name, which is also the result's function name; default: ``fn``'s name (``lambda``
            for a lambda).
        **options: Any other option of :func:`nsightx.analyze.kernel` but those of a sweep (``configs``,
            ``parallel_devices``, ``executor``): ``backend`` (default ``"auto"``, or the active tool: CUPTI's
            kernel times on a GPU, else the host clock), ``warmup``, ``metrics``, ``cache_control``,
            ``output_prefix``, ``verbosity`` (default ``SILENT``: nothing is printed), ...

    Returns:
        The result, as a decorated function returns it: ``.to_dataframe()`` has one row per metric.

    Raises:
        ConfigTypeError: ``fn`` is not callable, or an option has the wrong type.
        ConfigError: ``fn`` needs arguments or is an async or generator function (its call runs none of its
            body), an option is invalid or is one of a sweep, or ``normalize_against`` names another annotation
            than the call's one region.
        BackendUnavailableError: no backend here can deliver what was asked.

    Example:
        >>> import nsightx
        >>> result = nsightx.measure(lambda: sorted(range(1000)), runs=5, backend="host")
        >>> result.to_dataframe()[["Annotation", "Metric", "NumRuns"]].values.tolist()
        [['lambda', 'host__time_duration.sum', 5]]
    """
    _check(fn, options)
    label = name if name is not None else _name(fn)
    if not isinstance(label, str) or not label:
        raise ConfigTypeError(f"measure's name must be a non-empty str, got {label!r}")
    if label.isspace():  # annotate() would refuse it in the first run; say it before any run
        raise ConfigError(f"measure's name {label!r} is only whitespace; give the region a visible name")
    baseline = options.get("normalize_against")
    if isinstance(baseline, str) and baseline != label:  # the one region is known: no run needed to find it missing
        raise ConfigError(
            f"normalize_against={baseline!r} names no annotation of measure's call, whose one region is "
            f"{label!r}; give normalize_against={label!r} or leave it out"
        )

    def call() -> None:
        with annotate(label):
            result = fn()
        if result is not None:  # fn's value is not kept (as do_bench's); a coroutine's is refused
            refuse_lazy(label, result)

    call.__name__ = call.__qualname__ = label
    options.setdefault("combine_kernel_metrics", operator.add)
    options.setdefault("verbosity", VerbosityLevel.SILENT)
    return kernel(runs=runs, **options)(call)()
