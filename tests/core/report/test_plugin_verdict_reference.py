"""The pytest plugin's verdicts and report lines against ``nsightx compare`` on the same stored folders.

docs/ci.md section 1: the plugin compares each test's result with its baseline by ``nsightx compare``'s statistics
and table, and ``nsightx compare perf-baseline perf-new`` compares two such folders from the command line (tests
matched by node id). So on the same inputs, with no re-measure (``--nsightx-confirm=0``, the only part the command
line cannot do), they must agree: per test, every row's status, change, floor and verdict; the one-line summary
the plugin prints for the test and the verdict line of the command on that test's rows; the plugin's table (with
``-v``) and the command's table, row by row; and the session fails exactly when the command's gate fails, plus the
failures the docs give only the plugin (a session that compared nothing).

Random sessions of several tests, each a stored history (``test_gate_reference.stories``: drift, noise, other
devices, negative derived metrics) and a new process, some tests without a baseline, some baselines that no test
measured; random thresholds and ``--require-all``. The new results are saved by the gate itself
(``--nsightx-save``), the folder the command reads.
"""

from __future__ import annotations

import json
import os
from typing import Any

import pandas as pd
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from test_compare_formats_reference import text_table
from test_gate_reference import Story, stories, tmp

from nsightx._report import history
from nsightx._report.compare import gate_failed
from nsightx._report.pytest_gate import Gate, GateSettings
from nsightx._report.views import summary
from nsightx.cli import main

EXAMPLES = int(os.environ.get("NSIGHTX_REFERENCE_EXAMPLES", "20"))
"""Examples per run (more while hunting: ``NSIGHTX_REFERENCE_EXAMPLES=300``)."""
NODES = ("perf/test_mm.py::test_mm[64]", "perf/test_mm.py::test_mm[128]", "perf/test_copy.py::test_copy")


@st.composite
def sessions(draw: Any) -> tuple[dict[str, Story], dict[str, str], float, bool]:
    """Per node: a story and what the session does with it (``both``, ``no baseline``, ``not measured``)."""
    nodes = draw(st.lists(st.sampled_from(NODES), min_size=1, max_size=3, unique=True))
    told = {n: draw(st.sampled_from(["both", "both", "both", "no baseline", "not measured"])) for n in nodes}
    plot = {n: draw(stories(max_stored=4)) for n in nodes}
    for s in plot.values():
        s.ref, s.size = None, history.HISTORY  # the plugin's defaults: the newest save, a window of 5
    threshold = draw(st.sampled_from([1.0, 5.0, 10.0, 50.0]))
    return plot, told, threshold, draw(st.booleans())


def _cli(capsys: Any, *args: str) -> tuple[int, str]:
    capsys.readouterr()
    code = main(["compare", *args])
    return code, capsys.readouterr().out


def _same_rows(mine: pd.DataFrame, theirs: pd.DataFrame) -> None:
    """The plugin's frame of one test and the command's rows of that test: the same rows, verdicts and numbers."""
    cols = ["Annotation", "Metric", "n"]
    a = mine.sort_values(cols).reset_index(drop=True)
    b = theirs.drop(columns=["Test"]).sort_values(cols).reset_index(drop=True)
    for col in ("Status", "Regression", "BaselineRuns", "NewRuns", "BaselineProcesses"):
        assert a[col].tolist() == b[col].tolist(), (col, a[col].tolist(), b[col].tolist())
    for col in ("ChangePct", "NoiseFloorPct", "PValueAdj", "Ratio"):
        pd.testing.assert_series_equal(a[col].astype(float), b[col].astype(float), check_names=False, obj=col)


def _tables(lines: list[str]) -> dict[str, list[dict[str, str]]]:
    """The rows of each test's table in the plugin's verbose report (a test's title, then its table)."""
    out = {}
    for i, ln in enumerate(lines):
        if "  (baseline " in ln:
            out[ln.split("  (baseline ")[0]] = text_table(lines[i + 1])[1]
    return out


def _same_table(mine: list[dict[str, str]], theirs: list[dict[str, str]], node: str) -> None:
    """Each row of the plugin's table is a row of the command's for that test, in every column both show."""
    rows = [r for r in theirs if r.get("Test") == node]
    assert len(rows) == len(mine), (mine, rows)
    for row in mine:
        diff = [{k: (v, r.get(k)) for k, v in row.items() if r.get(k, v) != v} for r in rows]
        assert any(not d for d in diff), diff


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    derandomize="NSIGHTX_REFERENCE_RANDOM" not in os.environ,
)
@given(sessions())
def test_the_plugin_agrees_with_nsightx_compare_on_the_same_folders(
    capsys: pytest.CaptureFixture[str], session: tuple[dict[str, Story], dict[str, str], float, bool]
) -> None:
    plot, told, threshold, require_all = session
    root = tmp()
    base, new = root / "base", root / "new"
    base.mkdir()
    for node, story in plot.items():
        if told[node] != "no baseline":
            for p in story.stored:
                history.save(base, node, p.result())
    gate = Gate(GateSettings(compare_dir=base, save_dir=new, threshold_pct=threshold, require_all=require_all))
    for node, story in plot.items():
        if told[node] != "not measured":
            gate.record(node, story.new.result())
    if not new.is_dir():
        return  # no test measured: nothing for the command to read (the plugin fails: test_pytest_gate.py)
    flags = ["--threshold", f"{threshold:g}", *(["--require-all"] if require_all else [])]
    code, out = _cli(capsys, str(base), str(new), *flags, "--format", "json")
    if code == 2:  # nothing in both folders to compare: the gate compared nothing either, and fails
        assert not any(o.frame is not None for o in gate.outcomes) and gate.failures(), gate.outcomes
        return
    doc = json.loads(out)
    theirs = pd.DataFrame(doc["rows"])
    lines = gate.report_lines()
    verbose_tables = _tables(gate.report_lines(verbose=True))
    _, text = _cli(capsys, str(base), str(new), *flags)
    text_rows = text_table(text)[1]
    for outcome in gate.outcomes:
        mine = outcome.frame
        if mine is None:
            assert outcome.status == "no baseline" and told[outcome.nodeid] == "no baseline", outcome
            continue
        _same_rows(mine, theirs[theirs["Test"] == outcome.nodeid])
        if outcome.regressed:  # its table, not a line
            assert any(ln.startswith(f"{outcome.nodeid}  (baseline ") for ln in lines), lines
        else:
            assert f"{outcome.nodeid}: {summary(mine)}" in lines, lines
        _same_table(verbose_tables[outcome.nodeid], text_rows, outcome.nodeid)
    compared = [o for o in gate.outcomes if o.frame is not None]
    event(f"{len(compared)} test(s) compared, {sum(o.regressed for o in compared)} failing")
    failing_tests = {o.nodeid for o in compared if gate_failed(o.frame)}
    their_failing = {r["Test"] for r in doc["rows"] if r["Regression"]}
    if not require_all:
        assert failing_tests == their_failing, (failing_tests, their_failing)
        want = bool(failing_tests) or not compared
        assert bool(gate.failures()) == want, (gate.failures(), doc["verdict"])
        assert code == int(doc["failed"]) == int(bool(their_failing))
    else:  # a test or baseline on one side only fails both (the command: its rows are "only in" one side)
        lone = any(told[n] != "both" for n in plot) or any(gate_failed(o.frame) for o in compared)
        assert bool(gate.failures()) == (lone or bool(their_failing) or not compared), gate.failures()
        assert bool(doc["failed"]) == (lone or bool(their_failing)), doc["verdict"]
