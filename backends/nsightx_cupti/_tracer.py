"""The process-wide CUPTI Activity client: buffers, enabled kinds, external ids, flushes.

CUPTI allows one set of activity callbacks per process, so one :class:`ActivityTracer` exists per process and
sessions borrow it, one at a time. cupti-python is imported here, inside functions, only when a CUPTI session
starts. Only the Activity API is used (no ``subscribe``), which is what works with cupti-python 13.x against the
libcupti 13.0 that torch loads.

Records are copied out of CUPTI's buffer into small tuples inside the buffer-completed callback, so nothing
refers to CUPTI memory after the callback returns.

**Other CUPTI clients.** CUPTI keeps one set of activity callbacks per process. Another client in the same
process (torch.profiler's Kineto, Nsight Systems or compute-sanitizer injected through
``CUDA_INJECTION64_PATH``) registers its own, or finalises CUPTI when it is done, and from then on our records
go elsewhere or nowhere: after one ``torch.profiler`` session a CUPTI call returned no records and no error
(``98c9cf0:benchmarks/results/2026-12-03-diag-alloc-once.json``). So every :meth:`ActivityTracer.start` registers the
callbacks again and enables the kinds again (which also re-initialises a finalised CUPTI), refuses to start
while torch.profiler is recording, and makes one traced driver call under a reserved external id, the
*canary*. The first collection of the session must deliver it; if it delivers nothing at all, CUPTI is not
reporting to this process's tracer and :meth:`ActivityTracer.collect` raises a :class:`MeasurementError` naming
the likely cause, instead of an empty result.
"""

from __future__ import annotations

import ctypes
import functools
import importlib.metadata
import os
import sys
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from nsightx.ext import MeasurementError
from nsightx_cupti._attribution import ActivityBatch, ApiActivity, KernelActivity
from nsightx_cupti._clock import ClockMap, calibrate, foreign
from nsightx_cupti._quiet import ApiKey, LaunchGate, QuietApis

if TYPE_CHECKING:
    from nsightx_cupti._raw import RawBuffers

DEFAULT_BUFFER_BYTES = 256 * 1024
"""Size of each activity buffer handed to CUPTI (hundreds of records; CUPTI asks for another when one fills).

Measured on the H200: the sweep of 98c9cf0:benchmarks/cupti_overhead.py took 1.4x longer with 8 MiB buffers."""


CANARY_ID = (1 << 63) - 1
"""External id pushed around the start-of-session canary call (sessions count their ids up from 1)."""

OTHER_CLIENTS = (
    "another CUPTI client in this process took CUPTI's activity callbacks or finalised CUPTI: "
    "torch.profiler (Kineto), Nsight Systems, compute-sanitizer or another CUPTI-based tool"
)
"""The likely cause of activity that does not arrive, for error messages."""


def _default_canary() -> None:
    """One cheap driver API call (``cuCtxGetCurrent``), traced by CUPTI's DRIVER kind."""
    from nsightx_cupti import _driver

    _driver.current_context()


def _injected_tool() -> str | None:
    """The tool injected into this process by CUDA (``CUDA_INJECTION64_PATH``: nsys, ncu, compute-sanitizer)."""
    return os.environ.get("CUDA_INJECTION64_PATH") or None


def torch_profiler_recording() -> bool:
    """Whether torch.profiler (or autograd's profiler) is recording now; False when torch is not imported."""
    torch = sys.modules.get("torch")
    if torch is None:
        return False
    try:
        return bool(torch.autograd.profiler._is_profiler_enabled)
    except Exception:  # a torch without this flag: cannot tell
        return False


def cupti_module() -> Any:
    """Import and return ``cupti.cupti`` (raises ImportError when cupti-python is missing)."""
    from cupti import cupti

    return cupti


@functools.cache
def cupti_python_version() -> str | None:
    """Installed cupti-python version, or None."""
    try:
        return importlib.metadata.version("cupti-python")
    except importlib.metadata.PackageNotFoundError:
        return None


_libcupti_path: str | None = None


