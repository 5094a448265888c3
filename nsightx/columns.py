"""Names of the measured-condition columns, defined once for the core and for the plugins that fill them.

The nvml plugin writes these RUN-scope values before every measured run; the ncu backend derives
:data:`MEASURED_SM_CLOCK` from its report; the core's DataFrame reads them to mark throttled runs. A plugin that
measures the same conditions another way should use the same names, so that the ``Throttled`` column and
``StableMeasurement`` work for it too.

Example:
    >>> from nsightx.columns import MEASURED_SM_CLOCK
    >>> MEASURED_SM_CLOCK
    'MeasuredSMClockMHz'
"""

from __future__ import annotations

from typing import Final

MEASURED_SM_CLOCK: Final = "MeasuredSMClockMHz"
"""RUN-scope value: the SM clock read around the run (MHz), as opposed to the rated ``ComputeClock``."""
MEASURED_MEM_CLOCK: Final = "MeasuredMemClockMHz"
"""RUN-scope value: the memory clock read before the run (MHz), as opposed to the rated ``MemoryClock``."""
GPU_TEMPERATURE: Final = "GPUTemperatureC"
"""RUN-scope value: the GPU temperature read before the run (°C)."""
GPU_POWER: Final = "GPUPowerW"
"""RUN-scope value: the GPU's power draw read before the run (W)."""
CLOCK_EVENT_REASONS: Final = "ClockEventReasons"
"""RUN-scope value: ``none`` or ``|``-joined NVML clock-event reason names (``gpu_idle``, ``sw_power_cap``, ...)."""

MEASURED_CONDITIONS: Final = (MEASURED_SM_CLOCK, MEASURED_MEM_CLOCK, GPU_TEMPERATURE, GPU_POWER, CLOCK_EVENT_REASONS)
"""Every measured-condition column, in the order the nvml plugin fills them."""

SERIALIZES_KERNELS: Final = "SerializesKernels"
"""Environment key a backend sets (true) when it runs each kernel alone, as Nsight Compute's kernel replay does:
the ``serialized`` flag reads it, and ``launch_bound`` is not judged for such results."""

__all__ = [
    "CLOCK_EVENT_REASONS",
    "GPU_POWER",
    "GPU_TEMPERATURE",
    "MEASURED_CONDITIONS",
    "MEASURED_MEM_CLOCK",
    "MEASURED_SM_CLOCK",
    "SERIALIZES_KERNELS",
]
