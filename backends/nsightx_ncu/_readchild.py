"""The report-reader child, started before ncu runs so that its start-up overlaps the profiling.

Reading a report takes a fresh Python, the import of ``ncu_report`` (which maps Nsight Compute's reader
library) and the walk of the report itself. Only the walk needs the report: the child is started with the
reader's location when the sweep starts, imports it while ncu profiles, and then waits on its standard input
for the report to read. Measured on the H200 the whole read took 0.19-0.33 s of a 7 s one-metric sweep
(``98c9cf0:benchmarks/results/2026-12-03-ncu-overhead.log``), most of the backend's cost over plain ncu.

The child imports neither pydantic nor the rest of nsightx (see :mod:`nsightx_ncu._reader`); it is killed when
the sweep ends without a report to read.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType

from nsightx.ext import MeasurementError
from nsightx_ncu._reader import Action

READ_TIMEOUT_S = 600.0
"""Longest wait for the child to read one report (a deep read of a large report takes tens of seconds)."""

TAIL_LINES = 20
"""Lines of the child's error output quoted when it fails."""


class ReaderChild:
    """One ``python -m nsightx_ncu._reader --stdin`` child; a context manager that never leaves it behind.

    Args:
        reader_dir: Folder holding ``ncu_report.py`` (``None``: the ``ncu-report`` package).
        env: The child's environment (the worker's: this process's ``sys.path`` in ``PYTHONPATH``).
    """

    def __init__(self, reader_dir: str | None, env: Mapping[str, str]) -> None:
        self._proc = subprocess.Popen(
            # -P: the working folder is not put first on sys.path, so a user's own ncu_report.py there is never
            # imported in place of the reader reader_location() chose (the parent's sys.path is in env's PYTHONPATH)
            [sys.executable, "-P", "-m", "nsightx_ncu._reader", "--stdin", json.dumps({"reader_dir": reader_dir})],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=dict(env),
        )

    def read(self, report: Path, metrics: tuple[str, ...], deep: bool, out: Path) -> list[Action]:
        """Have the child read ``report`` into ``out`` and return its actions.

        Raises:
            MeasurementError: The child failed (the message holds its last error lines).
        """
        request = json.dumps({"report": str(report), "metrics": list(metrics), "deep": deep, "out": str(out)})
        try:
            stdout, stderr = self._proc.communicate(request + "\n", timeout=READ_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.close()
            raise MeasurementError(
                f"reading the ncu report {report} took over {READ_TIMEOUT_S:.0f} s and was stopped"
            ) from None
        if self._proc.returncode != 0 or not out.exists():
            tail = "\n".join((stderr or stdout).strip().splitlines()[-TAIL_LINES:])
            raise MeasurementError(f"reading the ncu report {report} failed (exit {self._proc.returncode}):\n{tail}")
        data = json.loads(out.read_text(encoding="utf-8"))
        return [Action.from_json(d) for d in data]

    def close(self) -> None:
        """Stop the child if it still runs (no report was read) and reap it."""
        if self._proc.poll() is None:
            self._proc.kill()
        self._proc.communicate()

    def __enter__(self) -> ReaderChild:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
