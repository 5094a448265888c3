"""Which public names are in ``nsightx``, which in ``nsightx.ext``, and why any is in both.

``nsightx`` is the user API (what a script or a notebook writes); ``nsightx.ext`` is the door for the author of a
backend or a collector plugin (tests/library/test_ext.py checks that backends and plugins use nothing else). A name in
both is one object re-exported twice, and only for a reason written here: adding a name to either module, or to
both, means adding it below.
"""

from __future__ import annotations

import nsightx
import nsightx.ext as ext

USER_ONLY = frozenset(
    {
        "AnnotationError",
        "CompareError",
        "ConcurrentCallWarning",
        "CoolingTimeoutError",
        "IncompleteResultWarning",
        "KernelCountError",
        "NestedCallError",
        "NsightxWarning",
        "OutputError",
        "ProfileResults",
        "ProfilerException",
        "ROOFLINE_METRICS",
        "ResultSchemaError",
        "SweepError",
        "ThermalControlError",
        "Tool",
        "TransformError",
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
        "filter_flags",
        "get_active_tool",
        "join_results",
        "load",
        "load_raw",
        "measure",
        "reconcile",
        "register_plugin",
        "row_panel",
        "unregister_plugin",
    }
)
"""In ``nsightx`` only: what a user calls, reads or catches."""

EXT_ONLY = frozenset(
    {
        "BackendOptions",
        "BackendRegistrar",
        "ByteCount",
        "COLLECT_EVERY",
        "COLLECT_SECONDS",
        "CollectResult",
        "CollectorLike",
        "CollectorRegistrar",
        "CollectorValue",
        "DeviceAttribute",
        "Frozen",
        "GpuInfo",
        "LIMIT_PERSISTING_L2_CACHE_SIZE",
        "MIN_FLUSH_BYTES",
        "NoOptions",
        "NvidiaSmiError",
        "Plan",
        "RegionRun",
        "RecordRow",
        "RemoteCall",
        "RunRecords",
        "RunValues",
        "Scalar",
        "Sink",
        "TemperatureSource",
        "ThermalReading",
        "ThermalSettings",
        "child_env",
        "cpu_model",
        "cuda_driver_version",
        "device_attribute",
        "git_state",
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
    }
)
"""In ``nsightx.ext`` only: what an author of a backend or a collector needs and a user does not."""

_SCRIPT_BACKEND = (
    "the backend contract: a script may define a backend and register it with nsightx.register_plugin "
    "(docs/plugins.md); a package imports it from ext"
)
_CAUGHT_AND_RAISED = "an error users catch around a profiled call, and backends raise"

IN_BOTH: dict[str, str] = {
    "Backend": _SCRIPT_BACKEND,
    "Session": _SCRIPT_BACKEND,
    "Capabilities": _SCRIPT_BACKEND,
    "Availability": _SCRIPT_BACKEND + "; also what nsightx doctor shows per backend",
    "RunOutput": _SCRIPT_BACKEND,
    "Record": "the values of a result's runs (users read them); what a backend's session produces",
    "RegionId": "names a region in a Record users read; what a backend's session receives",
    "hookimpl": "marks a plugin's hooks: a script's plugin for register_plugin, or a package's",
    "InfoCollector": "users write collectors (docs/api.md, Collectors); so do collector plugins",
    "CollectContext": "what a collector receives, whether a user's or a plugin's",
    "CollectionScope": "the scope a user gives a collector (experimental.collect); plugins' collectors have one too",
    "VerbosityLevel": "users pass verbosity=; a backend reads plan.verbosity",
    "NsightxError": "the base users catch; the base of every error a backend raises",
    "ConfigError": _CAUGHT_AND_RAISED + " (from validate, for a bad option)",
    "ConfigTypeError": _CAUGHT_AND_RAISED + " (a bad option's type)",
    "BackendUnavailableError": _CAUGHT_AND_RAISED + " (the backend cannot run here)",
    "MeasurementError": _CAUGHT_AND_RAISED + " (measuring failed)",
    "CounterPermissionError": _CAUGHT_AND_RAISED + " (the GPU's counters are admin-only)",
    "UnknownMetricError": _CAUGHT_AND_RAISED + " (a metric name the tool does not know)",
    "MetricErrorType": "nsight-python's metric error kinds: users read them off errors, backends build messages",
    "PluginError": _CAUGHT_AND_RAISED + " (a broken plugin)",
}
"""In both, one object re-exported twice, with the reason it is in each."""

REMOVED_FROM_EXT = frozenset(
    {
        "run_loop",
        "use_device",
        "RunSink",
        "Progress",
        "make_guard",
        "Guard",
        "NoGuard",
        "PAUSE_COLUMN",
        "to_scalar",
        "travel",
    }
)
"""Names ext held only so the ncu backend's worker could rebuild the run loop (issue 39): that machinery is now
nsightx's own (``nsightx._remote``), reached through :class:`~nsightx.ext.RemoteCall` and ``run_child``."""


def test_the_user_api_holds_exactly_these_names() -> None:
    assert set(nsightx.__all__) == USER_ONLY | set(IN_BOTH)
    assert len(nsightx.__all__) == len(set(nsightx.__all__))


def test_the_extension_api_holds_exactly_these_names() -> None:
    assert set(ext.__all__) == EXT_ONLY | set(IN_BOTH)


def test_every_name_in_both_has_a_reason_and_is_one_object() -> None:
    assert set(nsightx.__all__) & set(ext.__all__) == set(IN_BOTH)
    assert not USER_ONLY & EXT_ONLY
    for name, reason in IN_BOTH.items():
        assert len(reason) > 20, name
        assert getattr(nsightx, name) is getattr(ext, name), name


def test_ext_no_longer_carries_the_ncu_workers_loop() -> None:
    assert not REMOVED_FROM_EXT & set(ext.__all__)
    for name in REMOVED_FROM_EXT:
        assert not hasattr(ext, name), name
