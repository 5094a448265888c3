"""The CUPTI session: what happens at each step of the shared run loop.

``start_run``  nothing by default; with ``flush_at="run"`` the L2 flush below happens here instead; with
               ``cupti_drain="config"`` a config's first run delivers CUPTI's completed buffers first.
``region_enter`` with ``cache_control="all"``: reset persisting L2 lines, then overwrite a buffer of at least
               twice the L2 size, queued on the legacy default stream (before the id is pushed, so the flush
               is never counted; inputs the function wrote before the region are evicted, as ncu's
               per-kernel flush does). Then note the CUPTI time and push a fresh external correlation id.
``region_exit``  pop it, note the CUPTI time. Both are a few microseconds.
``finish_run``  deferred (the default): note the run and return at once. ``collect_runs`` (called by the run
               loop every 64 runs, at a config end a second or more after the last collection, at the end of
               the call, and after every run for ``runs="auto"``) synchronises the context, flushes CUPTI once,
               attributes every kernel to its region (see :mod:`nsightx_cupti._attribution`) and returns one
               record per (region, kernel) plus attributes for every run since the last collection. A CUPTI
               flush costs ~0.5 ms, more than a short run, and between collections the host queues runs
               ahead of the GPU, so collecting rarely is what keeps the overhead low.
               With ``backend_options={"cupti_collect": "run"}`` every run is collected as it finishes.
               With ``cupti_drain="wait"`` a helper thread delivers and decodes the CUPTI buffers the GPU has
               completed while the host waits for the device (:mod:`nsightx_cupti._drain`; not the default),
               so the flush after the wait only has the last ones.
"""

from __future__ import annotations

import atexit
import itertools
import threading
import time
import warnings
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Protocol

from nsightx.ext import MeasurementError, RegionId, RunOutput, Scalar, Session, l2_flush_bytes
from nsightx_cupti import _driver
from nsightx_cupti._attribution import (
    METRIC,
    ActivityBatch,
    Attribution,
    Grouped,
    KernelActivity,
    RegionWindow,
    attribute,
    group_windows,
    incomplete,
    silent_launches,
    to_run_output,
    to_run_outputs,
)
from nsightx_cupti._drain import DRAIN_BUFFER_BYTES, FLUSH_PERIOD_MS, DrainMode, wait_draining
from nsightx_cupti._options import CuptiOptions
from nsightx_cupti._tracer import (
    DEFAULT_BUFFER_BYTES,
    OTHER_CLIENTS,
    ActivityTracer,
    cupti_python_version,
    loaded_libcupti,
)

if TYPE_CHECKING:
    from nsightx.ext import Plan

_IDS = itertools.count(1)
"""External ids, unique in the process: an id left pushed on a thread (its region closed on another thread, or
never closed) can then never be a later region's, in this session or the next (each session used to count from 1,
so the next call's first region took the leftover's launches)."""

_OWED: dict[int, int] = {}
"""Thread ident -> how many ids are still pushed on that thread's CUPTI stack for regions closed on another thread.
Only the owning thread can pop them: it does at its next :meth:`CuptiSession.region_enter`, of any session, before
it pushes that region's id (regions do not nest, so none of its own is open then)."""
_OWED_LOCK = threading.Lock()
_get_ident = threading.get_ident


def _pay_owed(tid: int, tracer: Tracer) -> None:
    """Pop the ids this thread (``tid``, the caller) still has pushed for regions closed elsewhere."""
    with _OWED_LOCK:
        n = _OWED.pop(tid, 0)
    for _ in range(n):
        tracer.pop()


def _region_calls(tracer: Tracer) -> tuple[Callable[[int], object], Callable[[], object], Callable[[], int]]:
    """The tracer's push, pop and timestamp for the per-region path, taken once per session.

    Its ``region_calls()`` where it has them (the real tracer: cupti-python's own calls), else calls of its methods
    looked up when made (a test double may lack them, and never opens a region then).
    """
    calls = getattr(tracer, "region_calls", None)
    if calls is not None:
        return calls()
    return (lambda ext: tracer.push(ext)), (lambda: tracer.pop()), (lambda: tracer.timestamp())


