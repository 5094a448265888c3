"""What the profiled function prints in the ncu worker reaches the user's stdout/stderr; ncu's lines stay in the log."""

from __future__ import annotations

import io
import sys

import ncu_fake
import pytest
from ncu_fake import make_plan
from nsightx_ncu._backend import NcuBackend
from nsightx_ncu._echo import OutputRouter

import nsightx
from nsightx._enums import VerbosityLevel
from nsightx._results.sink import RunSink

pytest.importorskip("cloudpickle")
pytest.importorskip("nvtx")


@pytest.fixture(autouse=True)
def fake_ncu(monkeypatch, tmp_path):
    ncu_fake.use_fake_ncu(monkeypatch, tmp_path)


def test_router_keeps_every_byte_in_the_log_and_passes_user_lines_on(capsys):
    log = io.BytesIO()
    router = OutputRouter(log)
    router.feed("stdout", b"==PROF== Connected to process 1\nhel")
    router.feed("stdout", b"lo\n==WARNING== something\n")
    router.feed("stderr", b"oops\n==ERROR== ERR_NVGPUCTRPERM - The user does not have permission\npartial")
    router.close()
    out, err = capsys.readouterr()
    assert out == "hello\n" and err == "oops\npartial"
    assert log.getvalue().count(b"==PROF==") == 1 and b"hello" in log.getvalue()
    assert router.permission_denied


def test_tool_lines_are_shown_when_asked(capsys):
    router = OutputRouter(io.BytesIO(), show_tool_lines=True)
    router.feed("stdout", b'==PROF== Profiling "kernel"\n')
    assert capsys.readouterr().err == '==PROF== Profiling "kernel"\n'


@pytest.mark.parametrize("verbosity", [VerbosityLevel.INFO, VerbosityLevel.DEBUG])
def test_prints_of_the_function_reach_the_users_streams(verbosity, capsys, tmp_path):
    def scale(n):
        print(f"stdout of config {n}")
        print(f"stderr of config {n}", file=sys.stderr)
        with nsightx.annotate("scale"):
            pass

    plan = make_plan(scale, output_dir=tmp_path, verbosity=verbosity)
    with pytest.raises(nsightx.MeasurementError, match="wrote no report"):  # the fake ncu writes none
        NcuBackend().execute(plan, RunSink())
    out, err = capsys.readouterr()
    assert out.count("stdout of config 1\n") == 3 and out.count("stdout of config 2\n") == 3
    assert err.count("stderr of config 2\n") == 3
    assert "stderr of config" not in out and "stdout of config" not in err
    assert "==PROF==" not in out
    assert ("==PROF== fake ncu" in err) == (verbosity >= VerbosityLevel.DEBUG)
    [log] = tmp_path.glob("*.log")
    assert "==PROF== fake ncu" in log.read_text() and "stdout of config 1" in log.read_text()
