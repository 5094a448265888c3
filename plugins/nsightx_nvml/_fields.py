"""The five per-run NVML readings, with the slow ones read less often: shared by the collector and the sampler.

Kept apart from :mod:`nsightx_nvml._collectors` so that the sampler process (:mod:`nsightx_nvml._sampler_child`)
can read exactly what the collector reads without importing the rest of nsightx.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from nsightx.columns import (
    CLOCK_EVENT_REASONS,
    GPU_POWER,
    GPU_TEMPERATURE,
    MEASURED_CONDITIONS,
    MEASURED_MEM_CLOCK,
    MEASURED_SM_CLOCK,
)
from nsightx_nvml._lib import Nvml, reason_names

Value = int | float | str | None

READ_COLUMNS = MEASURED_CONDITIONS
"""The RUN columns read from NVML."""

SLOW_FIELDS = (MEASURED_MEM_CLOCK, GPU_TEMPERATURE, GPU_POWER)
"""Fields read at most every :data:`SLOW_FIELDS_MAX_AGE_S`; the SM clock and clock-event reasons, which can
change from one millisecond to the next, are read in every sample."""

SLOW_FIELDS_MAX_AGE_S = 0.1
"""How old the slow fields of a sample may be. Temperature moves by about a degree per second, power is NVML's
average over about a second, and the memory clock changes with the power state (which moves the SM clock too).
Each NVML query costs ~40 us while the GPU works, so three fewer per sample matter."""


def safe(nvml: Nvml, unsupported: set[str], key: str, read: Callable[[Any], Value], handle: Any) -> Value:
    """Read one field; ``None`` (and never asked again) when this device does not support it."""
    if key in unsupported:
        return None
    try:
        return read(handle)
    except nvml.error as e:
        if nvml.is_not_supported(e):
            unsupported.add(key)
        return None


class FieldReader:
    """Reads :data:`READ_COLUMNS` from one or more devices, remembering unsupported fields and slow values."""

    def __init__(self) -> None:
        self._unsupported: dict[str, set[str]] = {}
        self._slow: dict[str, tuple[int, dict[str, Value]]] = {}

    def read(self, nvml: Nvml, sensors: Any, label: str) -> dict[str, Value]:
        """The five values of the device whose sensor handle is ``sensors`` (``label`` names it in caches)."""
        values = self.read_raw(nvml, sensors, label)
        mask = values[CLOCK_EVENT_REASONS]
        values[CLOCK_EVENT_REASONS] = reason_names(mask) if isinstance(mask, int) else None
        return values

    def read_raw(self, nvml: Nvml, sensors: Any, label: str) -> dict[str, Value]:
        """As :meth:`read`, with ``ClockEventReasons`` as NVML's bitmask (what the sampler process shares)."""
        skip = self._unsupported.setdefault(label, set())
        mask = safe(nvml, skip, "reasons", nvml.event_reasons, sensors)
        fast: dict[str, Value] = {
            MEASURED_SM_CLOCK: safe(nvml, skip, "sm", nvml.sm_clock_mhz, sensors),
            CLOCK_EVENT_REASONS: int(mask) if isinstance(mask, int) else None,
        }
        now = time.perf_counter_ns()
        slow = self._slow.get(label)
        if slow is None or (now - slow[0]) / 1e9 >= SLOW_FIELDS_MAX_AGE_S:
            slow = (
                now,
                {
                    MEASURED_MEM_CLOCK: safe(nvml, skip, "mem", nvml.mem_clock_mhz, sensors),
                    GPU_TEMPERATURE: safe(nvml, skip, "temp", nvml.temperature_c, sensors),
                    GPU_POWER: safe(nvml, skip, "power", nvml.power_w, sensors),
                },
            )
            self._slow[label] = slow
        return {k: fast[k] if k in fast else slow[1][k] for k in READ_COLUMNS}
