"""The options of one plot: validated when ``analyze.plot`` is applied (or a plot is drawn), before any work.

``analyze.plot`` raises what is wrong with the roles of the parameters (panels, x keys, variants) when the
profiled function is called, where nsight-python raises it; the values themselves are refused when it is applied.

Shared by the decorator (:mod:`nsightx._api.plotting`), the drawing entry point (:mod:`nsightx._plot.render`), the
layout and the drawing, none of which has to import another to know what an option means.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nsightx._errors import ConfigError, ConfigTypeError

PLOT_TYPES = ("line", "bar", "box", "violin")
DISTRIBUTIONS = ("box", "violin")
"""Plot types that draw every run of each point, not its mean and CI (they need the result's runs)."""
AGGREGATES = ("avg", "geomean")
FILE_TYPES = ("png", "pdf", "svg", "jpg", "jpeg", "webp", "eps", "ps", "tif", "tiff")


@dataclass(frozen=True)
class PlotOptions:
    """The validated options of one plot (see :func:`nsightx.analyze.plot` for their meaning)."""

    metric: str | None = None
    title: str | None = None
    """``None``: the function, the metric and the backend (:func:`nsightx._plot.draw.default_title`)."""
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
    x_log: bool | None = None
    """Log x axis: ``None`` chooses (a numeric x spanning 16x or more), ``True``/``False`` force it."""
    y_log: bool | None = None
    """Log y axis: ``None`` chooses (positive values spanning more than two decades), ``True``/``False`` force it."""

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
            if unknown and option == "x_keys":  # nsight-python checks x_keys only, against the non-panel fields
                fields = [p for p in params if p not in (*self.row_panels, *self.col_panels)]
                raise ConfigError(
                    f"Field '{unknown[0]}' is not present in the DataFrame. Available fields: {fields}. "
                    f"(x_keys={list(names)} of the plot of {function})"
                )
            if unknown:
                raise ConfigError(
                    f"{option}={list(names)} names {unknown}, which are not parameters of "
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
    """Validate plot options into :class:`PlotOptions`: each value (:func:`plot_values`), then the roles they give.

    Raises:
        ConfigError: a value is out of range or options conflict (the message names the option and value).
        ConfigTypeError: a value has the wrong type.
    """
    opts = plot_values(**options)
    check_roles(opts)
    return opts


def plot_values(**options: Any) -> PlotOptions:
    """Validate each plot option's value into :class:`PlotOptions`, leaving the roles of parameters unchecked.

    ``analyze.plot`` checks the roles (:func:`check_roles`) against the profiled function when it is applied and
    raises what it finds when the function is called, as nsight-python does.

    Raises:
        ConfigError: an unknown option, or a value out of range (the message names the option and value).
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
        raise ConfigError(
            f"invalid plot_type {plot_type!r}; expected 'line' or 'bar' (means and their CI), or 'box' or "
            "'violin' (the runs of each point)"
        )
    aggregate = options.get("show_aggregate")
    if aggregate is not None and aggregate not in AGGREGATES:
        raise ConfigError(f"invalid show_aggregate {aggregate!r}; expected None, 'avg' or 'geomean'")
    title = options.get("title")
    ylabel = options.get("ylabel")
    for option, text in (("title", title), ("ylabel", ylabel)):
        if text is not None and not isinstance(text, str):
            raise ConfigTypeError(f"{option} must be a str, got {type(text).__name__} {text!r}")
    callback = options.get("plot_callback")
    if callback is not None and not callable(callback):
        raise ConfigTypeError(f"plot_callback must be callable (it receives the matplotlib Figure), got {callback!r}")
    return PlotOptions(
        metric=metric,
        title=title,
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
        x_log=_log("x_log", options.get("x_log"), plot_type),
        y_log=_log("y_log", options.get("y_log"), plot_type),
    )


def _log(option: str, value: object, plot_type: str) -> bool | None:
    if value is not None and not isinstance(value, bool):
        raise ConfigTypeError(f"{option} must be True, False or None (choose from the data), got {value!r}")
    if option == "x_log" and value and plot_type != "line":
        raise ConfigError(
            f"x_log=True applies to line plots (a numeric x axis); a {plot_type} plot places each x value as a "
            "category: use plot_type='line' or leave x_log unset"
        )
    return value


def check_roles(opts: PlotOptions) -> None:
    """Each parameter has one role (panel, variant or x); the x axis is not empty; variants need variant fields.

    Raises:
        ConfigError: a parameter with two roles, ``x_keys=[]``, or ``variant_annotations`` alone.
    """
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


def check_filename(filename: object) -> Path:
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