class Tracer(Protocol):
    """What the session needs from the CUPTI client (the real one is :class:`~._tracer.ActivityTracer`)."""

    def region_open(self) -> None:
        """A region opens (API tracing may start)."""

    def region_close(self) -> None:
        """A region closed (API tracing may stop)."""

    def push(self, external_id: int) -> None:
        """Push an external id on the calling thread's stack."""

    def pop(self) -> int:
        """Pop the calling thread's top external id."""

    def timestamp(self) -> int:
        """CUPTI's clock, ns."""

    def collect(self) -> ActivityBatch:
        """Flush and return everything delivered since the last call."""


class Device(Protocol):
    """The GPU-side actions of a session (the real one is :class:`CudaDevice`)."""

    def flush_l2(self) -> None:
        """Evict L2 (outside any region)."""

    def synchronize(self) -> None:
        """Wait for every stream of the measured context."""

    def environment(self) -> dict[str, Scalar]:
        """GPU name, rated clocks, L2 size."""


_buffers: dict[int, _driver.DeviceBuffer] = {}
"""Flush buffer of each device, kept between sessions (allocating ~2 x L2 costs ~0.2 ms a call)."""
_facts: dict[int, dict[str, Scalar]] = {}
"""Static facts of each device (name, rated clocks, L2 size), read once per process."""


def release_flush_buffers() -> None:
    """Free the L2 flush buffers kept for later CUPTI sessions (each is twice the device's L2 size)."""
    while _buffers:
        device, buf = _buffers.popitem()
        try:
            ctx = _driver.retain_primary(device)
            with _driver.using(ctx):
                buf.free()
            _driver.release_primary(device)
            _driver.release_primary(device)  # the reference the kept buffer held on its context
        except (OSError, _driver.DriverError):
            pass  # the context is gone (interpreter shutdown): the driver frees it with the process


atexit.register(release_flush_buffers)


class CudaDevice:
    """The measured device through the driver API: its primary context, the flush buffer, attributes.

    The flush buffer stays allocated after the session for the next one on the same device (at least the size
    asked for); :func:`release_flush_buffers` frees it.

    Args:
        device: Device ordinal, or None for the device of the current context (device 0 if none is current).
        flush: Whether ``cache_control="all"`` asks for an L2 flush before each run.
        flush_bytes: Size of the flush buffer; at least twice the L2 size when None.
    """

    def __init__(self, device: int | None, flush: bool, flush_bytes: int | None = None) -> None:
        _driver.init()
        current = _driver.current_context()
        if device is None:
            device = _driver.context_device(current) if current else 0
        self.device = device
        self.ctx = _driver.retain_primary(device)
        if not current:
            _driver.set_current(self.ctx)  # the context torch/CuPy will adopt on their first CUDA call
        self.l2_bytes = int(self._facts()["L2Bytes"] or 0)
        self.buffer: _driver.DeviceBuffer | None = None
        self.reset_persisting = False
        self._persisting_seen = False
        if flush:
            nbytes = l2_flush_bytes(self.l2_bytes, flush_bytes)
            kept = _buffers.get(device)
            if kept is not None and kept.ptr and kept.nbytes >= nbytes:
                self.buffer = kept
            else:
                with _driver.using(self.ctx):
                    if kept is not None:
                        kept.free()
                    else:
                        _driver.retain_primary(device)  # the kept buffer holds its context alive
                    self.buffer = _buffers[device] = _driver.DeviceBuffer(nbytes)
            self.reset_persisting = _driver.attribute(_driver.ATTR_MAX_PERSISTING_L2_CACHE_SIZE, device) > 0

    def _facts(self) -> dict[str, Scalar]:
        facts = _facts.get(self.device)
        if facts is None:
            facts = {
                "GPU": _driver.device_name(self.device),
                "Device": self.device,
                "L2Bytes": _driver.attribute(_driver.ATTR_L2_CACHE_SIZE, self.device),
            }
            for key, attr in (
                ("ComputeClock", _driver.ATTR_CLOCK_RATE),
                ("MemoryClock", _driver.ATTR_MEMORY_CLOCK_RATE),
            ):
                try:
                    facts[key] = _driver.attribute(attr, self.device)
                except _driver.DriverError:
                    facts[key] = None
            _facts[self.device] = facts
        return facts

    def flush_l2(self) -> None:
        """Reset persisting lines (when any can exist), then overwrite the buffer (does not wait for it).

        Persisting lines need a set-aside (``cudaLimitPersistingL2CacheSize``); while the context's is 0, none
        can exist and the reset (~15 us of host time and ~7 us of GPU time per run on a busy H200) is skipped.
        The limit is read before every run (a host-side query, ~1 us; CUPTI traces it) while it is 0, because
        the user's function may raise it; once it was seen above 0 in this session, every run resets without
        asking again (a reset with no persisting line left is merely unneeded).
        This runs before every region, so it makes the driver calls directly: the context is pushed only when
        another one is current (never, with torch: its current context is the primary one).
        """
        buffer = self.buffer
        if buffer is None:
            return
        ctx = self.ctx
        pushed = _driver.current_context() != ctx
        if pushed:
            _driver.push(ctx)
        try:
            if self.reset_persisting and (self._persisting_seen or self.persisting_possible()):
                self._persisting_seen = True
                _driver.reset_persisting_l2()
            buffer.overwrite()
        finally:
            if pushed:
                _driver.pop()

    def persisting_possible(self) -> bool:
        """Whether the current context has a persisting-L2 set-aside."""
        return _driver.persisting_l2_limit() > 0

    def synchronize(self) -> None:
        """Wait for all streams of the context."""
        with _driver.using(self.ctx):
            _driver.synchronize()

    def environment(self) -> dict[str, Scalar]:
        """Static facts about the device (clocks are rated values in kHz, as nsight-python reports them)."""
        env = dict(self._facts())
        env["FlushBytes"] = self.buffer.nbytes if self.buffer else 0
        return env

    def close(self) -> None:
        """Release the primary context (the flush buffer is kept for the next session)."""
        self.buffer = None
        _driver.release_primary(self.device)


