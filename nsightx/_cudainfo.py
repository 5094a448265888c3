"""The CUDA driver and ``nvidia-smi`` questions that backends, collectors and the core share.

One place loads ``libcuda`` (lazily: never at import time), one place names the driver's attribute numbers, one
place states the L2 flush-size rule and one place runs ``nvidia-smi``. Nothing here initialises CUDA unasked:
:func:`load_libcuda` only maps the library, :func:`loaded_libcuda` does not even do that, and the callers decide
whether to call ``cuInit`` (:func:`cuda_uuids` does; it is asked only where nothing else can answer). A machine
without an NVIDIA driver gets ``None`` (or an empty answer), never an exception at the point of loading.
Published to extension authors through :mod:`nsightx.ext`.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import enum
import os
import shutil
import subprocess
from collections.abc import Sequence

from nsightx._errors import BackendUnavailableError

LIBCUDA = "libcuda.so.1"
"""The driver library's name on Linux (the unversioned ``libcuda.so`` comes only with development packages)."""

_loaded: list[ctypes.CDLL | None] = []
"""The result of the first :func:`load_libcuda` (empty before it ran): a machine gains no driver mid-process."""


class DeviceAttribute(enum.IntEnum):
    """``CUdevice_attribute`` values (cuda.h) nsightx asks the driver for."""

    CLOCK_RATE = 13
    """Rated SM clock, kHz."""
    MEMORY_CLOCK_RATE = 36
    """Rated memory clock, kHz."""
    L2_CACHE_SIZE = 38
    """L2 cache size, bytes."""
    MAX_PERSISTING_L2_CACHE_SIZE = 108
    """Largest persisting-L2 set-aside the device allows, bytes (0: the device has no persisting L2)."""


LIMIT_PERSISTING_L2_CACHE_SIZE = 0x06
"""``CU_LIMIT_PERSISTING_L2_CACHE_SIZE`` (cuda.h): the current context's persisting-L2 set-aside, bytes."""

MIN_FLUSH_BYTES = 1 << 20
"""The smallest L2 flush buffer, whatever the device reports (1 MiB)."""


def _dlopen(name: str, mode: int = ctypes.DEFAULT_MODE) -> ctypes.CDLL | None:
    try:
        return ctypes.CDLL(name, mode=mode)
    except OSError:
        return None


def load_libcuda() -> ctypes.CDLL | None:
    """The CUDA driver library, loaded on the first call and kept; ``None`` when no NVIDIA driver is installed.

    Tries ``libcuda.so.1`` and then what ``ctypes.util.find_library("cuda")`` finds. Mapping the library does not
    initialise CUDA (``cuInit`` does). Never raises.

    Example:
        >>> lib = load_libcuda()
        >>> lib is None or hasattr(lib, "cuInit")
        True
    """
    if not _loaded:
        lib = _dlopen(LIBCUDA)
        if lib is None:
            found = ctypes.util.find_library("cuda")
            lib = _dlopen(found) if found else None
        _loaded.append(lib)
    return _loaded[0]


def loaded_libcuda() -> ctypes.CDLL | None:
    """The CUDA driver library only if this process has already loaded it (torch, CuPy, a backend), else ``None``.

    For code that must not be the one to bring the driver into a process (a collector that runs before the user's
    framework does). Uses ``RTLD_NOLOAD``; where the platform has none, answers ``None``. Never raises.

    A library found is kept (as :func:`load_libcuda` keeps its own): mapping it again built a ``CDLL`` at every
    profiled call (~30 us, issue 35), and a process does not unload the driver library its framework loaded.
    ``None`` is not kept: the user's framework may load the library later.
    """
    if _loaded and _loaded[0] is not None:
        return _loaded[0]
    noload = getattr(os, "RTLD_NOLOAD", None)
    if noload is None:
        return None
    lib = _dlopen(LIBCUDA, noload | os.RTLD_LAZY)
    if lib is not None and not _loaded:
        _loaded.append(lib)
    return lib


def device_attribute(attribute: DeviceAttribute | int, device: int) -> int | None:
    """``cuDeviceGetAttribute`` of ``device`` (an ordinal); ``None`` when there is no driver or it refuses.

    The driver must have been initialised (``cuInit``) by someone, as any process that ran a kernel has.
    """
    lib = load_libcuda()
    if lib is None:
        return None
    value = ctypes.c_int()
    ok = lib.cuDeviceGetAttribute(ctypes.byref(value), ctypes.c_int(int(attribute)), ctypes.c_int(device)) == 0
    return value.value if ok else None


