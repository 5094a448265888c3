"""Raw JSON-lines files: header, sweep ids, reading a stopped sweep back, torn and damaged lines."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest
from _paths import TESTS

import nsightx
from nsightx import ResultSchemaError
from nsightx._results.raw import read_runs
from nsightx._results.sink import read_raw

SILENT = nsightx.VerbosityLevel.SILENT
WORKLOAD = TESTS / "out_workload.py"


def sweep(tmp_path, runs=2):
    @nsightx.analyze.kernel(
        configs=[(1, "x"), (2, object())],
        runs=runs,
        warmup=0,
        backend="host",
        verbosity=SILENT,
        output_prefix=str(tmp_path) + "/",
    )
    def f(n, label):
        with nsightx.annotate("a"):
            sum(range(n))

    res = f()
    return res, Path(str(res.environment["raw_data"]))


def test_raw_file_has_a_header_then_runs_that_name_their_sweep(plugin_host, tmp_path):
    res, raw = sweep(tmp_path)
    lines = [json.loads(line) for line in raw.read_text().splitlines()]
    header, runs = lines[0], lines[1:]
    assert header["kind"] == "nsightx-raw" and header["format"] == 1
    assert header["sweep"] == res.environment["sweep"] and len(header["sweep"]) == 32
    assert header["nsightx_version"] == nsightx.__version__ and header["created"]
    plan = header["plan"]
    assert plan["function"] == "f" and plan["params"] == ["n", "label"] and plan["backend"] == "host"
    assert plan["configs"][0] == [1, "x"] and plan["configs"][1][1].startswith("<object object")  # repr
    assert [(r["config"], r["run"]) for r in runs] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    assert {r["sweep"] for r in runs} == {header["sweep"]}


def test_load_of_a_raw_file_gives_the_runs_with_parameter_columns(plugin_host, tmp_path):
    res, raw = sweep(tmp_path)
    back = nsightx.load(raw)
    assert back is not None and nsightx.load_raw(raw).data.runs == back.data.runs
    df = back.to_dataframe()
    assert df["n"].tolist() == [1, 2] and df["label"].tolist()[0] == "x" and df["NumRuns"].tolist() == [2, 2]
    assert df["AvgValue"].tolist() == res.to_dataframe()["AvgValue"].tolist()
    assert back.environment["sweep"] == res.environment["sweep"] and back.environment["raw_data"] == str(raw)


def test_sigkill_midway_leaves_exactly_the_completed_runs(tmp_path):
    signal_file = tmp_path / "ready"
    proc = subprocess.Popen([sys.executable, str(WORKLOAD), str(tmp_path / "out") + "/", str(signal_file), "4"])
    try:
        deadline = time.monotonic() + 60
        while not signal_file.exists():
            assert proc.poll() is None, "the sweep ended before it was killed"
            assert time.monotonic() < deadline
            time.sleep(0.02)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    out = tmp_path / "out"
    assert sorted(p.name for p in out.iterdir()) == ["raw_data-victim-0.jsonl"]
    df = nsightx.load(out / "raw_data-victim-0.jsonl").to_dataframe()  # 4 of 3 configs x 3 runs were done
    assert df["n"].tolist() == [10, 20] and df["NumRuns"].tolist() == [3, 1]
    assert df["Annotation"].tolist() == ["work", "work"]
    runs = nsightx.load(out / "raw_data-victim-0.jsonl").runs_dataframe()
    assert list(zip(runs["n"], runs["Run"], strict=True)) == [(10, 0), (10, 1), (10, 2), (20, 0)]


def test_unfinished_last_line_is_skipped_with_a_warning(plugin_host, tmp_path):
    _, raw = sweep(tmp_path)
    text = raw.read_text()
    raw.write_text(text[: len(text) - 40])  # killed while writing the last run
    with pytest.warns(RuntimeWarning, match=r"skipped the unfinished last line 5.*3 complete run line"):
        df = nsightx.load(raw).to_dataframe()
    assert df["NumRuns"].tolist() == [2, 1]


@pytest.mark.parametrize("reader", [read_raw, nsightx.load])
def test_damaged_line_in_the_middle_is_an_error_naming_it(plugin_host, tmp_path, reader):
    _, raw = sweep(tmp_path)
    lines = raw.read_text().splitlines(keepends=True)
    lines[2] = lines[2][:30] + "\n"
    raw.write_text("".join(lines))
    with pytest.raises(ResultSchemaError, match=r"line 3 is damaged"):
        reader(raw)


def test_run_line_missing_a_field_names_line_and_field(plugin_host, tmp_path):
    _, raw = sweep(tmp_path)
    lines = raw.read_text().splitlines(keepends=True)
    run = json.loads(lines[3])
    del run["records"][0]["value"]
    lines[3] = json.dumps(run) + "\n"
    raw.write_text("".join(lines))
    with pytest.raises(ResultSchemaError, match=r"line 4 is not a run: field 'records\[0\].value': missing"):
        nsightx.load(raw)


def test_line_of_another_sweep_is_an_error(plugin_host, tmp_path):
    _, raw = sweep(tmp_path)
    _, other = sweep(tmp_path)
    lines = raw.read_text().splitlines(keepends=True)
    raw.write_text("".join(lines) + other.read_text().splitlines(keepends=True)[1])
    with pytest.raises(ResultSchemaError, match=r"line 6 belongs to sweep '[0-9a-f]{32}', not to"):
        nsightx.load(raw)


def test_newer_raw_format_is_refused_with_upgrade_hint(plugin_host, tmp_path):
    _, raw = sweep(tmp_path)
    lines = raw.read_text().splitlines(keepends=True)
    header = json.loads(lines[0])
    header["format"] = 7
    raw.write_text(json.dumps(header) + "\n" + "".join(lines[1:]))
    with pytest.raises(ResultSchemaError, match=r"format v7.*upgrade nsightx"):
        nsightx.load(raw)


def test_raw_file_without_header_is_read_by_read_raw_but_not_load(plugin_host, tmp_path):
    _, raw = sweep(tmp_path)
    lines = raw.read_text().splitlines(keepends=True)
    raw.write_text("".join(line.replace(',"sweep":', ',"x":').split(',"x":')[0] + "}\n" for line in lines[1:]))
    assert [(r.config, r.run) for r in read_raw(raw)] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    assert read_runs(raw)[0] is None
    with pytest.raises(ResultSchemaError, match="has no header line"):
        nsightx.load(raw)


@pytest.mark.parametrize("reader", [nsightx.load, nsightx.load_raw, read_raw])
def test_raw_file_cut_inside_its_header_is_one_error_and_no_warning(plugin_host, tmp_path, reader):
    """Issue 38: a warning with a private module's source line, then an error saying the header is missing."""
    _, raw = sweep(tmp_path)
    raw.write_bytes(raw.read_bytes()[:150])  # the sweep was stopped while writing its header line
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ResultSchemaError) as info:
            reader(raw)
    message = str(info.value)
    assert message == (
        f"{str(raw)!r} ends inside its header line: the sweep was stopped before its first run was written, so "
        "the file holds no run to load"
    )
    assert "_results" not in message and "no header line" not in message


@pytest.mark.parametrize("reader", [nsightx.load, nsightx.load_raw])
def test_warnings_about_a_stopped_sweep_point_at_the_callers_line(plugin_host, tmp_path, reader):
    _, raw = sweep(tmp_path)
    text = raw.read_text()
    raw.write_text(text[: len(text) - 40])  # killed while writing the last run
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        reader(raw)
    assert {Path(w.filename).name for w in caught} == {Path(__file__).name}, [
        f"{w.filename}:{w.lineno} {w.message}" for w in caught
    ]


def test_a_file_without_header_names_the_public_reader(plugin_host, tmp_path):
    _, raw = sweep(tmp_path)
    lines = raw.read_text().splitlines(keepends=True)
    raw.write_text("".join(lines[1:]))
    with pytest.raises(ResultSchemaError, match=r"nsightx\.ext\.read_raw reads its runs") as info:
        nsightx.load(raw)
    assert "_results" not in str(info.value)
    from nsightx.ext import read_raw as public

    assert len(public(raw)) == 4
