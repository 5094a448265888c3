"""``nsightx.ext``: the extension API, the one module a backend or a plugin imports from nsightx.

A third-party package that adds a backend or an info collector needs nothing else from nsightx than this module
and the user API (``nsightx``, ``nsightx.analyze``, ``nsightx.experimental``, ``nsightx.exceptions``). The
first-party backends (``host``, ``events``, ``cupti``, ``ncu``) and plugins (``nvml``, ``env``) are written
against it too, and a test fails if any of them reaches into a private ``nsightx._*`` module. The guide, with a
complete example backend package, is docs/plugins.md; every name is listed in docs/api.md.

What is here, by purpose:

- **The backend contract**: :class:`Backend`, :class:`Session`, :class:`Capabilities`, :class:`Availability`,
  :class:`RunOutput`, and the deferred-collection policy of the run loop (:data:`COLLECT_EVERY`,
  :data:`COLLECT_SECONDS`).
- **What a backend receives and produces**: :class:`Plan` (with :class:`ThermalSettings`), :class:`RegionId`,
  :class:`Record` (:func:`new_record` builds one faster, for code after a GPU wait; a :data:`RecordRow` tuple
  in ``RunOutput.record_rows`` costs less still), :data:`Scalar`, and, for a
  backend that overrides :meth:`Backend.execute`, :class:`RunRecords`, :class:`RegionRun`,
  :class:`CollectorValue` and the :class:`Sink` they are written to; :func:`read_raw` reads the runs of a raw
  JSON-lines file back.
- **Running the plan in another process** (``execute`` of a backend whose measurement cannot happen in the
  user's process, as the ncu backend's worker under Nsight Compute): :class:`RemoteCall` is the parent's half
  (the plan shipped with its function, the collectors and the thermal guard kept in the user's process and
  served over a private channel, the child's runs and failure read back), :func:`run_child` the child's (the
  shared run loop on the backend's own session), :func:`child_env` a child's environment.
- **Objects pickle cannot send as they are**: :func:`register_reducer` (with :func:`unregister_reducer`): a
  package makes its own kinds travel to a worker (the ncu worker, ``parallel_devices``, ``executor=``), as
  nsightx does for ``@triton.jit`` kernels and for tensors and models (by value only up to a size).
- **Plugins and hooks**: :data:`hookimpl`, :class:`BackendRegistrar`, :class:`CollectorRegistrar`,
  :class:`CollectorLike`, :class:`InfoCollector`, :class:`CollectContext`, :data:`CollectResult`,
  :class:`RunValues` (a RUN answer the run loop keeps as it is),
  :class:`CollectionScope`, :class:`ThermalReading`, :class:`TemperatureSource`.
- **Checking options and raising errors**: :class:`BackendOptions` (subclass it with one field per
  ``backend_options`` key; :meth:`BackendOptions.parse` checks a plan's options), :class:`NoOptions` (a backend
  without options), :data:`ByteCount` (a size in bytes as a field type), :class:`Frozen` (the strict pydantic
  base), :class:`VerbosityLevel`, and the errors a
  backend raises (:class:`ConfigError`, :class:`ConfigTypeError`, :class:`BackendUnavailableError`,
  :class:`MeasurementError`, :class:`CounterPermissionError`, :class:`UnknownMetricError` with
  :class:`MetricErrorType` and :func:`metrics_error_message`, :class:`PluginError`, :class:`NsightxError`).
- **CUDA and GPU facts** shared by backends and collectors, none of which runs at import: :func:`load_libcuda`,
  :func:`loaded_libcuda`, :class:`DeviceAttribute`, :func:`device_attribute`, :func:`cuda_driver_version`,
  :data:`LIMIT_PERSISTING_L2_CACHE_SIZE`, the L2 flush-size rule :func:`l2_flush_bytes`
  (:data:`MIN_FLUSH_BYTES`), :func:`query_gpus` (``nvidia-smi``; :class:`NvidiaSmiError`), and the devices this
  process can use, :func:`visible_gpus` (:class:`GpuInfo`).
- **Host facts**, what every result records about where it ran: :func:`cpu_model` (``/proc/cpuinfo``'s model
  name) and :func:`git_state` (commit and dirtiness of a work tree, asked of git so that it runs no program the
  repository configures).

**What is stable.** Every name in ``__all__`` is public: it is removed or changed incompatibly only after a
release that warns about it, with a CHANGELOG entry. Compatible changes may come in any release: a model or
dataclass (:class:`Capabilities`, :class:`Plan`, :class:`Availability`, the records) may gain fields with
defaults; :class:`Session` and :class:`Backend` may gain methods with a default implementation; a hook may
gain keyword arguments (pluggy passes an implementation only the ones it names); the set of first-party
backends and their metric names are not part of this API. Where the objects are defined (the private modules
they are re-exported from) may change at any time: import them from here.

Importing this module is cheap: each name is loaded from its private module on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from nsightx._cudainfo import (
        LIMIT_PERSISTING_L2_CACHE_SIZE,
        MIN_FLUSH_BYTES,
        DeviceAttribute,
        NvidiaSmiError,
        cuda_driver_version,
        device_attribute,
        l2_flush_bytes,
        load_libcuda,
        loaded_libcuda,
        query_gpus,
    )
    from nsightx._enums import CollectionScope, VerbosityLevel
    from nsightx._errors import (
        BackendUnavailableError,
        ConfigError,
        ConfigTypeError,
        CounterPermissionError,
        MeasurementError,
        MetricErrorType,
        NsightxError,
        PluginError,
        UnknownMetricError,
        metrics_error_message,
    )
    from nsightx._model import Frozen
    from nsightx._pluginhost.hookspecs import hookimpl
    from nsightx._pluginhost.registrars import BackendRegistrar, CollectorRegistrar
    from nsightx._remote.call import RemoteCall, child_env
    from nsightx._remote.child import run_child
    from nsightx._remote.reducers import register_reducer, unregister_reducer
    from nsightx._results.records import CollectorValue, Record, RegionId, RegionRun, RunRecords, Scalar, new_record
    from nsightx._results.rows import RecordRow, RunValues
    from nsightx._results.sink import Sink, read_raw
    from nsightx._run.backend import (
        COLLECT_EVERY,
        COLLECT_SECONDS,
        Availability,
        Backend,
        BackendOptions,
        ByteCount,
        Capabilities,
        NoOptions,
        RunOutput,
        Session,
    )
    from nsightx._run.collectors import CollectContext, CollectorLike, CollectResult, InfoCollector
    from nsightx._run.device import GpuInfo
    from nsightx._run.device import visible as visible_gpus
    from nsightx._run.plan import Plan
    from nsightx._run.provenance import cpu_model, git_state
    from nsightx._run.thermal import TemperatureSource, ThermalReading, ThermalSettings

_SOURCES: dict[str, tuple[str, ...]] = {
    "nsightx._run.backend": (
        "COLLECT_EVERY",
        "COLLECT_SECONDS",
        "Availability",
        "Backend",
        "BackendOptions",
        "ByteCount",
        "Capabilities",
        "NoOptions",
        "RunOutput",
        "Session",
    ),
    "nsightx._run.collectors": ("CollectContext", "CollectorLike", "CollectResult", "InfoCollector"),
    "nsightx._cudainfo": (
        "LIMIT_PERSISTING_L2_CACHE_SIZE",
        "MIN_FLUSH_BYTES",
        "DeviceAttribute",
        "NvidiaSmiError",
        "cuda_driver_version",
        "device_attribute",
        "l2_flush_bytes",
        "load_libcuda",
        "loaded_libcuda",
        "query_gpus",
    ),
    "nsightx._run.device": ("GpuInfo",),
    "nsightx._enums": ("CollectionScope", "VerbosityLevel"),
    "nsightx._errors": (
        "BackendUnavailableError",
        "ConfigError",
        "ConfigTypeError",
        "CounterPermissionError",
        "MeasurementError",
        "MetricErrorType",
        "NsightxError",
        "PluginError",
        "UnknownMetricError",
        "metrics_error_message",
    ),
    "nsightx._pluginhost.hookspecs": ("hookimpl",),
    "nsightx._model": ("Frozen",),
    "nsightx._run.plan": ("Plan",),
    "nsightx._pluginhost.registrars": ("BackendRegistrar", "CollectorRegistrar"),
    "nsightx._remote.reducers": ("register_reducer", "unregister_reducer"),
    "nsightx._run.provenance": ("cpu_model", "git_state"),
    "nsightx._results.records": (
        "CollectorValue",
        "Record",
        "RemoteCall",
        "RegionId",
        "RegionRun",
        "RunRecords",
        "Scalar",
        "new_record",
    ),
    "nsightx._results.sink": ("Sink", "read_raw"),
    "nsightx._results.rows": ("RecordRow", "RunValues"),
    "nsightx._run.thermal": ("TemperatureSource", "ThermalReading", "ThermalSettings"),
    "nsightx._remote.call": ("RemoteCall", "child_env"),
    "nsightx._remote.child": ("run_child",),
}
"""Private module -> the names this module re-exports from it under the same name."""

_LAZY: dict[str, tuple[str, str]] = {name: (module, name) for module, names in _SOURCES.items() for name in names}
"""Public name -> (private module, attribute), loaded on first access."""
_LAZY["visible_gpus"] = ("nsightx._run.device", "visible")

if not TYPE_CHECKING:  # type checkers see the imports above, so a misspelt name is an error there

    def __getattr__(name: str) -> object:
        """Load ``name`` from its private module on first access (then it is a plain module attribute)."""
        try:
            module, attr = _LAZY[name]
        except KeyError:
            raise AttributeError(f"module 'nsightx.ext' has no attribute {name!r}") from None
        value = getattr(importlib.import_module(module), attr)
        globals()[name] = value
        return value


def __dir__() -> list[str]:
    """The public names, for ``dir()`` and completion."""
    return sorted(__all__)


__all__ = [
    "COLLECT_EVERY",
    "COLLECT_SECONDS",
    "LIMIT_PERSISTING_L2_CACHE_SIZE",
    "MIN_FLUSH_BYTES",
    "Availability",
    "Backend",
    "BackendOptions",
    "BackendRegistrar",
    "BackendUnavailableError",
    "ByteCount",
    "Capabilities",
    "CollectContext",
    "CollectResult",
    "CollectionScope",
    "CollectorLike",
    "CollectorRegistrar",
    "CollectorValue",
    "ConfigError",
    "ConfigTypeError",
    "CounterPermissionError",
    "DeviceAttribute",
    "Frozen",
    "GpuInfo",
    "InfoCollector",
    "MeasurementError",
    "MetricErrorType",
    "NoOptions",
    "NsightxError",
    "NvidiaSmiError",
    "Plan",
    "PluginError",
    "Record",
    "RecordRow",
    "RemoteCall",
    "RegionId",
    "RegionRun",
    "RunOutput",
    "RunRecords",
    "RunValues",
    "Scalar",
    "Session",
    "Sink",
    "TemperatureSource",
    "ThermalReading",
    "ThermalSettings",
    "UnknownMetricError",
    "VerbosityLevel",
    "child_env",
    "cpu_model",
    "cuda_driver_version",
    "device_attribute",
    "git_state",
    "hookimpl",
    "l2_flush_bytes",
    "load_libcuda",
    "loaded_libcuda",
    "metrics_error_message",
    "new_record",
    "query_gpus",
    "read_raw",
    "register_reducer",
    "run_child",
    "unregister_reducer",
    "visible_gpus",
]
