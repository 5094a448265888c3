r"""``ProfileResults`` as an HTML table, for Jupyter (``_repr_html_``).

The cells are those of :mod:`nsightx._results.summary` (readable units, the 95% CI, stability, the Tool column), under a
caption that says what was profiled, on which device and with which backend. Every piece of text (annotation
names, config values, metric names, the function's name) is escaped, so a name such as ``a<b>`` shows as written
and cannot inject markup into the notebook.

The cells hold the text the printed table's cells hold (``summarize(..., text=True)``: names and values written by
:func:`~nsightx._textcell.cell_text`), then HTML-escaped. A browser collapses a line break, a tab or a run of
spaces into one space and drops a terminal escape, so a name holding a line break (``"a\nb"`` in Python) used to
read as ``a b``, another name, where ``nsightx show`` prints it as ``a\nb`` (a backslash and an ``n``). Both views
now read ``a\nb``, and the warning under the table names the unstable rows as the printed one does.
"""

from __future__ import annotations

from html import escape
from typing import TYPE_CHECKING

from nsightx._results.summary import Summary, device_label, summarize, unstable_warning

if TYPE_CHECKING:
    import pandas as pd

    from nsightx._results.schema import ResultData

TABLE_CLASS = "nsightx-results"
"""The ``class`` of the ``<table>``, for notebook styling and for tests."""

_UNSTABLE_STYLE = "color: #b45309; font-weight: bold"
"""How a ``no`` in the Stable column stands out (amber: a warning, not an error)."""


def _caption(data: ResultData) -> str:
    plan = data.plan
    runs = f"auto (<= {plan.runs}) runs" if plan.adaptive else f"{plan.runs} run(s)"
    device = device_label(plan.backend, data.environment)
    text = f"{plan.function}: {len(plan.configs)} config(s) x {runs} on {device}"
    return f'<caption style="text-align: left">{escape(text)}</caption>'


def _style(summary: Summary, column: str, unstable: bool = False) -> str:
    """The ``style`` attribute of a cell: numbers right-aligned, text left-aligned, an unstable ``no`` highlighted."""
    styles = ["text-align: right" if column in summary.right else "text-align: left"]
    styles += [_UNSTABLE_STYLE] if unstable and column == "Stable" else []
    return f' style="{"; ".join(styles)}"'


def _body(summary: Summary) -> list[str]:
    lines = []
    for row in summary.rows:
        cells = (
            f"<td{_style(summary, column, not row.stable)}>{escape(cell)}</td>"
            for column, cell in zip(summary.header, row.cells, strict=True)
        )
        lines.append(f"<tr>{''.join(cells)}</tr>")
    return lines


def results_html(frame: pd.DataFrame, data: ResultData) -> str:
    """The aggregated table of a result as an HTML fragment (a ``<table>``, then a warning for unstable rows).

    Args:
        frame: The result's aggregated DataFrame.
        data: The result (for the caption: function, configs, runs, device and backend).
    """
    summary = summarize(frame, data.plan.params, text=True)  # the printed table's cells (see the module docstring)
    head = "".join(f"<th{_style(summary, h)}>{escape(h)}</th>" for h in summary.header)
    parts = [
        f'<table class="{TABLE_CLASS}">',
        _caption(data),
        f"<thead><tr>{head}</tr></thead>",
        "<tbody>",
        *_body(summary),
        "</tbody>",
        "</table>",
    ]
    warning = unstable_warning(summary)
    if warning:
        parts.append(f'<p style="{_UNSTABLE_STYLE}">warning: {escape(warning)}</p>')
    return "\n".join(parts)
