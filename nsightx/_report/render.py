"""Render a comparison (``nsightx._report.compare.compare``) as a terminal table or as Markdown (CI job summaries)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from nsightx._report.compare import FIXED_COLUMNS, only_in_one
from nsightx._results.summary import number, scale, with_unit

if TYPE_CHECKING:
    import pandas as pd

_FIXED = FIXED_COLUMNS


def format_value(value: float, unit: str | None) -> str:
    """A value with its unit, durations in ns shown in the largest readable unit (the demo's and notebook's rule)."""
    if not math.isfinite(value):
        return "-"
    factor, shown = scale(value, unit)
    return with_unit(number(value / factor), shown)


def _config(row: Any, params: list[str]) -> str:
    parts = [f"{p}={row[p]}" for p in params if not _missing(row[p])]
    return ", ".join(parts) or "-"


def _missing(v: Any) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


def _status(row: Any, threshold_pct: float) -> str:
    status = str(row["Status"])
    if status in ("slower", "faster"):
        text = f"{status} {row['ChangePct']:+.1f}%"
        if row["Regression"]:
            text += f"  REGRESSION (> {threshold_pct:g}%)"
        return text
    if status == "within noise" and math.isfinite(row["ChangePct"]):
        return f"within noise ({row['ChangePct']:+.1f}%)"
    return status


def _flags(row: Any) -> str:
    """Both sides' quality flags as ``baseline / new`` (``-`` for a side without any), or ``-`` when neither has."""
    base, new = str(row.get("BaselineFlags") or ""), str(row.get("NewFlags") or "")
    if not base and not new:
        return "-"
    return f"{base or '-'} / {new or '-'}"


def _cells(frame: pd.DataFrame) -> tuple[list[str], list[list[str]]]:
    params = [c for c in frame.columns if c not in _FIXED]
    threshold = float(frame.attrs.get("threshold_pct", 0.0))
    header = [
        "Function",
        "Annotation",
        "Config",
        "Metric",
        "Baseline",
        "New",
        "Ratio",
        "95% CI",
        "p (Holm)",
        "Runs",
        "Status",
        "Flags",
    ]
    rows = []
    for _, r in frame.iterrows():
        ci = f"[{r['Ratio_CI_Lower']:.3f}, {r['Ratio_CI_Upper']:.3f}]" if math.isfinite(r["Ratio_CI_Lower"]) else "-"
        rows.append(
            [
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
        )
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
    return f"ok: no significant slowdown larger than {threshold:g}% ({detail or 'nothing compared'})"


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
        f"gate: a slowdown fails when it is larger than {float(frame.attrs.get('threshold_pct', 0)):g}% and "
        f"significant (Mann-Whitney U on the runs, Holm-adjusted p < {frame.attrs.get('alpha', 0.05):g}, "
        "and the 95% bootstrap interval of the ratio of means excludes 1)"
    )


def render_text(frame: pd.DataFrame) -> str:
    """A plain-text table for a terminal or a CI log."""
    header, rows = _cells(frame)
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)]
    lines = [f"baseline: {frame.attrs.get('baseline', '?')}", f"new:      {frame.attrs.get('new', '?')}", _gate(frame)]
    lines += [f"warning: {w}" for w in frame.attrs.get("warnings", [])]
    lines.append("")
    lines.append("  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)).rstrip())
    lines.append("  ".join("-" * w for w in widths))
    for r in rows:
        lines.append("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())
    lines.append("")
    lines.append(summary(frame))
    lines += _notes(frame)
    return "\n".join(lines)


def render_markdown(frame: pd.DataFrame) -> str:
    """A Markdown table (e.g. for ``$GITHUB_STEP_SUMMARY`` or a pull-request comment)."""
    header, rows = _cells(frame)

    def esc(cell: str) -> str:
        return cell.replace("|", "\\|")

    verdict = summary(frame)
    lines = [
        f"### nsightx compare: {'**' + verdict + '**' if verdict.startswith('FAIL') else verdict}",
        "",
        f"- baseline: {esc(str(frame.attrs.get('baseline', '?')))}",
        f"- new: {esc(str(frame.attrs.get('new', '?')))}",
        f"- {_gate(frame)}",
    ]
    lines += [f"- warning: {esc(w)}" for w in frame.attrs.get("warnings", [])]
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
