"""``nsightx.load`` refuses what is not one whole, consistent result, and says which file, field or line, and why.

Saved results (schema 1 JSON) and raw JSON-lines files of real host-backend sweeps, edited in one place each.
The fixtures under ``tests/fixtures/results/`` were written by earlier versions (``make.py`` there says how) and
must load unchanged.
"""

from __future__ import annotations

import json
import math
import re
import warnings
from pathlib import Path

import _paths
import pytest

import nsightx
from nsightx import IncompleteResultWarning, NsightxError, NsightxWarning, ResultSchemaError
from nsightx._results.sink import read_raw

SILENT = nsightx.VerbosityLevel.SILENT
FIXTURES = _paths.FIXTURES / "results"


def sweep(tmp_path: Path, annotation: str = "a", runs: int = 3) -> tuple[nsightx.ProfileResults, Path, Path]:
    """A host sweep of 2 configs x ``runs`` runs, two regions; returns the result, its saved file and its raw file."""

    @nsightx.analyze.kernel(
        configs=[(1,), (2,)],
        runs=runs,
        warmup=0,
        backend="host",
        verbosity=SILENT,
        output_prefix=str(tmp_path / "out") + "/",
    )
    def f(n):
        with nsightx.annotate(annotation):
            sum(range(100 * n))
        with nsightx.annotate("b"):
            pass

    res = f()
    return res, res.save(tmp_path / "r.json"), Path(str(res.environment["raw_data"]))


def edited(path: Path, edit) -> Path:
    """``path`` (a saved result) after ``edit(doc)`` changed its parsed JSON in place."""
    doc = json.loads(path.read_text())
    edit(doc)
    path.write_text(json.dumps(doc))
    return path


def refused(path: Path, pattern: str) -> str:
    with pytest.raises(ResultSchemaError, match=pattern) as info:
        nsightx.load(path)
    assert str(path) in str(info.value)
    return str(info.value)


# --- saved results: fields, types, indices, duplicates -----------------------------------------------------------


@pytest.mark.parametrize("field", ["schema_version", "runs", "values", "environment"])
def test_a_missing_top_level_field_is_refused_by_name(plugin_host, tmp_path, field):
    _, path, _ = sweep(tmp_path)
    edited(path, lambda doc: doc.pop(field))
    refused(path, rf"field '{field}' is missing; every saved result has schema_version, .*runs, values")


@pytest.mark.parametrize("config", [2, 7, -1, -2])
def test_a_value_config_out_of_range_is_refused_negative_too(plugin_host, tmp_path, config):
    _, path, _ = sweep(tmp_path)
    edited(path, lambda doc: doc["values"][4].update(config=config))
    refused(path, rf"values\[4\]\.config is {config}; expected a config index from 0 to 1 \(plan.configs has 2\)")


def test_a_value_run_out_of_range_is_refused(plugin_host, tmp_path):
    _, path, _ = sweep(tmp_path)
    edited(path, lambda doc: doc["values"][1].update(run=3))
    refused(path, r"values\[1\]\.run is 3; expected a run index from 0 to 2 \(plan.runs is 3\)")


def test_a_run_out_of_range_is_refused(plugin_host, tmp_path):
    _, path, _ = sweep(tmp_path)

    def edit(doc):
        run = doc["runs"][2]
        run["config"] = 5
        for entry in run["records"] + run["regions"]:
            entry["config"] = 5

    edited(path, edit)
    refused(path, r"runs\[2\]\.config is 5; expected a config index from 0 to 1")


def test_a_duplicated_value_is_refused_naming_both_entries(plugin_host, tmp_path):
    res, path, _ = sweep(tmp_path)
    assert res.to_dataframe()["NumRuns"].tolist() == [3, 3, 3, 3]
    edited(path, lambda doc: doc["values"].append(doc["values"][2]))
    message = refused(path, r"values\[2\] and values\[12\] are both annotation 'a', config 0, run 1")
    assert "stored once" in message


def test_a_duplicated_run_is_refused_naming_both_entries(plugin_host, tmp_path):
    _, path, _ = sweep(tmp_path)
    edited(path, lambda doc: doc["runs"].append(doc["runs"][4]))
    refused(path, r"runs\[4\] and runs\[6\] are both config 1 run 1; each run is stored once")


