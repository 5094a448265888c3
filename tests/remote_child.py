"""The child of ``tests/core/remote/test_remote.py``: a host-clock session, run by ``nsightx.ext.run_child``.

Written against ``nsightx.ext`` only, as a third-party backend's child module would be. Each measured region gets
a host-clock record and, as an attribute, the process id it ran in (so the test can tell the child from the
parent).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Mapping
from typing import Any

from nsightx.ext import RegionId, RunOutput, Session, new_record, run_child


class ClockSession(Session):
    """Host time of each region under ``metric``, and the child's pid as a region attribute."""

    def __init__(self, metric: str) -> None:
        self.metric = metric
        self._start = 0
        self._spans: list[tuple[RegionId, int]] = []

    def region_enter(self, region: RegionId) -> None:
        """Note the start time."""
        self._start = time.perf_counter_ns()

    def region_exit(self, region: RegionId, failed: bool) -> None:
        """Keep the elapsed time."""
        self._spans.append((region, time.perf_counter_ns() - self._start))

    def finish_run(self, config: int, run: int) -> RunOutput:
        """One record per region, and the pid that measured it."""
        spans, self._spans = self._spans, []
        records = [new_record(r[0], r[1], r[2], "region", self.metric, float(ns), "ns", 0) for r, ns in spans]
        return RunOutput(records, {r[0]: {"child_pid": os.getpid()} for r, _ in spans})


def session_from(options: Mapping[str, Any]) -> ClockSession:
    """The session for the spec's options (``metric``: the metric name the parent asked for)."""
    return ClockSession(str(options["metric"]))


if __name__ == "__main__":
    sys.exit(run_child(None, session_from))