class CuptiSession(Session):
    """Measures each region's kernels with CUPTI Activity records.

    Args:
        tracer: The CUPTI client (already started).
        device: The device side (flush, synchronise).
        metrics: Metrics asked for (only ``gpu__time_duration.sum``).
        keep_batches: Keep every run's raw activity in :attr:`batches` (fixture capture, debugging).
    """

    def __init__(
        self,
        tracer: Tracer,
        device: Device,
        metrics: tuple[str, ...] = (METRIC,),
        keep_batches: bool = False,
        deferred: bool = False,
        flush_at: str = "run",
        drain: DrainMode = "off",
    ) -> None:
        self.deferred = deferred
        self.flush_at = flush_at
        self.drain: DrainMode = drain if deferred else "off"  # collected after every run: nothing to drain early
        self._config: int | None = None
        self._finished: list[tuple[int, int]] = []
        self.tracer = tracer
        self.device = device
        self.metrics = metrics
        self.keep_batches = keep_batches
        self.batches: list[tuple[ActivityBatch, list[RegionWindow]]] = []
        self._ids = _IDS
        self._flush_region = flush_at == "region"
        self._push, self._pop, self._stamp = _region_calls(tracer)
        """The tracer's push, pop and timestamp as :meth:`region_enter` and :meth:`region_exit` call them (taken once:
        the real tracer's push and pop are then cupti-python's own calls, without a method of ours around them)."""
        self._open: dict[RegionId, tuple[int, int, int]] = {}
        """Each open region (a :class:`RegionId`, a named tuple: the key as passed) -> its id, CUPTI time, thread."""
        self._windows: list[RegionWindow] = []
        """The windows closed since the last collection. Never replaced, only appended to (by :meth:`region_exit`,
        from any thread) and cut from the front (:meth:`_take_windows`): each is one list operation, atomic, so
        no lock is taken at each region's exit (~0.1 us) and a window appended while a collection takes them
        stays whole for the next one."""
        self._warned_untraced = False
        tracing = getattr(tracer, "api_tracing", "always")
        self._region_apis = tracing == "region" or bool(getattr(tracer, "gated", ()))
        """Whether the tracer switches API records on per region (else its region hooks do nothing: not called)."""
        self._learn_gate = getattr(tracer, "learn_gate", None) if tracing == "learn" else None
        """``api_tracing="learn"``: the tracer's hook that each collection teaches which launch APIs to gate."""
        self._traced_everywhere = tracing == "always" or (tracing == "learn" and not self._region_apis)
        """Whether every launch outside regions leaves a launch record (then a kernel without one is an API the
        tracer switched off for launching nothing that did launch: see :meth:`_untraced`)."""
        self.cost_ns: dict[str, int] = {"sync": 0, "collect": 0, "attribute": 0, "runs": 0}
        """Cumulative host time of :meth:`finish_run`'s steps (the backend's own overhead), ns."""

    def start_run(self, config: int, run: int) -> None:
        """Drain CUPTI at a config's first run (``cupti_drain="config"``); flush L2 (``flush_at="run"``)."""
        if config != self._config:
            self._config = config
            if self.drain == "config" and self._finished:
                self._drain()
        if self.flush_at == "run":
            self.device.flush_l2()

    def region_enter(self, region: RegionId) -> None:
        """Flush L2 (``flush_at="region"``), then open a window and push its external id on this thread.

        The flush is queued before the id is pushed, so its kernel never counts as the region's.
        """
        if self._flush_region:
            self.device.flush_l2()
        ext = next(self._ids)
        tid = _get_ident()
        if _OWED and tid in _OWED:  # a region this thread opened was closed on another: its id goes first
            _pay_owed(tid, self.tracer)
        if self._region_apis:
            self.tracer.region_open()
        t = self._stamp()
        self._push(ext)
        self._open[region] = (ext, t, tid)

    def region_exit(self, region: RegionId, failed: bool) -> None:
        """Pop the id (same thread only) and close the window.

        Closed on another thread (the run loop refuses that and fails the run, but still closes the region here),
        the id cannot be popped (CUPTI's stack is per thread): it stays pushed on the opening thread until that
        thread's next region enter pops it (:data:`_OWED`), and ids are unique in the process, so a
        leftover never matches a later region. The window gets an id no call carries, so its kernels are placed by
        launch time and a kernel the opening thread launches after the close is not counted in it.
        """
        ext, t0, tid = self._open.pop(region)
        if tid == _get_ident():
            self._pop()
        else:  # the id stays on the opening thread's stack until it pops it (see _OWED): not this region's id
            with _OWED_LOCK:
                _OWED[tid] = _OWED.get(tid, 0) + 1
            ext = -ext  # no call carries a negative id: each kernel is placed by its launch time (the window rule)
        t1 = self._stamp()
        if self._region_apis:
            self.tracer.region_close()
        window = RegionWindow(ext, region.annotation, region.config, region.run, t0, t1, tid, failed)
        self._windows.append(window)

    def finish_run(self, config: int, run: int) -> RunOutput:
        """Deferred: note the run (its records come from :meth:`collect_runs`). Otherwise collect it now.

        Raises:
            MeasurementError: records were dropped or a kernel record is incomplete.
        """
        if self.deferred:
            self._finished.append((config, run))
            return RunOutput()
        return self._collect()

    def collect_runs(self) -> dict[tuple[int, int], RunOutput]:
        """Collect every run finished since the last call in one CUPTI flush; outputs keyed (config, run).

        Raises:
            MeasurementError: records were dropped or a kernel record is incomplete.
        """
        if not self.deferred or not self._finished:
            return {}
        finished, self._finished = self._finished, []
        t0 = time.perf_counter_ns()
        pending = self._windows[:]
        ahead = group_windows(pending, finished)  # before the wait, while the GPU works: no record is read
        attribution, windows, grouped = self._attribute(ahead)
        if grouped is None:  # a region closed during the wait: its window is grouped with the others now
            grouped = group_windows(windows, finished)
        outputs = to_run_outputs(attribution, grouped.by_run, self.metrics, rows=True)
        self.cost_ns["runs"] += len(grouped.by_run)
        self.cost_ns["total"] = self.cost_ns.get("total", 0) + time.perf_counter_ns() - t0
        return outputs

    def _collect(self) -> RunOutput:
        """Collect the one run that just finished (``cupti_collect="run"``)."""
        t0 = time.perf_counter_ns()
        attribution, windows, _ = self._attribute(None)
        self.cost_ns["runs"] += 1
        out = to_run_output(attribution, windows, self.metrics)
        self.cost_ns["total"] = self.cost_ns.get("total", 0) + time.perf_counter_ns() - t0
        return out

    def _attribute(self, grouped: Grouped | None) -> tuple[Attribution, list[RegionWindow], Grouped | None]:
        """Synchronise, flush CUPTI once, and attribute every pending window's kernels.

        ``grouped``: the pending windows as grouped before the wait (:func:`group_windows`); handed back when they
        are all of them, else None (a region closed during the wait: they are grouped here).
        """
        t0 = time.perf_counter_ns()
        self._wait()
        t1 = time.perf_counter_ns()
        batch = self.tracer.collect()
        t2 = time.perf_counter_ns()
        windows = self._take_windows()
        if self.keep_batches:
            self.batches.append((batch, windows))
        if grouped is not None and grouped.count != len(windows):
            grouped = None
        learn_gate = self._learn_gate
        attribution = attribute(batch, windows, count_outside=learn_gate is not None, ahead=grouped)
        self._check_silent(batch, windows, attribution)
        if attribution.untraced and windows and self._traced_everywhere:
            self._untraced(attribution.untraced)
        if learn_gate is not None:
            learn_gate(attribution.outside_apis, len(attribution.untraced), len(windows))
        bad = incomplete(attribution, batch)
        if bad is not None:
            raise MeasurementError(
                f"CUPTI delivered an incomplete record for kernel {bad.name[:80]!r} "
                f"(start={bad.start}, end={bad.end}); it was probably still running on a "
                "device other than the measured one. Synchronise that device inside the region."
            )
        cost = self.cost_ns
        cost["sync"] += t1 - t0
        cost["collect"] += t2 - t1
        cost["attribute"] += time.perf_counter_ns() - t2
        return attribution, windows, grouped

    def _take_windows(self) -> list[RegionWindow]:
        """Every window closed so far, cut from :attr:`_windows` (one that closes meanwhile stays there)."""
        pending = self._windows
        taken = pending[:]
        del pending[: len(taken)]
        return taken

    def _drain(self) -> None:
        """Deliver CUPTI's completed buffers now, while the GPU still works (a tracer without ``drain``: no-op)."""
        drain = getattr(self.tracer, "drain", None)
        if drain is not None:
            drain()

    def _wait(self) -> None:
        """Wait for the device; drain CUPTI just before (``end``, ``config``) or all through it (``wait``).

        ``period`` needs no drain of ours: CUPTI's worker thread hands completed buffers over during the wait.
        """
        drain = getattr(self.tracer, "drain", None) if self.drain not in ("off", "period") else None
        if drain is None:
            self.device.synchronize()
        elif self.drain == "wait":
            wait_draining(self.device.synchronize, drain)
        else:
            drain()
            self.device.synchronize()

    def _check_silent(self, batch: ActivityBatch, windows: list[RegionWindow], attribution: Attribution) -> None:
        """A region that made kernel launch calls but got no kernel record is an error, never an empty result.

        Raises:
            MeasurementError: naming the first such region, the likely cause and the fix.
        """
        launches_kernels = getattr(self.tracer, "launches_kernels", None)
        if launches_kernels is None:
            return
        silent = silent_launches(batch, windows, attribution, launches_kernels)
        if silent:
            w, n = silent[0]
            raise MeasurementError(
                f"region {w.annotation!r} (config {w.config}, run {w.run}) made {n} kernel launch call(s) that "
                f"CUPTI recorded, but CUPTI delivered no kernel record for it ({len(silent)} region(s) so): "
                f"{OTHER_CLIENTS} (or the kernels ran on a device other than the measured one and had not "
                "finished). Profile with nsightx before or after that tool rather than while it runs, or use "
                "backend='events'"
            )

    def _untraced(self, kernels: list[KernelActivity]) -> None:
        """Kernels without a launch record: if APIs were switched off, switch them back on, and say so once.

        Such a kernel was launched by an API the tracer had switched off because it had launched nothing until
        then (or before the session started). Switching the learned APIs back on makes later runs whole again;
        the API that launched it will be seen launching and never switched off.
        """
        forget = getattr(self.tracer, "forget_quiet", None)
        restored = forget() if forget is not None else 0
        if restored or not self._warned_untraced:
            self._warned_untraced = True
            extra = (
                (
                    f"; {restored} API(s) switched off for launching nothing so far were switched back on, so "
                    "later runs see them, but runs collected before may miss kernels they launched (pass "
                    "backend_options={'api_filter': 'off'} to never switch APIs off)"
                )
                if restored
                else ""
            )
            warnings.warn(
                f"{len(kernels)} kernel(s) had no traced launch API record and were not counted "
                f"(first: {kernels[0].name[:80]}){extra}",
                RuntimeWarning,
                stacklevel=3,
            )

    def environment(self) -> Mapping[str, Scalar]:
        """Device facts plus what CUPTI was used."""
        env = dict(self.device.environment())
        env["CuptiPython"] = cupti_python_version()
        env["Libcupti"] = loaded_libcupti()
        env["CuptiApiTracing"] = getattr(self.tracer, "api_tracing", None)
        quiet = getattr(self.tracer, "quiet", None)
        env["CuptiQuietApis"] = len(quiet.off) if quiet is not None else None
        env["CuptiGatedApis"] = len(getattr(self.tracer, "gated", ()))
        runs = max(self.cost_ns["runs"], 1)
        for step in ("sync", "collect", "attribute"):
            env[f"CuptiUsPerRun_{step}"] = round(self.cost_ns[step] / runs / 1e3, 1)
        stats = getattr(self.tracer, "stats", {})
        env["CuptiDrain"] = self.drain
        clock = getattr(self.tracer, "clock", None)
        env["CuptiClock"] = "cupti" if clock is None else f"mapped from another client's ticks ({clock.rate:.5f}/ns)"
        env["CuptiDecoder"] = getattr(self.tracer, "decoder", None)
        for key in ("flush", "decode", "flush_decode", "drain", "dropped"):
            env[f"CuptiUsPerRun_{key}"] = round(stats.get(key, 0) / runs / 1e3, 1)
        for key in ("buffers", "records"):
            env[f"CuptiPerRun_{key}"] = round(stats.get(key, 0) / runs, 1)
        env["CuptiDrains"] = int(stats.get("drains", 0))
        return env


