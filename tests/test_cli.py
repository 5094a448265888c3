"""The nsightx command on a machine without a GPU (as CI is)."""

from __future__ import annotations

import os
import re
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
    assert "Mean" in out.stdout and "95% CI" in out.stdout and "matmul" in out.stdout and "TFLOP/s" in out.stdout
    assert "device: CPU (host backend)" in out.stdout and "GPU: None" not in out.stdout
    assert "e+0" not in out.stdout  # durations in us/ms, not 2.068e+04 ns
    assert re.search(r"\d+(\.\d+)? (us|ms) ", out.stdout), out.stdout
    assert "processed_data-matmul-0.csv" in out.stdout
    assert (tmp_path / "result-matmul-0.parquet").exists()


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
        "result-matmul-0.parquet",
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


def _nsightx(*argv: str, cwd=None) -> subprocess.CompletedProcess[str]:
    """Run ``python -m nsightx ARGV`` in a real subprocess, as a user's shell would."""
    return subprocess.run(
        [sys.executable, "-m", "nsightx", *argv], capture_output=True, text=True, cwd=cwd, timeout=120
    )


@pytest.fixture(scope="module")
def bad_files(tmp_path_factory):
    """Files that are not results: text that is not JSON, bytes that are not UTF-8, JSON of another shape."""
    folder = tmp_path_factory.mktemp("bad")
    (folder / "garbage.json").write_text("this is not json\n")
    (folder / "binary.json").write_bytes(b"\xff\xfe\x00\x81")
    (folder / "other.json").write_text('{"a": 1}')
    (folder / "empty").mkdir()
    (folder / "a_file").write_text("x")
    return folder


ERROR_PATHS = [
    # bad option
    (["demo", "--frobnicate"], "nsightx: error: unrecognized arguments: --frobnicate"),
    (["--frobnicate"], "nsightx: error: unrecognized arguments: --frobnicate"),
    (["demo", "--runs", "x"], "nsightx demo: error: argument --runs: invalid int value: 'x'"),
    (["compare", "a.json", "b.json", "--threshold", "five"], "invalid float value: 'five'"),
    (["compare", "only-one.json"], "nsightx compare: error: the following arguments are required: new"),
    (["doctor", "extra"], "nsightx: error: unrecognized arguments: extra"),
    # unknown command
    (["bogus"], "nsightx: error: argument COMMAND: invalid choice: 'bogus'"),
    # missing file
    (["compare", "/nonexistent/a.json", "/nonexistent/b.json"], "nsightx compare: cannot read result file"),
    # unreadable result files
    (["compare", "{bad}/garbage.json", "{bad}/garbage.json"], "garbage.json' is not an nsightx result: Invalid JSON"),
    (["compare", "{bad}/binary.json", "{bad}/binary.json"], "binary.json' starts with a UTF-16 LE byte-order mark"),
    (["compare", "{bad}/other.json", "{bad}/other.json"], "other.json' is not an nsightx result: field"),
    (["compare", "{bad}/empty", "{bad}/empty"], "empty' holds no saved result (result-*.parquet or result-*.json)"),
    # a command failing with an NsightxError
    (["demo", "--runs", "0"], "nsightx demo: runs must be >= 1 or 'auto', got 0"),
    (["demo", "--backend", "nonexistent"], "nsightx demo: unknown backend 'nonexistent'; registered backends:"),
    (["demo", "--backend", "host", "--output", "{bad}/a_file/sub"], "nsightx demo: output_prefix="),
]


@pytest.mark.parametrize(("argv", "message"), ERROR_PATHS, ids=[" ".join(a) for a, _ in ERROR_PATHS])
def test_every_error_is_one_line_on_stderr_and_exit_2(bad_files, argv, message):
    out = _nsightx(*(a.format(bad=bad_files) for a in argv))
    lines = out.stderr.strip().splitlines()
    assert out.returncode == 2, out
    assert len(lines) == 1 and message in lines[0], out.stderr
    assert "Traceback" not in out.stderr and out.stdout == ""


def test_bare_nsightx_prints_help_on_stdout_and_exits_2():
    out = _nsightx()
    assert out.returncode == 2 and out.stderr == ""
    assert out.stdout.startswith("usage: nsightx") and "compare" in out.stdout and "exit status:" in out.stdout


def test_version_and_help_exit_0():
    from nsightx import __version__

    version = _nsightx("--version")
    assert (version.returncode, version.stdout, version.stderr) == (0, f"nsightx {__version__}\n", "")
    assert main(["--version"]) == 0 and main(["--help"]) == 0
    assert main(["compare", "--help"]) == 0


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


def test_python_m_nsightx_costs_import_nsightx_nothing():
    probe = "import sys, nsightx; print(sorted(m for m in ('nsightx.__main__', 'nsightx.cli') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
    assert _nsightx("backends").stdout.startswith("'auto' picks")  # the same command as the console script


@pytest.mark.gpu
def test_demo_names_the_gpu(tmp_path):
    out = _nsightx("demo", "--runs", "3", "--output", str(tmp_path / "out"))
    assert out.returncode == 0, out.stderr
    [device] = [line for line in out.stdout.splitlines() if line.startswith("device: ")]
    assert "NVIDIA" in device and "backend)" in device and "host" not in device, device
    assert " us " in out.stdout or " ms " in out.stdout
    assert "e+0" not in out.stdout
