"""Render a comparison (``nsightx._report.compare.compare``): a terminal table, Markdown, JSON or CSV.

The text table fits the terminal (:func:`render_text`'s ``width``): a column that repeats another (``Annotation``
equal to ``Function`` in every row) or says nothing (``Flags`` without a flag, ``Test`` outside the pytest plugin)
is left out, and when it is still too wide the metric moves above the table, the interval column goes, the
status is shortened and the longest names are cut. The Markdown table (job summaries) keeps every column; JSON
and CSV hold every column of the frame, for programs.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
from typing import TYPE_CHECKING, Any

from nsightx._report.compare import FIXED_COLUMNS, gate_failed, only_in_one
from nsightx._results.output import csv_text
from nsightx._textcell import cell_text
from nsightx._units import readable

if TYPE_CHECKING:
    import pandas as pd

_FIXED = FIXED_COLUMNS


def format_value(value: float, unit: object) -> str:
    """A value with its unit, in the largest readable prefix of that unit (the demo's and notebook's rule).

    A metric without a unit is a missing cell of the frame's ``Unit`` column (NaN in pandas' string dtype), shown
    as a bare number.
    """
    return readable(value, unit if isinstance(unit, str) else None)


def _config(row: Any, params: list[str]) -> str:
    parts = [f"{p}={row[p]}" for p in params if not _missing(row[p])]
    return ", ".join(parts) or "-"


def _missing(v: Any) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


def _status(row: Any, threshold_pct: float) -> str:
    status = str(row["Status"])
    remeasured = str(row.get("Remeasured") or "")
    if status in ("slower", "faster"):
        text = f"{status} {row['ChangePct']:+.1f}%"
        if row["Regression"]:
            text += f" REGRESSION (> {threshold_pct:g}%)"  # one space: two separate the text table's columns
        return text + (f"; {remeasured}" if remeasured else "")
    if status == "within noise" and math.isfinite(row["ChangePct"]):
        floor = row.get("NoiseFloorPct", math.nan)
        below = bool(row.get("Significant")) and math.isfinite(floor)
        text = f"within noise ({row['ChangePct']:+.1f}%{f', floor {floor:.1f}%' if below else ''})"
        return text + (f"; {remeasured}" if remeasured else "")
    return status


def _flags(row: Any) -> str:
    """Both sides' quality flags as ``baseline / new`` (``-`` for a side without any), or ``-`` when neither has."""
    base, new = str(row.get("BaselineFlags") or ""), str(row.get("NewFlags") or "")
    if not base and not new:
        return "-"
    return f"{base or '-'} / {new or '-'}"


_HEADER = ("Test", "Function", "Annotation", "Config", "Metric", "Baseline", "New", "Ratio", "95% CI", "p (Holm)")
_HEADER_END = ("Runs", "Status", "Flags")


def _cells(frame: pd.DataFrame) -> tuple[list[str], list[list[str]]]:
    """The table's header and cells, every column (``Test`` only when the frame has one)."""
    params = [c for c in frame.columns if c not in _FIXED]
    threshold = float(frame.attrs.get("threshold_pct", 0.0))
    with_test = "Test" in frame.columns
    header = [h for h in (*_HEADER, *_HEADER_END) if with_test or h != "Test"]
    rows = []
    for _, r in frame.iterrows():
        ci = f"[{r['Ratio_CI_Lower']:.3f}, {r['Ratio_CI_Upper']:.3f}]" if math.isfinite(r["Ratio_CI_Lower"]) else "-"
        cells = [str(r["Test"])] if with_test else []
        cells += [
            str(r["Function"]),
            str(r["Annotation"]),
            _config(r, params),
            str(r["Metric"]),
            format_value(r["BaselineMean"], r["Unit"]),
            format_value(r["NewMean"], r["Unit"]),
            f"{r['Ratio']:.3f}" if math.isfinite(r["Ratio"]) else "-",
            ci,
            f"{r['PValueAdj']:.2g}" if math.isfinite(r["PValueAdj"]) else "-",
            f"{r['BaselineRuns']}/{r['NewRuns']}",
            _status(r, threshold),
            _flags(r),
        ]
        rows.append(cells)
    return header, rows


def summary(frame: pd.DataFrame) -> str:
    """One sentence: the verdict of the gate."""
    threshold = float(frame.attrs.get("threshold_pct", 0.0))
    if len(frame) and (frame["Status"] == "no change").all():
        return f"no change: baseline and new hold identical runs ({len(frame)} row(s))"
    n_reg = int(frame["Regression"].sum()) if len(frame) else 0
    counts = frame["Status"].value_counts().to_dict() if len(frame) else {}
    detail = ", ".join(f"{n} {s}" for s, n in counts.items())
    missing = only_in_one(frame) if frame.attrs.get("require_all") and len(frame) else 0
    if n_reg or missing:
        failures = [f"{n_reg} significant slowdown(s) larger than {threshold:g}%"] if n_reg else []
        failures += [f"{missing} row(s) in only one result (--require-all)"] if missing else []
        return f"FAIL: {' and '.join(failures)} ({detail})"
    cleared = _cleared(frame)
    note = f"; {cleared} row(s) cleared by re-measure" if cleared else ""
    return f"ok: no significant slowdown larger than {threshold:g}% ({detail or 'nothing compared'}){note}"