@contextmanager
def open_session(plan: Plan, keep_batches: bool = False) -> Iterator[CuptiSession]:
    """Prepare the device, start CUPTI, and undo both when the block ends.

    Args:
        plan: The plan (device, cache_control, metrics and ``backend_options`` are read).
        keep_batches: Keep each run's raw activity on the session (fixture capture).
    """
    opts = CuptiOptions.parse(plan.backend_options, "cupti")
    deferred = opts.cupti_collect != "run"
    drain = opts.cupti_drain if deferred else "off"
    device = CudaDevice(plan.device, flush=plan.cache_control == "all", flush_bytes=opts.flush_bytes)
    try:
        tracer = ActivityTracer.get()
        tracer.start(
            opts.buffer_bytes or (DEFAULT_BUFFER_BYTES if drain == "off" else DRAIN_BUFFER_BYTES),
            api_tracing=opts.api_tracing,
            flush_flag=opts.cupti_flush,
            api_filter=opts.api_filter,
            decode=opts.cupti_decode,
            flush_period_ms=FLUSH_PERIOD_MS if drain == "period" else 0,
        )
        try:
            yield CuptiSession(
                tracer,
                device,
                plan.metrics,
                keep_batches=keep_batches,
                deferred=deferred,
                flush_at=opts.flush_at,
                drain=drain,
            )
        finally:
            tracer.stop()
    finally:
        device.close()
