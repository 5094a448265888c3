"""The few CUDA driver calls the CUPTI backend needs, through ctypes on ``libcuda.so.1``.

The backend works with whatever framework launches the kernels (torch, CuPy, JAX, Triton, raw driver code), so it
does not use torch for its own GPU work: context synchronisation, the L2 flush buffer, the persisting-L2 reset
and device attributes go straight to the driver that every CUDA process already has loaded.
"""

from __future__ import annotations

import ctypes
from collections.abc import Iterator
from contextlib import contextmanager

from nsightx.ext import LIMIT_PERSISTING_L2_CACHE_SIZE, DeviceAttribute, load_libcuda

# CUdevice_attribute values (cuda.h), named as this module always named them
ATTR_CLOCK_RATE = DeviceAttribute.CLOCK_RATE
ATTR_MEMORY_CLOCK_RATE = DeviceAttribute.MEMORY_CLOCK_RATE
ATTR_L2_CACHE_SIZE = DeviceAttribute.L2_CACHE_SIZE
ATTR_MAX_PERSISTING_L2_CACHE_SIZE = DeviceAttribute.MAX_PERSISTING_L2_CACHE_SIZE


class DriverError(RuntimeError):
    """A CUDA driver call failed; ``code`` is the CUresult."""

    def __init__(self, call: str, code: int, name: str) -> None:
        super().__init__(f"{call} failed with CUDA error {code} ({name})")
        self.call = call
        self.code = code


def _lib() -> ctypes.CDLL:
    """libcuda, loaded once by :func:`nsightx.ext.load_libcuda` (raises OSError when no NVIDIA driver is installed)."""
    lib = load_libcuda()
    if lib is None:
        raise OSError("libcuda.so.1 (the NVIDIA driver's CUDA library) could not be loaded")
    return lib


def _check(code: int, call: str) -> None:
    if code != 0:
        text = ctypes.c_char_p()
        try:
            _lib().cuGetErrorName(code, ctypes.byref(text))
            name = (text.value or b"?").decode()
        except Exception:
            name = "?"
        raise DriverError(call, code, name)


def init() -> None:
    """``cuInit(0)``: idempotent."""
    _check(_lib().cuInit(0), "cuInit")


def device_count() -> int:
    """Number of CUDA devices (initialises the driver)."""
    init()
    n = ctypes.c_int()
    _check(_lib().cuDeviceGetCount(ctypes.byref(n)), "cuDeviceGetCount")
    return n.value


def current_context() -> int:
    """The calling thread's current context handle, 0 when none."""
    ctx = ctypes.c_void_p()
    _check(_lib().cuCtxGetCurrent(ctypes.byref(ctx)), "cuCtxGetCurrent")
    return ctx.value or 0


def context_device(ctx: int) -> int:
    """Device ordinal of context ``ctx``."""
    dev = ctypes.c_int()
    lib = _lib()
    _check(lib.cuCtxPushCurrent_v2(ctypes.c_void_p(ctx)), "cuCtxPushCurrent")
    try:
        _check(lib.cuCtxGetDevice(ctypes.byref(dev)), "cuCtxGetDevice")
    finally:
        lib.cuCtxPopCurrent_v2(ctypes.byref(ctypes.c_void_p()))
    return dev.value


def retain_primary(device: int) -> int:
    """Retain the primary context of ``device`` (the one torch, CuPy and the runtime use); returns it."""
    init()
    ctx = ctypes.c_void_p()
    _check(_lib().cuDevicePrimaryCtxRetain(ctypes.byref(ctx), ctypes.c_int(device)), "cuDevicePrimaryCtxRetain")
    return ctx.value or 0


def release_primary(device: int) -> None:
    """Release what :func:`retain_primary` retained."""
    _lib().cuDevicePrimaryCtxRelease_v2(ctypes.c_int(device))


def set_current(ctx: int) -> None:
    """Make ``ctx`` current on the calling thread."""
    _check(_lib().cuCtxSetCurrent(ctypes.c_void_p(ctx)), "cuCtxSetCurrent")


def push(ctx: int) -> None:
    """Make ``ctx`` current on the calling thread, above the one that was (undo with :func:`pop`)."""
    _check(_lib().cuCtxPushCurrent_v2(ctypes.c_void_p(ctx)), "cuCtxPushCurrent")


def pop() -> None:
    """Undo :func:`push`."""
    _lib().cuCtxPopCurrent_v2(ctypes.byref(ctypes.c_void_p()))


@contextmanager
def using(ctx: int) -> Iterator[None]:
    """Run the block with ``ctx`` current, pushing it only if another context is current."""
    if current_context() == ctx:
        yield
        return
    push(ctx)
    try:
        yield
    finally:
        pop()


def synchronize() -> None:
    """Wait for all work of the current context, on every stream."""
    _check(_lib().cuCtxSynchronize(), "cuCtxSynchronize")


def attribute(attr: int, device: int) -> int:
    """``cuDeviceGetAttribute``."""
    value = ctypes.c_int()
    _check(
        _lib().cuDeviceGetAttribute(ctypes.byref(value), ctypes.c_int(attr), ctypes.c_int(device)),
        "cuDeviceGetAttribute",
    )
    return value.value


def device_name(device: int) -> str:
    """The device's marketing name."""
    buf = ctypes.create_string_buffer(256)
    _check(_lib().cuDeviceGetName(buf, ctypes.c_int(256), ctypes.c_int(device)), "cuDeviceGetName")
    return buf.value.decode(errors="replace")


def persisting_l2_limit() -> int:
    """The current context's persisting-L2 set-aside in bytes (0: no line can be persisting)."""
    value = ctypes.c_size_t()
    _check(_lib().cuCtxGetLimit(ctypes.byref(value), ctypes.c_int(LIMIT_PERSISTING_L2_CACHE_SIZE)), "cuCtxGetLimit")
    return value.value


def reset_persisting_l2() -> None:
    """Demote every persisting L2 line of the current context to normal (``cuCtxResetPersistingL2Cache``)."""
    _check(_lib().cuCtxResetPersistingL2Cache(), "cuCtxResetPersistingL2Cache")


class DeviceBuffer:
    """A plain device allocation in the current context, used to evict L2 by overwriting it."""

    def __init__(self, nbytes: int) -> None:
        self.nbytes = (nbytes + 3) // 4 * 4
        ptr = ctypes.c_uint64()
        _check(_lib().cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(self.nbytes)), "cuMemAlloc")
        self.ptr = ptr.value
        self._value = 0
        self._args = (ctypes.c_uint64(self.ptr), ctypes.c_size_t(self.nbytes // 4), ctypes.c_void_p(0))
        """The call's fixed arguments, made once (it is made before every region)."""

    def overwrite(self) -> None:
        """Queue a memset of the whole buffer on the legacy default stream (ordered with torch's default)."""
        self._value = (self._value + 1) & 0xFF
        ptr, count, stream = self._args
        _check(
            _lib().cuMemsetD32Async(ptr, ctypes.c_uint32(self._value * 0x01010101), count, stream), "cuMemsetD32Async"
        )

    def free(self) -> None:
        """Free the allocation (idempotent)."""
        if self.ptr:
            _lib().cuMemFree_v2(ctypes.c_uint64(self.ptr))
            self.ptr = 0
