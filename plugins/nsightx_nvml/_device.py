"""Which NVML device is the CUDA device being profiled.

CUDA and NVML number GPUs differently: CUDA counts only the devices ``CUDA_VISIBLE_DEVICES`` leaves visible,
in ``CUDA_DEVICE_ORDER``; NVML counts every GPU in PCI order. The one name both share is the device UUID, so
the mapping asks the CUDA driver for the UUID of the ordinal and NVML for the device with that UUID.

The CUDA driver is asked through ``libcuda`` only if the process has already loaded it and initialised CUDA
(as torch, CuPy or JAX do on first use): this plugin never initialises CUDA itself. Before that, the ordinal
is mapped through ``CUDA_VISIBLE_DEVICES`` (indices or UUID prefixes), which agrees with CUDA on any machine
whose GPUs are all the same model, or with ``CUDA_DEVICE_ORDER=PCI_BUS_ID``; the answer is re-checked once CUDA
is up. On a machine of mixed GPUs numbered fastest first (the default), an index cannot be mapped before then:
the device is not found (empty columns) rather than guessed.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from nsightx.ext import loaded_libcuda
from nsightx_nvml._lib import Nvml


class CudaDriver(Protocol):
    """The two questions asked of the CUDA driver (tests answer them with a double)."""

    def current_device(self) -> int | None:
        """Ordinal of the current context's device; ``None`` when no context is current or CUDA is not up."""
        ...

    def uuid(self, ordinal: int) -> str | None:
        """UUID of CUDA device ``ordinal`` without its ``GPU-``/``MIG-`` prefix; ``None`` before CUDA is up."""
        ...


class LibCuda:
    """:class:`CudaDriver` through ``libcuda.so.1`` with ctypes, only once the process has loaded it."""

    def __init__(self) -> None:
        self._lib: Any = None

    def _library(self) -> Any:
        if self._lib is None:
            self._lib = loaded_libcuda()  # None until the process has loaded libcuda itself
        return self._lib

    def current_device(self) -> int | None:
        """See :class:`CudaDriver`."""
        lib = self._library()
        if lib is None:
            return None
        dev = ctypes.c_int()
        return dev.value if lib.cuCtxGetDevice(ctypes.byref(dev)) == 0 else None

    def uuid(self, ordinal: int) -> str | None:
        """See :class:`CudaDriver`."""
        lib = self._library()
        if lib is None:
            return None
        dev = ctypes.c_int()
        if lib.cuDeviceGet(ctypes.byref(dev), ctypes.c_int(ordinal)) != 0:  # e.g. CUDA_ERROR_NOT_INITIALIZED
            return None
        raw = (ctypes.c_ubyte * 16)()
        get = getattr(lib, "cuDeviceGetUuid_v2", None) or getattr(lib, "cuDeviceGetUuid", None)
        if get is None or get(raw, dev) != 0:
            return None
        return format_uuid(bytes(raw))


def format_uuid(raw: bytes) -> str:
    """16 bytes as NVML writes a UUID after its ``GPU-``/``MIG-`` prefix: ``xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx``."""
    h = raw.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


class DeviceNotFound(LookupError):
    """The CUDA device could not be matched to an NVML device; the message says why."""


@dataclass(frozen=True)
class Resolved:
    """An NVML device matched to the profiled CUDA device."""

    handle: Any
    """NVML handle of the device (a MIG instance's own handle under MIG)."""
    sensors: Any
    """Handle to read clocks, temperature and power from (the physical GPU under MIG)."""
    how: str
    """How it was matched: ``"uuid"`` (CUDA driver), ``"CUDA_VISIBLE_DEVICES"`` or ``"index"``."""
    label: str
    """Short description for messages, e.g. ``"CUDA device 0"``."""


