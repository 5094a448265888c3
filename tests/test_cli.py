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
    out = subprocess.run([sys.executable, "-m", "nsightx.cli", "demo", "--runs", "3", "--output",
                          str(tmp_path) + "/", "--backend", "host"], capture_output=True, text=True, check=True)
    assert "AvgValue" in out.stdout and "matmul" in out.stdout and "TFLOP/s" in out.stdout
    assert "processed_data-matmul-0.csv" in out.stdout
    assert (tmp_path / "result-matmul-0.json").exists()


def test_demo_output_without_separator_is_a_folder(tmp_path):
    out = subprocess.run([sys.executable, "-m", "nsightx.cli", "demo", "--runs", "2", "--output", "demo-out",
                          "--backend", "host"], capture_output=True, text=True, check=True, cwd=tmp_path)
    files = ["processed_data-matmul-0.csv", "profiled_data-matmul-0.csv", "raw_data-matmul-0.jsonl",
             "result-matmul-0.json"]
    assert sorted(p.name for p in (tmp_path / "demo-out").iterdir()) == files
    assert sorted(p.name for p in tmp_path.iterdir()) == ["demo-out"]
    listing = out.stdout.split("files written under", 1)[1].splitlines()
    assert listing[0].strip() == f"{tmp_path / 'demo-out'}:" and [x.strip() for x in listing[1:]] == files


def test_backends_and_plugins_commands(capsys, plugin_host):
    assert main(["backends"]) == 0
    assert "host" in capsys.readouterr().out
    assert main(["plugins"]) == 0
    assert "host (built-in)" in capsys.readouterr().out
