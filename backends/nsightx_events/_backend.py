"""The ``events`` backend: one pair of CUDA events around each region, through torch.

What it measures is the time between two points on the stream that is current when the region opens and
closes: everything queued on that stream in between (kernels, copies, gaps while the host was still launching,
work the stream waited for), **not** a sum of kernel durations. Hence its metric name,
``region__stream_span_duration``. Work on other streams counts only where the measured stream waits for it.
For kernel times use ``cupti``; this backend exists for machines where CUPTI is missing.
"""

from __future__ import annotations

import ctypes
import functools
import importlib.util
import sys
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from nsightx.ext import (
    LIMIT_PERSISTING_L2_CACHE_SIZE,
    Availability,
    Backend,
    BackendUnavailableError,
    Capabilities,
    ConfigError,
    DeviceAttribute,
    MeasurementError,
    Plan,
    RegionId,
    RunOutput,
    Scalar,
    Session,
    device_attribute,
    l2_flush_bytes,
    load_libcuda,
    new_record,
)

METRIC = "region__stream_span_duration"
"""Elapsed time between the region's open and close events on its stream, ns (not a kernel sum)."""


def _libcuda() -> ctypes.CDLL:
    """Libcuda through :func:`nsightx.ext.load_libcuda`; OSError when there is no NVIDIA driver."""
    lib = load_libcuda()
    if lib is None:
        raise OSError("libcuda.so.1 not found")
    return lib


def _cuda_devices_without_torch() -> int:
    lib = _libcuda()
    if lib.cuInit(0) != 0:
        return 0
    n = ctypes.c_int()
    return n.value if lib.cuDeviceGetCount(ctypes.byref(n)) == 0 else 0


@functools.cache
def _probe() -> Availability:
    if importlib.util.find_spec("torch") is None:
        return Availability(
            available=False,
            reason="torch is not installed (this backend records events with it)",
            remedy="pip install torch (a CUDA build), or use backend='cupti'",
        )
    if "torch" in sys.modules:  # already paid for: ask torch itself
        import torch

        if not torch.cuda.is_available():
            return Availability(
                available=False,
                reason="torch sees no CUDA device",
                remedy="install a CUDA build of torch; check CUDA_VISIBLE_DEVICES",
            )
        return Availability(
            available=True,
            reason=f"torch {torch.__version__}, {torch.cuda.device_count()} CUDA device(s)",
            version=torch.__version__,
        )
    try:
        count = _cuda_devices_without_torch()
    except OSError:
        return Availability(
            available=False,
            reason="no NVIDIA driver (libcuda.so.1 not found)",
            remedy="install the NVIDIA driver, or use backend='host'",
        )
    if count == 0:
        return Availability(
            available=False, reason="no CUDA device visible", remedy="check CUDA_VISIBLE_DEVICES and `nvidia-smi`"
        )
    return Availability(available=True, reason=f"torch installed (not imported yet), {count} CUDA device(s)")


def _reset_persisting_l2() -> bool:
    """``cuCtxResetPersistingL2Cache`` on the current context; False when the driver refuses."""
    try:
        return int(_libcuda().cuCtxResetPersistingL2Cache()) == 0
    except OSError:
        return False


def _persisting_check(index: int) -> Callable[[], bool]:
    """What tells, before a flush, whether the current context may hold persisting L2 lines; decided once a session.

    Asking the driver (``cuCtxGetLimit`` of the persisting-L2 set-aside) is needed while the set-aside is 0,
    because the user's function may raise it; the reset that a 0 saves costs ~15 us of host time and ~7 us of GPU
    time per run. What does not change during a session is settled here, not before every run: without a driver
    the answer is always no; on a device whose largest persisting-L2 size is 0 (no set-aside can ever be made)
    it is always no; otherwise the query is bound once (the function, its argument buffers) and costs one
    foreign call per run. When the driver cannot say, the answer is yes (reset to be safe).

    Args:
        index: CUDA ordinal of the session's device.
    """
    lib = load_libcuda()
    if lib is None:
        return _never
    if device_attribute(DeviceAttribute.MAX_PERSISTING_L2_CACHE_SIZE, index) == 0:
        return _never
    query = lib.cuCtxGetLimit
    value = ctypes.c_size_t()
    out, limit = ctypes.byref(value), ctypes.c_int(LIMIT_PERSISTING_L2_CACHE_SIZE)

    def possible() -> bool:
        return bool(query(out, limit) != 0 or value.value > 0)

    return possible


def _never() -> bool:
    """No persisting L2 line can exist (no driver, or a device without a persisting-L2 set-aside)."""
    return False


