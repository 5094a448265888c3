"""The nvml collectors and temperature source, over one process-wide NVML connection.

:class:`Provider` initialises NVML on first use (never at import) and remembers why it could not, so a machine
without nvidia-ml-py or an NVIDIA driver pays one failed attempt and then gets no nvml columns at all.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Mapping
from typing import Any

from nsightx._collectors import CollectContext
from nsightx._enums import CollectionScope
from nsightx._records import Scalar
from nsightx._thermal import ThermalReading
from nsightx_nvml._device import CudaDriver, DeviceMap, DeviceNotFound, LibCuda, Resolved
from nsightx_nvml._lib import Nvml, import_pynvml, reason_names

DEVICE_COLUMNS = ("DriverVersion", "GPUName", "GPUUUID", "PowerLimitW", "ECCEnabled", "SlowdownTempC")
"""ONCE columns: facts about the profiled device."""
RUN_COLUMNS = ("MeasuredSMClockMHz", "MeasuredMemClockMHz", "GPUTemperatureC", "GPUPowerW", "ClockEventReasons")
"""RUN columns: the device's state read just before each measured run."""

RUN_READ_MAX_AGE_S = 0.010
"""A run that starts within this many seconds of the last read of the same device gets that read again.

Five NVML queries take ~15 us on an idle H200 but ~55 us while it runs kernels, which is more than a whole short
run; runs that start this close together start in the same conditions, and a run that lasts longer than this
always gets a fresh read."""


class Provider:
    """Lazily initialised NVML plus the CUDA-to-NVML device map.

    Args:
        load: Returns the ``pynvml`` module (tests return a scripted double).
        cuda: Answers the CUDA driver questions (tests pass a double).
    """

    def __init__(self, load: Callable[[], Any] = import_pynvml, cuda: CudaDriver | None = None) -> None:
        self._load = load
        self._cuda = cuda
        self._nvml: Nvml | None = None
        self._map: DeviceMap | None = None
        self.error: str | None = None
        """Why NVML is unavailable (``None`` until tried, or when it works)."""
        self._tried = False

    def devices(self) -> DeviceMap | None:
        """The device map, or ``None`` if NVML cannot be used here (see :attr:`error`)."""
        if not self._tried:
            self._tried = True
            try:
                nvml = Nvml(self._load())
                nvml.init()
            except ImportError as e:
                self.error = f"nvidia-ml-py is not installed ({e}); pip install 'nsightx[nvml]'"
            except Exception as e:  # NVMLError: no driver, no GPU, no permission
                self.error = f"NVML could not start: {type(e).__name__}: {e}"
            else:
                self._nvml = nvml
                self._map = DeviceMap(nvml, self._cuda if self._cuda is not None else LibCuda())
        return self._map

    def status(self) -> str:
        """One line for ``nsightx plugins``: usable, or why not."""
        devices = self.devices()
        if devices is None:
            return f"unavailable: {self.error}"
        return f"NVML {devices.nvml.driver_version()} sees {devices.nvml.count()} GPU(s)"


_provider: Provider | None = None


def provider() -> Provider:
    """The process-wide provider (created on first use)."""
    global _provider
    if _provider is None:
        _provider = Provider()
    return _provider


def use_provider(p: Provider | None) -> Provider | None:
    """Replace the process-wide provider (tests install one over an NVML double); returns the old one."""
    global _provider
    old, _provider = _provider, p
    return old


_warned: set[str] = set()


def _unmatched(error: DeviceNotFound, columns: tuple[str, ...]) -> dict[str, Scalar]:
    """Empty values for ``columns``, with one warning per process and reason saying why."""
    if str(error) not in _warned:
        _warned.add(str(error))
        warnings.warn(f"nvml: cannot tell which GPU is being profiled ({error}); its columns are empty",
                      RuntimeWarning, stacklevel=3)
    return dict.fromkeys(columns)


def _safe(nvml: Nvml, unsupported: set[str], key: str, read: Callable[[Any], Scalar], handle: Any) -> Scalar:
    """Read one field; ``None`` (and never asked again) when this device does not support it."""
    if key in unsupported:
        return None
    try:
        return read(handle)
    except nvml.error as e:
        if nvml.is_not_supported(e):
            unsupported.add(key)
        return None


