"""What one read of the host clock costs here, for ``nsightx doctor``.

Every measured run reads the host clock a few times (each region's enter and exit, the nvml plugin's sample age
and its thermal check). Where the kernel's clock source is read through the vDSO (``tsc``, ``kvm-clock``) a
read costs tens of nanoseconds; where it falls back to a system call or a slow device (``hpet``, ``acpi_pm``,
some virtual machines), a read can cost microseconds, and a host-bound run of a tiny kernel pays that several
times. On two H100 hosts the nvml plugin's per-run cost was 9-12 us on one and 20-38 us on
the other (issue 35, session 17); this line is
how a user, and we, can tell such a host.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from pathlib import Path

CLOCKSOURCE = Path("/sys/devices/system/clocksource/clocksource0/current_clocksource")
"""Linux's current clock source (absent elsewhere)."""

SLOW_NS = 500
"""A read slower than this is called out: ten reads a run then cost several microseconds."""


def clock_source(path: Path = CLOCKSOURCE) -> str | None:
    """The kernel's current clock source (``tsc``, ``kvm-clock``, ``hpet`` ...), or None where it cannot be read."""
    try:
        return path.read_text(encoding="ascii").strip() or None
    except (OSError, UnicodeDecodeError):
        return None


def read_cost_ns(clock: Callable[[], int] = time.perf_counter_ns, reads: int = 1000, rounds: int = 5) -> float:
    """Median over ``rounds`` of the mean cost of one ``clock()`` call, in ns (``reads`` calls a round)."""
    costs = []
    for _ in range(rounds):
        t0 = time.perf_counter_ns()
        for _ in range(reads):
            clock()
        costs.append((time.perf_counter_ns() - t0) / reads)
    return statistics.median(costs)


def clock_line(source: str | None = None, cost_ns: float | None = None) -> str:
    """``host clock: <source>, <cost> ns a read`` and, for a slow read, what it means for a run."""
    source = clock_source() if source is None else source
    cost = read_cost_ns() if cost_ns is None else cost_ns
    line = f"host clock: {source or 'clock source unknown'}, {cost:.0f} ns a read (time.perf_counter_ns)"
    if cost > SLOW_NS:
        line += (
            "; slow: each measured run reads it several times, so a run of a tiny kernel costs microseconds more"
            " here (a vDSO clock source such as tsc reads in ~20-50 ns)"
        )
    return line
