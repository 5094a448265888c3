"""``nsightx compare --format markdown`` and ``--format json`` parsed back and compared with the comparison frame.

docs/ci.md ("nsightx compare", the formats table): ``json`` holds every column of ``nsightx.compare``'s DataFrame
in each row, missing numbers as ``null``; ``markdown`` shows every column of the table, one row per row of the
frame. Random result pairs (odd text in annotation names and parameter values: pipes, backticks, backslashes,
newlines, unicode; NaN/inf runs; rows on one side only) are saved, compared by the CLI in both formats and by
``nsightx.compare``; every row of the output is matched to the frame's row by (Annotation, Metric, parameter values)
and each cell is checked against that row.

Where the docs are silent this does not guess: how a JSON row writes an infinite number (only NaN is named), and
how Markdown shows a character that Markdown itself reads (``*``, backticks, ``<``): the Markdown cells are compared
as the text between the unescaped pipes, with only ``\\|`` read back as ``|``.
"""

from __future__ import annotations

import json
import math
import os
import random
import string
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from _synthetic import make_result
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import nsightx
from nsightx._report.compare import FIXED_COLUMNS
from nsightx._report.views import render_text
from nsightx.cli import main

EXAMPLES = int(os.environ.get("NSIGHTX_REFERENCE_EXAMPLES", "15"))
"""Examples per run (more while hunting: ``NSIGHTX_REFERENCE_EXAMPLES=300``)."""
ODD = ["gemm", "a|b", "`mm`", "x\\|y", "é∑€", "line\nnext", "tab\tc", "back\\", "a||b", "*em*", "cr\rx"]
ODD_TEXT = [*ODD, "esc\x1b[2J", "ls\u2028ps", "nel\x85", "a\\nb", "  two  spaces", "漢字 wide", "long" * 30]
"""More names for the text table: a terminal escape, Unicode line separators, a literal backslash-n, spaces,
wide characters, a name longer than a terminal."""
TIME, RATE = "gpu__time_duration.sum", "dram__bytes_read.sum.per_second"


@st.composite
def pairs(draw: Any) -> tuple[Any, Any]:
    rng = random.Random(draw(st.integers(0, 2**32)))
    anns = draw(st.lists(st.sampled_from(ODD_TEXT), min_size=1, max_size=3, unique=True))
    labels = draw(st.lists(st.sampled_from([*ODD_TEXT, "plain"]), min_size=1, max_size=3, unique=True))
    configs = [(i * 64 + 1, label) for i, label in enumerate(labels)]
    metrics = draw(st.sampled_from([(TIME,), (TIME, RATE)]))
    factor = draw(st.sampled_from([1.0, 1.3, 0.7, 1.02]))
    odd_rate = draw(st.sampled_from([0.0, 0.2]))
    sides = []
    for side in range(2):
        values: dict[tuple[str, int, str], list[float]] = {}
        for a_i, ann in enumerate(anns):
            if a_i and rng.random() < 0.25:
                continue  # a row on one side only
            for c in range(len(configs)):
                for m in metrics:
                    mean = 1000.0 * (c + 1) * (factor if side else 1.0)
                    runs = rng.randint(2, 8)
                    vals = [mean * (1 + rng.gauss(0, 0.01)) for _ in range(runs)]
                    vals = [rng.choice([math.nan, math.inf]) if rng.random() < odd_rate else v for v in vals]
                    values[(ann, c, m)] = vals
        if not values:
            values[(anns[0], 0, TIME)] = [1.0, 2.0]
        units = {TIME: "ns", RATE: "GB/s"}
        sides.append(make_result(values, params=["n", "label"], configs=configs, units=units))
    return sides[0], sides[1]


def _key(annotation: Any, metric: Any, config: str) -> tuple[str, str, str]:
    return (str(annotation), str(metric), config)


def _config_text(row: pd.Series, params: list[str]) -> str:
    """The Config cell as docs/ci.md shows it: ``name=value`` pairs, ``-`` for none."""
    parts = [
        f"{p}={row[p]}" for p in params if not (row[p] is None or (isinstance(row[p], float) and math.isnan(row[p])))
    ]
    return ", ".join(parts) or "-"


def _cells(line: str) -> list[str]:
    """A Markdown table row's cells as GitHub reads them (GFM tables): a backslash before ASCII punctuation escapes
    it (``\\|`` is a pipe in the cell, ``\\\\`` a backslash), any other pipe ends the cell; ``<br>`` is a line
    break in the cell."""
    inner = line.strip()
    assert inner.startswith("|") and inner.endswith("|"), line
    cells, cell, i = [], [], 1
    while i < len(inner):
        ch = inner[i]
        if ch == "\\" and i + 1 < len(inner) and inner[i + 1] in string.punctuation:
            cell.append(inner[i + 1])
            i += 2
            continue
        if ch == "|":
            cells.append("".join(cell).strip().replace("<br>", "\n"))
            cell = []
        else:
            cell.append(ch)
        i += 1
    return cells


