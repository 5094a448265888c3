"""The aggregated table as people read it: readable units, the 95% CI in the mean's unit, stability, Tool.

``nsightx demo`` prints it as text and ``ProfileResults._repr_html_`` (:mod:`nsightx._results.html`) draws it in a
notebook; both go through :func:`summarize`, so the two show the same cells. The DataFrame itself keeps the raw
values (durations in ns): this module only formats them for display, in the units :mod:`nsightx._units` picks
(``20.68 us``, ``140.6 MFLOP/s``).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from nsightx._results.flags import FEW_RUNS
from nsightx._results.stats import STABLE_RSD_PCT
from nsightx._textcell import cell_text
from nsightx._units import number, scale, with_unit

if TYPE_CHECKING:
    import pandas as pd

MAX_NAMED_UNSTABLE = 3
"""How many unstable rows the warning names before it says "and N more"."""


@dataclass(frozen=True)
class Row:
    """One displayed row: its cells (in the order of :attr:`Summary.header`) and what the warning needs."""

    cells: tuple[str, ...]
    stable: bool | None
    """``StableMeasurement``; ``None`` where the frame holds ``<NA>`` (unknown RSD: a single run, an infinity)."""
    label: str
    """The row named for a warning: annotation, config and metric (``matmul n=64 host__time_duration.sum``)."""
    rsd_pct: float


@dataclass(frozen=True)
class Summary:
    """The displayed table: a header and one :class:`Row` per annotation, config and metric."""

    header: tuple[str, ...]
    rows: tuple[Row, ...]
    right: frozenset[str] = frozenset()
    """Columns whose cells are numbers, right-aligned in text."""

    @property
    def unstable(self) -> tuple[Row, ...]:
        """The rows whose ``StableMeasurement`` is false (not those where it is unknown)."""
        return tuple(r for r in self.rows if r.stable is False)


def mean_and_ci(avg: float, lower: float, upper: float, unit: str | None) -> tuple[str, str]:
    """The mean and its 95% confidence interval, both in the unit chosen for the mean.

    A mean that is missing or infinite is ``-`` alone, as :func:`~nsightx._units.readable` writes it: a unit after
    it (``- ns``) would read as a value.
    """
    if not math.isfinite(avg):
        return "-", "-"
    factor, shown = scale(avg, unit)
    if not (math.isfinite(lower) and math.isfinite(upper)):
        return with_unit(number(avg / factor), shown), "-"
    ci = f"[{number(lower / factor)}, {number(upper / factor)}]"
    return with_unit(number(avg / factor), shown), with_unit(ci, shown)


def _float(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def _config_cells(record: Mapping[Any, Any], params: Sequence[str]) -> list[str]:
    return ["-" if record.get(p) is None else str(record.get(p)) for p in params]


def _stable(value: Any) -> bool | None:
    """``StableMeasurement`` as a bool, ``None`` where it is unknown (``<NA>``, read back as ``None`` or NaN)."""
    if value is None:
        return None
    try:
        return bool(value) if bool(value == value) else None  # NaN is not itself
    except TypeError:  # pd.NA: its truth is ambiguous
        return None


def _row(record: Mapping[Any, Any], params: Sequence[str], device: bool) -> Row:
    unit = record.get("Unit")
    unit = unit if isinstance(unit, str) and unit else None  # a row of no valid run holds NaN, not a unit
    mean, ci = mean_and_ci(
        _float(record.get("AvgValue")), _float(record.get("CI95_Lower")), _float(record.get("CI95_Upper")), unit
    )
    rsd = _float(record.get("RelativeStdDevPct"))
    stable = _stable(record.get("StableMeasurement", True))
    config = " ".join(f"{p}={record.get(p)}" for p in params)
    cells = [str(record.get("Annotation")), *_config_cells(record, params), str(record.get("Metric"))]
    cells += [mean, ci, f"{rsd:.1f}%" if math.isfinite(rsd) else "-", str(record.get("NumRuns", "-"))]
    cells += ["-" if stable is None else "yes" if stable else "no"]
    cells += [str(record.get("Device"))] if device else []
    cells += [str(record.get("Tool"))]
    label = " ".join(part for part in (str(record.get("Annotation")), config, str(record.get("Metric"))) if part)
    return Row(cells=tuple(cells), stable=stable, label=label, rsd_pct=rsd)


def summarize(frame: pd.DataFrame, params: Sequence[str], *, text: bool = False) -> Summary:
    r"""The displayed table of an aggregated DataFrame (:meth:`ProfileResults.to_dataframe`).

    Args:
        frame: The aggregated DataFrame.
        params: The profiled function's parameter names (the config columns), in order.
        text: For a terminal or a log (:func:`render_text`, :func:`unstable_warning`): names and values written
            by :func:`~nsightx._textcell.cell_text`, so a line break or an escape sequence in them is shown as
            ``\n``/``\x1b`` and every row stays one line (the notebook view escapes its HTML instead).
    """
    device = "Device" in frame.columns
    header = ["Annotation", *params, "Metric", "Mean", "95% CI", "RSD", "Runs", "Stable"]
    header += ["Device"] if device else []
    header += ["Tool"]
    records = frame.to_dict("records")
    rows = tuple(_row(rec, params, device) for rec in records)
    if text:
        rows = tuple(_as_text(row) for row in rows)
    numeric = [p for p in params if all(_is_number(rec.get(p)) for rec in records)]
    return Summary(header=tuple(header), rows=rows, right=frozenset((*numeric, "Mean", "95% CI", "RSD", "Runs")))


def _as_text(row: Row) -> Row:
    """``row`` with every cell and its label one line of printable text (:func:`~nsightx._textcell.cell_text`)."""
    return Row(tuple(map(cell_text, row.cells)), row.stable, cell_text(row.label), row.rsd_pct)


def _is_number(value: Any) -> bool:
    return isinstance(value, numbers.Number) and not isinstance(value, bool)


def device_label(backend: str, environment: Mapping[str, Any]) -> str:
    """What measured, for people: ``CPU (host backend)``, or the GPU's name and the backend."""
    if backend == "host":
        return "CPU (host backend)"
    gpu = environment.get("GPU")
    return f"{gpu} ({backend} backend)" if gpu else f"GPU, name not recorded ({backend} backend)"