def _cleared(frame: pd.DataFrame) -> int:
    """Rows that looked regressed and did not stay so when the pytest plugin measured them again."""
    if "Remeasured" not in frame.columns:
        return 0
    return int(frame["Remeasured"].astype(str).str.startswith("cleared").sum())


def _notes(frame: pd.DataFrame) -> list[str]:
    """What the verdict leaves out: rows in only one result, when they do not fail the gate."""
    missing = only_in_one(frame) if len(frame) else 0
    if not missing or frame.attrs.get("require_all"):
        return []
    return [
        f"note: {missing} row(s) are in only one result (listed above) and do not fail the gate; "
        "--require-all makes them fail it"
    ]


def _gate(frame: pd.DataFrame) -> str:
    return (
        f"gate: a slowdown fails when it is larger than {float(frame.attrs.get('threshold_pct', 0)):g}%, larger "
        "than the row's noise floor (the quieter side's run-to-run spread; the spread between the baseline's "
        "stored processes) and significant (Mann-Whitney U on the runs, Holm-adjusted p < "
        f"{frame.attrs.get('alpha', 0.05):g}, and the 95% bootstrap interval of the ratio of means excludes 1)"
    )


def environment_lines(frame: pd.DataFrame) -> list[str]:
    """One line per provenance entry that differs between the two sides (``df.attrs["environment"]``)."""
    return [
        f"differs: {d['key']}: {_short(d['baseline'])} (baseline) -> {_short(d['new'])} (new)"
        for d in frame.attrs.get("environment", [])
    ]


def _short(value: object) -> str:
    if value is None:
        return "-"
    text = str(value)
    return text[:10] if len(text) == 40 and all(c in "0123456789abcdef" for c in text) else repr(text)


def terminal_width(isatty: bool) -> int | None:
    """The width a text table should fit: ``COLUMNS`` when set, else the terminal's.

    ``None`` (no limit) when the output is not a terminal: a CI log or a pipe has no width, and programs read
    ``--format json`` or ``csv``.
    """
    if os.environ.get("COLUMNS", "").strip().isdigit() or isatty:
        return shutil.get_terminal_size().columns
    return None


def render_text(frame: pd.DataFrame, width: int | None = None) -> str:
    r"""A plain-text table for a terminal or a CI log, at most ``width`` columns wide where it can be.

    Each row is one line: a cell is written by :func:`cell_text` (a line break in a name as ``\n``).

    Args:
        frame: A comparison.
        width: The terminal's width (``shutil.get_terminal_size().columns``); ``None``: no limit.
    """
    header, rows = _cells(frame)
    rows = [[cell_text(c) for c in r] for r in rows]  # one line per row: a name's line break is written as \n
    header, rows, above = fit(header, rows, width)
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)]
    lines = [f"baseline: {frame.attrs.get('baseline', '?')}", f"new:      {frame.attrs.get('new', '?')}", _gate(frame)]
    lines += [f"warning: {w}" for w in frame.attrs.get("warnings", [])]
    lines += above
    lines.append("")
    lines.append("  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)).rstrip())
    lines.append("  ".join("-" * w for w in widths))
    for r in rows:
        lines.append("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())
    lines.append("")
    lines.append(summary(frame))
    lines += environment_lines(frame)
    lines += _notes(frame)
    return "\n".join(lines)


_CUTTABLE = ("Flags", "Metric", "Config", "Annotation", "Function", "Test")
"""Columns whose cells may be cut short (with ``..``) to fit the width, the first ones first; numbers and the
status never are."""


def _drop(header: list[str], rows: list[list[str]], name: str) -> tuple[list[str], list[list[str]]]:
    i = header.index(name)
    return header[:i] + header[i + 1 :], [r[:i] + r[i + 1 :] for r in rows]


def _total(header: list[str], rows: list[list[str]]) -> int:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)]
    return sum(widths) + 2 * (len(widths) - 1)


def fit(header: list[str], rows: list[list[str]], width: int | None) -> tuple[list[str], list[list[str]], list[str]]:
    """Leave out what repeats or says nothing, then narrow the table step by step until it fits ``width``.

    Returns:
        The header, the rows, and lines to print above the table (a metric moved out of it).
    """
    if all(r[header.index("Annotation")] == r[header.index("Function")] for r in rows):
        header, rows = _drop(header, rows, "Annotation")
    for name in ("Flags", "Test"):
        if name in header and all(r[header.index(name)] in ("-", "") for r in rows):
            header, rows = _drop(header, rows, name)
    above: list[str] = []
    if width is None:
        return header, rows, above
    metrics = {r[header.index("Metric")] for r in rows}
    if _total(header, rows) > width and len(metrics) == 1:
        above.append(f"metric: {metrics.pop()}")
        header, rows = _drop(header, rows, "Metric")
    if _total(header, rows) > width:
        header, rows = _drop(header, rows, "95% CI")
    if _total(header, rows) > width:
        status = header.index("Status")
        rows = [[*r[:status], _terse(r[status]), *r[status + 1 :]] for r in rows]
    cut = _cut(header, rows, width)
    if _total(header, cut) > width and "Flags" in header:
        header, rows = _drop(header, rows, "Flags")
        above.append("(the Flags column is left out to fit the width; --format markdown or json shows it)")
        cut = _cut(header, rows, width)
    return header, cut, above


