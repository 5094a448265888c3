"""benchmarks/run.py, the suite's one runner: its table, its record format, and the recorded results it keeps.

The GPU benchmarks cannot run here; recording an output made elsewhere (``--from``) is the path their results take,
so it is tested on the outputs the suite keeps.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from _paths import ROOT
from _scripts import load_script

BENCH = ROOT / "benchmarks"


run = load_script(BENCH / "run.py", "bench_run")


def test_the_suite_has_at_most_eight_benchmarks_each_a_script_in_the_readme() -> None:
    readme = (BENCH / "README.md").read_text(encoding="utf-8")
    assert 1 <= len(run.SUITE) <= 8
    for name, bench in run.SUITE.items():
        assert (BENCH / bench.script).is_file(), bench.script
        assert f"| `{name}` (`{bench.script}`" in readme, f"benchmarks/README.md has no row for {name}"
    scripts = {p.name for p in BENCH.iterdir() if p.suffix in (".py", ".sh")}
    helpers = {
        "run.py",
        "run_gpu.sh",
        "overhead_summary.py",
        "frame_stages.py",
        "call_phases.py",
        "gpu_lag.py",
        "cupti_flush_kind.py",
        "after_phase.py",
        "cupti_collect.py",
        "overlap_wait.py",
        "oneshot.py",
        "first_call.py",
        "nsight_python_tests.sh",
        "cupti_midwait_probe.py",
        "nsight_shim.sh",
    }  # each named in its benchmark's row
    assert scripts - helpers == {b.script for b in run.SUITE.values()}, "a script in benchmarks/ is in no benchmark"


LOGS = "logs"
"""``results/logs/<date>/``: the raw logs a GPU call brought back, with a README naming machine, tree and command."""


@pytest.mark.parametrize("name", sorted(p.name for p in (BENCH / "results").iterdir() if p.is_dir() and p.name != LOGS))
def test_each_kept_result_is_in_the_one_format(name: str) -> None:
    folder = BENCH / "results" / name
    assert name in run.SUITE and {p.name for p in folder.iterdir()} == {"latest.json", "latest.md", "history.jsonl"}
    latest = json.loads((folder / "latest.json").read_text(encoding="utf-8"))
    for key in ("benchmark", "goal", "date", "tree", "machine", "command", "rc", "headline", "result"):
        assert key in latest, f"{name}/latest.json lacks {key}"
    assert run.SUITE[name].headline(latest["result"]) == latest["headline"]
    history = [json.loads(line) for line in (folder / "history.jsonl").read_text(encoding="utf-8").splitlines()]
    assert history and all("result" not in line for line in history)
    # the latest run is in the history (runs recorded with --no-latest may follow it)
    assert {k: v for k, v in latest.items() if k != "result"} in history


def test_each_folder_of_raw_logs_says_where_they_came_from() -> None:
    folders = sorted(p for p in (BENCH / "results" / LOGS).iterdir() if p.is_dir())
    for folder in folders:
        readme = (folder / "README.md").read_text(encoding="utf-8")
        assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", folder.name), f"{folder.name}: name log folders by date"
        for word in ("machine", "tree", "command"):
            assert word in readme, f"{folder}/README.md does not name the {word}"


def test_from_records_an_output_made_elsewhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    output = json.loads((BENCH / "results" / "ncu_overhead" / "latest.json").read_text(encoding="utf-8"))["result"]
    made = tmp_path / "ncu_overhead.json"
    made.write_text(json.dumps(output), encoding="utf-8")
    monkeypatch.setattr(run, "RESULTS", tmp_path / "results")
    for _ in range(2):
        rc = run.main(["ncu_overhead", "--from", str(made), "--machine", "H100", "--command", "cmd", "--tree", "abc"])
        assert rc == 0
    folder = tmp_path / "results" / "ncu_overhead"
    lines = (folder / "history.jsonl").read_text(encoding="utf-8").splitlines()
    latest = json.loads((folder / "latest.json").read_text(encoding="utf-8"))
    assert len(lines) == 2 and latest["machine"] == "H100" and latest["tree"] == "abc" and latest["result"] == output
    assert "| 1 metric ratio | 0.99 |" in (folder / "latest.md").read_text(encoding="utf-8")


def test_an_unknown_benchmark_names_the_suite() -> None:
    out = subprocess.run(
        [sys.executable, str(BENCH / "run.py"), "kineto_probe"], capture_output=True, text=True, timeout=60, check=False
    )
    assert out.returncode == 2 and "unknown benchmark 'kineto_probe'" in out.stderr and "overhead" in out.stderr


SHIM_BODY = '''"""`import nsight` gives nsightx itself, so nsight-python code runs unchanged on nsightx."""
{os}import sys

import nsightx

{activate}sys.modules[__name__] = nsightx
'''
"""The shim each script wrote itself before they shared nsight_shim.sh (the examples one never activates ncu)."""
ACTIVATE = 'if os.environ.get("NSP_TESTS_ACTIVATE") == "ncu":\n    nsightx.activate(nsightx.Tool.NCU)\n'


@pytest.mark.parametrize(
    ("script", "arg"), [("nsight_python_tests.sh", " activate"), ("nsight_python_examples.sh", "")]
)
def test_both_nsight_python_scripts_write_the_shim_they_wrote_before(tmp_path: Path, script: str, arg: str) -> None:
    text = (BENCH / script).read_text(encoding="utf-8")
    assert f'nsight_shim "$work/shim"{arg}\n' in text and "<<'PY'" not in text  # one shim, from nsight_shim.sh
    shim = BENCH / "nsight_shim.sh"
    subprocess.run(["bash", "-c", f'. "{shim}" && nsight_shim "{tmp_path}"{arg}'], check=True)
    want = SHIM_BODY.format(os="import os\n" if arg else "", activate=ACTIVATE if arg else "")
    assert (tmp_path / "nsight" / "__init__.py").read_text(encoding="utf-8") == want