def test_a_duplicated_record_is_refused(plugin_host, tmp_path):
    _, path, _ = sweep(tmp_path)
    edited(path, lambda doc: doc["runs"][1]["records"].append(doc["runs"][1]["records"][0]))
    refused(path, r"runs\[1\]\.records\[0\] and runs\[1\]\.records\[2\] are the same entry")


def test_a_record_filed_under_another_run_is_refused(plugin_host, tmp_path):
    _, path, _ = sweep(tmp_path)
    edited(path, lambda doc: doc["runs"][1]["records"][1].update(run=0))
    refused(path, r"runs\[1\]\.records\[1\] is config 0 run 0, but runs\[1\] is config 0 run 1")


def test_a_value_of_a_run_that_is_not_there_is_refused(plugin_host, tmp_path):
    _, path, _ = sweep(tmp_path)
    edited(path, lambda doc: doc["runs"].pop(5))
    refused(path, r"values\[10\] is config 1 run 2, but runs holds no such run")


@pytest.mark.parametrize(
    ("where", "bad", "path_re"),
    [
        (("values", 3, "config"), "0", r"values\[3\]\.config"),
        (("values", 3, "value"), "12.5", r"values\[3\]\.value"),
        (("values", 3, "run"), 1.0, r"values\[3\]\.run"),
        (("runs", 0, "records", 0, "seq"), True, r"runs\[0\]\.records\[0\]\.seq"),
        (("plan", "runs"), "3", r"plan\.runs"),
    ],
)
def test_a_field_of_the_wrong_type_is_refused_not_converted(plugin_host, tmp_path, where, bad, path_re):
    _, path, _ = sweep(tmp_path)

    def edit(doc):
        node = doc
        for key in where[:-1]:
            node = node[key]
        node[where[-1]] = bad

    edited(path, edit)
    refused(path, rf"is not an nsightx result: field '{path_re}': Input should be .*\(found {bad!r}\)")


def test_a_config_with_the_wrong_number_of_values_is_refused(plugin_host, tmp_path):
    _, path, _ = sweep(tmp_path)
    edited(path, lambda doc: doc["plan"]["configs"][1].append(9))
    refused(path, r"plan\.configs\[1\] has 2 value\(s\); expected 1, one per parameter of plan\.params \['n'\]")


def test_a_plan_naming_a_metric_twice_is_refused(plugin_host, tmp_path):
    _, path, _ = sweep(tmp_path)
    edited(path, lambda doc: doc["plan"]["metrics"].append(doc["plan"]["metrics"][0]))
    refused(path, r"plan\.metrics names 'host__time_duration\.sum' twice")


def test_config_hosts_of_the_wrong_length_is_refused(plugin_host, tmp_path):
    _, path, _ = sweep(tmp_path)
    edited(path, lambda doc: doc.update(config_hosts=["h1"]))
    refused(path, r"config_hosts has 1 entries; expected none or 2")


def test_a_version_that_is_not_a_number_is_a_damaged_file_not_an_upgrade(plugin_host, tmp_path):
    _, path, _ = sweep(tmp_path)
    edited(path, lambda doc: doc.update(schema_version="1"))
    message = refused(path, r"field 'schema_version': Input should be 1 or 2")
    assert "upgrade" not in message


def test_compare_refuses_a_damaged_result_with_the_same_error(plugin_host, tmp_path):
    res, path, _ = sweep(tmp_path)
    edited(path, lambda doc: doc["values"].append(doc["values"][0]))
    with pytest.raises(ResultSchemaError, match=r"values\[0\] and values\[12\]"):
        nsightx.compare(path, res)


# --- bytes: empty, byte-order mark, invalid UTF-8 ------------------------------------------------------------


@pytest.mark.parametrize("kind", ["result", "raw"])
def test_an_empty_file_is_called_empty(plugin_host, tmp_path, kind):
    _, path, raw = sweep(tmp_path)
    target = path if kind == "result" else raw
    target.write_bytes(b"")
    message = refused(target, r"is empty \(0 bytes\)")
    assert "not an nsightx result" not in message


@pytest.mark.parametrize("kind", ["result", "raw"])
def test_a_byte_order_mark_is_named_at_byte_0(plugin_host, tmp_path, kind):
    _, path, raw = sweep(tmp_path)
    target = path if kind == "result" else raw
    target.write_bytes(b"\xef\xbb\xbf" + target.read_bytes())
    refused(target, r"starts with a UTF-8 byte-order mark \(BOM\) at byte 0 \(ef bb bf\).*remove the first 3 bytes")


