"""The pytest plugin's gate as plain Python: verdicts the pytester sessions do not reach, on given per-run values.

The results are real ``ProfileResults`` (``_synthetic.make_result``: the schema, aggregation, save and load of a
measured one) with chosen values, so each verdict is deterministic;
tests/plugins/pytest_plugin/test_pytest_plugin.py runs the same gate in real pytest sessions on measured ones.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from _synthetic import make_result, noisy
from test_compare_formats_reference import check_markdown

from nsightx._report import history
from nsightx._report.pytest_gate import Gate, GateSettings, result_filename

NODE = "perf/test_mm.py::test_mm"


def result(configs, scale=1.0, seed=0):
    values = {
        ("mm", i, "gpu__time_duration.sum"): noisy(10_000.0 * scale, 0.01, 20, seed + i) for i in range(len(configs))
    }
    return make_result(values, params=["n"], configs=[(n,) for n in configs])


def gate(tmp_path: Path, **settings) -> Gate:
    base = tmp_path / "base"
    base.mkdir(exist_ok=True)
    return Gate(GateSettings(compare_dir=base, **settings))


def test_a_row_only_one_side_has_fails_only_with_require_all(tmp_path):
    result([1024]).save(tmp_path / "base" / result_filename(NODE))
    for require_all, failed in ((False, False), (True, True)):
        g = gate(tmp_path, require_all=require_all)
        g.record(NODE, result([1024, 2048], seed=50))
        assert bool(g.failures()) is failed
        assert not any("significant slowdown" in reason for reason in g.failures())
    assert g.failures() == ["1 test(s) with a config or metric only one side has (--nsightx-require-all)"]
    assert g.verdict().startswith("nsightx: FAIL: 1 test(s) with a config or metric only one side has")
    assert any("only in new" in line for line in g.report_lines())  # its table is shown


def test_a_file_that_is_not_a_result_is_a_bad_baseline(tmp_path):
    g = gate(tmp_path)
    (tmp_path / "base" / result_filename(NODE)).write_text("{}")
    g.record(NODE, result([1024]))
    assert [o.status for o in g.outcomes] == ["bad baseline"]
    assert g.failures()[0] == "1 test(s) whose result could not be compared with the baseline"
    (line,) = g.report_lines()
    assert line.startswith(f"{NODE}: BAD BASELINE: ") and "is not an nsightx result" in line


def test_slowdown_and_markdown(tmp_path):
    g = gate(tmp_path, save_dir=tmp_path / "base")  # the same folder: the baseline is read before the new save
    result([1024, 2048]).save(tmp_path / "base" / result_filename(NODE))  # a file of the plugin before history
    g.record(NODE, result([1024, 2048], scale=1.2, seed=100))
    assert g.failures() == ["1 test(s) with a significant slowdown larger than 5%"]
    md = g.markdown()
    assert md.startswith("## nsightx: FAIL: 1 test(s) with a significant slowdown larger than 5%\n")
    assert f"#### `{NODE}`" in md and md.count("REGRESSION") == 2
    (saved,) = g.saved
    assert saved.parent == tmp_path / "base" / history.test_folder(NODE) and saved.name.startswith("0001_testhost_")
    g2 = gate(tmp_path)
    g2.record(NODE, result([1024, 2048], scale=1.2, seed=100))  # the newest save is the baseline
    assert g2.outcomes[0].frame is not None and (g2.outcomes[0].frame["Status"] == "no change").all()
    g3 = gate(tmp_path, baseline_ref="0")  # save 0: the old file
    g3.record(NODE, result([1024, 2048], scale=1.2, seed=100))
    assert g3.failures() == ["1 test(s) with a significant slowdown larger than 5%"]


def test_unmatched_baselines_are_only_files_this_plugin_wrote(tmp_path):
    g = gate(tmp_path)
    for name in ("README.md", "result-mm-0.json", result_filename("perf/test_old.py::test_old")):
        (tmp_path / "base" / name).write_text("{}")
    assert [p.name for p in g.unmatched_baselines()] == [history.test_folder("perf/test_old.py::test_old")]
    assert g.failures() == [
        "nothing was compared: no test recorded a result with the nsightx_bench fixture (all skipped, failed or "
        "deselected?)"
    ]
    strict = gate(tmp_path, require_all=True)
    assert "1 baseline(s) no test measured (--nsightx-require-all)" in strict.failures()


def test_save_only_never_fails(tmp_path):
    g = Gate(GateSettings(save_dir=tmp_path / "out"))
    g.not_recorded(NODE, "the test did not pass")
    assert g.failures() == [] and g.verdict() == f"nsightx: saved 0 result(s) to {str(tmp_path / 'out')!r}"
    assert g.report_lines() == [f"{NODE}: NOT RECORDED: the test did not pass"]


def test_confirmation_remeasures_only_the_regressed_configs(tmp_path):
    """2048 is planted 20% slower; a re-measure that is not clears it, one that is keeps it, twice."""
    history.save(tmp_path / "base", NODE, result([1024, 2048]))
    sizes = [1024, 2048]

    def first() -> object:
        values = {("mm", 0, "gpu__time_duration.sum"): noisy(10_000.0, 0.01, 20, 50)}
        values[("mm", 1, "gpu__time_duration.sum")] = noisy(12_000.0, 0.01, 20, 51)
        return make_result(values, params=["n"], configs=[(n,) for n in sizes])

    for scale, failed, note in ((1.0, False, "cleared by re-measure 1 ("), (1.2, True, "confirmed by 2 re-measure(s)")):
        asked: list[list[int]] = []

        def remeasure(indices, scale=scale, asked=asked):
            asked.append(list(indices))
            return result([sizes[i] for i in indices], scale=scale, seed=200 + len(asked))

        g = gate(tmp_path)
        g.record(NODE, first(), remeasure)
        assert bool(g.failures()) is failed
        assert asked == ([[1]] if not failed else [[1], [1]])  # only the 2048 config, once or twice
        frame = g.outcomes[0].frame
        row = frame[frame["n"] == 2048].iloc[0]
        assert note in row["Remeasured"] and bool(row["Regression"]) is failed and row["Status"] == "slower"
        assert frame[frame["n"] == 1024].iloc[0]["Remeasured"] == ""
    no_confirm = gate(tmp_path, confirm=0)
    no_confirm.record(NODE, first(), lambda indices: pytest.fail("confirm=0 re-measures nothing"))
    assert no_confirm.failures() == ["1 test(s) with a significant slowdown larger than 5%"]


def test_every_save_is_kept_and_listed(tmp_path):
    g = Gate(GateSettings(save_dir=tmp_path / "out"))
    for seed in (1, 2):
        g.record(NODE, result([1024], seed=seed))
    assert [p.name[:5] for p in g.saved] == ["0001_", "0002_"] and len(set(g.saved)) == 2
    lines = history.listing(tmp_path / "out")
    assert lines[0] == f"1 test(s) in {str(tmp_path / 'out')!r}; the gate compares with the newest save of each"
    assert lines[1] == f"{history.test_folder(NODE)}: 2 save(s)"
    assert lines[2].startswith("    #1    commit -") and lines[3].startswith("  * #2 ")


def test_markdown_of_odd_names_keeps_each_row_and_the_test_title(tmp_path):
    """The plugin's --nsightx-markdown: a region or parameter name with a line break, pipe or backslash keeps its row
    (status and REGRESSION mark on it, read back by the compare-format reference's GFM reader), and a node id with
    a backtick stays one code span (a single-tick span ended at it)."""
    node = "perf/test_mm.py::test_mm[a`b]"
    names = ["two\nlines", "a|b", "x\\|y"]
    values = {(n, 0, "gpu__time_duration.sum"): noisy(10_000.0, 0.01, 20, i) for i, n in enumerate(names)}
    slower = {(n, 0, "gpu__time_duration.sum"): noisy(13_000.0, 0.01, 20, 9 + i) for i, n in enumerate(names)}
    history.save(tmp_path / "base", node, make_result(values, params=["label"], configs=[("p|q\nr",)]))
    g = gate(tmp_path)
    g.record(node, make_result(slower, params=["label"], configs=[("p|q\nr",)]))
    (outcome,) = g.outcomes
    assert outcome.frame is not None and bool(outcome.frame["Regression"].all())
    md = g.markdown()
    assert "#### `` perf/test_mm.py::test_mm[a`b] ``" in md.splitlines()
    check_markdown(md, outcome.frame)