def unstable_warning(
    summary: Summary, remedy: str = "more runs, runs='auto' or a quieter machine tighten them"
) -> str | None:
    """One sentence naming the unstable rows (at most :data:`MAX_NAMED_UNSTABLE`), or ``None`` when all are stable.

    ``remedy`` ends it, in the reader's words: ``runs='auto'`` in Python, ``--runs auto`` on a command line.
    """
    unstable = summary.unstable
    if not unstable:
        return None
    named = ", ".join(
        f"{r.label} ({r.rsd_pct:.1f}%)" if math.isfinite(r.rsd_pct) else r.label for r in unstable[:MAX_NAMED_UNSTABLE]
    )
    more = f" and {len(unstable) - MAX_NAMED_UNSTABLE} more" if len(unstable) > MAX_NAMED_UNSTABLE else ""
    return (
        f"{len(unstable)} of {len(summary.rows)} row(s) unstable (relative std dev >= {STABLE_RSD_PCT:g}%, fewer "
        f"than {FEW_RUNS} valid runs or a throttled run): {named}{more}; {remedy}"
    )


def render_text(summary: Summary) -> str:
    """The table as aligned plain text for a terminal or a log."""
    widths = [len(h) for h in summary.header]
    for row in summary.rows:
        widths = [max(w, len(c)) for w, c in zip(widths, row.cells, strict=True)]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(
            c.rjust(w) if h in summary.right else c.ljust(w)
            for h, c, w in zip(summary.header, cells, widths, strict=True)
        ).rstrip()

    return "\n".join([line(summary.header), *(line(row.cells) for row in summary.rows)])


def _width(summary: Summary) -> int:
    """How wide :func:`render_text` prints ``summary``."""
    widths = [len(h) for h in summary.header]
    for row in summary.rows:
        widths = [max(w, len(c)) for w, c in zip(widths, row.cells, strict=True)]
    return sum(widths) + 2 * (len(widths) - 1)


def _without(summary: Summary, column: str) -> Summary:
    i = summary.header.index(column)
    rows = tuple(Row(r.cells[:i] + r.cells[i + 1 :], r.stable, r.label, r.rsd_pct) for r in summary.rows)
    return Summary(summary.header[:i] + summary.header[i + 1 :], rows, summary.right)


def _cut(summary: Summary, column: str, over: int, keep: int) -> Summary:
    """Cut the cells of ``column`` (with ``..``) by up to ``over`` characters, keeping at least ``keep``.

    The column's heading is cut too where it is wider than what is kept (``Annotation`` -> ``Anno..``): a long value
    elsewhere in the row (a rate, a wide spread) may leave no other way to fit the terminal.
    """
    i = summary.header.index(column)
    now = max(len(column), *(len(r.cells[i]) for r in summary.rows))
    limit = max(keep, now - over, 3)

    def clip(text: str) -> str:
        return text if len(text) <= limit else text[: limit - 2] + ".."

    rows = tuple(
        Row((*r.cells[:i], clip(r.cells[i]), *r.cells[i + 1 :]), r.stable, r.label, r.rsd_pct) for r in summary.rows
    )
    header = (*summary.header[:i], clip(column), *summary.header[i + 1 :])
    right = frozenset(clip(h) if h == column else h for h in summary.right)
    return Summary(header, rows, right)


def fit(summary: Summary, width: int | None) -> tuple[Summary, list[str]]:
    """``summary`` narrowed to ``width`` characters where it can be, and lines to print above it.

    What is the same in every row (the ``Tool``, the ``Device``, a single metric) moves above the table first; then
    long annotations are cut (``..``), the CI column is left out, metric names are cut, the stability column is left
    out (the warning still names the unstable rows), and names are cut shorter still, each step only while the table
    is still too wide.
    ``width=None`` (not a terminal) leaves the table whole.
    """
    above: list[str] = []
    if width is None or not summary.rows:
        return summary, above
    for column in ("Tool", "Device", "Metric"):
        if _width(summary) <= width or column not in summary.header:
            continue
        values = {r.cells[summary.header.index(column)] for r in summary.rows}
        if len(values) == 1:
            above.append(f"{column.lower()}: {values.pop()}")
            summary = _without(summary, column)
    steps = (("Annotation", 10), ("95% CI", 0), ("Metric", 16), ("Stable", 0), ("Metric", 8), ("Annotation", 6))
    for column, keep in steps:
        if _width(summary) <= width or column not in summary.header:
            continue
        over = _width(summary) - width
        summary = _cut(summary, column, over, keep) if keep else _without(summary, column)
    return summary, above
