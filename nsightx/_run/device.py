"""Choosing the CUDA device to measure: ``device=`` as an ordinal or a GPU UUID, honouring CUDA_VISIBLE_DEVICES.

Ordinals are CUDA's: indices into the devices visible to this process (after CUDA_VISIBLE_DEVICES). A UUID
(``GPU-8f1c...``, or a unique prefix of one) is matched against the visible devices. The device list comes
from ``nvidia-smi`` (queried only when a call names a device), in PCI order; CUDA numbers the GPUs in
``CUDA_DEVICE_ORDER``, fastest first by default, so on a machine of mixed GPUs where an index decides (no
mask, or indices in it) the CUDA driver is asked which UUID each ordinal is. Making a device current uses torch
when it is installed, else cuda-python's runtime bindings.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from nsightx._cudainfo import NvidiaSmiError, cuda_uuids, query_gpus
from nsightx._errors import BackendUnavailableError, ConfigError


@dataclass(frozen=True)
class GpuInfo:
    """One GPU as this process sees it."""

    ordinal: int
    """CUDA ordinal in this process (after CUDA_VISIBLE_DEVICES)."""
    index: int
    """nvidia-smi / NVML index (physical)."""
    uuid: str
    name: str

    @property
    def label(self) -> str:
        """``"<ordinal>:<uuid>"``, as the ``Device`` column shows it."""
        return f"{self.ordinal}:{self.uuid}"


def _all_gpus() -> list[tuple[int, str, str]]:
    try:
        rows = query_gpus(("index", "uuid", "name"))
    except NvidiaSmiError as e:
        if e.missing:
            raise BackendUnavailableError("no NVIDIA GPU found (nvidia-smi is not on PATH); device= needs a GPU") from e
        raise BackendUnavailableError(str(e)) from e
    return [(int(row[0]), row[1], row[2]) for row in rows if len(row) == 3 and row[0].isdigit()]


def visible(
    cuda_visible: str | None = None,
    gpus: list[tuple[int, str, str]] | None = None,
    order: str | None = None,
    driver: Callable[[], list[str] | None] | None = None,
) -> list[GpuInfo]:
    """The GPUs this process can use, in CUDA ordinal order.

    Args:
        cuda_visible: The CUDA_VISIBLE_DEVICES value (default: this process's environment).
        gpus: ``(index, uuid, name)`` of every GPU, in PCI order (default: asked from nvidia-smi).
        order: The CUDA_DEVICE_ORDER value (default: this process's environment).
        driver: The CUDA driver's UUID of each ordinal, asked only when nvidia-smi's order cannot tell (default:
            :func:`nsightx._cudainfo.cuda_uuids`, which initialises the driver, as the measurement will).

    Raises:
        ConfigError: the GPUs differ, CUDA numbers them fastest first, an index decides which is which, and the
            CUDA driver cannot say.
    """
    gpus = _all_gpus() if gpus is None else gpus
    value = os.environ.get("CUDA_VISIBLE_DEVICES") if cuda_visible is None else cuda_visible
    order = os.environ.get("CUDA_DEVICE_ORDER") if order is None else order
    if order != "PCI_BUS_ID" and len({g[2] for g in gpus}) > 1:
        if value is None or any(v.strip().isdigit() for v in value.split(",")):
            return _from_driver(gpus, value, order, (driver or cuda_uuids)())
    chosen = gpus if value is None else _masked(value, gpus)
    return [GpuInfo(i, idx, uuid, name) for i, (idx, uuid, name) in enumerate(chosen)]


def _masked(value: str, gpus: list[tuple[int, str, str]]) -> list[tuple[int, str, str]]:
    """The GPUs CUDA_VISIBLE_DEVICES=``value`` leaves, in its order; indices are PCI-order ones here."""
    chosen = []
    for item in (v.strip() for v in value.split(",")):
        if not item:
            break
        match = [
            g
            for g in gpus
            if (item.isdigit() and g[0] == int(item))
            or (not item.isdigit() and g[1].startswith(item if item.startswith("GPU-") else f"GPU-{item}"))
        ]
        if len(match) != 1:
            break  # CUDA stops at the first entry it cannot match
        chosen.append(match[0])
    return chosen


def _from_driver(
    gpus: list[tuple[int, str, str]], value: str | None, order: str | None, uuids: list[str] | None
) -> list[GpuInfo]:
    """The GPUs in the order the CUDA driver numbers them; a ConfigError when it cannot say."""
    by_uuid = {g[1]: g for g in gpus}
    if uuids is not None and all(u in by_uuid for u in uuids):
        return [GpuInfo(i, by_uuid[u][0], u, by_uuid[u][2]) for i, u in enumerate(uuids)]
    names = ", ".join(f"{g[0]}: {g[2]}" for g in gpus)
    raise ConfigError(
        f"cannot tell which GPU each CUDA ordinal is: CUDA_DEVICE_ORDER={order or 'FASTEST_FIRST (the default)'} "
        f"numbers these different GPUs ({names}; nvidia-smi's PCI order) fastest first, "
        f"CUDA_VISIBLE_DEVICES={value!r} picks by index, and the CUDA driver could not list its devices; "
        "set CUDA_DEVICE_ORDER=PCI_BUS_ID, or list the GPUs by UUID in CUDA_VISIBLE_DEVICES"
    )


def resolve(device: int | str, devices: list[GpuInfo]) -> GpuInfo:
    """Find ``device`` (ordinal or UUID prefix) among ``devices``; a clear ConfigError if it is not there."""
    listing = ", ".join(f"{g.ordinal} ({g.uuid}, {g.name})" for g in devices) or "none"
    if isinstance(device, int):
        if 0 <= device < len(devices):
            return devices[device]
        raise ConfigError(f"device={device} does not exist; visible CUDA devices: {listing}")
    key = device if device.startswith(("GPU-", "MIG-")) else f"GPU-{device}"
    match = [g for g in devices if g.uuid.startswith(key)]
    if len(match) == 1:
        return match[0]
    what = "matches several devices" if match else "matches no visible device"
    raise ConfigError(f"device={device!r} {what}; visible CUDA devices: {listing}")


@contextmanager
def use_device(ordinal: int | None) -> Iterator[None]:
    """Make ``ordinal`` the current CUDA device of this thread for the block (no-op for ``None``)."""
    if ordinal is None:
        yield
        return
    previous = _set_device(ordinal)
    try:
        yield
    finally:
        if previous is not None and previous != ordinal:
            _set_device(previous)


def _set_device(ordinal: int) -> int | None:
    try:
        import torch

        previous = int(torch.cuda.current_device()) if torch.cuda.is_initialized() else None
        torch.cuda.set_device(ordinal)
        return previous
    except ImportError:
        pass
    try:
        from cuda.bindings import runtime
    except ImportError as e:
        raise BackendUnavailableError(
            "device= needs torch or cuda-python to select the device (pip install cuda-python)"
        ) from e
    err, prev = runtime.cudaGetDevice()
    (status,) = runtime.cudaSetDevice(ordinal)
    if int(status) != 0:
        raise ConfigError(f"cudaSetDevice({ordinal}) failed with {status}")
    return int(prev) if int(err) == 0 else None
