"""Value labels (``annotate_points``) that do not overlap: each one moved up until it clears those below it.

Bars of neighbouring series often have about the same height, so their labels, each wider than its bar, land on
top of one another (issue 38). After the figure's layout is final, every label's box is measured with the
renderer; a label that intersects one already placed is moved up by the overlap (in points, so it stays tied to
its bar), and the y axis grows until the highest label fits inside it. The layout engine is switched off for the
final drawing, so that the positions measured are the positions saved.
"""

from __future__ import annotations

import math
from typing import Any

GAP_PX = 3.0
"""Space kept between two labels, in pixels, across and along: labels that touch read as one number."""

MAX_ROUNDS = 6
"""How many times the y axis may grow to fit the labels before they are left where they are."""


def _labels(ax: Any) -> list[Any]:
    return [t for t in ax.texts if t.get_visible() and t.get_text()]


def _overlap(a: Any, b: Any) -> bool:
    """Whether two label boxes come closer than :data:`GAP_PX`."""
    gap = GAP_PX
    return bool(a.x0 < b.x1 + gap and b.x0 < a.x1 + gap and a.y0 < b.y1 + gap and b.y0 < a.y1 + gap)


def _stack(ax: Any, renderer: Any, dpi: float) -> float:
    """Move each label of ``ax`` up until it clears those placed before it; return the top of the highest (px)."""
    placed: list[Any] = []
    top = float("-inf")
    boxes = {id(t): t.get_window_extent(renderer) for t in _labels(ax)}
    for label in sorted(_labels(ax), key=lambda t: (boxes[id(t)].y0, boxes[id(t)].x0)):
        box = boxes[id(label)]
        hits = [p for p in placed if _overlap(box, p)]
        while hits:
            shift = max(p.y1 for p in hits) + GAP_PX - box.y0
            dx, dy = label.xyann
            label.xyann = (dx, dy + shift * 72.0 / dpi)
            box = label.get_window_extent(renderer)
            hits = [p for p in placed if _overlap(box, p)]
        placed.append(box)
        top = max(top, box.y1)
    return top


def _grow(ax: Any, top_px: float) -> bool:
    """Raise the y axis's top so that a label reaching ``top_px`` fits; whether it had to."""
    axes_top = ax.get_window_extent().y1
    if top_px <= axes_top:
        return False
    lo, hi = ax.get_ylim()
    height = ax.get_window_extent().height
    need = (top_px - axes_top) / height + 0.02
    if need > 1:  # the label overflows by more than the axes' height (axes squeezed to a sliver): growing the
        return False  # axis would only squash the data towards the bottom, round after round, towards infinity
    lo, hi = float(lo), float(hi)
    try:
        top = hi * (hi / lo) ** need if ax.get_yscale() == "log" else hi + (hi - lo) * need
    except (OverflowError, ZeroDivisionError):
        top = math.inf
    if not math.isfinite(top):  # the axis would pass the float range: the labels stay where they are
        return False
    ax.set_ylim(lo, top)
    return True


def separate(fig: Any) -> None:
    """Fix the layout of ``fig`` and move the value labels of every axes so that no two overlap."""
    if not any(_labels(ax) for ax in fig.axes):
        return
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(fig)  # a renderer to measure text with (a bare Figure has none)
    fig.draw_without_rendering()  # the layout engine places the axes now...
    fig.set_layout_engine("none")  # ...and nothing moves them after the labels are measured
    renderer = canvas.get_renderer()
    for ax in fig.axes:
        asked = {id(label): label.xyann for label in _labels(ax)}
        for _ in range(MAX_ROUNDS if asked else 0):
            for label in _labels(ax):
                label.xyann = asked[id(label)]  # back where it was asked, for each round
            if not _grow(ax, _stack(ax, renderer, fig.dpi)):
                break
