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
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from nsightx._backend import (
    Availability,
    Backend,
    Capabilities,
    RunOutput,
    Session,
    check_byte_option,
    check_option_names,
)
from nsightx._errors import BackendUnavailableError, ConfigError, MeasurementError
from nsightx._plan import Plan
from nsightx._records import Record, RegionId, Scalar

METRIC = "region__stream_span_duration"
"""Elapsed time between the region's open and close events on its stream, ns (not a kernel sum)."""

OPTIONS = {"flush_bytes": "size of the L2 flush buffer in bytes (default and minimum: twice the L2 size)"}
"""``backend_options`` keys this backend accepts."""


@functools.cache
def _libcuda() -> ctypes.CDLL:
    return ctypes.CDLL("libcuda.so.1")


def _cuda_devices_without_torch() -> int:
    lib = _libcuda()
    if lib.cuInit(0) != 0:
        return 0
    n = ctypes.c_int()
    return n.value if lib.cuDeviceGetCount(ctypes.byref(n)) == 0 else 0


@functools.cache
def _probe() -> Availability:
    if importlib.util.find_spec("torch") is None:
        return Availability(available=False, reason="torch is not installed (this backend records events with it)",
                            remedy="pip install torch (a CUDA build), or use backend='cupti'")
    if "torch" in sys.modules:  # already paid for: ask torch itself
        import torch

        if not torch.cuda.is_available():
            return Availability(available=False, reason="torch sees no CUDA device",
                                remedy="install a CUDA build of torch; check CUDA_VISIBLE_DEVICES")
        return Availability(available=True, reason=f"torch {torch.__version__}, {torch.cuda.device_count()} "
                            "CUDA device(s)", version=torch.__version__)
    try:
        count = _cuda_devices_without_torch()
    except OSError:
        return Availability(available=False, reason="no NVIDIA driver (libcuda.so.1 not found)",
                            remedy="install the NVIDIA driver, or use backend='host'")
    if count == 0:
        return Availability(available=False, reason="no CUDA device visible",
                            remedy="check CUDA_VISIBLE_DEVICES and `nvidia-smi`")
    return Availability(available=True, reason=f"torch installed (not imported yet), {count} CUDA device(s)")


def _reset_persisting_l2() -> bool:
    """``cuCtxResetPersistingL2Cache`` on the current context; False when the driver refuses."""
    try:
        return int(_libcuda().cuCtxResetPersistingL2Cache()) == 0
    except OSError:
        return False


class EventsSession(Session):
    """Records a start and an end event on the current stream around each region.

    Args:
        device: CUDA device ordinal (None: torch's current device).
        flush: Overwrite a buffer of at least twice the L2 size before each run (``cache_control="all"``).
        flush_bytes: Flush buffer size override.
    """

    def __init__(self, device: int | None, flush: bool, flush_bytes: int | None = None) -> None:
        import torch

        self._torch = torch
        self.device = torch.device("cuda", torch.cuda.current_device() if device is None else device)
        props = torch.cuda.get_device_properties(self.device)
        self.gpu = props.name
        self.l2_bytes = int(getattr(props, "L2_cache_size", 0) or 0)
        self.buffer: Any = None
        if flush:
            nbytes = max(flush_bytes or 0, 2 * self.l2_bytes, 1 << 20)
            self.buffer = torch.empty(nbytes // 4, dtype=torch.int32, device=self.device)
        self._pool: list[tuple[Any, Any]] = []
        self._open: dict[tuple[str, int, int], tuple[Any, Any]] = {}
        self._done: list[tuple[RegionId, bool, Any, Any]] = []
        self._lock = threading.Lock()
        self._persisting_ok = True

    def _pair(self) -> tuple[Any, Any]:
        with self._lock:
            if self._pool:
                return self._pool.pop()
        make = self._torch.cuda.Event
        return make(enable_timing=True), make(enable_timing=True)

    def _flush(self, run: int) -> None:
        """Reset persisting L2 lines and overwrite the flush buffer on the current stream."""
        if self.buffer is None:
            return
        if self._persisting_ok:  # the current context is torch's: its current device
            self._persisting_ok = _reset_persisting_l2()
        self.buffer.fill_(run & 0x7F)

    def region_enter(self, region: RegionId) -> None:
        """Flush L2 (``cache_control="all"``), then record the start event on this thread's current stream.

        The flush is queued before the start event, so it is not part of the span; inputs the function wrote
        before the region are evicted too, as the CUPTI backend and ncu's per-kernel flush do.
        """
        self._flush(region.run)
        start, end = self._pair()
        self._open[(region.annotation, region.config, region.run)] = (start, end)
        start.record(self._torch.cuda.current_stream(self.device))

    def region_exit(self, region: RegionId, failed: bool) -> None:
        """Record the end event on this thread's current stream."""
        start, end = self._open.pop((region.annotation, region.config, region.run))
        end.record(self._torch.cuda.current_stream(self.device))
        with self._lock:
            self._done.append((region, failed, start, end))

    def finish_run(self, config: int, run: int) -> RunOutput:
        """Wait for each end event and turn each pair into one record.

        Raises:
            MeasurementError: an event pair could not be read.
        """
        with self._lock:
            done, self._done = self._done, []
        out = RunOutput()
        for region, failed, start, end in done:
            try:
                end.synchronize()
                ms = start.elapsed_time(end)
            except RuntimeError as e:
                raise MeasurementError(f"CUDA events of region {region.annotation!r} could not be read: {e}") from e
            finally:
                with self._lock:
                    self._pool.append((start, end))
            out.region_attributes[region.annotation] = {"span_ns": round(ms * 1e6)}
            if not failed:
                out.records.append(Record(
                    annotation=region.annotation, config=region.config, run=region.run, kernel="region",
                    metric=METRIC, value=ms * 1e6, unit="ns", seq=0))
        return out

    def environment(self) -> Mapping[str, Scalar]:
        """GPU name and rated clocks (kHz) from the driver, L2 and flush sizes."""
        env: dict[str, Scalar] = {"GPU": self.gpu, "Device": self.device.index, "L2Bytes": self.l2_bytes,
                                  "FlushBytes": 0 if self.buffer is None else self.buffer.numel() * 4,
                                  "PersistingL2Reset": self._persisting_ok if self.buffer is not None else None}
        try:
            lib = _libcuda()
            for key, attr in (("ComputeClock", 13), ("MemoryClock", 36)):
                value = ctypes.c_int()
                ok = lib.cuDeviceGetAttribute(ctypes.byref(value), attr, self.device.index) == 0
                env[key] = value.value if ok else None
        except OSError:
            pass
        return env


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
        check_option_names(plan, OPTIONS, self.name)
        check_byte_option(plan, "flush_bytes")
        wrong = [m for m in plan.metrics if m != METRIC]
        if wrong:
            raise ConfigError(f"the events backend measures only {METRIC!r} (the region's span on its stream), "
                              f"not {wrong}; use backend='cupti' for kernel times or 'ncu' for counters")

    @contextmanager
    def session(self, plan: Plan) -> Iterator[Session]:
        """A session on the plan's device.

        Raises:
            BackendUnavailableError: torch or a CUDA device is missing.
        """
        avail = self.availability()
        if not avail.available:
            raise BackendUnavailableError(f"backend 'events' is not available: {avail.reason}. {avail.remedy}",
                                          backend=self.name)
        session = EventsSession(plan.device, flush=plan.cache_control == "all",
                                flush_bytes=plan.backend_options.get("flush_bytes"))
        try:
            yield session
        finally:
            session.buffer = None