def cuda_uuids() -> list[str] | None:
    """``GPU-...`` UUID of each CUDA ordinal, in CUDA's order; ``None`` without a driver or when it refuses.

    Initialises the driver (``cuInit``, as any process that runs a kernel does; it creates no context). The one
    exact answer to "which GPU is CUDA device N": CUDA numbers the GPUs ``CUDA_VISIBLE_DEVICES`` leaves, in
    ``CUDA_DEVICE_ORDER`` (fastest first by default), which nvidia-smi's PCI order does not tell on a machine of
    mixed GPUs. A MIG instance's UUID comes without its ``MIG-`` kind (the driver does not say it): it matches no
    GPU of nvidia-smi's.
    """
    lib = load_libcuda()
    count = ctypes.c_int()
    if lib is None or lib.cuInit(0) != 0 or lib.cuDeviceGetCount(ctypes.byref(count)) != 0:
        return None
    get = getattr(lib, "cuDeviceGetUuid_v2", None) or getattr(lib, "cuDeviceGetUuid", None)
    uuids = []
    for ordinal in range(count.value):
        dev, raw = ctypes.c_int(), (ctypes.c_ubyte * 16)()
        if get is None or lib.cuDeviceGet(ctypes.byref(dev), ctypes.c_int(ordinal)) != 0 or get(raw, dev) != 0:
            return None
        h = bytes(raw).hex()
        uuids.append(f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}")
    return uuids


def cuda_driver_version() -> str | None:
    """The CUDA version the installed driver supports (``cuDriverGetVersion``, e.g. ``"13.0"``); ``None`` without one.

    Does not initialise CUDA.
    """
    lib = load_libcuda()
    if lib is None:
        return None
    value = ctypes.c_int()
    if lib.cuDriverGetVersion(ctypes.byref(value)) != 0:
        return None
    return f"{value.value // 1000}.{value.value % 1000 // 10}"


def l2_flush_bytes(l2_bytes: int, requested: int | None = None) -> int:
    """Size of the buffer to overwrite so that nothing measured before stays in L2.

    Twice the L2 size (a cache does not evict strictly in order), at least :data:`MIN_FLUSH_BYTES`, or
    ``requested`` (``backend_options["flush_bytes"]``) when that is larger.

    Args:
        l2_bytes: The device's L2 size in bytes (0 when unknown).
        requested: A size the user asked for, or ``None``.

    Example:
        >>> l2_flush_bytes(60 << 20)  # H200: 60 MiB of L2
        125829120
        >>> l2_flush_bytes(0), l2_flush_bytes(1 << 20, requested=8 << 20)
        (1048576, 8388608)
    """
    return max(requested or 0, 2 * l2_bytes, MIN_FLUSH_BYTES)


class NvidiaSmiError(BackendUnavailableError):
    """``nvidia-smi`` is not on PATH (``missing`` is true) or failed (``detail`` says how)."""

    def __init__(self, message: str, *, missing: bool, detail: str = "") -> None:
        super().__init__(message)
        self.missing = missing
        self.detail = detail


def query_gpus(fields: Sequence[str], *, timeout: float = 30.0) -> list[list[str]]:
    """Ask ``nvidia-smi --query-gpu=<fields>`` about every GPU of the machine (NVML order, not CUDA's).

    Args:
        fields: nvidia-smi query field names, e.g. ``("index", "uuid", "name")``.
        timeout: Seconds to wait for nvidia-smi.

    Returns:
        One list of stripped values per GPU, in the order of ``fields`` (the last value keeps any comma in it).

    Raises:
        NvidiaSmiError: nvidia-smi is not on PATH, could not be run, timed out or exited with an error.
    """
    smi = shutil.which("nvidia-smi")
    if smi is None:
        raise NvidiaSmiError("nvidia-smi is not on PATH", missing=True)
    try:
        out = subprocess.run(
            [smi, f"--query-gpu={','.join(fields)}", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        raise NvidiaSmiError(f"nvidia-smi failed: {e}", missing=False, detail=str(e)) from e
    if out.returncode != 0:
        detail = (out.stderr or out.stdout).strip()
        raise NvidiaSmiError(f"nvidia-smi failed: {detail[:300]}", missing=False, detail=detail)
    rows = (line.split(",", len(fields) - 1) for line in out.stdout.splitlines() if line.strip())
    return [[part.strip() for part in row] for row in rows]
