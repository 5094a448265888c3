"""Sweeps run in separate processes by test_output.py and test_raw.py (importable by reference, or as a script).

As a script: ``python out_workload.py <output_prefix> <signal_file> <k>`` runs a host-backend sweep over three
configs that writes ``signal_file`` when run ``k + 1`` starts (so ``k`` runs are complete and on disk) and then
blocks, waiting to be killed.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

import nsightx

SILENT = nsightx.VerbosityLevel.SILENT


def sweep_at_once(prefix: str, value: int, barrier: Any, out: Any) -> None:
    """Wait for the other processes, then sweep config ``value`` into ``prefix``; report (pid, value, raw path)."""

    @nsightx.analyze.kernel(
        configs=[value],
        runs=3,
        warmup=0,
        backend="host",
        verbosity=SILENT,
        output_prefix=prefix,
        info_collectors=[("pid", os.getpid, "once")],
    )
    def shared(n: int) -> None:
        with nsightx.annotate("a"):
            sum(range(n))

    barrier.wait()
    res = shared()
    out.put((os.getpid(), value, str(res.environment["raw_data"])))


def killed_midway(prefix: str, signal_file: str, k: int) -> None:
    """Sweep n in (10, 20, 30), 3 runs each; when run k + 1 starts, write ``signal_file`` and block."""
    calls = {"n": 0}

    @nsightx.analyze.kernel(
        configs=[10, 20, 30], runs=3, warmup=0, backend="host", verbosity=SILENT, output_prefix=prefix
    )
    def victim(n: int) -> None:
        calls["n"] += 1
        if calls["n"] == k + 1:
            Path(signal_file).write_text("ready")
            time.sleep(60)
        with nsightx.annotate("work"):
            sum(range(n))

    victim()


if __name__ == "__main__":
    killed_midway(sys.argv[1], sys.argv[2], int(sys.argv[3]))