class DeviceInfo:
    """ONCE: driver version, GPU name and UUID, enforced power limit, ECC state, slowdown temperature."""

    name = "nvml.device"
    scope = CollectionScope.ONCE
    columns = DEVICE_COLUMNS

    def __init__(self) -> None:
        self._fixed: dict[tuple[int, str], tuple[DeviceMap, dict[str, Scalar]]] = {}

    def collect(self, ctx: CollectContext) -> Mapping[str, Scalar]:
        """The device facts, or no columns when NVML is unavailable."""
        devices = provider().devices()
        if devices is None:
            return {}
        nvml = devices.nvml
        try:
            dev = devices.resolve(ctx.device)
        except DeviceNotFound as e:
            return _unmatched(e, DEVICE_COLUMNS)
        skip: set[str] = set()
        key = (id(devices), dev.label)
        cached = self._fixed.get(key)
        fixed = cached[1] if cached is not None and cached[0] is devices else None
        if fixed is None:  # facts that do not change while the driver is loaded (ECC needs a reboot)
            fixed = {
                "DriverVersion": nvml.driver_version(),
                "GPUName": _safe(nvml, skip, "name", nvml.name, dev.handle),
                "GPUUUID": _safe(nvml, skip, "uuid", nvml.uuid, dev.handle),
                "ECCEnabled": _safe(nvml, skip, "ecc", nvml.ecc_enabled, dev.sensors),
                "SlowdownTempC": _safe(nvml, skip, "slowdown", nvml.slowdown_c, dev.sensors),
            }
            self._fixed[key] = (devices, fixed)
        out = dict(fixed)
        out["PowerLimitW"] = _safe(nvml, skip, "limit", nvml.power_limit_w, dev.sensors)  # an admin may change it
        return {k: out[k] for k in DEVICE_COLUMNS}

    def availability(self) -> str:
        """Whether NVML works here (shown by ``nsightx plugins``)."""
        return provider().status()


class RunConditions:
    """RUN: SM and memory clocks, temperature, power and clock-event reasons, read just before each run.

    The read happens after the previous run and the thermal guard, right before the user's function is
    called: it describes the state the run starts in. Runs starting less than :data:`RUN_READ_MAX_AGE_S` after
    the last read share it (short runs queue faster than NVML answers). A field the device does not support is
    ``None``, and is not asked again.
    """

    name = "nvml.run"
    scope = CollectionScope.RUN
    columns = RUN_COLUMNS

    def __init__(self) -> None:
        self._unsupported: dict[str, set[str]] = {}
        self._last: dict[tuple[int, str], tuple[DeviceMap, float, dict[str, Scalar]]] = {}

    def collect(self, ctx: CollectContext) -> Mapping[str, Scalar]:
        """The per-run readings, or no columns when NVML is unavailable."""
        devices = provider().devices()
        if devices is None:
            return {}
        try:
            dev = devices.resolve(ctx.device)
        except DeviceNotFound as e:
            return _unmatched(e, RUN_COLUMNS)
        now = time.perf_counter()
        key = (id(devices), dev.label)
        last = self._last.get(key)
        if last is not None and last[0] is devices and now - last[1] < RUN_READ_MAX_AGE_S:
            return last[2]
        values = self.read(devices.nvml, dev)
        self._last[key] = (devices, now, values)
        return values

    def read(self, nvml: Nvml, dev: Resolved) -> dict[str, Scalar]:
        """Read the five values from ``dev``."""
        skip = self._unsupported.setdefault(dev.label, set())
        h = dev.sensors
        mask = _safe(nvml, skip, "reasons", nvml.event_reasons, h)
        return {
            "MeasuredSMClockMHz": _safe(nvml, skip, "sm", nvml.sm_clock_mhz, h),
            "MeasuredMemClockMHz": _safe(nvml, skip, "mem", nvml.mem_clock_mhz, h),
            "GPUTemperatureC": _safe(nvml, skip, "temp", nvml.temperature_c, h),
            "GPUPowerW": _safe(nvml, skip, "power", nvml.power_w, h),
            "ClockEventReasons": reason_names(int(mask)) if isinstance(mask, int) else None,
        }

    def availability(self) -> str:
        """Whether NVML works here (shown by ``nsightx plugins``)."""
        return provider().status()


class NvmlTemperatureSource:
    """The thermal guard's source: temperature and slowdown threshold of the watched device.

    Args:
        device: CUDA ordinal, UUID, or ``None`` for the current device (looked up again at every read).
        source: The provider to read through (default: the process-wide one).
    """

    def __init__(self, device: int | str | None, source: Provider | None = None) -> None:
        self.device = device
        self._provider = source
        self._slowdown: dict[str, int] = {}

    def read(self) -> ThermalReading:
        """Read now.

        Raises:
            RuntimeError: NVML is unavailable.
            DeviceNotFound: the device cannot be matched.
        """
        p = self._provider or provider()
        devices = p.devices()
        if devices is None:
            raise RuntimeError(p.error)
        dev = devices.resolve(self.device)
        nvml = devices.nvml
        key = dev.label
        if key not in self._slowdown:
            self._slowdown[key] = nvml.slowdown_c(dev.sensors)
        return ThermalReading(temperature_c=nvml.temperature_c(dev.sensors), slowdown_c=self._slowdown[key],
                              device=dev.label)
