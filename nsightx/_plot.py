"""Plotting (``analyze.plot``, ``ProfileResults.plot``) on matplotlib, imported only when a plot is made."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nsightx._errors import ConfigError

if TYPE_CHECKING:
    import pandas as pd

PLOT_TYPES = ("line", "bar")


def plot_frame(frame: pd.DataFrame, filename: str = "plot.png", **options: Any) -> Path:
    """Render ``frame`` (an aggregated DataFrame) to ``filename``."""
    raise NotImplementedError("plotting lands with issue 6")


def plot(filename: str = "plot.png", metric: str | None = None, **options: Any) -> Callable[[Any], Any]:
    """Decorator stacked on ``analyze.kernel``: profile, then plot one metric to ``filename``."""
    plot_type = options.get("plot_type", "line")
    if plot_type not in PLOT_TYPES:
        raise ConfigError(f"invalid plot_type {plot_type!r}; expected 'line' or 'bar'")

    def decorate(profiled: Any) -> Any:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            results = profiled(*args, **kwargs)
            plot_frame(results.to_dataframe(), filename, metric=metric, **options)
            return results

        return wrapper

    return decorate