STREAMS_KEPT = 64
"""Most stream objects an events session keeps (see :meth:`EventsSession._current_stream`)."""

SPARE_PAIRS = 1024
"""Most event pairs kept for later sessions per (torch, device) (see :func:`spare_pairs`)."""

_SPARE: dict[tuple[Any, int], list[tuple[Any, Any]]] = {}
_SPARE_LOCK = threading.Lock()


def spare_pairs(torch: Any, index: int) -> list[tuple[Any, Any]]:
    """The event pairs an earlier session on this device read and left, handed to a new session (once).

    A session used to start with no pair and make two ``torch.cuda.Event`` objects at every region of every call
    (each also a driver event at its first record), on the host's path between two launches; a pair that was
    read is reused as well. Keyed by the torch module too, so a process that swaps it (the tests' doubles) never
    mixes their events.
    """
    with _SPARE_LOCK:
        return _SPARE.pop((torch, index), [])


def keep_pairs(torch: Any, index: int, pairs: list[tuple[Any, Any]]) -> None:
    """Keep read pairs for the next session on this device, up to :data:`SPARE_PAIRS`."""
    with _SPARE_LOCK:
        kept = _SPARE.setdefault((torch, index), [])
        kept.extend(pairs[: max(0, SPARE_PAIRS - len(kept))])


def _stream_key_reader(torch: Any) -> Callable[[int], Any]:
    """What returns the identity of the current stream of a device (an ordinal): torch's ``(id, device, type)``.

    ``torch._C._cuda_getCurrentStream`` is what ``torch.cuda.current_stream`` itself asks before it builds its
    object. A torch without it gets a reader that answers ``None``: every run then asks
    ``torch.cuda.current_stream``, as before this cache existed.
    """
    reader = getattr(getattr(torch, "_C", None), "_cuda_getCurrentStream", None)
    if reader is None:
        return _no_key
    return reader


def _no_key(index: int) -> None:
    """No stream identity (the stream object is then made every time)."""
    return None


