"""A clock for the host backend that only the measured region moves, for tests whose outcome rests on the timings.

Real sleeps measured beside other jobs on a 2-core machine stretch by milliseconds, now on one run, now on the
next; a test that needs a quiet region to be quiet, or one region to be 20% slower than another, then fails now
and then. With :func:`install`, the host backend's session reads this clock, which stands still until the region
calls :meth:`RegionClock.advance`. The run loop's run state reads it too: it times the host backend's regions
and hands the session the time (``Session.host_timed``). The run loop, the backend's session, the aggregation and
the statistics are the real code, and the region's time is exactly what the test says.
"""

from __future__ import annotations

import time
from typing import Any

import pytest


class RegionClock:
    """Stands in for the ``time`` module inside ``nsightx_host``: ``perf_counter_ns`` is the clock's reading."""

    def __init__(self) -> None:
        self.ns = 0

    def perf_counter_ns(self) -> int:
        return self.ns

    def advance(self, seconds: float) -> None:
        """The region lasts ``seconds`` (called inside ``nsightx.annotate``)."""
        self.ns += round(seconds * 1e9)

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)


def install(monkeypatch: pytest.MonkeyPatch) -> RegionClock:
    """Make the host backend and the run state read a new :class:`RegionClock` for the rest of the test."""
    import nsightx_host

    from nsightx._run import context

    clock = RegionClock()
    monkeypatch.setattr(nsightx_host, "time", clock)
    monkeypatch.setattr(context, "_clock", clock.perf_counter_ns)
    return clock
