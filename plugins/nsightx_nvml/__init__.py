"""nsightx_nvml: the conditions each run was measured under, read from NVML (first-party plugin ``nvml``).

Registers the collector set ``nvml``, **on by default**: every profiled call gets these columns when NVML works
on the machine (nvidia-ml-py installed, an NVIDIA driver loaded), and none at all otherwise. Turn it off for
every call with ``NSIGHTX_BLOCK_PLUGINS=nvml``.

Once per call (``nvml.device``): ``DriverVersion``, ``GPUName``, ``GPUUUID``, ``PowerLimitW``, ``ECCEnabled``,
``SlowdownTempC``. Before each measured run (``nvml.run``): ``MeasuredSMClockMHz``, ``MeasuredMemClockMHz``,
``GPUTemperatureC``, ``GPUPowerW`` and ``ClockEventReasons`` (``none``, or names such as
``sw_power_cap|hw_slowdown``). The aggregated frame turns those into ``_Avg/_Std/_Min/_Max`` columns, a
``ThrottledRuns`` count, and a ``StableMeasurement`` that is false when any run was throttled.

The device read is the one being profiled: the decorator's ``device=``, else the calling thread's current CUDA
device, matched to NVML by UUID (see :mod:`nsightx_nvml._device`). The plugin also gives the thermal guard its
temperatures (hook ``nsightx_temperature_source``).

Why on by default: a number without the clock it was measured at is hard to trust, and the cost is outside the
measured regions. On the H200 one per-run collection (five NVML queries) takes 14 µs on an idle GPU and ~55 µs
while it runs kernels, so runs starting within 10 ms of the last read share it; in the CUPTI overhead benchmark
the collectors cost ~3% of the sweep (``98c9cf0:benchmarks/results/2026-12-02-s2-run.md``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from nsightx.ext import hookimpl

if TYPE_CHECKING:
    from nsightx.ext import CollectorRegistrar, TemperatureSource

SET_NAME = "nvml"


@hookimpl
def nsightx_register_collectors(register: CollectorRegistrar) -> None:
    """Register the ``nvml`` set (device facts once, conditions per run), used by every call."""
    from nsightx_nvml._collectors import DeviceInfo, RunConditions

    register(SET_NAME, [DeviceInfo(), RunConditions()], default=True)


@hookimpl
def nsightx_temperature_source(device: int | str | None) -> TemperatureSource | None:
    """Offer NVML temperatures of ``device`` to the thermal guard, when NVML works here."""
    from nsightx_nvml._collectors import NvmlTemperatureSource, provider

    if provider().devices() is None:
        return None
    return NvmlTemperatureSource(device)
