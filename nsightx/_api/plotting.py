"""``analyze.plot``: the decorator that plots the result of a profiled function (stacked on ``analyze.kernel``).

It belongs to the user's API layer, next to :mod:`nsightx._api.kernel`: it checks its options against the profiled
function's parameters when it is applied (raising a problem of what to draw when the function is called, where
nsight-python raises it), and draws through :mod:`nsightx._plot.render` once the call has returned.
"""

from __future__ import annotations

import copy
import functools
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from nsightx._api.kernel import ProfiledFunction
from nsightx._enums import VerbosityLevel
from nsightx._errors import ConfigError
from nsightx._plot.plotoptions import DISTRIBUTIONS, PlotOptions, check_filename, check_roles, plot_values
from nsightx._plot.render import render
from nsightx._results.profileresults import ProfileResults


def plot(filename: str | Path = "plot.png", metric: str | None = None, **options: Any) -> Callable[[Any], Any]:
    """Profile, then plot one metric of the result; stack it above ``@analyze.kernel``.

    Each row of the aggregated result becomes a point with its 95% confidence interval (a band on line plots,
    whiskers on bars). Every annotation is drawn, however many there are: colours, markers and line styles
    repeat in different combinations rather than running out.

    Args:
        filename: Output image; the extension picks the format. Default ``plot.png``.
        metric: Metric to plot; may be omitted when the result has one metric.
        **options: ``title``; ``ylabel`` (default: metric and unit); ``plot_type`` (``"line"`` or ``"bar"``);
            ``row_panels``/``col_panels`` (parameters whose values make a grid of subplots); ``x_keys``
            (parameters on the x axis; default: those not used elsewhere); ``variant_fields`` (parameters that
            split an annotation into one series per value); ``variant_annotations`` (the annotations they split;
            default all, the others are pooled); ``annotate_points`` (write each value); ``show_aggregate``
            (``"avg"`` or ``"geomean"`` per series); ``plot_callback`` (called with the matplotlib ``Figure``
            before saving); ``plot_width``/``plot_height`` (inches per subplot); ``print_data`` (print the
            plotted table).

    Returns:
        A decorator. The decorated function returns the same ``ProfileResults`` as the function below it.
        Several ``analyze.plot`` decorators may be stacked (one measurement, several figures).

    Raises:
        ConfigError: an option is invalid, or the decorator is not stacked on ``analyze.kernel``: raised when the
            decorator is applied. What to draw (several metrics and no ``metric``; ``x_keys``, panels or
            variants naming no parameter, or one parameter in two roles) is checked then too, but raised when
            the function is called, before anything runs (after the call's own argument and config errors), as
            nsight-python raises it when it draws: a module holding such a decorator still imports.
    """
    path = check_filename(filename)
    opts = plot_values(metric=metric, **options)

    def decorate(profiled: Any) -> Any:
        inner = getattr(profiled, "profiled", profiled)  # another analyze.plot below this one
        if not isinstance(inner, ProfiledFunction):
            raise ConfigError(
                f"analyze.plot must be stacked above analyze.kernel (it plots the result of a profiled "
                f"function), got {profiled!r}; write @analyze.plot(...) on the line above @analyze.kernel(...)"
            )
        deferred = _drawing_error(opts, inner)

        @functools.wraps(profiled)
        def wrapper(*args: Any, **kwargs: Any) -> ProfileResults:
            if deferred is not None:
                inner.check_call(*args, **kwargs)  # nsight-python reports a bad call before it plots
                raise copy.copy(deferred)  # a fresh copy: the stored one keeps no traceback of a call
            results: ProfileResults = profiled(*args, **kwargs)
            runs = results.runs_dataframe() if opts.plot_type in DISTRIBUTIONS else None
            written = render(results.to_dataframe(), path, opts, runs=runs, function=inner.name)
            if inner.spec.verbosity >= VerbosityLevel.INFO:
                print(f"nsightx: {inner.name}: plot -> {written}", file=sys.stderr)
            return results

        wrapper.profiled = inner  # type: ignore[attr-defined]
        return wrapper

    return decorate


def _drawing_error(opts: PlotOptions, inner: ProfiledFunction) -> ConfigError | None:
    """What keeps the plot of ``inner``'s result from being drawn, in nsight-python's order; ``None`` if nothing.

    The metric comes first, then ``x_keys`` and the other parameters named, then their roles.
    """
    try:
        _check_one_metric(inner, opts.metric)
        opts.check_params(inner.shape.names, inner.name)
        check_roles(opts)
    except ConfigError as e:
        return e
    return None


def _check_one_metric(inner: ProfiledFunction, metric: str | None) -> None:
    """A plot shows one metric: without ``metric=``, the profiled function must give only one.

    Raises:
        ConfigError: several metrics (``metrics=`` lists more than one, or ``derive_metric`` adds some).
    """
    spec = inner.spec
    if metric is None and (spec.derive_metric is not None or len(spec.metrics or ()) > 1):
        asked = len(spec.metrics or ("",))
        count, what = (
            (f"at least {asked + 1}", "derive_metric's metrics too")
            if spec.derive_metric is not None
            else (str(asked), f"metrics={list(spec.metrics or ())}")
        )
        raise ConfigError(
            f"Cannot visualize multiple metrics ({count} > 1) with the @nsight.analyze.plot decorator. "
            f"Please specify a metric to plot. ({inner.name}'s result will hold {what}): pass metric=<name> to "
            "analyze.plot"
        )
