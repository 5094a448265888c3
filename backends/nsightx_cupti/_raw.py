"""CUPTI's activity buffers read straight from libcupti through ctypes (``backend_options={"cupti_decode": "ctypes"}``).

cupti-python hands its buffer-completed callback a list of Python objects, one per record, each reading its fields
through the record's numpy dtype. Built after the GPU's last kernel (the final buffer comes out only then), that
list is on a call's critical path: on the H200 a forced flush delivering a sweep's one buffer of ~170 records took
~0.6-0.77 ms, of which our own decode inside the callback was ~0.18 ms (``98c9cf0:benchmarks/cupti_flush_probe.py``,
2026-12-04). This module registers its own callbacks with ``cuptiActivityRegisterCallbacks``, walks the buffer
with ``cuptiActivityGetNextRecord`` and reads only the fields nsightx keeps, at their offsets in CUPTI 13's
packed record structs (:data:`KERNEL`, :data:`API`, :data:`EXTERNAL`), into the same tuples the cupti-python path
builds. Everything else (enabling kinds, external ids, flushes) still goes through cupti-python.

The offsets are those of ``CUpti_ActivityKernel10`` (CUPTI 13.0), ``CUpti_ActivityAPI`` and
``CUpti_ActivityExternalCorrelation``; later CUPTI versions append fields to the kernel record and keep these
(CUPTI 13.5's ``CUpti_ActivityKernel13`` is 248 bytes, not 216, with every field read here where 13.0 has it).
A record of a kind is never read before its size is known (libcupti steps over the first one), and one shorter
than the fields read is reported, not read.
:func:`open_libcupti` refuses a libcupti older than 13 (:data:`MIN_API_VERSION`), where the layout differs.
"""

from __future__ import annotations

import ctypes
import struct
import time
from collections.abc import Callable
from typing import Any

from nsightx_cupti._attribution import ApiActivity, KernelActivity

MIN_API_VERSION = 130000
"""``cuptiGetVersion`` of CUPTI 13.0: the first whose record layout :data:`KERNEL` reads."""

ALIGN = 8
"""CUPTI's activity buffers must be 8-byte aligned (``ACTIVITY_RECORD_ALIGNMENT``)."""

KERNEL = struct.Struct("<16xQQ8xIII40xI8xQ32xQ4xI")
"""From the start of ``CUpti_ActivityKernel10`` (the kind and padding skipped): start (offset 16), end,
(completed), deviceId, contextId, streamId, correlationId (92), name pointer (104), graphNodeId (144), graphId (156)."""

API = struct.Struct("<4xIQQ4xII")
"""From the start of ``CUpti_ActivityAPI``: cbid (offset 4), start, end, (processId), threadId, correlationId."""

EXTERNAL = struct.Struct("<4xIQI")
"""From the start of ``CUpti_ActivityExternalCorrelation``: externalKind (offset 4), externalId, correlationId."""

SUCCESS = 0
MAX_LIMIT_REACHED = 12
"""``cuptiActivityGetNextRecord``'s answer at the end of the buffer."""

REQUEST = ctypes.CFUNCTYPE(
    None, ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_size_t), ctypes.POINTER(ctypes.c_size_t)
)
"""``CUpti_BuffersCallbackRequestFunc(uint8_t **buffer, size_t *size, size_t *maxNumRecords)``."""
COMPLETE = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_uint32, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t)
"""``CUpti_BuffersCallbackCompleteFunc(CUcontext, uint32_t streamId, uint8_t *buffer, size_t size, size_t valid)``."""

Deliver = Callable[[list[KernelActivity], dict[int, ApiActivity], dict[int, int], int, int], None]
"""Receives one buffer's kernels, API records by correlation id, external ids by correlation id, the number of
records, and the decode time in ns."""


def open_libcupti(path: str) -> Any:
    """The already loaded libcupti at ``path`` through ctypes, its functions typed; raises OSError if unusable.

    Raises:
        OSError: the library cannot be opened, or its ``cuptiGetVersion`` is below :data:`MIN_API_VERSION`.
    """
    lib = ctypes.CDLL(path)
    version = ctypes.c_uint32(0)
    if lib.cuptiGetVersion(ctypes.byref(version)) != SUCCESS or version.value < MIN_API_VERSION:
        raise OSError(f"{path}: CUPTI API version {version.value} is older than {MIN_API_VERSION} (CUDA 13)")
    lib.cuptiActivityGetNextRecord.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_void_p)]
    lib.cuptiActivityGetNextRecord.restype = ctypes.c_int
    lib.cuptiActivityRegisterCallbacks.argtypes = [REQUEST, COMPLETE]
    lib.cuptiActivityRegisterCallbacks.restype = ctypes.c_int
    return lib


SPARE_BUFFERS = 4
"""Most buffers kept for reuse (1 MiB at the default size): a call uses one or two; a drain-mode call, more."""


