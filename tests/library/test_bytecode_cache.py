"""The test session's subprocesses share one bytecode folder where ``PYTHONDONTWRITEBYTECODE`` is set.

Checked in a real pytest session (pytester, in a subprocess) that uses this suite's ``conftest.py``: a process
that test starts must see the run's folder as its ``sys.pycache_prefix`` and write its bytecode there.
"""

from __future__ import annotations

import json

import pytest
from _paths import TESTS

pytest_plugins = ["pytester"]

INNER = """
import json
import subprocess
import sys


def test_child(tmp_path, tmp_path_factory):
    probe = "import json, sys; print(json.dumps([sys.pycache_prefix, sys.flags.dont_write_bytecode]))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    (tmp_path / "probe_module.py").write_text("X = 1\\n")
    subprocess.run([sys.executable, "-c", "import probe_module"], cwd=tmp_path, check=True)
    folder = tmp_path_factory.getbasetemp() / "pycache"
    written = sorted(p.name for p in folder.rglob("probe_module*.pyc")) if folder.exists() else []
    print("CHILD " + json.dumps({"seen": json.loads(out.stdout), "folder": str(folder), "written": written}))
"""


def _child(pytester: pytest.Pytester) -> dict:
    pytester.makeconftest((TESTS / "conftest.py").read_text())
    pytester.makepyfile(test_inner=INNER)
    res = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-s")
    res.assert_outcomes(passed=1)
    (line,) = [ln for ln in res.outlines if "CHILD " in ln]  # -s: printed after the test file's name
    return json.loads(line.split("CHILD ", 1)[1])


def test_with_dontwritebytecode_subprocesses_write_to_one_folder_of_the_run(pytester, monkeypatch):
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    monkeypatch.delenv("PYTHONPYCACHEPREFIX", raising=False)
    child = _child(pytester)
    assert child["seen"] == [child["folder"], 0]
    assert child["written"] and child["written"][0].startswith("probe_module.")


def test_without_dontwritebytecode_nothing_changes(pytester, monkeypatch):
    monkeypatch.delenv("PYTHONDONTWRITEBYTECODE", raising=False)
    monkeypatch.delenv("PYTHONPYCACHEPREFIX", raising=False)
    assert _child(pytester)["seen"] == [None, 0]


def test_a_prefix_the_user_set_is_kept(pytester, monkeypatch, tmp_path):
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    monkeypatch.setenv("PYTHONPYCACHEPREFIX", str(tmp_path / "mine"))
    assert _child(pytester)["seen"] == [str(tmp_path / "mine"), 1]
