"""A background NVML sampler: the per-run conditions are read off the measured path and joined to runs by time.

Why: one NVML query costs ~2 us on an idle H200 but ~40 us while it runs kernels, and the RUN collector makes
five, so reading them before every run put up to 0.2 ms of host time between two runs
(98c9cf0:benchmarks/results/2026-12-03-diag-alloc-once.json). A thread now reads them every :data:`SAMPLE_PERIOD_S` and
publishes each sample with the time its reads began; the collector called before a run takes the latest sample
published by then, so the value it stores was read *before the run started*, at most about one period plus the
length of one sample earlier (``NvmlSampleAgeMs`` says how long before, for every run).

The thread samples only while runs keep starting (:meth:`Sampler.demand`): it parks after
:data:`IDLE_PERIODS` periods without one, so it makes no NVML call while the host waits for queued GPU work, a
thermal pause or the next call. The first H200 measurement of an always-sampling thread showed why: it cost
more than the reads it replaced, on a sweep whose host waits for the GPU most of the time
(``98c9cf0:benchmarks/results/2026-12-03-cost-run1-after.json``).

The calls cost the measured thread little: pynvml calls NVML through ``ctypes.CDLL``, which releases the GIL
for the duration of each C call, so the thread only holds the GIL for the few microseconds of Python around each
query. A sampler lives exactly as long as the sweeps that use it: the RUN collector starts one when a profiled
call starts (:meth:`nsightx_nvml._collectors.RunConditions.start`) and stops it when the call ends; it is never
started at import. Several calls on one device (threads) share one sampler through a reference count.
"""

from __future__ import annotations

import atexit
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass

from nsightx.ext import Scalar
from nsightx_nvml._shm import SharedSample

SAMPLE_PERIOD_S = 0.005
"""Seconds between two samples of one device while runs keep starting; 0 starts no sampler (every run then reads
NVML itself, before it starts: the tests that script one value per run use that).

Short enough that a run's values are at most a few milliseconds old (clocks change on the scale of milliseconds).
"""

IDLE_PERIODS = 2
"""The sampler parks (makes no NVML call) once no run has started for this many periods, and wakes up at the
next run start. Measured on the H200 (``98c9cf0:benchmarks/results/2026-12-03-cost-run1-after.json``): a sampler that
kept querying while the host waited for a GPU-bound sweep to finish cost 3.5-7% of the sweep's wall time, more
than the queries made between runs before; while the host waits, nothing new needs to be read."""

