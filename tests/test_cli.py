"""The nsightx command on a machine without a GPU (as CI is)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from nsightx.cli import main

NO_GPU = os.environ.get("CI") == "true" or not os.path.exists("/dev/nvidia0")


@pytest.mark.skipif(not NO_GPU, reason="checks the no-GPU explanation")
def test_doctor_explains_no_gpu(capsys, plugin_host):
    assert main(["doctor"]) == 0
    out = capsys.readouterr().out
    assert "No GPU backend is available here" in out
    assert "yes host" in out
    assert "Python" in out and "ncu on PATH" in out


def test_demo_prints_table_and_files(tmp_path):
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "nsightx.cli",
            "demo",
            "--runs",
            "3",
            "--output",
            str(tmp_path) + "/",
            "--backend",
            "host",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "AvgValue" in out.stdout and "matmul" in out.stdout and "TFLOP/s" in out.stdout
    assert "processed_data-matmul-0.csv" in out.stdout
    assert (tmp_path / "result-matmul-0.json").exists()


def test_demo_output_without_separator_is_a_folder(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "nsightx.cli", "demo", "--runs", "2", "--output", "demo-out", "--backend", "host"],
        capture_output=True,
        text=True,
        check=True,
        cwd=tmp_path,
    )
    files = [
        "processed_data-matmul-0.csv",
        "profiled_data-matmul-0.csv",
        "raw_data-matmul-0.jsonl",
        "result-matmul-0.json",
    ]
    assert sorted(p.name for p in (tmp_path / "demo-out").iterdir()) == files
    assert sorted(p.name for p in tmp_path.iterdir()) == ["demo-out"]
    listing = out.stdout.split("files written under", 1)[1].splitlines()
    assert listing[0].strip() == f"{tmp_path / 'demo-out'}:" and [x.strip() for x in listing[1:]] == files


def test_backends_and_plugins_commands(capsys, plugin_host):
    assert main(["backends"]) == 0
    assert "host" in capsys.readouterr().out
    assert main(["plugins"]) == 0
    assert "host (built-in)" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["demo", "--runs", "0"], "nsightx demo: runs must be >= 1 or 'auto', got 0"),
        (["demo", "--runs", "-3", "--backend", "host"], "nsightx demo: runs must be >= 1"),
        (["demo", "--backend", "nonexistent"], "nsightx demo: unknown backend 'nonexistent'; registered backends:"),
        (["demo", "--runs", "x"], "nsightx demo: error: argument --runs: invalid int value: 'x'"),
        (["demo", "--frobnicate"], "nsightx: error: unrecognized arguments: --frobnicate"),
        ([], "nsightx: error: the following arguments are required: COMMAND (see nsightx --help)"),
        (["bogus"], "nsightx: error: argument COMMAND: invalid choice: 'bogus'"),
        (["doctor", "extra"], "nsightx: error: unrecognized arguments: extra"),
        (["compare", "only-one.json"], "nsightx compare: error: the following arguments are required: new"),
        (["compare", "a.json", "b.json", "--threshold", "five"], "invalid float value: 'five'"),
        (["compare", "/nonexistent/a.json", "/nonexistent/b.json"], "nsightx compare: cannot read result file"),
    ],
)
def test_every_misuse_is_one_line_and_exit_2(capsys, plugin_host, argv, message):
    assert main(argv) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], captured.err
    assert "Traceback" not in captured.err and captured.out == ""


def test_unavailable_backend_message_is_joined_into_one_line(capsys, plugin_host):
    if plugin_host.availability()["ncu"].available:
        pytest.skip("ncu is available here")
    assert main(["demo", "--backend", "ncu"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "backend 'ncu' is not available" in err


def test_console_script_misuse_has_no_traceback():
    out = subprocess.run(
        [sys.executable, "-m", "nsightx.cli", "demo", "--backend", "nonexistent"], capture_output=True, text=True
    )
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert out.stderr.strip().splitlines() == [
        "nsightx demo: unknown backend 'nonexistent'; registered backends: cupti, events, host, ncu, or 'auto'"
    ]
