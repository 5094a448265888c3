"""The report-reader child started before ncu runs (:mod:`nsightx_ncu._readchild`), on real H200 reports."""

from __future__ import annotations

from pathlib import Path

import _paths
import pytest
from nsightx_ncu._readchild import ReaderChild
from nsightx_ncu._reader import read_report

from nsightx._errors import MeasurementError
from nsightx.ext import child_env as worker_env

pytest.importorskip("ncu_report", reason="needs the ncu-report package (test dependency group)")

FIXTURES = _paths.FIXTURES / "ncu"
TIME = "gpu__time_duration.sum"


def test_the_child_reads_what_a_direct_read_gives(tmp_path: Path) -> None:
    report = FIXTURES / "multi_pass.ncu-rep"
    with ReaderChild(None, worker_env()) as child:
        actions = child.read(report, (TIME,), False, tmp_path / "a.json")
    direct = read_report(str(report), (TIME,))
    assert [a.to_json() for a in actions] == [a.to_json() for a in direct]
    assert actions and all(TIME in a.metrics for a in actions)


def test_a_child_with_nothing_to_read_is_stopped_and_reaped() -> None:
    child = ReaderChild(None, worker_env())
    child.close()
    assert child._proc.returncode is not None
    child.close()  # twice is harmless


def test_a_reader_that_fails_gives_its_error_lines(tmp_path: Path) -> None:
    broken = tmp_path / "extras"
    broken.mkdir()
    (broken / "ncu_report.py").write_text("raise ImportError('libnvperf_host.so: cannot open shared object')\n")
    report = FIXTURES / "multi_pass.ncu-rep"
    with ReaderChild(str(broken), worker_env()) as child, pytest.raises(MeasurementError) as info:
        child.read(report, (TIME,), False, tmp_path / "a.json")
    assert "multi_pass.ncu-rep failed" in str(info.value)
    assert "libnvperf_host.so" in str(info.value)
