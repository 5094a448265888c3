"""Which ``ncu_report`` the report-reader child imports: the one the parent located, never a file of the cwd.

The reference is docs/backends.md ("Reports are read with the ``ncu_report`` module of the ncu install
(``extras/python``), or else with the ``ncu-report`` package from PyPI") and :func:`nsightx_ncu._locate.
reader_location`, which decides in the user's process which of the two reads. The child runs as ``python -m``,
which by default puts its working folder (the user's) first on ``sys.path``: a user's own ``ncu_report.py``
there (a script of that name, next to the reports it reads) was imported instead of the package, running the
user's script in the reader and reading the report with it, or failing with an error about the wrong module.
"""

from __future__ import annotations

from pathlib import Path

import _paths
import pytest
from nsightx_ncu._readchild import ReaderChild
from nsightx_ncu._reader import read_report

from nsightx.ext import child_env

pytest.importorskip("ncu_report", reason="needs the ncu-report package (test dependency group)")

REPORT = _paths.FIXTURES / "ncu" / "multi_pass.ncu-rep"
TIME = "gpu__time_duration.sum"


def test_the_reader_child_ignores_an_ncu_report_py_in_the_working_folder(tmp_path: Path, monkeypatch) -> None:
    cwd = tmp_path / "project"
    cwd.mkdir()
    imported = tmp_path / "user-script-ran"
    (cwd / "ncu_report.py").write_text(f"open({str(imported)!r}, 'w').close()\n")  # the user's own script
    direct = read_report(str(REPORT), (TIME,))
    monkeypatch.chdir(cwd)
    with ReaderChild(None, child_env()) as child:  # None: the ncu-report package, as reader_location said
        actions = child.read(REPORT, (TIME,), False, tmp_path / "a.json")
    assert not imported.exists(), "the reader child imported the user's ncu_report.py from its working folder"
    assert [a.to_json() for a in actions] == [a.to_json() for a in direct]
