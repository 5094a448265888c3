"""The pytest plugin's gate as plain Python: verdicts the pytester sessions do not reach, on given per-run values.

The results are real ``ProfileResults`` (``_synthetic.make_result``: the schema, aggregation, save and load of a
measured one) with chosen values, so each verdict is deterministic; tests/test_pytest_plugin.py runs the same
gate in real pytest sessions on measured ones.
"""

from __future__ import annotations

from pathlib import Path

from _synthetic import make_result, noisy

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
