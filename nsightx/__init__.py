"""nsightx: measure GPU kernels from inside the code that launches them.

``import nsightx as nsight`` runs code written for nsight-python::

    import nsightx as nsight

    @nsight.analyze.kernel(configs=[(1024,), (2048,)], runs=10)
    def bench(n):
        with nsight.annotate("matmul"):
            ...

    df = bench().to_dataframe()

Importing this package does no work: no subprocess, no CUDA, no plugin loading, no environment changes.
Submodules (``analyze``, ``experimental``, ``exceptions``, ``ext``) and heavy names load on first attribute access;
type checkers see every public name declared (a misspelt one is an error). Backend and plugin authors import
from :mod:`nsightx.ext`.
Every name nsight-python's top-level package exports (``col_panel`` and ``row_panel`` included) is here with
the same meaning.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from nsightx._api.tool import activate, deactivate, get_active_tool
from nsightx._enums import CollectionScope, Tool, VerbosityLevel
from nsightx._errors import (
    AnnotationError,
    BackendUnavailableError,
    CompareError,
    ConcurrentCallWarning,
    ConfigError,
    ConfigTypeError,
    CoolingTimeoutError,
    CounterPermissionError,
    IncompleteResultWarning,
    KernelCountError,
    MeasurementError,
    MetricErrorType,
    NestedCallError,
    NsightxError,
    NsightxWarning,
    OutputError,
    PluginError,
    ProfilerException,
    ResultSchemaError,
    ThermalControlError,
    TransformError,
    UnknownMetricError,
)
from nsightx._run.annotate import annotate
from nsightx._version import __version__

if TYPE_CHECKING:
    from nsightx import analyze, exceptions, experimental, ext
    from nsightx._api.measure import measure
    from nsightx._plot.layout import col_panel, row_panel
    from nsightx._pluginhost.hookspecs import hookimpl
    from nsightx._pluginhost.plugins import register_plugin, unregister_plugin
    from nsightx._report.compare import compare
    from nsightx._results.profileresults import ProfileResults, load
    from nsightx._results.raw import load_raw
    from nsightx._results.records import Record, RegionId
    from nsightx._run.backend import Availability, Backend, Capabilities, RunOutput, Session
    from nsightx._run.collectors import CollectContext, InfoCollector

_LAZY = {
    "analyze": ("nsightx.analyze", None),
    "experimental": ("nsightx.experimental", None),
    "exceptions": ("nsightx.exceptions", None),
    "ext": ("nsightx.ext", None),
    "col_panel": ("nsightx._plot.layout", "col_panel"),
    "row_panel": ("nsightx._plot.layout", "row_panel"),
    "InfoCollector": ("nsightx._run.collectors", "InfoCollector"),
    "CollectContext": ("nsightx._run.collectors", "CollectContext"),
    "ProfileResults": ("nsightx._results.profileresults", "ProfileResults"),
    "load": ("nsightx._results.profileresults", "load"),
    "load_raw": ("nsightx._results.raw", "load_raw"),
    "compare": ("nsightx._report.compare", "compare"),
    "filter_flags": ("nsightx._results.flags", "filter_flags"),
    "join_results": ("nsightx._api.counters", "joined_results"),
    "measure": ("nsightx._api.measure", "measure"),
    "reconcile": ("nsightx._api.reconcile", "reconcile"),
    "ROOFLINE_METRICS": ("nsightx._results.roofline", "ROOFLINE_METRICS"),
    "hookimpl": ("nsightx._pluginhost.hookspecs", "hookimpl"),
    "register_plugin": ("nsightx._pluginhost.plugins", "register_plugin"),
    "unregister_plugin": ("nsightx._pluginhost.plugins", "unregister_plugin"),
    "Backend": ("nsightx._run.backend", "Backend"),
    "Session": ("nsightx._run.backend", "Session"),
    "Capabilities": ("nsightx._run.backend", "Capabilities"),
    "Availability": ("nsightx._run.backend", "Availability"),
    "RunOutput": ("nsightx._run.backend", "RunOutput"),
    "Record": ("nsightx._results.records", "Record"),
    "RegionId": ("nsightx._results.records", "RegionId"),
    "SweepError": ("nsightx._api.sweep", "SweepError"),
}


if not TYPE_CHECKING:  # type checkers see only the imports above: a misspelt name is an error there

    def __getattr__(name: str) -> object:
        """Load a submodule or a heavy name on first access (then it is a plain module attribute)."""
        try:
            module, attr = _LAZY[name]
        except KeyError:
            raise AttributeError(f"module 'nsightx' has no attribute {name!r}") from None
        mod = importlib.import_module(module)
        value = mod if attr is None else getattr(mod, attr)
        globals()[name] = value
        return value


def __dir__() -> list[str]:
    """The public names, for ``dir()`` and completion."""
    return sorted(set(__all__) | set(globals()))


__all__ = [
    "ROOFLINE_METRICS",
    "AnnotationError",
    "Availability",
    "Backend",
    "BackendUnavailableError",
    "Capabilities",
    "CollectContext",
    "CollectionScope",
    "CompareError",
    "ConcurrentCallWarning",
    "ConfigError",
    "ConfigTypeError",
    "CoolingTimeoutError",
    "CounterPermissionError",
    "IncompleteResultWarning",
    "InfoCollector",
    "KernelCountError",
    "MeasurementError",
    "MetricErrorType",
    "NestedCallError",
    "NsightxError",
    "OutputError",
    "NsightxWarning",
    "PluginError",
    "ProfileResults",
    "ProfilerException",
    "Record",
    "RegionId",
    "ResultSchemaError",
    "RunOutput",
    "Session",
    "SweepError",
    "ThermalControlError",
    "Tool",
    "TransformError",
    "UnknownMetricError",
    "VerbosityLevel",
    "__version__",
    "activate",
    "analyze",
    "annotate",
    "col_panel",
    "compare",
    "deactivate",
    "exceptions",
    "filter_flags",
    "join_results",
    "experimental",
    "ext",
    "get_active_tool",
    "hookimpl",
    "load",
    "load_raw",
    "measure",
    "reconcile",
    "register_plugin",
    "row_panel",
    "unregister_plugin",
]