def _lines(text: str) -> str:
    """``text`` with each line break (``\\r\\n``, ``\\r``) as ``\\n``: Markdown shows each as one break."""
    return text.replace("\r\n", "\n").replace("\r", "\n")


def check_markdown(text: str, frame: pd.DataFrame) -> None:
    params = [c for c in frame.columns if c not in FIXED_COLUMNS]
    lines = text.split("\n")  # Markdown's line endings (CommonMark): not str.splitlines' \u2028, \x85, ...
    start = next(i for i, ln in enumerate(lines) if ln.startswith("| Function"))
    header = _cells(lines[start])
    body = []
    for ln in lines[start + 2 :]:
        if not ln.startswith("|"):
            break
        body.append(_cells(ln))
    assert len(body) == len(frame), (len(body), len(frame), text)
    want = {}
    for _, row in frame.iterrows():
        key = _key(row["Annotation"], row["Metric"], _config_text(row, params))
        want[tuple(_lines(k).strip() for k in key)] = row  # GFM strips a cell's outer spaces
    assert len(want) == len(frame)
    for cells in body:
        assert len(cells) == len(header), (cells, header)
        got = dict(zip(header, cells, strict=True))
        key = _key(got["Annotation"], got["Metric"], got["Config"])
        assert key in want, (key, list(want))
        row = want.pop(key)
        assert got["Function"] == row["Function"]
        assert got["Runs"] == f"{row['BaselineRuns']}/{row['NewRuns']}", (got, row.to_dict())
        ratio = "-" if not math.isfinite(row["Ratio"]) else f"{row['Ratio']:.3f}"
        assert got["Ratio"] == ratio, (got, row.to_dict())
        assert got["Status"].strip("*").startswith(str(row["Status"])), (got, row.to_dict())
        assert ("REGRESSION" in got["Status"]) == bool(row["Regression"]), (got, row.to_dict())


_ESCAPES = {"\\": "\\", "n": "\n", "r": "\r", "t": "\t"}
_HEX = {"x": 2, "u": 4, "U": 8}


def unescape(cell: str) -> str:
    """A text-table cell read back (docs/ci.md: a character that is not printable is written as its Python escape,
    a backslash doubled): ``\\\\`` ``\\n`` ``\\r`` ``\\t`` ``\\xNN`` ``\\uNNNN`` ``\\UNNNNNNNN``."""
    out, i = [], 0
    while i < len(cell):
        ch = cell[i]
        if ch != "\\":
            out.append(ch)
            i += 1
            continue
        kind = cell[i + 1]
        if kind in _ESCAPES:
            out.append(_ESCAPES[kind])
            i += 2
        else:
            digits = _HEX[kind]
            out.append(chr(int(cell[i + 2 : i + 2 + digits], 16)))
            i += 2 + digits
    return "".join(out)


def text_table(text: str) -> tuple[list[str], list[dict[str, str]]]:
    """The text table's header and rows, each row one line, its cells cut at the dashed line's columns."""
    lines = text.splitlines()  # every line break a terminal or a log viewer may act on (\r, \x85, \u2028...)
    dash = next(i for i, ln in enumerate(lines) if ln and set(ln) <= {"-", " "} and ln.startswith("-"))
    spans, col = [], 0
    for run in lines[dash].split("  "):
        spans.append((col, col + len(run)))
        col += len(run) + 2
    header = [lines[dash - 1][a:b].strip() for a, b in spans]
    rows = []
    for ln in lines[dash + 1 :]:
        if not ln:
            break
        cells = [ln[a:b] for a, b in spans[:-1]] + [ln[spans[-1][0] :]]
        assert all(ln[b : b + 2] in ("  ", "") for _, b in spans[:-1]), ln  # no cell runs into the next
        rows.append(dict(zip(header, (c.rstrip() for c in cells), strict=True)))
    return header, rows


def check_text(text: str, frame: pd.DataFrame, *, cut: bool = False) -> None:
    """Each row of the frame is one line of the table, with its own status and mark; names read back unless
    ``cut`` (the table was narrowed to a width, which may shorten them)."""
    params = [c for c in frame.columns if c not in FIXED_COLUMNS]
    _, body = text_table(text)
    assert len(body) == len(frame), (len(body), len(frame), text)
    want = {}
    for _, row in frame.iterrows():
        want[(str(row["Annotation"]), str(row["Metric"]), _config_text(row, params))] = row
    for got in body:
        if cut:  # the names may be shortened: match on what stays whole
            key = next(k for k, r in want.items() if _text_row_matches(got, r))
        else:
            annotation = got.get("Annotation", got["Function"])
            key = (
                unescape(annotation),
                unescape(got.get("Metric", str(frame["Metric"].iloc[0]))),
                unescape(got["Config"]),
            )
            assert key in want, (key, list(want), text)
            assert unescape(got["Function"]) == str(want[key]["Function"])
        row = want.pop(key)
        assert _text_row_matches(got, row), (got, row.to_dict())


