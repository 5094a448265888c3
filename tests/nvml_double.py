"""A scripted stand-in for the ``pynvml`` module and the CUDA driver: the doubles at the NVML boundary.

Only what lies past that boundary is faked (the library calls and what the hardware would answer); the
nsightx_nvml wrapper, device map, collectors, temperature source, thermal guard and run loop above it are the
real code. Temperatures, clocks and reasons are scripted per device: a list is consumed one value per read
(the last one repeats), a callable is called with the fake clock's time.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any


class NVMLError(Exception):
    def __init__(self, value: int) -> None:
        super().__init__(f"NVML error {value}")
        self.value = value


class FakeClock:
    """Monotonic time that only moves when ``sleep`` is called (or ``advance``)."""

    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds

    def advance(self, seconds: float) -> None:
        self.now += seconds


@dataclass
class FakeGpu:
    uuid: str
    name: str = "NVIDIA H200"
    sm_mhz: Any = 1980
    mem_mhz: Any = 3201
    temp_c: Any = 40
    slowdown_c: int = 89
    power_mw: Any = 120_000
    limit_mw: int = 700_000
    ecc: bool = True
    reasons: Any = 0
    unsupported: set[str] = field(default_factory=set)


class FakeNvml:
    """Answers the pynvml calls nsightx_nvml makes, from a list of :class:`FakeGpu` (NVML index order)."""

    NVML_CLOCK_SM = 1
    NVML_CLOCK_MEM = 2
    NVML_TEMPERATURE_GPU = 0
    NVML_TEMPERATURE_THRESHOLD_SLOWDOWN = 1
    NVML_ERROR_NOT_SUPPORTED = 3
    NVML_ERROR_NOT_FOUND = 6
    NVML_ERROR_DRIVER_NOT_LOADED = 9
    NVML_FEATURE_ENABLED = 1
    NVMLError = NVMLError

    def __init__(
        self,
        gpus: list[FakeGpu],
        clock: FakeClock | None = None,
        driver: str = "580.159.04",
        driver_loaded: bool = True,
    ) -> None:
        self.gpus = gpus
        self.clock = clock or FakeClock()
        self.driver = driver
        self.driver_loaded = driver_loaded
        self.calls: Counter[str] = Counter()
        self._cursor: Counter[tuple[str, str]] = Counter()

    # --- scripting -------------------------------------------------------------------------------------
    def _value(self, gpu: FakeGpu, attr: str) -> Any:
        if attr in gpu.unsupported:
            raise NVMLError(self.NVML_ERROR_NOT_SUPPORTED)
        script = getattr(gpu, attr)
        if callable(script):
            return script(self.clock.now)
        if isinstance(script, list):
            i = self._cursor[(gpu.uuid, attr)]
            self._cursor[(gpu.uuid, attr)] += 1
            return script[min(i, len(script) - 1)]
        return script

    def _gpu(self, handle: Any) -> FakeGpu:
        assert isinstance(handle, FakeGpu), f"not a handle: {handle!r}"
        return handle

    # --- the pynvml surface ----------------------------------------------------------------------------
    def nvmlInit(self) -> None:
        self.calls["nvmlInit"] += 1
        if not self.driver_loaded:
            raise NVMLError(self.NVML_ERROR_DRIVER_NOT_LOADED)

    def nvmlSystemGetDriverVersion(self) -> str:
        return self.driver

    def nvmlDeviceGetCount(self) -> int:
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> FakeGpu:
        self.calls["nvmlDeviceGetHandleByIndex"] += 1
        if not 0 <= index < len(self.gpus):
            raise NVMLError(2)  # NVML_ERROR_INVALID_ARGUMENT
        return self.gpus[index]

    def nvmlDeviceGetHandleByUUID(self, uuid: str) -> FakeGpu:
        self.calls["nvmlDeviceGetHandleByUUID"] += 1
        for gpu in self.gpus:
            if gpu.uuid == uuid:
                return gpu
        raise NVMLError(self.NVML_ERROR_NOT_FOUND)

    def nvmlDeviceGetUUID(self, handle: Any) -> str:
        return self._gpu(handle).uuid

    def nvmlDeviceGetName(self, handle: Any) -> bytes:
        return self._gpu(handle).name.encode()  # old bindings return bytes; the wrapper must cope

    def nvmlDeviceIsMigDeviceHandle(self, handle: Any) -> int:
        return 0

    def nvmlDeviceGetClockInfo(self, handle: Any, kind: int) -> int:
        self.calls["nvmlDeviceGetClockInfo"] += 1
        gpu = self._gpu(handle)
        return int(self._value(gpu, "sm_mhz" if kind == self.NVML_CLOCK_SM else "mem_mhz"))

    def nvmlDeviceGetTemperature(self, handle: Any, sensor: int) -> int:
        self.calls["nvmlDeviceGetTemperature"] += 1
        assert sensor == self.NVML_TEMPERATURE_GPU
        return int(self._value(self._gpu(handle), "temp_c"))

    def nvmlDeviceGetTemperatureThreshold(self, handle: Any, kind: int) -> int:
        self.calls["nvmlDeviceGetTemperatureThreshold"] += 1
        assert kind == self.NVML_TEMPERATURE_THRESHOLD_SLOWDOWN
        return int(self._value(self._gpu(handle), "slowdown_c"))

    def nvmlDeviceGetPowerUsage(self, handle: Any) -> int:
        self.calls["nvmlDeviceGetPowerUsage"] += 1
        return int(self._value(self._gpu(handle), "power_mw"))

    def nvmlDeviceGetEnforcedPowerLimit(self, handle: Any) -> int:
        return int(self._value(self._gpu(handle), "limit_mw"))

    def nvmlDeviceGetEccMode(self, handle: Any) -> list[int]:
        on = int(bool(self._value(self._gpu(handle), "ecc")))
        return [on, on]

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle: Any) -> int:
        self.calls["nvmlDeviceGetCurrentClocksEventReasons"] += 1
        return int(self._value(self._gpu(handle), "reasons"))


class FakeCuda:
    """The CUDA driver's answers: the current device and each visible ordinal's UUID (``None``: not up)."""

    def __init__(self, uuids: dict[int, str] | None = None, current: int | None = 0) -> None:
        self.uuids = uuids
        self.current = current

    def current_device(self) -> int | None:
        return self.current if self.uuids is not None else None

    def uuid(self, ordinal: int) -> str | None:
        if self.uuids is None:
            return None
        return self.uuids.get(ordinal)


GPU_A = "GPU-aaaaaaaa-0000-0000-0000-000000000000"
GPU_B = "GPU-bbbbbbbb-1111-1111-1111-111111111111"


def install(monkeypatch: Any, gpus: list[FakeGpu], cuda: FakeCuda | None = None, **kw: Any) -> FakeNvml:
    """Put a provider over a :class:`FakeNvml` in place of the process-wide one for one test."""
    from nsightx_nvml import _collectors, _fields, _sampler

    fake = FakeNvml(gpus, **kw)
    monkeypatch.setattr(_collectors, "RUN_READ_MAX_AGE_S", 0.0)  # one read per run: scripted values line up
    monkeypatch.setattr(_sampler, "SAMPLE_PERIOD_S", 0.0)  # no sampler thread (tests that want one set a period)
    monkeypatch.setattr(_fields, "SLOW_FIELDS_MAX_AGE_S", 0.0)  # every field read every time
    monkeypatch.setattr(_collectors, "_provider", _collectors.Provider(load=lambda: fake, cuda=cuda or FakeCuda()))
    return fake
