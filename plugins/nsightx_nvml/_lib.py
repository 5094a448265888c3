"""The NVML boundary: a thin, typed wrapper over the ``pynvml`` module (package ``nvidia-ml-py``).

Everything NVML-specific that the collectors and the temperature source use goes through :class:`Nvml`, which
converts units (mW to W) and picks the current name of renamed functions. Tests replace the ``pynvml`` module
itself with a scripted double, so the code above this wrapper, and the wrapper, run unchanged.
"""

from __future__ import annotations

import functools
from typing import Any

CLOCK_EVENT_REASONS: tuple[tuple[int, str], ...] = (
    (0x001, "gpu_idle"),
    (0x002, "applications_clocks_setting"),
    (0x004, "sw_power_cap"),
    (0x008, "hw_slowdown"),
    (0x010, "sync_boost"),
    (0x020, "sw_thermal_slowdown"),
    (0x040, "hw_thermal_slowdown"),
    (0x080, "hw_power_brake_slowdown"),
    (0x100, "display_clock_setting"),
    (0x200, "board_limit"),
    (0x400, "reliability"),
)
"""NVML clock-event (formerly "throttle") reason bits and the names nsightx writes for them."""


@functools.lru_cache(maxsize=64)
def reason_names(mask: int) -> str:
    """``"none"`` for 0, else the set bits' names joined by ``|`` (unknown bits as ``bit_0x...``).

    Cached: the sampler thread asks for the same few masks again and again, holding the GIL meanwhile.
    """
    if mask == 0:
        return "none"
    names = [name for bit, name in CLOCK_EVENT_REASONS if mask & bit]
    known = 0
    for bit, _ in CLOCK_EVENT_REASONS:
        known |= bit
    rest = mask & ~known
    bit = 1
    while rest:
        if rest & bit:
            names.append(f"bit_{bit:#x}")
            rest &= ~bit
        bit <<= 1
    return "|".join(names)


def import_pynvml() -> Any:
    """Import the real ``pynvml`` (raises ImportError when nvidia-ml-py is not installed)."""
    import pynvml

    return pynvml


class Nvml:
    """Typed calls into one ``pynvml``-like module. Handles are opaque objects from that module.

    Args:
        module: ``pynvml``, or a double with the same function names and constants.
    """

    def __init__(self, module: Any) -> None:
        self.m = module
        self._reasons = (
            getattr(module, "nvmlDeviceGetCurrentClocksEventReasons", None)
            or module.nvmlDeviceGetCurrentClocksThrottleReasons
        )

    def init(self) -> None:
        """Initialise NVML (``nvmlInit``); raises the module's NVMLError when the driver is missing."""
        self.m.nvmlInit()

    def is_not_supported(self, error: BaseException) -> bool:
        """True when ``error`` is NVML's "Not Supported" (a field this device does not report)."""
        return getattr(error, "value", None) == self.m.NVML_ERROR_NOT_SUPPORTED

    def is_not_found(self, error: BaseException) -> bool:
        """True when ``error`` is NVML's "Not Found" (no device with that UUID)."""
        return getattr(error, "value", None) == self.m.NVML_ERROR_NOT_FOUND

    @property
    def error(self) -> type[BaseException]:
        """The module's base exception class."""
        error: type[BaseException] = self.m.NVMLError
        return error

    def driver_version(self) -> str:
        """Driver version string, e.g. ``"580.159.04"``."""
        return _text(self.m.nvmlSystemGetDriverVersion())

    def count(self) -> int:
        """Number of GPUs NVML sees (all of them: NVML ignores CUDA_VISIBLE_DEVICES)."""
        return int(self.m.nvmlDeviceGetCount())

    def by_index(self, index: int) -> Any:
        """Handle of NVML device ``index`` (NVML numbers devices in PCI bus order)."""
        return self.m.nvmlDeviceGetHandleByIndex(index)

    def by_uuid(self, uuid: str) -> Any:
        """Handle of the GPU or MIG instance with this UUID."""
        return self.m.nvmlDeviceGetHandleByUUID(uuid)

    def uuid(self, handle: Any) -> str:
        """Device UUID, ``GPU-...`` (or ``MIG-...``)."""
        return _text(self.m.nvmlDeviceGetUUID(handle))

    def name(self, handle: Any) -> str:
        """Product name, e.g. ``"NVIDIA H200"``."""
        return _text(self.m.nvmlDeviceGetName(handle))

    def parent(self, handle: Any) -> Any:
        """The physical GPU of a MIG instance handle, else ``handle`` (MIG slices share clocks and sensors)."""
        is_mig = getattr(self.m, "nvmlDeviceIsMigDeviceHandle", None)
        if is_mig is None:
            return handle
        try:
            flag = is_mig(handle)
        except self.error:
            return handle
        if int(getattr(flag, "value", flag)):
            return self.m.nvmlDeviceGetDeviceHandleFromMigDeviceHandle(handle)
        return handle

    def sm_clock_mhz(self, handle: Any) -> int:
        """Current SM clock (MHz)."""
        return int(self.m.nvmlDeviceGetClockInfo(handle, self.m.NVML_CLOCK_SM))

    def mem_clock_mhz(self, handle: Any) -> int:
        """Current memory clock (MHz)."""
        return int(self.m.nvmlDeviceGetClockInfo(handle, self.m.NVML_CLOCK_MEM))

    def temperature_c(self, handle: Any) -> int:
        """GPU core temperature (°C)."""
        get = getattr(self.m, "nvmlDeviceGetTemperature", None)
        if get is None:  # removed in newer bindings in favour of the versioned call
            return int(self.m.nvmlDeviceGetTemperatureV(handle, self.m.NVML_TEMPERATURE_GPU))
        return int(get(handle, self.m.NVML_TEMPERATURE_GPU))

    def slowdown_c(self, handle: Any) -> int:
        """Temperature at which the GPU starts to slow its clocks (°C)."""
        return int(self.m.nvmlDeviceGetTemperatureThreshold(handle, self.m.NVML_TEMPERATURE_THRESHOLD_SLOWDOWN))

    def power_w(self, handle: Any) -> float:
        """Board power draw (W); on recent GPUs NVML averages it over about one second."""
        return float(self.m.nvmlDeviceGetPowerUsage(handle)) / 1000.0

    def power_limit_w(self, handle: Any) -> float:
        """Enforced power limit (W)."""
        return float(self.m.nvmlDeviceGetEnforcedPowerLimit(handle)) / 1000.0

    def ecc_enabled(self, handle: Any) -> bool:
        """Whether ECC is currently on."""
        current = self.m.nvmlDeviceGetEccMode(handle)[0]
        return bool(int(current) == int(self.m.NVML_FEATURE_ENABLED))

    def event_reasons(self, handle: Any) -> int:
        """Bitmask of the current clock-event reasons (see :data:`CLOCK_EVENT_REASONS`)."""
        return int(self._reasons(handle))


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
