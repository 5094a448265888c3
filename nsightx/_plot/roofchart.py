"""Drawing a roofline: the roofs of each precision present and one point per kernel and config, on log-log axes.

matplotlib is imported only here, when a roofline is drawn, through its object-oriented API and the Agg canvas
(as :mod:`nsightx._plot.draw` does), so drawing never touches a user's ``pyplot`` state.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nsightx._errors import ConfigError
from nsightx._plot.plotoptions import check_filename

if TYPE_CHECKING:
    import pandas as pd

_MARKERS = "os^Dv<>pP*hX"


def _finite(frame: pd.DataFrame) -> pd.DataFrame:
    """Rows that can be placed: a finite, positive intensity and FLOP/s."""
    ai, fs = frame["ArithmeticIntensity"], frame["FLOPPerSecond"]
    return frame[ai.map(_positive) & fs.map(_positive)]


def _positive(v: Any) -> bool:
    return isinstance(v, int | float) and math.isfinite(v) and v > 0


def _roofs(ax: Any, frame: pd.DataFrame, x_lo: float, x_hi: float) -> None:
    """One roof per precision: the bandwidth slope up to the ridge point, then the flat compute peak."""
    import numpy as np

    for precision, group in frame.groupby("Precision", sort=True):
        peak_f = float(group["PeakFLOPPerSecond"].median())
        peak_b = float(group["PeakBytesPerSecond"].median())
        if not (_positive(peak_f) and _positive(peak_b)):
            continue
        xs = np.geomspace(x_lo, x_hi, 200)
        ax.plot(
            xs, np.minimum(peak_f, xs * peak_b), linewidth=1.5, label=f"{precision} roof ({peak_f / 1e12:.3g} TFLOP/s)"
        )
        ax.axvline(peak_f / peak_b, color="0.8", linewidth=0.8, linestyle=":")


def _label(row: Any, params: list[str]) -> str:
    config = ", ".join(f"{p}={row[p]}" for p in params)
    kernel = str(row["Kernel"])
    kernel = kernel if len(kernel) <= 28 else kernel[:27] + "…"
    return f"{row['Annotation']}" + (f" ({config})" if config else "") + f" {kernel} [{row['Precision']}]"


def draw_roofline(frame: pd.DataFrame, filename: str | Path, *, title: str | None = None) -> Path:
    """Draw the roofline of a :func:`nsightx._results.roofline.roofline_frame` table to ``filename``.

    Args:
        frame: The roofline table (``ArithmeticIntensity``, ``FLOPPerSecond``, peaks, ``Annotation``, params).
        filename: Output image; its extension picks the format.
        title: Figure title.

    Returns:
        The path written.

    Raises:
        ConfigError: no row has a finite intensity and FLOP/s (the ncu roofline counters were not measured).
    """
    path = check_filename(filename)
    placed = _finite(frame)
    if placed.empty:
        raise ConfigError(
            "plot_roofline: no kernel has both FLOP and DRAM bytes; measure with backend='ncu' and "
            "metrics=nsightx.ROOFLINE_METRICS (or the counters listed in docs/roofline.md)"
        )
    from matplotlib.figure import Figure

    fixed = {"Annotation", "Config", "Seq", "Kernel", "Precision", "NumRuns"}
    params = [c for c in frame.columns[1 : list(frame.columns).index("Kernel")] if c not in fixed]
    ai = placed["ArithmeticIntensity"].astype(float)
    x_lo, x_hi = min(ai.min() / 4, 0.1), max(ai.max() * 4, 100.0)
    fig = Figure(figsize=(8.0, 5.5))
    ax = fig.add_subplot(1, 1, 1)
    ax.set_xscale("log")
    ax.set_yscale("log")
    _roofs(ax, placed, x_lo, x_hi)
    for i, (_, row) in enumerate(placed.iterrows()):
        ci = row.get("FLOPPerSecond_CI95")
        yerr = [[ci], [ci]] if isinstance(ci, float) and _positive(ci) else None
        ax.errorbar(
            [row["ArithmeticIntensity"]],
            [row["FLOPPerSecond"]],
            yerr=yerr,
            fmt=_MARKERS[i % len(_MARKERS)],
            markersize=6,
            capsize=3,
            label=_label(row, params),
        )
    ax.set_xlabel("Arithmetic intensity [FLOP / DRAM byte]")
    ax.set_ylabel("Performance [FLOP/s]")
    ax.set_xlim(x_lo, x_hi)
    ax.grid(True, which="both", linewidth=0.3, alpha=0.5)
    ax.legend(fontsize=7, loc="lower right")
    if title:
        ax.set_title(title)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    return path
