"""CUPTI's timestamps back on nanoseconds when another client registered its own clock.

torch.profiler (Kineto) registers a timestamp callback with CUPTI that returns CPU cycle counts (``rdtsc``) and
never takes it back: every later CUPTI timestamp of the process, kernel start and end included, is then in cycles,
so a kernel's duration read as nanoseconds is off by the CPU's cycle rate (about 2.1x on the H100 machine). A
callback of our own would fix the unit, but it would replace Kineto's (whose next session expects cycles) and costs
a Python call per timestamp. Instead, at the start of each session this module notices a clock that is not wall-clock
nanoseconds and measures how many of its ticks make a nanosecond; the session then maps every timestamp it reads
through that line. The cycle counter of the CPUs we run on ticks at a constant rate (the probe
``98c9cf0:benchmarks/kineto_probe.py`` read 2.1046 to 2.1051 ticks per ns in one process), so the mapping is exact to
a few parts in 10^5 and durations stay what CUPTI's own clock would give.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from nsightx.ext import MeasurementError
from nsightx_cupti._attribution import ActivityBatch

FOREIGN_NS = 600 * 10**9
"""How far CUPTI's clock may lie from ``time.time_ns`` before it is taken to be another client's (cycles since
boot read about 1e14, wall-clock nanoseconds about 1.8e18)."""

CALIBRATION_NS = 10_000_000
"""How long the calibration watches both clocks; the error of the rate is about 2 reads' cost over this."""


@dataclass(frozen=True, slots=True)
class ClockMap:
    """A line from another client's ticks to wall-clock nanoseconds: ``ns = origin_ns + (t - origin) / rate``."""

    rate: float
    """Ticks per nanosecond."""
    origin: int
    """A tick count read at :attr:`origin_ns`."""
    origin_ns: int
    """Wall-clock nanoseconds (``time.time_ns``) at :attr:`origin`."""

    def ns(self, ticks: int) -> int:
        """``ticks`` on the wall clock, ns."""
        return self.origin_ns + round((ticks - self.origin) / self.rate)

    def batch(self, batch: ActivityBatch) -> ActivityBatch:
        """``batch`` with every kernel's and API call's start and end mapped to nanoseconds."""
        ns = self.ns
        kernels = [k._replace(start=ns(k.start), end=ns(k.end)) for k in batch.kernels]
        apis = {c: a._replace(start=ns(a.start), end=ns(a.end)) for c, a in batch.apis.items()}
        return ActivityBatch(kernels, apis, batch.externals)


def foreign(ticks: int, now_ns: int) -> bool:
    """Whether a CUPTI timestamp read at wall time ``now_ns`` is in another unit than wall-clock nanoseconds."""
    return abs(now_ns - ticks) > FOREIGN_NS


def _pair(read: Callable[[], int]) -> tuple[int, int, int]:
    """(ticks, wall ns, read cost ns) from the tightest of five back-to-back reads."""
    best: tuple[int, int, int] | None = None
    for _ in range(5):
        a = time.perf_counter_ns()
        ticks = read()
        b = time.perf_counter_ns()
        if best is None or b - a < best[2]:
            best = (ticks, (a + b) // 2, b - a)
    assert best is not None
    return best


def calibrate(read: Callable[[], int], span_ns: int = CALIBRATION_NS) -> ClockMap:
    """Measure ``read``'s ticks per nanosecond against ``time.perf_counter_ns`` over ``span_ns``.

    Each end takes the tightest of five reads, so a preempted read does not skew the rate. The origin is mapped
    onto ``time.time_ns`` so that mapped timestamps still look like CUPTI's own (wall-clock ns).
    """
    offset = time.time_ns() - time.perf_counter_ns()
    t0, p0, _ = _pair(read)
    deadline = p0 + span_ns
    while time.perf_counter_ns() < deadline:
        time.sleep(span_ns / 4e9)
    t1, p1, _ = _pair(read)
    rate = (t1 - t0) / (p1 - p0)
    if not rate > 0:
        raise MeasurementError(
            f"CUPTI's clock, which another client set (it read {t0}, not wall-clock nanoseconds), did not advance "
            f"over {span_ns / 1e6:.0f} ms (then {t1}), so kernel times cannot be mapped back to nanoseconds; "
            "profile this call with backend='events', or in a process without the other CUPTI client"
        )
    return ClockMap(rate, t1, p1 + offset)