def test_invalid_utf8_in_a_result_is_named_by_line_and_byte(plugin_host, tmp_path):
    _, path, _ = sweep(tmp_path)
    data = bytearray(path.read_bytes())
    at = data.index(b'"annotation":"a"') + len('"annotation":"')
    data[at] = 0xFF
    path.write_bytes(bytes(data))
    refused(path, rf"holds invalid UTF-8 at line 1 byte {at + 1} \(byte {at} of the file, ff: invalid start byte\)")


def test_invalid_utf8_in_a_raw_file_is_named_by_line_and_byte(plugin_host, tmp_path):
    _, _, raw = sweep(tmp_path)
    lines = raw.read_bytes().split(b"\n")
    column = lines[2].index(b'"kernel":"region"') + len('"kernel":"r')
    lines[2] = lines[2][:column] + b"\xc3\x28" + lines[2][column + 2 :]
    raw.write_bytes(b"\n".join(lines))
    refused(raw, rf"holds invalid UTF-8 at line 3 byte {column + 1} \(byte \d+ of the file, c3: invalid continuation")


def test_a_raw_file_cut_inside_a_character_skips_the_unfinished_line(plugin_host, tmp_path):
    _, _, raw = sweep(tmp_path, annotation="größe")
    data = raw.read_bytes()
    cut = data.rindex("ß".encode()) + 1  # between the two bytes of the last line's "ß"
    raw.write_bytes(data[:cut])
    with (
        pytest.warns(IncompleteResultWarning, match=r"holds 5 of 6"),
        pytest.warns(RuntimeWarning, match=r"skipped the unfinished last line 7"),
    ):
        back = nsightx.load(raw)
    assert back.completeness.held == 5


# --- raw files: duplicated lines, indices, types, an incomplete sweep --------------------------------------------


def test_a_duplicated_raw_line_is_refused_naming_both_lines(plugin_host, tmp_path):
    _, _, raw = sweep(tmp_path)
    lines = raw.read_text().splitlines(keepends=True)
    raw.write_text("".join([*lines, lines[2]]))
    message = refused(raw, r"lines 3 and 8 both hold config 0 run 1")
    assert "More than one" not in message


def test_a_raw_run_outside_the_plan_is_refused_naming_the_line(plugin_host, tmp_path):
    _, _, raw = sweep(tmp_path)
    lines = raw.read_text().splitlines(keepends=True)
    run = json.loads(lines[3])
    run["config"] = 3
    for entry in run["records"] + run["regions"]:
        entry["config"] = 3
    lines[3] = json.dumps(run) + "\n"
    raw.write_text("".join(lines))
    refused(raw, r"line 4\.config is 3; expected a config index from 0 to 1 .*the header's plan does not hold it")


def test_a_raw_header_whose_configs_do_not_match_its_parameters_is_refused(plugin_host, tmp_path):
    _, _, raw = sweep(tmp_path)
    lines = raw.read_text().splitlines(keepends=True)
    header = json.loads(lines[0])
    header["plan"]["configs"][0] = []
    raw.write_text(json.dumps(header) + "\n" + "".join(lines[1:]))
    refused(raw, r"line 1: plan\.configs\[0\] has 0 value\(s\); expected 1, one per parameter")


def test_a_raw_line_with_a_number_as_text_is_refused(plugin_host, tmp_path):
    _, _, raw = sweep(tmp_path)
    lines = raw.read_text().splitlines(keepends=True)
    lines[2] = lines[2].replace('{"config":0,"run":1,', '{"config":"0","run":1,', 1)
    raw.write_text("".join(lines))
    refused(raw, r"line 3 is not a run: field 'config': Input should be a valid integer \(found '0'\)")