_TERSE = (
    (re.compile(r"^slower ([+-][\d.]+%) REGRESSION \(> [\d.]+%\)"), r"REGRESSION \1"),
    (re.compile(r"^within noise \(([+-][\d.]+%)[^)]*\)"), r"noise \1"),
)


def _terse(status: str) -> str:
    """A status cell in fewer characters: ``REGRESSION +19.7%``, ``noise +1.2%`` (the gate line has the rule)."""
    for pattern, short in _TERSE:
        status = pattern.sub(short, status)
    return status


def _cut(header: list[str], rows: list[list[str]], width: int) -> list[list[str]]:
    """Cut the cells of :data:`_CUTTABLE` columns, in that order, each down to 8 characters, until the table fits."""
    over = _total(header, rows) - width
    limits: dict[int, int] = {}
    for name in _CUTTABLE:
        if over <= 0 or name not in header:
            continue
        i = header.index(name)
        now = max(len(name), *(len(r[i]) for r in rows)) if rows else len(name)
        cut = min(over, max(0, now - max(8, len(name))))
        limits[i] = now - cut
        over -= cut
    return [[_clip(c, limits[i]) if i in limits else c for i, c in enumerate(r)] for r in rows]


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 2] + ".."


def render_json(frame: pd.DataFrame) -> str:
    """The verdict, the settings, the warnings, what differs between the environments, and every row, as JSON.

    Missing numbers (NaN) are ``null``; the object's keys are stable: ``verdict``, ``failed``, ``baseline``,
    ``new``, ``threshold_pct``, ``alpha``, ``require_all``, ``warnings``, ``environment``, ``rows``.
    """
    rows = [{str(k): _plain(v) for k, v in rec.items()} for rec in frame.to_dict("records")]
    doc = {
        "verdict": summary(frame),
        "failed": gate_failed(frame),
        **{k: _plain(frame.attrs.get(k)) for k in ("baseline", "new", "threshold_pct", "alpha", "require_all")},
        "warnings": list(frame.attrs.get("warnings", [])),
        "environment": [{k: _plain(v) for k, v in d.items()} for d in frame.attrs.get("environment", [])],
        "rows": rows,
    }
    return json.dumps(doc, indent=2, allow_nan=False)


def _plain(value: object) -> object:
    """A JSON-ready value: numpy scalars as Python ones, NaN as ``None``."""
    item = getattr(value, "item", None)
    if callable(item):
        value = item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return str(value)


def render_csv(frame: pd.DataFrame) -> str:
    r"""Every column of the comparison, one line per row (the verdict is the exit status, or ``--format json``).

    A text cell holding a ``\r`` is quoted (:func:`~nsightx._results.output.csv_text`): unquoted, a CSV reader
    ended the row there.
    """
    return csv_text(frame)


def markdown_text(text: str) -> str:
    r"""``text`` as one Markdown table cell shows it (GitHub's tables).

    A backslash is escaped before the pipes are: ``a\|b`` as ``a\\\|b`` (left as ``a\\|b``, the escaped
    backslash let the pipe end the cell and split the row). A line break (``\n``, ``\r``) is ``<br>``: a raw one
    ended the row there and the rest of it fell out of the table.
    """
    return cell_text(text, markdown=True)


def render_markdown(frame: pd.DataFrame) -> str:
    """A Markdown table (e.g. for ``$GITHUB_STEP_SUMMARY`` or a pull-request comment)."""
    header, rows = _cells(frame)
    esc = markdown_text
    verdict = summary(frame)
    lines = [
        f"### nsightx compare: {'**' + verdict + '**' if verdict.startswith('FAIL') else verdict}",
        "",
        f"- baseline: {esc(str(frame.attrs.get('baseline', '?')))}",
        f"- new: {esc(str(frame.attrs.get('new', '?')))}",
        f"- {_gate(frame)}",
    ]
    lines += [f"- warning: {esc(w)}" for w in frame.attrs.get("warnings", [])]
    lines += [f"- {esc(line)}" for line in environment_lines(frame)]
    lines += ["", "| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    for r in rows:
        cells = [esc(c) for c in r]
        if "REGRESSION" in cells[-2]:
            cells[-2] = f"**{cells[-2]}**"
        lines.append("| " + " | ".join(cells) + " |")
    notes = _notes(frame)
    if notes:
        lines += ["", *(esc(n) for n in notes)]
    return "\n".join(lines)