class EventsSession(Session):
    """Records a start and an end event on the current stream around each region; reads them in batches.

    Deferred (like the CUPTI session): :meth:`finish_run` only notes the run, and :meth:`collect_runs`, which
    the run loop calls every 64 runs, at config ends and at the end of the call, waits for the recorded events
    and reads every pair at once. Synchronising after every run kept the host from queueing the next run while
    the GPU worked, and cost the whole host time of each run on top of its GPU time (1.23x a bare loop on the
    allocated-once matmul sweep, ``98c9cf0:benchmarks/results/2026-12-03-diag-alloc-once.json``). A span is still the
    time between its own two events on its stream, so what it measures is unchanged; without the per-run wait
    the GPU no longer idles between runs, so a short region's start event no longer fires before its first
    kernel has even been launched (less launch latency inside the span).

    Args:
        device: CUDA device ordinal (None: torch's current device).
        flush: Overwrite a buffer of at least twice the L2 size before each run (``cache_control="all"``).
        flush_bytes: Flush buffer size override.
        deferred: False reads every run's events at its end (the behaviour before deferred collection).
    """

    def __init__(self, device: int | None, flush: bool, flush_bytes: int | None = None, deferred: bool = True) -> None:
        import torch

        self._torch = torch
        self.deferred = deferred
        self.device = torch.device("cuda", torch.cuda.current_device() if device is None else device)
        self._index = int(self.device.index or 0)
        props = torch.cuda.get_device_properties(self.device)
        self.gpu = props.name
        self.l2_bytes = int(getattr(props, "L2_cache_size", 0) or 0)
        self.buffer: Any = None
        if flush:
            nbytes = l2_flush_bytes(self.l2_bytes, flush_bytes)
            self.buffer = torch.empty(nbytes // 4, dtype=torch.int32, device=self.device)
        self._pool: list[tuple[Any, Any]] = spare_pairs(torch, self._index)
        self._open: dict[tuple[str, int, int], tuple[Any, Any]] = {}
        self._done: list[tuple[RegionId, bool, Any, Any]] = []
        self._finished: list[tuple[int, int]] = []
        self._lock = threading.Lock()
        self._streams: dict[Any, Any] = {}
        """torch's stream object per (stream id, device, type) of the current stream: see :meth:`_current_stream`."""
        self._stream_key = _stream_key_reader(torch)
        self._persisting = _persisting_check(self._index) if flush else _never
        self._persisting_ok = True
        self.resets = 0
        """Persisting-L2 resets made (only while the context has a set-aside)."""

    def release(self) -> None:
        """The session ends: its read pairs go to the next session on this device (:func:`keep_pairs`).

        Pairs not read (a run the call stopped before reading) are not kept: their events may still be pending.
        """
        with self._lock:
            pool, self._pool = self._pool, []
        keep_pairs(self._torch, self._index, pool)

    def _pair(self) -> tuple[Any, Any]:
        with self._lock:
            if self._pool:
                return self._pool.pop()
        make = self._torch.cuda.Event
        return make(enable_timing=True), make(enable_timing=True)

    def _flush(self, run: int) -> None:
        """Reset persisting L2 lines (when any can exist), then overwrite the flush buffer on the current stream."""
        if self.buffer is None:
            return
        # the current context is torch's (its current device); once a set-aside was seen, reset without asking
        if self._persisting_ok and (self.resets or self._persisting()):
            self._persisting_ok = _reset_persisting_l2()
            self.resets += 1
        self.buffer.fill_(run & 0x7F)

    def _current_stream(self) -> Any:
        """This thread's current stream on the session's device, as the torch object an event records on.

        ``torch.cuda.current_stream`` builds a new stream object each time (~2-3 us of host time on the H100's
        host, twice a run); the stream's identity (id, device, type) costs one call into torch's C extension. The
        object made for an identity is kept, so a run on the same stream as an earlier one makes none, and a
        stream the user switched to (between runs or inside a region) is still the one recorded on. At most
        :data:`STREAMS_KEPT` are kept (a function that makes a new stream every run does not grow the cache).
        """
        key = self._stream_key(self._index)
        stream = self._streams.get(key)
        if stream is None:
            streams = self._streams
            if len(streams) >= STREAMS_KEPT:
                streams.clear()
            stream = self._torch.cuda.current_stream(self._index)
            if key is not None:
                streams[key] = stream
        return stream

    def region_enter(self, region: RegionId) -> None:
        """Flush L2 (``cache_control="all"``), then record the start event on this thread's current stream.

        The flush is queued before the start event, so it is not part of the span; inputs the function wrote
        before the region are evicted too, as the CUPTI backend and ncu's per-kernel flush do.
        """
        self._flush(region.run)
        start, end = self._pair()
        self._open[(region.annotation, region.config, region.run)] = (start, end)
        start.record(self._current_stream())

    def region_exit(self, region: RegionId, failed: bool) -> None:
        """Record the end event on this thread's current stream."""
        start, end = self._open.pop((region.annotation, region.config, region.run))
        end.record(self._current_stream())
        with self._lock:
            self._done.append((region, failed, start, end))

    def finish_run(self, config: int, run: int) -> RunOutput:
        """Deferred: note the run (its records come from :meth:`collect_runs`). Otherwise read it now.

        Raises:
            MeasurementError: an event pair could not be read.
        """
        if self.deferred:
            self._finished.append((config, run))
            return RunOutput()
        return dict(self._read(self._take(), [])).get((config, run), RunOutput())

    def collect_runs(self) -> dict[tuple[int, int], RunOutput]:
        """Wait for every run finished since the last call and read its events; outputs keyed (config, run).

        Raises:
            MeasurementError: an event pair could not be read.
        """
        return dict(self.completed_runs())

    def completed_runs(self) -> Iterator[tuple[tuple[int, int], RunOutput]]:
        """What :meth:`collect_runs` returns, one run at a time, in the order the runs finished.

        Each run is handed back once its last region's end event fired and its pairs were read, so the run loop
        writes it while the GPU still works through the later runs. The runs to read are taken now, when this is
        called (a second call reads only runs finished since); a run whose events are never reached (the reading
        stopped at an error, or the caller stopped asking) is not read later: its pairs go back to the pool.

        Raises:
            MeasurementError: an event pair could not be read (from the iteration, at that run).
        """
        if not self.deferred or not self._finished:
            return iter(())
        finished, self._finished = self._finished, []
        return self._read(self._take(), finished)

    def _take(self) -> list[tuple[RegionId, bool, Any, Any]]:
        """Every recorded pair of a closed region not read yet (this session reads it now)."""
        with self._lock:
            done, self._done = self._done, []
        return done

    def _read(
        self, done: list[tuple[RegionId, bool, Any, Any]], finished: list[tuple[int, int]]
    ) -> Iterator[tuple[tuple[int, int], RunOutput]]:
        """Each run's output: the runs of ``finished`` in that order, then those of the other pairs of ``done``.

        A run is handed back once each of its regions' end events fired: every pair becomes one span and, unless
        the region failed, one record (in the order the regions closed); then the pairs go back to the pool.
        """
        by_run: dict[tuple[int, int], list[tuple[RegionId, bool, Any, Any]]] = {key: [] for key in finished}
        for item in done:
            region = item[0]
            by_run.setdefault((region.config, region.run), []).append(item)
        try:
            for key, pairs in by_run.items():
                yield key, _run_output(pairs)
        finally:
            with self._lock:
                self._pool.extend((start, end) for _, _, start, end in done)

    def environment(self) -> Mapping[str, Scalar]:
        """GPU name and rated clocks (kHz) from the driver, L2 and flush sizes."""
        env: dict[str, Scalar] = {
            "GPU": self.gpu,
            "Device": self.device.index,
            "L2Bytes": self.l2_bytes,
            "FlushBytes": 0 if self.buffer is None else self.buffer.numel() * 4,
            "PersistingL2Reset": self._persisting_ok if self.buffer is not None else None,
            "EventsCollect": "batch" if self.deferred else "run",
        }
        env.update(_rated_clocks(self._index))
        return env


def _run_output(pairs: list[tuple[RegionId, bool, Any, Any]]) -> RunOutput:
    """Wait for each region's end event and read its pair: its span and, unless it failed, its record.

    Raises:
        MeasurementError: an event pair could not be read.
    """
    out = RunOutput()
    for region, failed, start, end in pairs:
        try:
            end.synchronize()
            ms = start.elapsed_time(end)
        except RuntimeError as e:
            raise MeasurementError(f"CUDA events of region {region.annotation!r} could not be read: {e}") from e
        out.region_attributes[region.annotation] = {"span_ns": round(ms * 1e6)}
        if not failed:
            out.records.append(
                new_record(region.annotation, region.config, region.run, "region", METRIC, ms * 1e6, "ns", 0)
            )
    return out


@functools.cache
def _rated_clocks(index: int) -> dict[str, Scalar]:
    """The device's rated SM and memory clocks, kHz, asked once per process and device.

    They are fixed facts of the board, and asking the driver took ~1.4 ms per call on the H200 (after the
    call's last wait, on its measured path: ``98c9cf0:benchmarks/results/2026-12-04-s7-call-timeline-before.json``).
    """
    if load_libcuda() is None:
        return {}
    return {
        "ComputeClock": device_attribute(DeviceAttribute.CLOCK_RATE, index),
        "MemoryClock": device_attribute(DeviceAttribute.MEMORY_CLOCK_RATE, index),
    }


class EventsBackend(Backend):
    """The span of each region on its CUDA stream, from a pair of CUDA events (``region__stream_span_duration``).

    For machines where CUPTI is missing. The span includes launch gaps and everything else queued on the stream
    between the two events, so it is at least the sum of the region's kernel times and, for short kernels
    launched from Python, often much more.
    """

    name = "events"
    description = "CUDA events around each region: its span on the stream (region__stream_span_duration)"
    capabilities = Capabilities(
        metrics=frozenset({METRIC}),
        default_metrics=(METRIC,),
        cache_control=frozenset({"all", "none"}),
        clock_control=frozenset({"none"}),
        replay_modes=frozenset({"kernel"}),
        needs_gpu=True,
        cost=20,
        auto=True,
    )

    @classmethod
    def availability(cls) -> Availability:
        """Whether torch and a CUDA device are present. Never raises; does not import torch if not imported."""
        try:
            return _probe()
        except Exception as e:
            return Availability(available=False, reason=f"probe failed: {type(e).__name__}: {e}")

    def validate(self, plan: Plan) -> None:
        """Reject unknown ``backend_options`` and metrics.

        Raises:
            ConfigError: an unknown key, a bad value or a metric it cannot measure.
        """
        from nsightx_events._options import EventsOptions

        EventsOptions.parse(plan.backend_options, self.name)
        wrong = [m for m in plan.metrics if m != METRIC]
        if wrong:
            raise ConfigError(
                f"the events backend measures only {METRIC!r} (the region's span on its stream), "
                f"not {wrong}; use backend='cupti' for kernel times or 'ncu' for counters"
            )

    @contextmanager
    def session(self, plan: Plan) -> Iterator[Session]:
        """A session on the plan's device.

        Raises:
            BackendUnavailableError: torch or a CUDA device is missing.
        """
        avail = self.availability()
        if not avail.available:
            raise BackendUnavailableError(
                f"backend 'events' is not available: {avail.reason}. {avail.remedy}", backend=self.name
            )
        from nsightx_events._options import EventsOptions

        opts = EventsOptions.parse(plan.backend_options, self.name)
        session = EventsSession(
            plan.device,
            flush=plan.cache_control == "all",
            flush_bytes=opts.flush_bytes,
            deferred=opts.events_collect != "run",
        )
        try:
            yield session
        finally:
            session.buffer = None
            session.release()
