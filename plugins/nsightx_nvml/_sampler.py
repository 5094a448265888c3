"""A background NVML sampler: the per-run conditions are read off the measured path and joined to runs by time.

Why: one NVML query costs ~2 us on an idle H200 but ~40 us while it runs kernels, and the RUN collector makes
five, so reading them before every run put up to 0.2 ms of host time between two runs
(benchmarks/results/2026-12-03-diag-alloc-once.json). A thread now reads them every :data:`SAMPLE_PERIOD_S` and
publishes each sample with the time its reads began; the collector called before a run takes the latest sample
published by then, so the value it stores was read *before the run started*, at most about one period plus the
length of one sample earlier (``NvmlSampleAgeMs`` says how long before, for every run).

The calls cost the measured thread almost nothing: pynvml calls NVML through ``ctypes.CDLL``, which releases the
GIL for the duration of each C call, so the thread only holds the GIL for the few microseconds of Python around
each query. A sampler lives exactly as long as the sweeps that use it: the RUN collector starts one when a
profiled call starts (:meth:`nsightx_nvml._collectors.RunConditions.start`) and stops it when the call ends; it is
never started at import. Several calls on one device (threads, ``parallel_devices``) share one sampler through a
reference count.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass

from nsightx._records import Scalar

SAMPLE_PERIOD_S = 0.005
"""Seconds between two samples of one device; 0 starts no sampler (every run then reads NVML itself, before it
starts, as nsightx did before 0.x: the tests that script one value per run use that).

Short enough that a run's values are at most a few milliseconds old (clocks and power change on the scale of
milliseconds to seconds; temperature on the scale of seconds), long enough that the sampler's share of a CPU
core stays around 1-4% while the GPU is busy (five queries of ~40 us every 5 ms)."""

JOIN_TIMEOUT_S = 1.0
"""How long :meth:`Sampler.stop` waits for the thread to finish its current sample."""


@dataclass(frozen=True)
class Sample:
    """One set of readings of one device."""

    taken_ns: int
    """``time.perf_counter_ns()`` when the first query of the sample began."""
    values: Mapping[str, Scalar]
    """The readings, keyed by column name."""

    def age_ms(self, now_ns: int) -> float:
        """How long before ``now_ns`` the sample's reads began, in milliseconds (rounded to microseconds)."""
        return round((now_ns - self.taken_ns) / 1e6, 3)


class Sampler:
    """Reads one device every ``period_s`` seconds on a daemon thread and keeps the latest sample.

    Args:
        read: Makes the queries and returns the readings (called on the sampler thread, never concurrently).
        period_s: Seconds between the start of one sample's wait and the next sample.
        clock: Nanosecond clock the samples are stamped with (the run loop's ``time.perf_counter_ns``).
        name: Thread name, for debuggers and ``threading.enumerate()``.

    Example:
        >>> s = Sampler(lambda: {"x": 1}, period_s=0.001)
        >>> s.start(); s.latest().values["x"]
        1
        >>> s.stop(); s.running
        False
    """

    def __init__(self, read: Callable[[], Mapping[str, Scalar]], period_s: float = SAMPLE_PERIOD_S,
                 clock: Callable[[], int] = time.perf_counter_ns, name: str = "nsightx-nvml-sampler") -> None:
        self._read = read
        self.period_s = period_s
        self._clock = clock
        self._name = name
        self._latest: Sample | None = None
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self.samples = 0
        """Samples taken so far (tests and the benchmark read it)."""
        self.error: str | None = None
        """The last failure of ``read`` (the previous sample stays the latest)."""

    @property
    def running(self) -> bool:
        """True while the thread is alive."""
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> None:
        """Take one sample now (so the first run has one) and start the thread. A no-op while running."""
        if self.running:
            return
        self._wake.clear()
        self.sample()
        self._thread = threading.Thread(target=self._loop, name=self._name, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop the thread and wait for its current sample to finish; the latest sample is kept."""
        thread, self._thread = self._thread, None
        if thread is None:
            return
        self._wake.set()
        thread.join(JOIN_TIMEOUT_S)

    def latest(self) -> Sample | None:
        """The most recent complete sample (``None`` before the first). Lock-free: one reference read."""
        return self._latest

    def sample(self) -> None:
        """Take one sample on the calling thread and publish it."""
        taken = self._clock()
        try:
            values = dict(self._read())
        except Exception as e:  # a failed read keeps the previous sample; the thread goes on
            self.error = f"{type(e).__name__}: {e}"
            return
        self._latest = Sample(taken, values)
        self.samples += 1

    def _loop(self) -> None:
        while not self._wake.wait(self.period_s):
            self.sample()


class _Lease:
    """A sampler and the number of sweeps using it."""

    def __init__(self, sampler: Sampler) -> None:
        self.sampler = sampler
        self.users = 0


_leases: dict[Hashable, _Lease] = {}
_lock = threading.Lock()


def acquire(key: Hashable, read: Callable[[], Mapping[str, Scalar]], period_s: float | None = None) -> Sampler:
    """Start (or join) the sampler of ``key``, one device; every call needs one :func:`release` later.

    Args:
        key: Identifies the device (the collectors use the NVML connection and the device label).
        read: What a sample reads, used when this call starts the sampler.
        period_s: Sampling period; ``None``: :data:`SAMPLE_PERIOD_S` as it is when the sampler starts.
    """
    with _lock:
        lease = _leases.get(key)
        if lease is None:
            lease = _leases[key] = _Lease(Sampler(read, SAMPLE_PERIOD_S if period_s is None else period_s))
        lease.users += 1
        if lease.users == 1 and lease.sampler.period_s > 0:
            lease.sampler.start()
        return lease.sampler


def release(key: Hashable) -> None:
    """Leave the sampler of ``key``; the last user stops it and forgets it."""
    with _lock:
        lease = _leases.get(key)
        if lease is None:
            return
        lease.users -= 1
        if lease.users > 0:
            return
        del _leases[key]
    lease.sampler.stop()


def running(key: Hashable) -> Sampler | None:
    """The sampler of ``key`` while some sweep uses it and it samples, else ``None`` (no lock)."""
    lease = _leases.get(key)
    return lease.sampler if lease is not None and lease.sampler.running else None
