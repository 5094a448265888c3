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

from nsightx._annotate import annotate
from nsightx._enums import CollectionScope, Tool, VerbosityLevel
from nsightx._errors import (
    AnnotationError,
    BackendUnavailableError,
    CompareError,
    ConfigError,
    ConfigTypeError,
    CoolingTimeoutError,
    CounterPermissionError,
    KernelCountError,
    MeasurementError,
    MetricErrorType,
    NsightxError,
    PluginError,
    ProfilerException,
    ResultSchemaError,
    ThermalControlError,
    TransformError,
    UnknownMetricError,
)
from nsightx._tool import activate, deactivate, get_active_tool
from nsightx._version import __version__

if TYPE_CHECKING:
    from nsightx import analyze, exceptions, experimental, ext
    from nsightx._backend import Availability, Backend, Capabilities, RunOutput, Session
    from nsightx._collectors import CollectContext, InfoCollector
    from nsightx._compare import compare
    from nsightx._hookspecs import hookimpl
    from nsightx._plot_layout import col_panel, row_panel
    from nsightx._plugins import register_plugin, unregister_plugin
    from nsightx._raw import load_raw
    from nsightx._records import Record, RegionId
    from nsightx._results import ProfileResults, load

_LAZY = {
    "analyze": ("nsightx.analyze", None),
    "experimental": ("nsightx.experimental", None),
    "exceptions": ("nsightx.exceptions", None),
    "ext": ("nsightx.ext", None),
    "col_panel": ("nsightx._plot_layout", "col_panel"),
    "row_panel": ("nsightx._plot_layout", "row_panel"),
    "InfoCollector": ("nsightx._collectors", "InfoCollector"),
    "CollectContext": ("nsightx._collectors", "CollectContext"),
    "ProfileResults": ("nsightx._results", "ProfileResults"),
    "load": ("nsightx._results", "load"),
    "load_raw": ("nsightx._raw", "load_raw"),
    "compare": ("nsightx._compare", "compare"),
    "hookimpl": ("nsightx._hookspecs", "hookimpl"),
    "register_plugin": ("nsightx._plugins", "register_plugin"),
    "unregister_plugin": ("nsightx._plugins", "unregister_plugin"),
    "Backend": ("nsightx._backend", "Backend"),
    "Session": ("nsightx._backend", "Session"),
    "Capabilities": ("nsightx._backend", "Capabilities"),
    "Availability": ("nsightx._backend", "Availability"),
    "RunOutput": ("nsightx._backend", "RunOutput"),
    "Record": ("nsightx._records", "Record"),
    "RegionId": ("nsightx._records", "RegionId"),
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
    "AnnotationError",
    "Availability",
    "Backend",
    "BackendUnavailableError",
    "Capabilities",
    "CollectContext",
    "CollectionScope",
    "CompareError",
    "ConfigError",
    "ConfigTypeError",
    "CoolingTimeoutError",
    "CounterPermissionError",
    "InfoCollector",
    "KernelCountError",
    "MeasurementError",
    "MetricErrorType",
    "NsightxError",
    "PluginError",
    "ProfileResults",
    "ProfilerException",
    "Record",
    "RegionId",
    "ResultSchemaError",
    "RunOutput",
    "Session",
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
    "experimental",
    "ext",
    "get_active_tool",
    "hookimpl",
    "load",
    "load_raw",
    "register_plugin",
    "row_panel",
    "unregister_plugin",
]