class DeviceMap:
    """Maps a CUDA ordinal, a UUID or ``None`` (current device) to an NVML handle, caching the answers.

    Args:
        nvml: The NVML wrapper.
        cuda: The CUDA driver questions.
        environ: Environment to read ``CUDA_VISIBLE_DEVICES`` from (default ``os.environ``).
    """

    def __init__(self, nvml: Nvml, cuda: CudaDriver, environ: Mapping[str, str] | None = None) -> None:
        self.nvml = nvml
        self.cuda = cuda
        self.environ = os.environ if environ is None else environ
        self._by_uuid: dict[str, Resolved] = {}
        self._by_ordinal: dict[int, Resolved] = {}
        self._names: list[str] | None = None
        """The GPUs' names in NVML's order, asked once (they do not change while the process runs)."""

    def resolve(self, device: int | str | None) -> Resolved:
        """The NVML device for ``device``; ``None`` means the calling thread's current CUDA device (else 0).

        Raises:
            DeviceNotFound: no NVML device matches.
        """
        if isinstance(device, str):
            return self._uuid(device, f"device {device}")
        ordinal = device if device is not None else (self.cuda.current_device() or 0)
        hit = self._by_ordinal.get(ordinal)
        if hit is not None:
            return hit
        label = f"CUDA device {ordinal}"
        uuid = self.cuda.uuid(ordinal)
        if uuid is not None:
            found = self._uuid(uuid, label)
            self._by_ordinal[ordinal] = found  # exact: cached for good
            return found
        return self._visible(ordinal, label)  # best effort until CUDA is up; not cached

    def _uuid(self, uuid: str, label: str) -> Resolved:
        hit = self._by_uuid.get(uuid)
        if hit is not None:
            return hit
        handle = None
        candidates = [uuid] if uuid.startswith(("GPU-", "MIG-")) else [f"GPU-{uuid}", f"MIG-{uuid}"]
        for name in candidates:
            try:
                handle = self.nvml.by_uuid(name)
                break
            except self.nvml.error as e:
                if not self.nvml.is_not_found(e):
                    raise
        if handle is None:
            handle = self._uuid_prefix(uuid)
        found = Resolved(handle, self.nvml.parent(handle), "uuid", label)
        self._by_uuid[uuid] = found
        return found

    def _uuid_prefix(self, prefix: str) -> Any:
        want = prefix.lower() if prefix.startswith("GPU-") else f"gpu-{prefix.lower()}"
        matches = []
        for i in range(self.nvml.count()):
            handle = self.nvml.by_index(i)
            if self.nvml.uuid(handle).lower().startswith(want):
                matches.append(handle)
        if len(matches) != 1:
            raise DeviceNotFound(f"{len(matches)} NVML devices have a UUID starting with {prefix!r}; need one")
        return matches[0]

    def _visible(self, ordinal: int, label: str) -> Resolved:
        visible = self.environ.get("CUDA_VISIBLE_DEVICES")
        if visible is None or any(e.strip().isdigit() for e in visible.split(",")):
            self._check_pci_order(label)
        if visible is None:
            if ordinal >= self.nvml.count():
                raise DeviceNotFound(f"{label}: NVML sees only {self.nvml.count()} device(s)")
            handle = self.nvml.by_index(ordinal)
            return Resolved(handle, self.nvml.parent(handle), "index", label)
        entries = [e.strip() for e in visible.split(",") if e.strip()]
        if ordinal >= len(entries):
            raise DeviceNotFound(f"{label}: CUDA_VISIBLE_DEVICES={visible!r} makes only {len(entries)} visible")
        entry = entries[ordinal]
        if entry.isdigit():
            if int(entry) >= self.nvml.count():
                raise DeviceNotFound(
                    f"{label}: CUDA_VISIBLE_DEVICES={visible!r} names GPU {entry}, but NVML sees "
                    f"only {self.nvml.count()}"
                )
            handle = self.nvml.by_index(int(entry))
            return Resolved(handle, self.nvml.parent(handle), "CUDA_VISIBLE_DEVICES", label)
        found = self._uuid(entry, label)
        return Resolved(found.handle, found.sensors, "CUDA_VISIBLE_DEVICES", label)

    def _check_pci_order(self, label: str) -> None:
        """DeviceNotFound unless CUDA numbers the GPUs in NVML's (PCI) order: PCI_BUS_ID, or GPUs all alike."""
        order = self.environ.get("CUDA_DEVICE_ORDER")
        if order == "PCI_BUS_ID":
            return
        if self._names is None:
            count = self.nvml.count()
            self._names = [self.nvml.name(self.nvml.by_index(i)) for i in range(count)] if count > 1 else []
        names = self._names
        if len(set(names)) > 1:
            raise DeviceNotFound(
                f"{label}: CUDA_DEVICE_ORDER={order or 'FASTEST_FIRST (the default)'} numbers these different GPUs "
                f"({', '.join(names)}) fastest first, not in NVML's PCI order, and CUDA is not up yet to say which is "
                "which; set CUDA_DEVICE_ORDER=PCI_BUS_ID or list the GPUs by UUID in CUDA_VISIBLE_DEVICES"
            )