def _text_row_matches(got: dict[str, str], row: pd.Series) -> bool:
    ratio = "-" if not math.isfinite(row["Ratio"]) else f"{row['Ratio']:.3f}"
    status = got["Status"]
    return (
        got["Runs"] == f"{row['BaselineRuns']}/{row['NewRuns']}"
        and got["Ratio"] == ratio
        and (status.startswith(str(row["Status"])) or status.startswith(("REGRESSION", "noise")))
        and ("REGRESSION" in status) == bool(row["Regression"])
    )


def _same(got: Any, want: Any) -> bool:
    if hasattr(want, "item") and callable(want.item):
        want = want.item()
    if want is None or (isinstance(want, float) and math.isnan(want)):
        return got is None
    if isinstance(want, float) and math.isinf(want):
        return True  # docs/ci.md names NaN -> null only: an infinite number is not checked (see the docstring)
    if isinstance(want, float):
        return isinstance(got, int | float) and float(got) == want
    return got == want or (isinstance(want, bool) and got is want)


def check_json(text: str, frame: pd.DataFrame) -> None:
    doc = json.loads(text)
    params = [c for c in frame.columns if c not in FIXED_COLUMNS]
    rows = doc["rows"]
    assert len(rows) == len(frame)
    by_key = {}
    for _, row in frame.iterrows():
        by_key[_key(row["Annotation"], row["Metric"], _config_text(row, params))] = row
    for got in rows:
        assert set(got) == {str(c) for c in frame.columns}, (set(got), list(frame.columns))
        config = ", ".join(f"{p}={got[p]}" for p in params if got[p] is not None) or "-"
        row = by_key.pop(_key(got["Annotation"], got["Metric"], config))
        for col in frame.columns:
            assert _same(got[str(col)], row[col]), (col, got[str(col)], row[col])
    assert doc["failed"] == bool(frame["Regression"].any()) or doc["require_all"]


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(pairs())
def test_markdown_json_and_text_hold_the_frame(
    tmp_path_factory: pytest.TempPathFactory, capsys: Any, pair: Any
) -> None:
    folder: Path = tmp_path_factory.mktemp("fmt")
    base, new = pair[0].save(folder / "base.json"), pair[1].save(folder / "new.json")
    try:
        frame = nsightx.compare(base, new)
    except nsightx.CompareError:
        return  # nothing to compare (every row too few runs): the CLI exits 2, tests/core/report/test_compare.py
    for fmt, check in (("markdown", check_markdown), ("json", check_json), ("text", check_text)):
        capsys.readouterr()
        assert main(["compare", str(base), str(new), "--format", fmt]) in (0, 1)
        check(capsys.readouterr().out, frame)
    for width in (60, 120):
        check_text(render_text(frame, width), frame, cut=True)


@pytest.mark.parametrize("name", ["two\nlines", "cr\ronly", "x\\|y", "ends\\"])
def test_markdown_row_of_a_name_with_a_line_break_or_backslash_pipe_stays_one_row(
    tmp_path: Path, capsys: Any, name: str
) -> None:
    """A line break ended the row there (the rest of it, the status too, fell out of the table); ``\\|`` was
    written ``\\\\|``, whose escaped backslash let the pipe split the cell."""
    values = {(name, 0, TIME): [100.0, 101.0, 99.0], ("plain", 0, TIME): [5.0, 5.1, 4.9]}
    res = make_result(values, params=["label"], configs=[(name,)])
    path = res.save(tmp_path / "r.json")
    assert main(["compare", str(path), str(path), "--format", "markdown"]) == 0
    check_markdown(capsys.readouterr().out, nsightx.compare(path, path))


@pytest.mark.parametrize("name", ["two\nlines", "cr\ronly", "esc\x1b[2Jx", "ls\u2028ps", "a\\nb"])
def test_text_row_of_a_name_with_a_line_break_stays_one_line(
    tmp_path: Path, capsys: Any, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    """The text table (the default ``--format``) wrote a name's line break raw: the row ended there and its
    status and ``REGRESSION`` mark stood on a line of their own; a terminal escape sequence was written raw."""
    monkeypatch.delenv("COLUMNS", raising=False)
    values = {(name, 0, TIME): [100.0, 101.0, 99.0, 100.5], ("plain", 0, TIME): [5.0, 5.1, 4.9, 5.05]}
    new_values = {(name, 0, TIME): [200.0, 202.0, 198.0, 201.0], ("plain", 0, TIME): [5.0, 5.1, 4.9, 5.05]}
    base = make_result(values, params=["label"], configs=[(name,)]).save(tmp_path / "b.json")
    new = make_result(new_values, params=["label"], configs=[(name,)]).save(tmp_path / "n.json")
    main(["compare", str(base), str(new), "--alpha", "0.5"])
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\u2028" not in out
    frame = nsightx.compare(base, new, alpha=0.5)
    check_text(out, frame)
    assert bool(frame["Regression"].any())  # the mark is on the slowed row's own line (check_text)
