"""Plotting: ``analyze.plot`` (stacked on ``analyze.kernel``) and ``ProfileResults.plot``.

Every option is checked when the decorator is applied, before anything is measured. matplotlib is imported only
when a plot is drawn, and only its object-oriented API with the Agg canvas is used, so plotting never changes
the backend or the state of a user's ``pyplot`` session.

Example:
    >>> import nsightx
    >>> @nsightx.analyze.plot("sweep.png", plot_type="bar")     # doctest: +SKIP
    ... @nsightx.analyze.kernel(configs=[256, 512, 1024], runs=10)
    ... def sweep(n): ...
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nsightx._enums import VerbosityLevel
from nsightx._errors import ConfigError, ConfigTypeError

if TYPE_CHECKING:
    import pandas as pd

    from nsightx._results import ProfileResults

PLOT_TYPES = ("line", "bar")
AGGREGATES = ("avg", "geomean")
FILE_TYPES = ("png", "pdf", "svg", "jpg", "jpeg", "webp", "eps", "ps", "tif", "tiff")
DEFAULT_TITLE = "Nsight Analyze Kernel Plot Results"


@dataclass(frozen=True)
class PlotOptions:
    """The validated options of one plot (see :func:`plot` for their meaning)."""

    metric: str | None = None
    title: str = DEFAULT_TITLE
    ylabel: str | None = None
    plot_type: str = "line"
    row_panels: tuple[str, ...] = ()
    col_panels: tuple[str, ...] = ()
    x_keys: tuple[str, ...] | None = None
    annotate_points: bool = False
    show_aggregate: str | None = None
    variant_fields: tuple[str, ...] = ()
    variant_annotations: tuple[str, ...] | None = None
    plot_callback: Callable[[Any], None] | None = None
    plot_width: float = 6.0
    plot_height: float = 4.0
    print_data: bool = False

    def check_params(self, params: Sequence[str], function: str) -> None:
        """Check that every parameter named by a panel, x or variant option is one of ``params``.

        Raises:
            ConfigError: a name is not a parameter, or one parameter has two roles.
        """
        roles = {
            "row_panels": self.row_panels,
            "col_panels": self.col_panels,
            "variant_fields": self.variant_fields,
            "x_keys": self.x_keys or (),
        }
        for option, names in roles.items():
            unknown = [n for n in names if n not in params]
            if unknown:
                first = ""
                if option == "x_keys":  # nsight-python checks x_keys only, against the non-panel fields
                    fields = [p for p in params if p not in (*self.row_panels, *self.col_panels)]
                    first = f"Field '{unknown[0]}' is not present in the DataFrame. Available fields: {fields}. "
                raise ConfigError(
                    f"{first}{option}={list(names)} names {unknown}, which are not parameters of "
                    f"{function}; its parameters are {list(params)}"
                )


def _names(option: str, value: object, *, allow_none: bool = False) -> tuple[str, ...] | None:
    if value is None:
        return None if allow_none else ()
    if isinstance(value, str):
        raise ConfigTypeError(f"{option} must be a list of names, got the str {value!r}; write {option}=[{value!r}]")
    if not isinstance(value, Sequence | set | frozenset):
        raise ConfigTypeError(f"{option} must be a list of names, got {type(value).__name__} {value!r}")
    items = tuple(value)
    bad = [v for v in items if not isinstance(v, str) or not v]
    if bad:
        raise ConfigTypeError(f"{option} entries must be non-empty str, got {bad!r}")
    dupes = sorted({v for v in items if items.count(v) > 1})
    if dupes:
        raise ConfigError(f"{option} lists {dupes} more than once")
    return items


def _size(option: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigTypeError(f"{option} must be a number of inches > 0, got {type(value).__name__} {value!r}")
    if not 0 < value <= 100:
        raise ConfigError(f"{option} must be between 0 and 100 inches, got {value}")
    return float(value)


def _flag(option: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise ConfigTypeError(f"{option} must be True or False, got {value!r}")
    return value


def plot_options(**options: Any) -> PlotOptions:
    """Validate plot options into :class:`PlotOptions`.

    Raises:
        ConfigError: a value is out of range or options conflict (the message names the option and value).
        ConfigTypeError: a value has the wrong type.
    """
    accepted = set(PlotOptions.__dataclass_fields__)
    unknown = sorted(set(options) - accepted)
    if unknown:
        raise ConfigError(f"unknown plot option(s) {unknown}; accepted: {', '.join(sorted(accepted))}")
    metric = options.get("metric")
    if metric is not None and (not isinstance(metric, str) or not metric):
        raise ConfigTypeError(f"metric must be a metric name (str) or None, got {metric!r}")
    plot_type = options.get("plot_type", "line")
    if plot_type not in PLOT_TYPES:
        raise ConfigError(f"invalid plot_type {plot_type!r}; expected 'line' or 'bar'")
    aggregate = options.get("show_aggregate")
    if aggregate is not None and aggregate not in AGGREGATES:
        raise ConfigError(f"invalid show_aggregate {aggregate!r}; expected None, 'avg' or 'geomean'")
    title = options.get("title", DEFAULT_TITLE)
    ylabel = options.get("ylabel")
    for option, text in (("title", title), ("ylabel", ylabel)):
        if text is not None and not isinstance(text, str):
            raise ConfigTypeError(f"{option} must be a str, got {type(text).__name__} {text!r}")
    callback = options.get("plot_callback")
    if callback is not None and not callable(callback):
        raise ConfigTypeError(f"plot_callback must be callable (it receives the matplotlib Figure), got {callback!r}")
    opts = PlotOptions(
        metric=metric,
        title=title if title is not None else DEFAULT_TITLE,
        ylabel=ylabel,
        plot_type=plot_type,
        row_panels=_names("row_panels", options.get("row_panels")) or (),
        col_panels=_names("col_panels", options.get("col_panels")) or (),
        x_keys=_names("x_keys", options.get("x_keys"), allow_none=True),
        annotate_points=_flag("annotate_points", options.get("annotate_points", False)),
        show_aggregate=aggregate,
        variant_fields=_names("variant_fields", options.get("variant_fields")) or (),
        variant_annotations=_names("variant_annotations", options.get("variant_annotations"), allow_none=True),
        plot_callback=callback,
        plot_width=_size("plot_width", options.get("plot_width", 6.0)),
        plot_height=_size("plot_height", options.get("plot_height", 4.0)),
        print_data=_flag("print_data", options.get("print_data", False)),
    )
    roles = {
        "row_panels": opts.row_panels,
        "col_panels": opts.col_panels,
        "variant_fields": opts.variant_fields,
        "x_keys": opts.x_keys or (),
    }
    overlap = sorted(set(opts.x_keys or ()) & {*opts.row_panels, *opts.col_panels, *opts.variant_fields})
    if overlap:
        shown = "{" + ", ".join(repr(n) for n in overlap) + "}"
        raise ConfigError(
            f"x_keys cannot contain fields used in row_panels, col_panels, or variant_fields: {shown}. "
            "Give each parameter one role"
        )
    owner: dict[str, str] = {}
    for option, names in roles.items():
        for n in names:
            if n in owner:
                raise ConfigError(f"parameter {n!r} is in both {owner[n]} and {option}; give each parameter one role")
            owner[n] = option
    if opts.x_keys == ():
        raise ConfigError("x_keys=[] leaves nothing on the x axis; name at least one parameter or pass None")
    if opts.variant_annotations is not None and not opts.variant_fields:
        raise ConfigError("variant_annotations only applies with variant_fields; add variant_fields=[...]")
    return opts


def _check_filename(filename: object) -> Path:
    if not isinstance(filename, str | Path) or not str(filename):
        raise ConfigTypeError(f"filename must be a path (str or Path), got {filename!r}")
    path = Path(filename)
    ext = path.suffix.lower().lstrip(".")
    if ext not in FILE_TYPES:
        raise ConfigError(
            f"cannot tell the image format of {str(filename)!r} (extension {ext!r}); "
            f"use one of {', '.join('.' + e for e in FILE_TYPES)}"
        )
    return path


def plot_frame(frame: pd.DataFrame, filename: str | Path = "plot.png", **options: Any) -> Path:
    """Render an aggregated DataFrame (``ProfileResults.to_dataframe()``) to an image file.

    Args:
        frame: The aggregated frame (``Annotation, Metric, <params>, AvgValue, ..., CI95_Lower, CI95_Upper``).
        filename: Output file; its extension picks the format (``.png``, ``.pdf``, ``.svg``, ...).
        **options: The options of :func:`plot` (``metric``, ``plot_type``, ``row_panels``, ...).

    Returns:
        The path written.

    Raises:
        ConfigError: an option is invalid or does not fit the data (unknown metric or parameter, ...).
    """
    path = _check_filename(filename)
    return render(frame, path, plot_options(**options))


def render(frame: pd.DataFrame, path: Path, options: PlotOptions) -> Path:
    """Lay out and draw ``frame`` with already validated options."""
    from nsightx import _plot_draw, _plot_layout

    layout = _plot_layout.build(frame, options)
    if options.print_data:
        import pandas as pd

        with pd.option_context("display.width", 200, "display.max_columns", 20, "display.max_rows", 500):
            print(layout.table().to_string(index=False))
    return _plot_draw.draw(layout, path, options)


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
        ConfigError: an option is invalid, names no parameter of the function, or the decorator is not
            stacked on ``analyze.kernel``. Raised when the decorator is applied.
    """
    path = _check_filename(filename)
    opts = plot_options(metric=metric, **options)

    def decorate(profiled: Any) -> Any:
        from nsightx._kernel import ProfiledFunction

        inner = getattr(profiled, "profiled", profiled)  # another analyze.plot below this one
        if not isinstance(inner, ProfiledFunction):
            raise ConfigError(
                f"analyze.plot must be stacked above analyze.kernel (it plots the result of a profiled "
                f"function), got {profiled!r}; write @analyze.plot(...) on the line above @analyze.kernel(...)"
            )
        opts.check_params(inner.shape.names, inner.name)
        spec = inner.spec
        if opts.metric is None and (spec.derive_metric is not None or len(spec.metrics or ()) > 1):
            asked = len(spec.metrics or ("",))
            count, what = (
                (f"at least {asked + 1}", "derive_metric adds metrics")
                if spec.derive_metric is not None
                else (str(asked), f"metrics={list(spec.metrics or ())}")
            )
            raise ConfigError(
                f"Cannot visualize multiple metrics ({count} > 1) with the @nsight.analyze.plot decorator. "
                f"Please specify a metric to plot. analyze.plot on {inner.name}: the result will hold several "
                f"metrics ({what}) and a plot shows one; pass metric=<name> to analyze.plot"
            )

        @functools.wraps(profiled)
        def wrapper(*args: Any, **kwargs: Any) -> ProfileResults:
            results: ProfileResults = profiled(*args, **kwargs)
            written = render(results.to_dataframe(), path, opts)
            if inner.spec.verbosity >= VerbosityLevel.INFO:
                print(f"nsightx: {inner.name}: plot -> {written}", file=sys.stderr)
            return results

        wrapper.profiled = inner  # type: ignore[attr-defined]
        return wrapper

    return decorate