DEMAND_REFRESH_PERIODS = 0.5
"""A process sampler's demand time is written again only once the last one written is this many periods old.

While runs keep starting, the demand the process reads is then at most half a period older than the latest run
start, so it still sees one within its :data:`IDLE_PERIODS` (2) periods and never parks during a sweep; once runs
stop it parks 1.5 to 2 periods after the last run instead of 2. Must stay below :data:`IDLE_PERIODS`."""

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
    """Reads one device on a daemon thread every ``period_s`` seconds while it is in demand; keeps the latest sample.

    :meth:`demand` (called when a run starts) keeps it sampling; after :data:`IDLE_PERIODS` periods without a
    call it parks until the next one.

    Args:
        read: Makes the queries and returns the readings (called on the sampler thread, or by :meth:`sample`).
        period_s: Seconds between two samples.
        clock: Nanosecond clock the samples are stamped with (the run loop's ``time.perf_counter_ns``).
        name: Thread name, for debuggers and ``threading.enumerate()``.

    Example:
        >>> s = Sampler(lambda: {"x": 1}, period_s=0.001)
        >>> s.start(); s.latest().values["x"]
        1
        >>> s.stop(); s.running
        False
    """

    def __init__(
        self,
        read: Callable[[], Mapping[str, Scalar]],
        period_s: float = SAMPLE_PERIOD_S,
        clock: Callable[[], int] = time.perf_counter_ns,
        name: str = "nsightx-nvml-sampler",
    ) -> None:
        self._read = read
        self.period_s = period_s
        self._clock = clock
        self._name = name
        self._latest: Sample | None = None
        self._stopped = threading.Event()
        self._wanted = threading.Event()
        self._demand_ns = 0
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self.samples = 0
        """Samples taken so far (tests and the benchmark read it)."""
        self.parks = 0
        """Times the thread parked for lack of demand."""
        self.error: str | None = None
        """The last failure of ``read`` (the previous sample stays the latest)."""

    @property
    def running(self) -> bool:
        """True while the thread is alive."""
        thread = self._thread
        return thread is not None and thread.is_alive()

    def start(self) -> None:
        """Take one sample now (so the first run has one) and start the thread. A no-op while running."""
        if self.running:
            return
        self._stopped.clear()
        self.sample()
        self.demand()
        self._thread = threading.Thread(target=self._loop, name=self._name, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop the thread and wait for its current sample to finish; the latest sample is kept."""
        thread, self._thread = self._thread, None
        if thread is None:
            return
        self._stopped.set()
        self._wanted.set()
        thread.join(JOIN_TIMEOUT_S)

    def demand(self, now_ns: int | None = None) -> None:
        """A run starts (at ``now_ns``; ``None``: now): keep sampling (wake the thread if it parked).

        Cheap: a clock read and a flag test.
        """
        self._demand_ns = self._clock() if now_ns is None else now_ns
        if not self._wanted.is_set():
            self._wanted.set()

    def latest(self) -> Sample | None:
        """The most recent complete sample (``None`` before the first). Lock-free: one reference read."""
        return self._latest

    def demand_latest(self, now_ns: int) -> Sample | None:
        """:meth:`demand` at ``now_ns``, then :meth:`latest`: what the RUN collector asks before every run."""
        self._demand_ns = now_ns
        if not self._wanted.is_set():
            self._wanted.set()
        return self._latest

    def sample(self) -> Sample | None:
        """Take one sample on the calling thread, publish it and return it (``None`` when the read failed)."""
        with self._lock:  # the thread and a caller reading inline never query at once
            taken = self._clock()
            try:
                values = dict(self._read())
            except Exception as e:  # a failed read keeps the previous sample; the thread goes on
                self.error = f"{type(e).__name__}: {e}"
                return None
            sample = self._latest = Sample(taken, values)
            self.samples += 1
            return sample

    def _idle(self) -> bool:
        return self._clock() - self._demand_ns > IDLE_PERIODS * self.period_s * 1e9

    def _loop(self) -> None:
        while not self._stopped.wait(self.period_s):
            if self._idle():
                self._wanted.clear()
                if self._stopped.is_set():  # stop() set both flags before the clear: its wake-up is gone
                    return
                if self._idle():  # checked again after clearing: a demand in between is not lost
                    self.parks += 1
                    self._wanted.wait()
                    if self._stopped.is_set():
                        return
            self.sample()


@dataclass(frozen=True)
class ChildSpec:
    """What the sampler process needs to read one device by itself."""

    uuid: str
    """NVML UUID of the device whose sensors are read (the physical GPU under MIG)."""
    loader: str = "pynvml"
    """Module giving ``pynvml`` (``"module:function"``: a function returning a pynvml-like module)."""


PARKED_POLL_LONG_S = 0.05
"""How often a sampler process that has been parked for over a second looks for a new run."""


class ProcessSampler:
    """Like :class:`Sampler`, but the reads happen in a separate process (:mod:`nsightx_nvml._sampler_child`).

    The sweep's thread pays a few memory reads per run (:mod:`nsightx_nvml._shm`), no GIL hand-over, and no thread
    start and join per call (see :mod:`nsightx_nvml._sampler_child` for what was measured). The process starts with
    the first profiled call (its first sample arrives once that process has started Python and NVML; until then runs
    use the sample :meth:`start` read inline, or read for themselves), parks between calls, and ends with the user's
    process. If it cannot read NVML, it ends at once and :attr:`running` stays false for the rest of the process:
    the collector then reads NVML itself.

    Args:
        read: Reads the device on the calling thread (the first sample, and reads made for a stale run).
        spec: The device and NVML module for the process.
        period_s: Seconds between two samples.
        clock: Nanosecond clock (``time.perf_counter_ns``: CLOCK_MONOTONIC, the same in both processes).
    """

    def __init__(
        self,
        read: Callable[[], Mapping[str, Scalar]],
        spec: ChildSpec,
        period_s: float = SAMPLE_PERIOD_S,
        clock: Callable[[], int] = time.perf_counter_ns,
    ) -> None:
        self._read = read
        self.spec = spec
        self.period_s = period_s
        self._clock = clock
        self._shared: SharedSample | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._inline: Sample | None = None
        self._cached: tuple[int, Sample] | None = None
        self._answer: tuple[int, Sample | None] = (-1, None)
        """What :meth:`demand_latest` last answered for a sequence number; forgotten when an inline sample is kept."""
        self._demanded_ns: int | None = None
        """The demand time :meth:`demand_latest` last wrote (``None``: none yet in this shared file)."""
        self._demand_every_ns = period_s * 1e9 * DEMAND_REFRESH_PERIODS
        """How old the last written demand may be before :meth:`demand_latest` writes a new one."""
        self._lock = threading.Lock()
        self.failed: str | None = None
        """Why the process ended by itself (it is then not started again)."""

    @property
    def running(self) -> bool:
        """True while the process is alive."""
        proc = self._proc
        if proc is None or proc.poll() is not None:
            if proc is not None and self.failed is None and proc.returncode != 0:
                self.failed = self.error or f"exit status {proc.returncode}"
                self._close()
            return False
        return True

    @property
    def samples(self) -> int:
        """Samples the process has published so far."""
        return self._shared.counters()[0] if self._shared is not None else 0

    @property
    def parks(self) -> int:
        """Times the process parked for lack of demand."""
        return self._shared.counters()[1] if self._shared is not None else 0

    @property
    def error(self) -> str | None:
        """The last failure of a read in the process."""
        return self._shared.error() if self._shared is not None else None

    def start(self) -> None:
        """Take one sample now and start the process (a no-op but a demand while it runs)."""
        if self.running:
            self.demand()
            return
        self.sample()
        if self.failed is not None:
            return
        self._close()
        self._shared = SharedSample.create()
        self._shared.demand(self._clock())
        args = {
            "shm": self._shared.path,
            "uuid": self.spec.uuid,
            "loader": self.spec.loader,
            "period_s": self.period_s,
            "idle_periods": IDLE_PERIODS,
            "parent": os.getpid(),
            "parked_long_s": PARKED_POLL_LONG_S,
        }
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(os.path.abspath(p or os.getcwd()) for p in sys.path))
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "nsightx_nvml._sampler_child", json.dumps(args)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=env,
            start_new_session=True,  # a Ctrl-C of the sweep is the sweep's; the child ends with its parent
        )
        _stop_at_exit(self)

    def stop(self) -> None:
        """End the process (waits up to :data:`JOIN_TIMEOUT_S`) and remove its shared file."""
        proc, self._proc = self._proc, None
        if proc is not None:
            if self._shared is not None:
                self._shared.request_stop()
            try:
                proc.wait(JOIN_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self._close()

    def _close(self) -> None:
        shared, self._shared = self._shared, None
        self._cached, self._answer = None, (-1, None)  # a new file numbers its samples from 0 again
        self._demanded_ns = None  # and holds no demand of ours yet
        if shared is not None:
            shared.unlink()
            shared.close()

    def demand(self, now_ns: int | None = None) -> None:
        """A run starts (at ``now_ns``; ``None``: now): keep sampling (one 8-byte write)."""
        shared = self._shared
        if shared is not None:
            shared.demand(self._clock() if now_ns is None else now_ns)

    def latest(self) -> Sample | None:
        """The newest of the process's latest sample and the last inline one."""
        shared_file = self._shared
        return self._newest(shared_file.seq()) if shared_file is not None else self._inline

    def demand_latest(self, now_ns: int) -> Sample | None:
        """:meth:`demand` at ``now_ns``, then :meth:`latest`, in one read and one write of the shared file.

        What the RUN collector asks before every run: while no new sample was published, the same :class:`Sample`
        object (its values decoded once), after an 8-byte read, and nothing else: the answer given for that
        sequence number is given again (an inline sample read in between forgets it). The demand is written only
        when the last one written is :data:`DEMAND_REFRESH_PERIODS` periods old or more (or ``now_ns`` lies
        before it): the process only asks whether a run started in the last :data:`IDLE_PERIODS` periods, so a
        sweep that starts runs faster than that skips the 8-byte write on most runs (issue 35).
        """
        shared_file = self._shared
        if shared_file is None:
            return self._inline
        demanded = self._demanded_ns
        if demanded is not None and 0 <= now_ns - demanded < self._demand_every_ns:
            seq = shared_file.seq_field()[0]  # the process saw a run start recently enough: only the sequence number
        else:
            seq = shared_file.demand_seq(now_ns)
            self._demanded_ns = now_ns
        answer = self._answer
        if answer[0] == seq:
            return answer[1]
        sample = self._newest(seq)
        self._answer = (seq, sample)
        return sample

    def _newest(self, seq: int) -> Sample | None:
        """The newest of the shared file's sample ``seq`` (decoded once per sample) and the last inline one."""
        inline, shared_file, cached = self._inline, self._shared, self._cached
        if shared_file is None:
            return inline
        if cached is None or cached[0] != seq:  # a new sample: decode it once
            snap = shared_file.snapshot()
            if snap is None:
                return inline
            cached = self._cached = (snap[0], Sample(snap[1], snap[2]))
        shared = cached[1]
        return inline if inline is not None and inline.taken_ns > shared.taken_ns else shared

    def sample(self) -> Sample | None:
        """Read on the calling thread, keep it as the inline sample and return it (``None`` when it failed)."""
        with self._lock:
            taken = self._clock()
            try:
                values = dict(self._read())
            except Exception:
                return None
            sample = self._inline = Sample(taken, values)
            self._answer = (-1, None)
            return sample


_at_exit: list[ProcessSampler] = []


def _stop_all() -> None:
    for sampler in list(_at_exit):
        sampler.stop()


def _stop_at_exit(sampler: ProcessSampler) -> None:
    """End ``sampler``'s process when the interpreter exits (registered once per sampler)."""
    if not _at_exit:
        atexit.register(_stop_all)
    if sampler not in _at_exit:
        _at_exit.append(sampler)


class _Lease:
    """A sampler and the number of sweeps using it."""

    def __init__(self, sampler: Sampler | ProcessSampler) -> None:
        self.sampler = sampler
        self.users = 0


_leases: dict[Hashable, _Lease] = {}
_parked: dict[Hashable, ProcessSampler] = {}
"""Sampler processes no sweep uses now: parked, kept for the next call on their device."""
_lock = threading.Lock()


def acquire(
    key: Hashable,
    read: Callable[[], Mapping[str, Scalar]],
    period_s: float | None = None,
    child: ChildSpec | None = None,
) -> Sampler | ProcessSampler:
    """Start (or join) the sampler of ``key``, one device; every call needs one :func:`release` later.

    Args:
        key: Identifies the device (the collectors use the NVML connection and the device label).
        read: What a sample reads, used when this call starts the sampler (and for reads on the calling thread).
        period_s: Sampling period; ``None``: :data:`SAMPLE_PERIOD_S` as it is when the sampler starts.
        child: How a sampler process reads the device; ``None``: a thread (NVML doubles in tests live only in
            this process).
    """
    period = SAMPLE_PERIOD_S if period_s is None else period_s
    with _lock:
        lease = _leases.get(key)
        if lease is None:
            sampler: Sampler | ProcessSampler
            if child is not None:
                kept = _parked.pop(key, None)
                sampler = kept if kept is not None and kept.spec == child else ProcessSampler(read, child, period)
                if kept is not None and kept is not sampler:
                    kept.stop()
            else:
                sampler = Sampler(read, period)
            lease = _leases[key] = _Lease(sampler)
        lease.users += 1
        if lease.users == 1 and lease.sampler.period_s > 0:
            lease.sampler.start()
        return lease.sampler


def release(key: Hashable) -> None:
    """Leave the sampler of ``key``; the last user stops a thread, and parks a process for the next call."""
    with _lock:
        lease = _leases.get(key)
        if lease is None:
            return
        lease.users -= 1
        if lease.users > 0:
            return
        del _leases[key]
        if isinstance(lease.sampler, ProcessSampler) and lease.sampler.running:
            _parked[key] = lease.sampler
            return
    lease.sampler.stop()


def current(key: Hashable) -> Sampler | ProcessSampler | None:
    """The sampler of ``key`` while some sweep uses it, sampling or not (no lock, no system call).

    The RUN collector asks this before every run; :func:`running` also asks a sampler process whether it is
    alive (a ``waitpid``), which the collector does only once the latest sample has gone stale.
    """
    lease = _leases.get(key)
    return lease.sampler if lease is not None else None


def running(key: Hashable) -> Sampler | ProcessSampler | None:
    """The sampler of ``key`` while some sweep uses it and it samples, else ``None`` (no lock)."""
    lease = _leases.get(key)
    return lease.sampler if lease is not None and lease.sampler.running else None