def test_an_incomplete_raw_sweep_loads_with_a_warning_saying_how_much_is_there(plugin_host, tmp_path):
    _, _, raw = sweep(tmp_path)
    lines = raw.read_text().splitlines(keepends=True)
    raw.write_text("".join(lines[:5]))  # header + 4 of the 6 runs
    with pytest.warns(IncompleteResultWarning, match=r"holds 4 of 6 planned runs \(2 configs x 3 runs\)") as got:
        back = nsightx.load(raw)
    assert issubclass(got[0].category, NsightxWarning) and issubclass(got[0].category, RuntimeWarning)
    done = back.completeness
    assert (done.held, done.planned, done.complete) == (4, 6, False)
    assert "holds 4 of 6 planned runs" in repr(back)
    assert back.to_dataframe()["NumRuns"].tolist() == [3, 3, 1, 1]
    saved = back.save(tmp_path / "partial.json")
    with pytest.warns(IncompleteResultWarning, match=r"holds 4 of 6 planned runs"):
        assert nsightx.load(saved).completeness == done


def test_a_complete_result_loads_without_a_warning(plugin_host, tmp_path):
    res, path, raw = sweep(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert nsightx.load(path).data == res.data
        assert nsightx.load(raw).completeness.complete


# --- NaN, and files of earlier versions ------------------------------------------------------------------------


def test_a_failed_region_round_trips_as_nan(plugin_host, tmp_path):
    @nsightx.analyze.kernel(configs=[(1,), (2,)], runs=2, warmup=0, backend="host", verbosity=SILENT)
    def f(n):
        with nsightx.annotate("a", ignore_failures=True):
            if n == 2:
                raise ValueError("on purpose")

    with pytest.warns(RuntimeWarning):
        res = f()
    path = res.save(tmp_path / "r.json")
    assert path.read_text().count('"value":null') == 2
    back = nsightx.load(path)
    assert [math.isnan(v.value) for v in back.data.values] == [False, False, True, True]
    assert back.to_dataframe()["NumRuns"].tolist() == [2, 0]


def test_with_nan_values_the_problem_named_is_the_bad_field_not_a_null(plugin_host, tmp_path):
    @nsightx.analyze.kernel(configs=[(1,), (2,)], runs=2, warmup=0, backend="host", verbosity=SILENT)
    def f(n):
        with nsightx.annotate("a", ignore_failures=True):
            if n == 2:
                raise ValueError("on purpose")

    with pytest.warns(RuntimeWarning):
        path = f().save(tmp_path / "r.json")
    edited(path, lambda doc: doc["values"][3].update(run="1"))
    refused(path, r"field 'values\[3\]\.run': Input should be a valid integer \(found '1'\)")


def test_a_raw_record_stored_as_null_is_read_as_nan(plugin_host, tmp_path):
    _, _, raw = sweep(tmp_path)
    lines = raw.read_text().splitlines(keepends=True)
    lines[2] = lines[2].replace('"value":', '"value":null,"was":', 1)
    lines[2] = re.sub(r',"was":[-0-9.e+]+', "", lines[2], count=1)
    raw.write_text("".join(lines))
    back = nsightx.load(raw)
    assert math.isnan(back.data.runs[1].records[0].value) and math.isnan(back.data.values[2].value)


def _same_values(loaded: nsightx.ProfileResults, expected: dict) -> None:
    got = [[v.annotation, v.config, v.run, v.metric, v.value, v.kernel] for v in loaded.data.values]
    assert len(got) == len(expected["values"])
    for g, e in zip(got, expected["values"], strict=True):
        assert g[:4] + g[5:] == e[:4] + e[5:]
        assert (math.isnan(g[4]) and math.isnan(e[4])) or g[4] == e[4]
    runs = [[r.config, r.run, len(r.records), len(r.regions), len(r.collectors)] for r in loaded.data.runs]
    assert runs == expected["runs"]


@pytest.mark.parametrize("version", sorted(p.name for p in FIXTURES.iterdir() if p.is_dir()))
def test_results_saved_by_earlier_versions_load_unchanged(plugin_host, version):
    folder = FIXTURES / version
    expected = json.loads((folder / "expected.json").read_text())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _same_values(nsightx.load(folder / "result.json"), expected)
    raw = folder / "raw_data.jsonl"
    if '"kind":"nsightx-raw"' in raw.read_text().splitlines()[0]:
        _same_values(nsightx.load(raw), expected)
    else:  # written before raw files had a header: read_raw reads the runs, load says why it cannot
        assert [[r.config, r.run] for r in read_raw(raw)] == [r[:2] for r in expected["runs"]]
        with pytest.raises(NsightxError, match="has no header line"):
            nsightx.load(raw)
