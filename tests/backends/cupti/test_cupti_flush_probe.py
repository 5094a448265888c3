"""``benchmarks/call_phases.py --flush-probe`` on CPU: one probed flush's bookkeeping through the real tracer with
cupti-python doubled (the library boundary, as in ``test_cupti_tracer.py``), and the command line without a GPU."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

import pytest
from _paths import ROOT
from _scripts import load_script
from nsightx_cupti._tracer import ActivityTracer
from test_cupti_tracer import FakeCupti

SCRIPT = ROOT / "benchmarks" / "call_phases.py"


cp = load_script(SCRIPT, "call_phases")


def test_a_probed_flush_counts_what_it_delivered_and_keeps_none_of_it() -> None:
    fake = FakeCupti()
    tracer = ActivityTracer(fake, canary=None)
    tracer.start(api_tracing="always", api_filter="off", decode="cupti-python")
    try:
        assert cp.one_flush(tracer)["records"] == 0  # nothing launched: a flush with nothing pending
        tracer.push(7)
        for _ in range(3):
            fake.launch()
        tracer.pop()
        row = cp.one_flush(tracer)
        assert fake.forced_flushes == 2
        assert (row["records"], row["buffers"]) == (9, 1)  # each launch: its API, external and kernel record
        assert row["flush_us"] >= row["callbacks_us"] > 0
        assert row["cupti_us"] == pytest.approx(row["flush_us"] - row["callbacks_us"])
        assert tracer.collect().kernels == []  # the probe's records are not left for a collection
    finally:
        tracer.stop()


def test_flush_counts_are_positive_integers() -> None:
    assert cp.counts_arg("1,10,100") == (1, 10, 100)
    for bad in ("0,5", "a", ""):
        with pytest.raises(argparse.ArgumentTypeError, match="positive kernel counts"):
            cp.counts_arg(bad)


def test_without_a_gpu_the_probe_says_so_and_exits() -> None:
    try:
        import torch

        if torch.cuda.is_available():
            pytest.skip("a CUDA device is here: the probe would run")
    except ImportError:
        pass
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--flush-probe", "--flush-counts", "1,10"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert done.returncode == 1
    assert "needs" in done.stderr and "CUDA device" in done.stderr and "Traceback" not in done.stderr
