"""Drawing an aggregated frame, for ``analyze.plot`` (:mod:`nsightx._api.plotting`) and ``ProfileResults.plot``.

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

from pathlib import Path
from typing import TYPE_CHECKING, Any

from nsightx._plot import draw as _plot_draw
from nsightx._plot import layout as _plot_layout
from nsightx._plot.plotoptions import DISTRIBUTIONS, PlotOptions, check_filename, plot_options

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["PlotOptions", "plot_frame", "plot_options", "render"]


def plot_frame(
    frame: pd.DataFrame,
    filename: str | Path = "plot.png",
    *,
    runs: pd.DataFrame | None = None,
    function: str | None = None,
    **options: Any,
) -> Path:
    """Render an aggregated DataFrame (``ProfileResults.to_dataframe()``) to an image file.

    Args:
        frame: The aggregated frame (``Annotation, Metric, <params>, AvgValue, ..., CI95_Lower, CI95_Upper``).
        filename: Output file; its extension picks the format (``.png``, ``.pdf``, ``.svg``, ...).
        runs: The per-run frame of the same result (``ProfileResults.runs_dataframe()``), which box and violin
            plots draw.
        function: The profiled function's name, for the default title.
        **options: The options of :func:`nsightx.analyze.plot` (``metric``, ``plot_type``, ``row_panels``, ...).

    Returns:
        The path written.

    Raises:
        ConfigError: an option is invalid or does not fit the data (unknown metric or parameter, ...).
    """
    path = check_filename(filename)
    return render(frame, path, plot_options(**options), runs=runs, function=function)


def render(
    frame: pd.DataFrame,
    path: Path,
    options: PlotOptions,
    *,
    runs: pd.DataFrame | None = None,
    function: str | None = None,
) -> Path:
    """Lay out and draw ``frame`` with validated options (``runs`` and ``function`` as in :func:`plot_frame`)."""
    layout = _plot_layout.build(frame, options, runs if options.plot_type in DISTRIBUTIONS else None)
    if options.print_data:
        import pandas as pd

        with pd.option_context("display.width", 200, "display.max_columns", 20, "display.max_rows", 500):
            print(layout.table().to_string(index=False))
    return _plot_draw.draw(layout, path, options, function)
