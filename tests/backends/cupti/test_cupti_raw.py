"""The ctypes decoder of CUPTI activity buffers (:mod:`nsightx_cupti._raw`), on buffers laid out as CUPTI 13 lays
them out, with a double of libcupti's record walk (the library boundary); the real one is compared with
cupti-python's decoding in ``tests/backends/cupti/test_cupti_gpu.py``."""

from __future__ import annotations

import ctypes
import struct
from typing import Any

from nsightx_cupti._attribution import ApiActivity, KernelActivity
from nsightx_cupti._raw import MAX_LIMIT_REACHED, SPARE_BUFFERS, SUCCESS, RawBuffers

K_KERNEL, K_RUNTIME, K_DRIVER, K_EXTERNAL, K_OTHER = 10, 5, 4, 39, 7
EXT_KIND = 2
SIZES = {K_KERNEL: 216, K_RUNTIME: 40, K_DRIVER: 40, K_EXTERNAL: 24, K_OTHER: 48}
"""Record sizes as CUPTI 13.0's structs have them (``CUpti_ActivityKernel10`` is 216 bytes)."""

NAME = ctypes.create_string_buffer(b"_Z6kernelPf")


def kernel(start: int, end: int, corr: int, stream: int = 7, graph: int = 0, node: int = 0) -> bytes:
    rec = bytearray(SIZES[K_KERNEL])
    struct.pack_into("<I", rec, 0, K_KERNEL)
    struct.pack_into("<QQQ", rec, 16, start, end, end)
    struct.pack_into("<III", rec, 40, 0, 1, stream)  # deviceId, contextId, streamId
    struct.pack_into("<I", rec, 92, corr)
    struct.pack_into("<Q", rec, 104, ctypes.addressof(NAME))
    struct.pack_into("<Q", rec, 144, node)
    struct.pack_into("<I", rec, 156, graph)
    return bytes(rec)


def api(kind: int, cbid: int, start: int, end: int, thread: int, corr: int) -> bytes:
    return struct.pack("<IIQQIII4x", kind, cbid, start, end, 99, thread, corr)


def external(ekind: int, eid: int, corr: int) -> bytes:
    return struct.pack("<IIQI4x", K_EXTERNAL, ekind, eid, corr)


def other() -> bytes:
    return struct.pack("<I44x", K_OTHER)


class FakeLib:
    """libcupti's ``cuptiActivityGetNextRecord``: steps by each record's kind's size; counts the calls."""

    def __init__(self) -> None:
        self.calls = 0

    def cuptiActivityGetNextRecord(self, buffer: int, valid: int, ref: Any) -> int:
        self.calls += 1
        record: ctypes.c_void_p = ref._obj
        if record.value is None:
            nxt = buffer
        else:
            kind = ctypes.c_uint32.from_address(record.value).value
            nxt = record.value + SIZES[kind]
        if nxt - buffer >= valid:
            return MAX_LIMIT_REACHED
        record.value = nxt
        return SUCCESS


def decoder(lib: FakeLib) -> tuple[RawBuffers, list[Any], list[str]]:
    got: list[Any] = []
    errors: list[str] = []
    raw = RawBuffers(
        lib,
        (K_KERNEL, K_RUNTIME, K_DRIVER, K_EXTERNAL),
        EXT_KIND,
        lambda k, a, e, n, _ns: got.append((k, a, e, n)),
        errors.append,
    )
    return raw, got, errors


def complete(raw: RawBuffers, payload: bytes) -> None:
    """Hand ``payload`` to the decoder as CUPTI would: in a buffer it requested, then completed."""
    buf, size, most = ctypes.c_void_p(), ctypes.c_size_t(), ctypes.c_size_t()
    raw._on_request(ctypes.pointer(buf), ctypes.pointer(size), ctypes.pointer(most))
    assert buf.value is not None and buf.value % 8 == 0 and size.value == raw.buffer_bytes
    ctypes.memmove(buf.value, payload, len(payload))
    raw._on_complete(None, 0, buf.value, size.value, len(payload))


def test_every_kept_field_is_read_at_its_offset_and_other_kinds_are_stepped_over() -> None:
    lib = FakeLib()
    raw, got, errors = decoder(lib)
    payload = (
        api(K_RUNTIME, 211, 100, 150, 4242, 1)
        + external(EXT_KIND, 77, 1)
        + external(EXT_KIND + 1, 88, 1)  # another client's kind: not ours
        + other()
        + kernel(1000, 1500, 1, graph=3, node=9)
        + api(K_DRIVER, 307, 160, 170, 4243, 2)
        + kernel(2000, 2600, 2, stream=13)
        + api(K_RUNTIME, 211, 180, 190, 4242, 3)
    )
    complete(raw, payload)
    assert errors == []
    [(kernels, apis, externals, n)] = got
    assert n == 8
    name = NAME.value.decode()
    assert kernels == [
        KernelActivity(name, 1000, 1500, 1, 7, 0, 1, 3, 9),
        KernelActivity(name, 2000, 2600, 2, 13, 0, 1, 0, 0),
    ]
    assert apis == {
        1: ApiActivity(1, 100, 150, 4242, 211, "runtime"),
        2: ApiActivity(2, 160, 170, 4243, 307, "driver"),
        3: ApiActivity(3, 180, 190, 4242, 211, "runtime"),
    }
    assert externals == {1: 77}
    assert raw._held == {}  # the buffer was given back