class RawBuffers:
    """Owns the activity buffers handed to CUPTI and decodes each one CUPTI gives back.

    Args:
        lib: libcupti from :func:`open_libcupti`.
        kinds: The ``CUpti_ActivityKind`` values of kernel, runtime, driver and external-correlation records.
        external_kind: The ``CUpti_ExternalCorrelationKind`` nsightx pushes (others are skipped).
        deliver: Called with each decoded buffer (under CUPTI's flush, on whichever thread CUPTI calls from).
        error: Called with a message when a buffer cannot be decoded (a callback must never raise into CUPTI).
    """

    def __init__(
        self,
        lib: Any,
        kinds: tuple[int, int, int, int],
        external_kind: int,
        deliver: Deliver,
        error: Callable[[str], None],
    ) -> None:
        self._lib = lib
        self._kinds = kinds
        self._external_kind = external_kind
        self._deliver = deliver
        self._error = error
        self.buffer_bytes = 256 * 1024
        self._held: dict[int, ctypes.Array[ctypes.c_char]] = {}
        self._spare: list[ctypes.Array[ctypes.c_char]] = []
        """Buffers CUPTI gave back, kept for its next requests (at most :data:`SPARE_BUFFERS`, of ``buffer_bytes``)."""
        self._names: dict[int, str] = {}
        self._sizes: dict[int, int] = {}
        """Record size of each kind met so far, bytes (learned from libcupti, see :meth:`_decode`)."""
        k_kernel, k_runtime, k_driver, k_external = kinds
        self._min_sizes = {
            k_kernel: KERNEL.size,
            k_runtime: API.size,
            k_driver: API.size,
            k_external: EXTERNAL.size,
        }
        """The smallest record size each read kind can have (the end of its last field read): a learned size below
        it means the layout is not the one this module reads, and that kind is stepped through libcupti."""
        self._request = REQUEST(self._on_request)
        self._complete = COMPLETE(self._on_complete)

    def register(self, buffer_bytes: int) -> None:
        """Make these the process's buffer callbacks, with buffers of ``buffer_bytes``.

        Raises:
            OSError: libcupti refused the registration.
        """
        if buffer_bytes != self.buffer_bytes:
            self._spare.clear()
        self.buffer_bytes = buffer_bytes
        self._names.clear()  # a name pointer is only known to stay valid while its module is loaded
        status = self._lib.cuptiActivityRegisterCallbacks(self._request, self._complete)
        if status != SUCCESS:
            raise OSError(f"cuptiActivityRegisterCallbacks returned {status}")

    def outstanding(self) -> int:
        """Buffers handed to CUPTI and not given back yet."""
        return len(self._held)

    def _on_request(self, buffer: Any, size: Any, max_records: Any) -> None:
        try:
            raw = self._new_buffer()
            addr = (ctypes.addressof(raw) + ALIGN - 1) & ~(ALIGN - 1)
            self._held[addr] = raw
            buffer[0] = addr
            size[0] = self.buffer_bytes
            max_records[0] = 0
        except Exception as e:  # never raise into CUPTI: no buffer means CUPTI drops records, and counts them
            buffer[0] = None
            size[0] = 0
            self._error(f"{type(e).__name__} while allocating a CUPTI buffer: {e}")

    def _on_complete(self, _ctx: Any, _stream: int, buffer: int | None, _size: int, valid: int) -> None:
        if not buffer:
            return
        try:
            if valid:
                self._decode(buffer, valid)
        except Exception as e:
            self._error(f"{type(e).__name__}: {e}")
        finally:
            self._keep(self._held.pop(buffer, None))

    def _new_buffer(self) -> ctypes.Array[ctypes.c_char]:
        """A buffer for CUPTI: one it gave back, else a new one.

        A new buffer is zero-filled by ctypes (~50 us for 256 KiB on the H100's host, under cProfile), paid at the
        first kernel of every call (the start, while the GPU idles) and after every collection. CUPTI writes records
        from the buffer's start and says how many bytes are valid, so a used buffer serves as well.
        """
        try:
            return self._spare.pop()  # atomic: CUPTI may call from two threads
        except IndexError:
            return ctypes.create_string_buffer(self.buffer_bytes + ALIGN)

    def _keep(self, raw: ctypes.Array[ctypes.c_char] | None) -> None:
        """Keep a buffer CUPTI gave back (decoded: nothing refers to it) for a later request, up to the limit."""
        if raw is not None and len(raw) == self.buffer_bytes + ALIGN and len(self._spare) < SPARE_BUFFERS:
            self._spare.append(raw)

    def _decode(self, buffer: int, valid: int) -> None:
        """Read every record of one buffer and hand the kept fields to ``deliver``.

        Records lie one after another, each the size of its kind's struct. ``cuptiActivityGetNextRecord`` is
        asked only for the first record and once per kind not met before (the distance to the next record is
        that kind's size, kept for the process): a ctypes call per record cost ~3 us, more than all the rest.
        Inside the flush after the GPU wait, so per record: the kind read from a ``uint32`` view, each read
        kind's size a local (0 until :meth:`_step` learns it; the record is then read again), one branch a kind.
        """
        t0 = time.perf_counter_ns()
        view = ctypes.string_at(buffer, valid)  # one copy: unpacking from bytes is ~3x cheaper than from ctypes
        words = memoryview(view)[: valid - valid % 4].cast("I")
        k_kernel, k_runtime, k_driver, k_external = self._kinds
        ext_kind, names, sizes = self._external_kind, self._names, self._sizes
        kernels: list[KernelActivity] = []
        apis: dict[int, ApiActivity] = {}
        externals: dict[int, int] = {}
        new, add_kernel = tuple.__new__, kernels.append
        kernel_at, api_at, external_at = KERNEL.unpack_from, API.unpack_from, EXTERNAL.unpack_from
        s_kernel, s_runtime, s_driver, s_external = (sizes.get(kind, 0) for kind in self._kinds)
        first = self._next(buffer, valid, None)
        off, n = valid if first is None else first, 0
        while off < valid:
            n += 1
            kind = words[off >> 2]
            if kind == k_kernel and s_kernel:
                start, end, device, context, stream, corr, name_ptr, node, graph = kernel_at(view, off)
                name = names.get(name_ptr)
                if name is None:
                    name = names[name_ptr] = ctypes.string_at(name_ptr).decode("utf-8", "replace") if name_ptr else ""
                add_kernel(new(KernelActivity, (name, start, end, corr, stream, device, context, graph, node)))
                off += s_kernel
            elif kind == k_runtime and s_runtime:
                cbid, start, end, thread, corr = api_at(view, off)
                apis[corr] = new(ApiActivity, (corr, start, end, thread, cbid, "runtime"))
                off += s_runtime
            elif kind == k_external and s_external:
                ekind, eid, corr = external_at(view, off)
                if ekind == ext_kind:
                    externals[corr] = eid
                off += s_external
            elif kind == k_driver and s_driver:
                cbid, start, end, thread, corr = api_at(view, off)
                apis[corr] = new(ApiActivity, (corr, start, end, thread, cbid, "driver"))
                off += s_driver
            else:
                size, step = self._step(buffer, valid, off, kind)
                off += step
                if step:
                    continue
                n -= 1  # a read kind whose size is now known: read this record again, at that size
                if kind == k_kernel:
                    s_kernel = size
                elif kind == k_external:
                    s_external = size
                else:
                    s_runtime, s_driver = (size, s_driver) if kind == k_runtime else (s_runtime, size)
        self._deliver(kernels, apis, externals, n, time.perf_counter_ns() - t0)

    def _step(self, buffer: int, valid: int, off: int, kind: int) -> tuple[int, int]:
        """A record :meth:`_decode`'s loop does not read as it stands: ``(size, bytes to step over it)``.

        A kind this module reads whose size was unknown to the loop answers its size (learned from libcupti if
        need be) and a step of 0, so that the loop reads it. Another kind is stepped over; so is a record shorter
        than the fields read from its kind (reported: another layout).
        """
        size = self._sizes.get(kind) or self._learn(buffer, valid, off, kind)
        if size is None:
            return 0, self._skip(buffer, valid, off, kind)
        return size, 0 if kind in self._kinds else size

    def _next(self, buffer: int, valid: int, off: int | None) -> int | None:
        """Offset of the record after the one at ``off`` (the first one for None); None at the buffer's end."""
        record = ctypes.c_void_p(None if off is None else buffer + off)
        status = self._lib.cuptiActivityGetNextRecord(buffer, valid, ctypes.byref(record))
        if status == SUCCESS and record.value is not None:
            return int(record.value) - buffer
        if status != MAX_LIMIT_REACHED:
            self._error(f"cuptiActivityGetNextRecord returned {status} at offset {off} of a {valid}-byte buffer")
        return None

    def _learn(self, buffer: int, valid: int, off: int, kind: int) -> int | None:
        """Size of the record at ``off``, asked of libcupti (the distance to the next record, or to the end).

        Kept for its kind when it can be (a whole record, 8-byte aligned). None when it is shorter than the fields
        this module reads from that kind: the layout is not CUPTI 13's, and reading on could follow a pointer
        that is not one.
        """
        nxt = self._next(buffer, valid, off)
        size = (valid if nxt is None else nxt) - off
        if size < self._min_sizes.get(kind, ALIGN):
            return None
        if nxt is not None and size % ALIGN == 0:
            self._sizes[kind] = size
        return size

    def _skip(self, buffer: int, valid: int, off: int, kind: int) -> int:
        """Report a record of an unreadable layout; the bytes to step over it (to the end if libcupti cannot say)."""
        nxt = self._next(buffer, valid, off)
        self._error(
            f"a CUPTI activity record of kind {kind} is {(nxt or valid) - off} bytes, fewer than the "
            f"{self._min_sizes.get(kind)} nsightx's ctypes decoder reads from it (a libcupti with another record "
            "layout); pass backend_options={'cupti_decode': 'cupti-python'}"
        )
        return (valid if nxt is None else nxt) - off