def loaded_libcupti() -> str | None:
    """Path of the libcupti mapped into this process (the one torch or cupti-python loaded), if any.

    Read from /proc/self/maps once it is found (a library stays mapped), so later sessions pay nothing.
    """
    global _libcupti_path
    if _libcupti_path is not None:
        return _libcupti_path
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if "libcupti" in line:
                    _libcupti_path = line.split()[-1]
                    return _libcupti_path
    except OSError:
        return None
    return None


class ActivityTracer:
    """Owns CUPTI activity collection for the process.

    Use :meth:`get` for the instance. :meth:`start` enables the kinds, :meth:`collect` flushes and returns what
    was delivered since the last call, :meth:`stop` disables everything again so that later non-CUPTI sessions
    run untraced.
    """

    _instance: ActivityTracer | None = None
    _instance_lock = threading.Lock()

    @classmethod
    def get(cls) -> ActivityTracer:
        """The process-wide tracer (created on first use; imports cupti-python)."""
        with cls._instance_lock:
            if cls._instance is None:
                cls._instance = cls(cupti_module(), clock_check=True, raw_decode=True)
            return cls._instance

    def __init__(
        self,
        cupti: Any,
        canary: Callable[[], None] | None = _default_canary,
        *,
        clock_check: bool = False,
        raw_decode: bool = False,
    ) -> None:
        self._cupti = cupti
        self.raw_decode = raw_decode
        """Whether ``decode="ctypes"`` may read buffers through :mod:`nsightx_cupti._raw` (on for the process-wide
        tracer of :meth:`get`; test doubles of cupti-python have no libcupti behind them)."""
        self._raw: RawBuffers | None = None
        self._raw_failed: str | None = None
        """Why the ctypes decoder could not be set up (then cupti-python's callbacks are used)."""
        self.decoder = "cupti-python"
        """Which decoder the running session's buffers go through (``ctypes`` or ``cupti-python``)."""
        self._canary = canary
        self.clock_check = clock_check
        """Refuse records whose timestamps are not wall-clock nanoseconds (on for the process-wide tracer of
        :meth:`get`; test doubles with small made-up timestamps leave it off)."""
        self.clock: ClockMap | None = None  # set by start() when another client's clock stamps CUPTI's records
        self._int_stamps = False  # get_timestamp answered an int at start()'s clock check (see region_calls)
        self._canary_pending = False
        self.reregister = True
        """Register the callbacks at every :meth:`start` (False: a dispatcher in front of this tracer registered
        them and forwards to it; ``98c9cf0:benchmarks/cupti_breakdown.py`` does, to compare with a minimal client)."""
        kinds = cupti.ActivityKind
        self._k_kernel, self._k_runtime = int(kinds.CONCURRENT_KERNEL), int(kinds.RUNTIME)
        self._k_driver, self._k_external = int(kinds.DRIVER), int(kinds.EXTERNAL_CORRELATION)
        self._ext_kind = int(cupti.ExternalCorrelationKind.CUSTOM2)
        self._lock = threading.Lock()
        self._pending = ActivityBatch()
        self._errors: list[str] = []
        self._requested = 0
        """Buffers cupti-python's callbacks handed to CUPTI and not given back yet (see :meth:`_holds`)."""
        self.buffer_bytes = DEFAULT_BUFFER_BYTES
        self.active = False
        self.quiet = QuietApis(self._api_name)
        """APIs switched off while tracing because they launched nothing (learned, kept for the process)."""
        self.api_tracing = "always"
        """``always``: API records for the whole session; ``region``: only while a region is open; ``learn``: for
        the whole session, but those of the launch APIs in :attr:`gate` only while a region is open."""
        self.gate = LaunchGate()
        """Launch APIs learned to launch kernels outside regions (``api_tracing="learn"``), kept for the process."""
        self._gated: tuple[tuple[ApiKey, Callable[[int, int], Any]], ...] = ()
        """Each launch API switched off outside regions in this session, with its per-API switch (see :meth:`_gate`)."""
        self.api_filter = "learn"
        """``learn``: APIs seen to launch nothing are switched off (:mod:`nsightx_cupti._quiet`); ``off``: never."""
        self._open_regions = 0
        self._launches: dict[ApiKey, bool] = {}
        """:meth:`launches_kernels`'s answer for each API asked about."""
        self.flush_period_ms = 0  # CUPTI's periodic flush of this session, ms (0: none; cupti_drain="period")
        self.flush_flag = "complete"
        """How :meth:`collect` flushes: ``complete``, ``forced`` or ``plain`` (see :meth:`_flush`)."""
        self.stats: dict[str, float] = {}
        """The tracer's own work, ns: ``flush`` (:meth:`collect`'s), ``decode`` (in the callback), ``flush_decode``
        (``decode`` inside that flush), ``drain``, ``dropped``; counts: ``collects``, ``buffers``, ``records``,
        ``drains``, ``drain_errors``, ``forced_after_default``, ``forced_at_stop`` (forced flushes, see collect)."""

    # --- CUPTI callbacks (may run on a CUPTI thread) --------------------------------------------------------
    def _buffer_requested(self) -> tuple[int, int]:
        with self._lock:
            self._requested += 1
        return self.buffer_bytes, 0

    def _buffer_completed(self, activities: Any) -> None:
        """Copy one delivered buffer's records into :attr:`_pending` (CUPTI calls this inside a flush).

        A forced flush after the GPU wait runs this on the critical path, so it reads each field once, binds
        everything it calls to locals and builds the named tuples without their Python-level constructor.
        """
        t0 = time.perf_counter_ns()
        with self._lock:  # CUPTI gives each buffer back once
            self._requested = max(0, self._requested - 1)
        try:
            kernels: list[KernelActivity] = []
            apis: dict[int, ApiActivity] = {}
            externals: dict[int, int] = {}
            k_kernel, k_runtime, k_driver = self._k_kernel, self._k_runtime, self._k_driver
            k_external, ext_kind = self._k_external, self._ext_kind
            new = tuple.__new__  # the named tuples' own constructor is a Python function: ~2x slower
            add_kernel = kernels.append
            for a in activities:
                kind = a.kind
                if kind == k_kernel:
                    add_kernel(
                        new(
                            KernelActivity,
                            (
                                a.name,
                                a.start,
                                a.end,
                                a.correlation_id,
                                a.stream_id,
                                a.device_id,
                                a.context_id,
                                a.graph_id,
                                a.graph_node_id,
                            ),
                        )
                    )
                elif kind == k_external:
                    if a.external_kind == ext_kind:
                        externals[a.correlation_id] = a.external_id
                elif kind == k_runtime or kind == k_driver:
                    corr = a.correlation_id
                    domain = "runtime" if kind == k_runtime else "driver"
                    apis[corr] = new(ApiActivity, (corr, a.start, a.end, a.thread_id, a.cbid, domain))
            self._deliver(kernels, apis, externals, len(activities), time.perf_counter_ns() - t0)
        except Exception as e:  # never raise into CUPTI; report at the next collect()
            self._errors.append(f"{type(e).__name__}: {e}")

    def _deliver(
        self,
        kernels: list[KernelActivity],
        apis: dict[int, ApiActivity],
        externals: dict[int, int],
        records: int,
        decode_ns: int,
    ) -> None:
        """Add one decoded buffer to :attr:`_pending` (from either decoder, on whichever thread CUPTI calls)."""
        with self._lock:
            pending = self._pending
            pending.kernels.extend(kernels)
            pending.apis.update(apis)
            pending.externals.update(externals)
            self._count("buffers", 1)
            self._count("records", records)
            self._count("decode", decode_ns)

    def _decode_error(self, message: str) -> None:
        """A buffer the ctypes decoder could not read: reported by the next :meth:`collect`."""
        self._errors.append(message)

    def _raw_buffers(self) -> RawBuffers | None:
        """The ctypes decoder over the libcupti cupti-python loaded; None (once, for good) if it cannot be had."""
        if self._raw is None and not self._raw_failed:
            from nsightx_cupti._raw import RawBuffers, open_libcupti

            try:
                self._cupti.get_timestamp()  # cupti-python loads libcupti on its first call
                path = loaded_libcupti()
                if path is None:
                    raise OSError("no libcupti is mapped into this process")
                kinds = (self._k_kernel, self._k_runtime, self._k_driver, self._k_external)
                self._raw = RawBuffers(open_libcupti(path), kinds, self._ext_kind, self._deliver, self._decode_error)
            except (OSError, AttributeError) as e:
                self._raw_failed = f"{type(e).__name__}: {e}"
        return self._raw

    def _register(self, decode: str) -> None:
        """Make this tracer's buffer callbacks CUPTI's: the ctypes decoder if asked for and usable, else cupti-python's.

        :attr:`decoder` says which was registered.
        """
        raw = self._raw_buffers() if decode == "ctypes" and self.raw_decode else None
        if raw is not None:
            try:
                raw.register(self.buffer_bytes)
                self.decoder = "ctypes"
                return
            except OSError as e:
                self._raw_failed = str(e)
        self._cupti.activity_register_callbacks(self._buffer_requested, self._buffer_completed)
        self.decoder = "cupti-python"

    def _count(self, key: str, value: float) -> None:
        self.stats[key] = self.stats.get(key, 0) + value

    # --- session-facing API ---------------------------------------------------------------------------------
    def start(
        self,
        buffer_bytes: int = DEFAULT_BUFFER_BYTES,
        api_tracing: str = "always",
        flush_flag: str = "complete",
        api_filter: str = "learn",
        decode: str = "ctypes",
        flush_period_ms: int = 0,
    ) -> None:
        """Register the buffer callbacks, enable the activity kinds, and make the canary call.

        The callbacks are registered at every start, not once per process: another CUPTI client may have
        replaced them since the last session (see the module docstring).

        Kernel and external-correlation records are enabled for the whole session. API records (needed to tie
        a kernel to its launch, and without which CUPTI writes no external-correlation records) are enabled for
        the whole session (``api_tracing="always"``, the default), minus the APIs learned to be quiet (see
        :mod:`nsightx_cupti._quiet`), or only while a region is open (``"region"``: nothing outside regions is
        recorded, but switching the two kinds on and off costs ~110 us per region on the H200). ``"learn"`` is
        ``"always"`` with the launch APIs of :attr:`gate` on only while a region is open (see
        :class:`~nsightx_cupti._quiet.LaunchGate`).

        Args:
            buffer_bytes: Size of each activity buffer.
            api_tracing: ``always``, ``region`` or ``learn``.
            flush_flag: ``complete`` (default), ``forced`` or ``plain`` (overhead studies: may lose kernels).
            api_filter: ``learn`` (default): switch off APIs seen to launch nothing; ``off``: record every API.
            decode: ``ctypes`` (default, where it can be set up: :mod:`nsightx_cupti._raw`) or ``cupti-python``.
            flush_period_ms: When positive, CUPTI's worker thread delivers completed full buffers this often
                (``cuptiActivityFlushPeriod``; :meth:`stop` sets it back to 0, CUPTI's default).

        Raises:
            MeasurementError: another CUPTI session is active in this process, or torch.profiler is recording.
        """
        self._check_can_start()
        c = self._cupti
        self.buffer_bytes = buffer_bytes
        if self.reregister:  # at every start: another client (torch.profiler, nsys) may have taken them since
            self._register(decode)
        self._discard()
        self.stats = {}
        self.flush_flag = flush_flag
        self.api_tracing = api_tracing
        self._open_regions = 0
        self.clock = self._clock_map() if self.clock_check else None
        for kind in (self._k_runtime, self._k_driver, self._k_external, self._k_kernel):
            c.activity_enable(kind)
        self._canary_pending = self._sing()
        self.api_filter = api_filter
        if api_filter == "learn":
            for key in sorted(self.quiet.off):
                self._switch(key, False)
        if api_tracing == "region":
            self._apis(False)
        self._gated = self._gate() if api_tracing == "learn" else ()
        self.flush_period_ms = flush_period_ms
        if flush_period_ms:
            c.activity_flush_period(flush_period_ms)
        self.active = True

    def _clock_map(self) -> ClockMap | None:
        """A map back to nanoseconds when another client's clock stamps CUPTI's records (see :mod:`._clock`)."""
        read = self._cupti.get_timestamp
        ticks = read()
        self._int_stamps = type(ticks) is int
        if not foreign(int(ticks), time.time_ns()):
            return None
        t0 = time.perf_counter_ns()
        clock = calibrate(lambda: int(read()))
        self._count("clock_calibration", time.perf_counter_ns() - t0)
        return clock

    def _check_can_start(self) -> None:
        """Raise when a session cannot start now (see :meth:`start`)."""
        if self.active:
            raise MeasurementError(
                "a CUPTI session is already running in this process; CUPTI sessions cannot nest (finish the "
                "outer profiled call first, or use backend='events' for the inner one)"
            )
        if torch_profiler_recording():
            raise MeasurementError(
                "torch.profiler is recording in this process and holds CUPTI's activity callbacks, which CUPTI "
                "gives to one client at a time; end the torch.profiler session before the profiled call, or "
                "profile this call with backend='events'"
            )

    def _sing(self) -> bool:
        """Make the canary call under :data:`CANARY_ID` (before any API is switched off); False if it failed."""
        if self._canary is None:
            return False
        c = self._cupti
        c.activity_push_external_correlation_id(self._ext_kind, CANARY_ID)
        try:
            self._canary()
        except Exception:  # no driver to call (tests without one): nothing to check later
            return False
        finally:
            c.activity_pop_external_correlation_id(self._ext_kind)
        return True

    def _check_canary(self, batch: ActivityBatch) -> None:
        """First collection of a session: CUPTI must have delivered something, at least the canary's record.

        Raises:
            MeasurementError: nothing at all arrived (another client has CUPTI).
        """
        self._canary_pending = False
        canary = [corr for corr, ext in batch.externals.items() if ext == CANARY_ID]
        for corr in canary:
            del batch.externals[corr]
            batch.apis.pop(corr, None)
        if canary or batch.kernels or batch.apis or batch.externals:
            return  # CUPTI reports to us (a canary API switched off elsewhere still leaves other records)
        tool = _injected_tool()
        hint = f" (CUDA_INJECTION64_PATH={tool} injects one into this process)" if tool else ""
        raise MeasurementError(
            "CUPTI delivered no activity records to nsightx in this session, not even the one it makes itself "
            f"at the session start, so no kernel of it could be timed: {OTHER_CLIENTS}{hint}. Profile with "
            "nsightx before torch.profiler in the process, run it in a process of its own, or use "
            "backend='events'"
        )

    def _apis(self, on: bool) -> None:
        switch = self._cupti.activity_enable if on else self._cupti.activity_disable
        switch(self._k_runtime)
        switch(self._k_driver)

    @property
    def gated(self) -> tuple[ApiKey, ...]:
        """The launch APIs switched off outside regions in this session (``api_tracing="learn"``)."""
        return tuple(key for key, _ in self._gated)

    def _gate(self) -> tuple[tuple[ApiKey, Callable[[int, int], Any]], ...]:
        """Switch off the launch APIs of :attr:`gate`; returns those libcupti switched, each with its switch.

        The switch functions are bound here: :meth:`region_open` and :meth:`region_close` call them between two
        launches of every run.
        """
        c = self._cupti
        return tuple(
            (key, c.activity_enable_runtime_api if key[0] == "runtime" else c.activity_enable_driver_api)
            for key in sorted(self.gate.keys - self.quiet.refused)
            if self._switch(key, False)
        )

    def _launch_apis(self, on: int) -> None:
        """Switch the gated launch APIs on (1) or off (0).

        Should libcupti refuse one, the RUNTIME and DRIVER kinds are enabled again, which records every API from
        then on (the gated ones included) and ends the gating for this session: a region's launches must never
        go unrecorded, or its kernels would have no external id.
        """
        try:
            for (_, cbid), switch in self._gated:
                switch(cbid, on)
        except Exception:
            self._gated = ()
            self._apis(True)

    def learn_gate(self, outside_apis: dict[ApiKey, int], unplaced: int, regions: int) -> None:
        """After a collection: update which launch APIs the next ``api_tracing="learn"`` session gates."""
        if self.api_tracing == "learn":
            self.gate.learn(outside_apis, unplaced, regions, self.gated)

    def region_open(self) -> None:
        """A region opens: start tracing API calls (``api_tracing="region"``) or the gated launch APIs (``"learn"``)."""
        if self.api_tracing in ("region", "learn"):
            self._open_regions += 1
            if self._open_regions == 1:
                if self.api_tracing == "region":
                    self._apis(True)
                else:
                    self._launch_apis(1)

    def region_close(self) -> None:
        """A region closed: stop tracing what :meth:`region_open` switched on."""
        if self.api_tracing in ("region", "learn") and self._open_regions > 0:
            self._open_regions -= 1
            if self._open_regions == 0:
                if self.api_tracing == "region":
                    self._apis(False)
                else:
                    self._launch_apis(0)

    def _api_name(self, domain: str, cbid: int) -> str | None:
        """The API's name from cupti-python's callback-id enums; None for an unknown id or a missing enum."""
        try:
            enum = self._cupti.RuntimeApiTraceCbid if domain == "runtime" else self._cupti.DriverApiTraceCbid
            return str(enum(cbid).name)
        except (AttributeError, ValueError):
            return None

    def launches_kernels(self, api: ApiActivity) -> bool:
        """Whether ``api`` is a call that always launches a kernel (``cudaLaunchKernel``, ``cuLaunchKernelEx``...).

        Graph launches (a graph may hold no kernel) and host-function launches are not counted; an id the
        installed cupti-python cannot name is not either.
        """
        key = (api.domain, api.cbid)
        known = self._launches.get(key)
        if known is None:  # asked for every launch record of a collection: name each API once per process
            name = self._api_name(*key)
            known = self._launches[key] = (
                name is not None and "Launch" in name and "HostFunc" not in name and "Graph" not in name
            )
        return known

    def forget_quiet(self) -> int:
        """Switch every API this tracer switched off back on and forget them; returns how many there were."""
        keys = sorted(self.quiet.off)
        if self.active and self.api_filter == "learn":
            for key in keys:
                self._switch(key, True)
        self.quiet.off.clear()
        return len(keys)

    def _switch(self, key: ApiKey, on: bool) -> bool:
        """Switch one API's records on or off; False (and never asked again) when libcupti refuses."""
        domain, cbid = key
        c = self._cupti
        switch = c.activity_enable_runtime_api if domain == "runtime" else c.activity_enable_driver_api
        try:
            switch(cbid, 1 if on else 0)
        except Exception:
            self.quiet.refused.add(key)
            self.quiet.off.discard(key)
            return False
        return True

    def _silence(self, batch: ActivityBatch) -> None:
        """Switch off the APIs of ``batch`` that launched nothing (kept off in later sessions of the process)."""
        for key in self.quiet.candidates(batch):
            if self._switch(key, False):
                self.quiet.off.add(key)

    def stop(self) -> None:
        """Disable every kind this tracer enabled and drop what is still buffered.

        The APIs switched off one by one stay so: libcupti lets the next ``cuptiActivityEnable`` of the RUNTIME
        or DRIVER kind override every per-API setting (``cupti_activity.h``), so another client that enables the
        kinds (torch.profiler) records every API, and switching ~40 APIs back on here (~50 us on the H200, after
        the GPU wait) bought nothing.
        """
        if not self.active:
            return
        c = self._cupti
        try:
            if self.flush_period_ms:
                c.activity_flush_period(0)
                self.flush_period_ms = 0
            for kind in (self._k_kernel, self._k_external):
                c.activity_disable(kind)
            if self.api_tracing != "region" or self._open_regions:
                self._apis(False)
            if self._holds():  # counted: a forced flush slows the next session's first launch (see collect)
                with self._lock:
                    self._count("forced_at_stop", 1)
                self._forced_flush()
        finally:
            self._discard()
            self._gated = ()
            self.active = False

    def _holds(self) -> bool:
        """Whether CUPTI may hold a buffer of ours: one was handed out and not given back (either decoder counts).

        :meth:`stop` flushes only then, and so does :meth:`collect` after its default flush. After the final
        collection's flush CUPTI usually holds none (no CUDA call was traced since), and a forced flush once the
        kinds are off cost 57-170 us on the H200, after the GPU wait (``98c9cf0:benchmarks/cupti_flush_probe.py``'s
        ``stop_parts``; stop went from 102-133 to 68-73 us, ``98c9cf0:benchmarks/results/2026-12-04-s10-gpu-run.md``).
        It must not be skipped when CUPTI does hold one: a buffer still in CUPTI when another client registers its
        callbacks would be handed to that client.
        """
        if self.decoder == "ctypes" and self._raw is not None:
            return self._raw.outstanding() > 0
        return self._requested > 0

    def _flush(self) -> None:
        """:meth:`collect`'s flush, as :attr:`flush_flag` says.

        ``complete``: a default flush, then a forced one only while CUPTI still holds a buffer of ours (see
        :meth:`collect`); a default flush that libcupti refuses is followed by the forced one, which delivers
        everything (or raises itself). ``forced``: a forced flush (every buffer). ``plain``: a default flush alone
        (only buffers whose records are all complete).
        """
        if self.flush_flag == "forced":
            self._forced_flush()
            return
        try:
            self._cupti.activity_flush_all(0)
        except Exception:
            if self.flush_flag != "complete":
                raise
            self._forced_flush()
            return
        if self.flush_flag == "complete" and self._holds():
            with self._lock:
                self._count("forced_after_default", 1)
            self._forced_flush()

    def _forced_flush(self) -> None:
        """Deliver every buffer CUPTI holds, complete or not (afterwards it holds none of ours)."""
        c = self._cupti
        c.activity_flush_all(int(c.ActivityFlag.FLUSH_FORCED))
        self._requested = 0

    def push(self, external_id: int) -> None:
        """Push ``external_id`` on the calling thread's CUPTI stack."""
        self._cupti.activity_push_external_correlation_id(self._ext_kind, external_id)

    def pop(self) -> int:
        """Pop the calling thread's top external id."""
        return int(self._cupti.activity_pop_external_correlation_id(self._ext_kind))

    def region_calls(self) -> tuple[Callable[[int], object], Callable[[], object], Callable[[], int]]:
        """:meth:`push`, :meth:`pop` and :meth:`timestamp` as a session calls them around each region.

        The push and the pop are cupti-python's own functions with the external kind bound (``functools.partial``,
        a C call), not methods of ours: no Python frame around each of those CUPTI calls, ~0.1-0.2 us a region
        (the pop's answer is not made an ``int``: the session drops it). The timestamp is cupti-python's
        ``get_timestamp`` itself where :meth:`start` saw it answer an ``int`` and mapped no other client's clock,
        else :meth:`timestamp`. Take them after :meth:`start` (which sets that clock).
        """
        c, kind = self._cupti, self._ext_kind
        push = functools.partial(c.activity_push_external_correlation_id, kind)
        pop = functools.partial(c.activity_pop_external_correlation_id, kind)
        stamp = c.get_timestamp if self._int_stamps and self.clock is None else self.timestamp
        return push, pop, stamp

    def timestamp(self) -> int:
        """CUPTI's current timestamp (the clock of API records), ns (mapped, when another client's clock ticks)."""
        t = int(self._cupti.get_timestamp())
        return t if self.clock is None else self.clock.ns(t)

    def collect(self) -> ActivityBatch:
        """Deliver everything CUPTI holds (call after synchronising the device) and return it.

        With :attr:`flush_flag` ``complete`` (the default) CUPTI's default flush comes first: after the wait for
        the device every record is complete, and it hands back every buffer of ours (``cuptiActivityFlushAll``'s
        documentation: a flush delivers every completed record, and the client's synchronisation before it is what
        completes them; the flag only decides whether incomplete ones come too). A forced flush follows only
        when CUPTI still holds one (:meth:`_holds`: a buffer with a record not yet complete), so no record is left
        behind. Why not always forced: after a forced flush the next kernel launched while the kernel kind is on
        costs the host ~0.15-0.35 ms more (H100, session 28: a 512 matmul in a call's first region 0.47-0.50 ms
        after a call that forced, 0.15-0.16 ms after one that did not; 0.23-0.26 against 0.07-0.10 ms in a bare
        tracer), so every profiled call of a process paid it in its first region, while the GPU was idle. The
        default flush takes as long as the forced one there.

        Raises:
            MeasurementError: CUPTI dropped records, or a buffer could not be decoded.
        """
        decoded = self.stats.get("decode", 0)
        t0 = time.perf_counter_ns()
        self._flush()
        t1 = time.perf_counter_ns()
        dropped = self.dropped()
        t2 = time.perf_counter_ns()
        with self._lock:
            self._count("collects", 1)
            self._count("flush", t1 - t0)
            self._count("flush_decode", self.stats.get("decode", 0) - decoded)
            self._count("dropped", t2 - t1)
            batch, self._pending = self._pending, ActivityBatch()
            errors, self._errors = self._errors, []
        if errors:
            raise MeasurementError(f"CUPTI activity buffers could not be decoded: {errors[0]}")
        if self._canary_pending and self.active:
            self._check_canary(batch)
        if self.clock is not None:
            batch = self.clock.batch(batch)
        if self.clock_check:
            check_clock(batch, time.time_ns())
        if self.active and self.api_filter == "learn":
            self._silence(batch)
        if dropped:
            raise MeasurementError(
                f"CUPTI dropped {dropped} activity records (its buffers were full), so kernel times of this run "
                "are incomplete. Launch fewer kernels per run, or give CUPTI bigger buffers with "
                f"backend_options={{'buffer_bytes': {2 * self.buffer_bytes}}}"
            )
        return batch

    def drain(self) -> None:
        """Deliver the buffers whose records are all complete (a non-forced flush); leave the rest in CUPTI.

        Called while the GPU still works (see :mod:`nsightx_cupti._drain`), from the session's thread or a
        helper thread, so the decode of those buffers happens before the wait for the device instead of after
        it. What it delivers joins the pending batch that :meth:`collect` returns. Never raises: a failed drain
        is counted in :attr:`stats` (``drain_errors``) and the forced flush of :meth:`collect` delivers what it
        could not.
        """
        if not self.active:
            return
        t0 = time.perf_counter_ns()
        failed = 0
        try:
            self._cupti.activity_flush_all(0)
        except Exception:
            failed = 1
        with self._lock:
            self._count("drains", 1)
            self._count("drain", time.perf_counter_ns() - t0)
            self._count("drain_errors", failed)

    def dropped(self) -> int:
        """Records CUPTI dropped since the last call (its global queue; the count resets on read)."""
        n = ctypes.c_size_t(0)
        self._cupti.activity_get_num_dropped_records(0, 0, ctypes.addressof(n))
        return int(n.value)

    def _discard(self) -> None:
        with self._lock:
            self._pending = ActivityBatch()
            self._errors = []


def check_clock(batch: ActivityBatch, now_ns: int) -> None:
    """Refuse a batch whose timestamps are not wall-clock nanoseconds (:func:`nsightx_cupti._clock.foreign`).

    A clock found foreign at the session's start is mapped (:mod:`nsightx_cupti._clock`); what is left to catch
    here is a clock that changed while the session ran.

    One record is enough: every record of a process shares CUPTI's one timestamp source.

    Raises:
        MeasurementError: the first kernel (or API) record starts far from ``now_ns``.
    """
    first = batch.kernels[0].start if batch.kernels else next((a.start for a in batch.apis.values()), None)
    if first is None or not foreign(first, now_ns):
        return
    raise MeasurementError(
        f"CUPTI's timestamps changed unit while this call ran (a record starts at {first}, the wall clock reads "
        f"{now_ns}): another CUPTI client registered its own clock during the call, as torch.profiler does when a "
        "session starts (Kineto stamps CUPTI records with CPU cycle counts), so kernel times of this call would be "
        "off by the CPU's cycle rate. Start and end torch.profiler sessions outside the profiled function, or "
        "profile this call with backend='events'"
    )