def test_libcupti_is_asked_once_per_kind_then_never() -> None:
    lib = FakeLib()
    raw, got, _ = decoder(lib)
    one = api(K_RUNTIME, 1, 1, 2, 3, 1) + external(EXT_KIND, 5, 1) + kernel(10, 20, 1)
    complete(raw, one * 50)
    first = lib.calls
    assert first == 1 + 3  # the first record, and one step per kind met
    complete(raw, one * 50)
    assert lib.calls - first == 1  # only the first record of the next buffer
    assert [len(k) for k, *_ in got] == [50, 50]


def test_a_record_shorter_than_the_fields_read_is_never_read() -> None:
    """A libcupti whose kernel record is shorter than CUPTI 13's: not read at these offsets (its "name pointer"
    would be another record's bytes), not learned, and reported with the way out."""
    lib = FakeLib()
    raw, got, errors = decoder(lib)
    rec = kernel(10, 20, 1)[:64]
    SIZES[K_KERNEL] = 64
    try:
        complete(raw, rec * 4)
    finally:
        SIZES[K_KERNEL] = 216
    assert K_KERNEL not in raw._sizes
    assert got[0][0] == [] and got[0][3] == 4
    assert len(errors) == 4 and "cupti_decode" in errors[0] and "64 bytes" in errors[0]


def test_a_torn_record_is_reported_and_the_buffer_still_given_back() -> None:
    lib = FakeLib()
    raw, got, errors = decoder(lib)
    complete(raw, api(K_RUNTIME, 1, 1, 2, 3, 1) + kernel(10, 20, 1)[:100])  # the kernel's fields run past the end
    assert got[0][0] == [] and list(got[0][1]) == [1]
    assert len(errors) == 1 and "100 bytes" in errors[0]
    assert raw._held == {}


def test_a_failing_deliver_is_reported_not_raised_into_cupti() -> None:
    def deliver(*_: Any) -> None:
        raise ZeroDivisionError("division by zero")

    errs: list[str] = []
    raw = RawBuffers(FakeLib(), (K_KERNEL, K_RUNTIME, K_DRIVER, K_EXTERNAL), EXT_KIND, deliver, errs.append)
    complete(raw, kernel(10, 20, 1))
    assert errs == ["ZeroDivisionError: division by zero"] and raw._held == {}


def test_outstanding_counts_the_buffers_cupti_still_holds() -> None:
    """The tracer's stop flushes only while CUPTI holds one of these buffers (``ActivityTracer._holds``)."""
    raw, _, _ = decoder(FakeLib())
    assert raw.outstanding() == 0
    buf, size, most = ctypes.c_void_p(), ctypes.c_size_t(), ctypes.c_size_t()
    raw._on_request(ctypes.pointer(buf), ctypes.pointer(size), ctypes.pointer(most))
    assert raw.outstanding() == 1
    raw._on_complete(None, 0, buf.value, size.value, 0)
    assert raw.outstanding() == 0


def _request(raw: RawBuffers) -> tuple[ctypes.c_void_p, ctypes.c_size_t]:
    buf, size, most = ctypes.c_void_p(), ctypes.c_size_t(), ctypes.c_size_t()
    raw._on_request(ctypes.pointer(buf), ctypes.pointer(size), ctypes.pointer(most))
    return buf, size


def test_a_buffer_given_back_serves_the_next_request_and_its_old_records_are_not_read() -> None:
    """Reuse saves the zero-fill of a new 256 KiB buffer at each call's first kernel; only ``valid`` bytes count."""
    raw, got, errors = decoder(FakeLib())
    first, size = _request(raw)
    two = kernel(10, 20, 1) + kernel(30, 40, 2)
    ctypes.memmove(first.value, two, len(two))
    raw._on_complete(None, 0, first.value, size.value, len(two))
    second, size = _request(raw)
    assert second.value == first.value  # the same memory, its two old records still in it
    one = kernel(50, 60, 3)
    ctypes.memmove(second.value, one, len(one))
    raw._on_complete(None, 0, second.value, size.value, len(one))
    assert not errors
    assert [[(k.start, k.end) for k in batch[0]] for batch in got] == [[(10, 20), (30, 40)], [(50, 60)]]


def test_buffers_kept_are_few_and_of_the_size_asked() -> None:
    raw, _, _ = decoder(FakeLib())
    held = [_request(raw) for _ in range(SPARE_BUFFERS + 3)]
    for buf, size in held:
        raw._on_complete(None, 0, buf.value, size.value, 0)
    assert len(raw._spare) == SPARE_BUFFERS and raw.outstanding() == 0
    raw._lib = FakeRegistering()
    raw.register(raw.buffer_bytes)
    assert len(raw._spare) == SPARE_BUFFERS  # same size: kept
    raw.register(8 * 1024)
    assert raw._spare == []  # another size: dropped, and new buffers are of the new size
    assert _request(raw)[1].value == 8 * 1024


class FakeRegistering(FakeLib):
    """libcupti's ``cuptiActivityRegisterCallbacks`` too (it accepts)."""

    def cuptiActivityRegisterCallbacks(self, request: Any, complete: Any) -> int:
        return SUCCESS
