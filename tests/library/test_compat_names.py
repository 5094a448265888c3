"""nsight-python's public names exist in nsightx with the same meaning (``import nsightx as nsight``).

The lists are nsight-python's (NVIDIA/nsight-python, ``nsight/__init__.py``, ``analyze.py``, ``experimental.py``
and ``exceptions.py`` at the commit of Aug 2026), plus the tool names of its 1.1.0 release.
"""

from __future__ import annotations

import inspect
import json
import subprocess
import sys

import pytest

import nsightx as nsight

TOP_LEVEL = [
    "CollectionScope",
    "InfoCollector",
    "VerbosityLevel",
    "analyze",
    "annotate",
    "experimental",
    "col_panel",
    "row_panel",
    "__version__",
    "exceptions",
]
TOOLS_1_1 = ["Tool", "activate", "deactivate", "get_active_tool"]
ANALYZE = ["kernel", "plot", "ignore_failures"]
EXPERIMENTAL = ["collect", "CollectionScope"]
EXCEPTIONS = [
    "ProfilerException",
    "NCUNotAvailableError",
    "MetricErrorType",
    "ThermalControlError",
    "CoolingTimeoutError",
    "get_metrics_error_message",
]


@pytest.mark.parametrize("name", TOP_LEVEL + TOOLS_1_1)
def test_top_level_name_exists(name):
    assert getattr(nsight, name) is not None


@pytest.mark.parametrize(
    ("module", "name"),
    [("analyze", n) for n in ANALYZE]
    + [("experimental", n) for n in EXPERIMENTAL]
    + [("exceptions", n) for n in EXCEPTIONS],
)
def test_submodule_name_exists(module, name):
    assert getattr(getattr(nsight, module), name) is not None


def test_enums_have_nsight_pythons_values():
    assert {s.name: s.value for s in nsight.CollectionScope} == {
        "ONCE": "once",
        "CONFIG": "config",
        "RUN": "run",
        "ANNOTATION": "annotation",
    }
    assert {v.name: int(v) for v in nsight.VerbosityLevel} == {"SILENT": 0, "INFO": 3, "DEBUG": 4}
    assert nsight.experimental.CollectionScope is nsight.CollectionScope
    assert {m.name: m.value for m in nsight.exceptions.MetricErrorType} == {
        "INVALID": "Invalid",
        "UNSUPPORTED": "Unsupported",
    }


def test_exception_hierarchy():
    exc = nsight.exceptions
    assert exc.ProfilerException is nsight.NsightxError
    assert exc.NCUNotAvailableError is nsight.BackendUnavailableError
    assert issubclass(exc.CoolingTimeoutError, exc.ThermalControlError)
    assert issubclass(exc.ThermalControlError, exc.ProfilerException)
    assert exc.CoolingTimeoutError is nsight.CoolingTimeoutError
    for error in (nsight.ConfigError, nsight.AnnotationError, nsight.MeasurementError, exc.NCUNotAvailableError):
        assert issubclass(error, exc.ProfilerException)


def test_get_metrics_error_message_is_nsight_pythons_text():
    text = nsight.exceptions.get_metrics_error_message(["a.sum", "b"], nsight.exceptions.MetricErrorType.INVALID)
    assert text == (
        "Invalid value ['a.sum', 'b'] for 'metrics' parameter for nsight.analyze.kernel().\n"
        "Please refer ncu --query-metrics for list of supported metrics."
    )


def test_signatures_of_the_decorators_and_annotate():
    params = inspect.signature(nsight.annotate).parameters
    assert list(params) == ["name", "ignore_failures"] and params["ignore_failures"].default is False
    plot = inspect.signature(nsight.analyze.plot).parameters
    assert list(plot)[:2] == ["filename", "metric"] and plot["filename"].default == "plot.png"
    collector = nsight.InfoCollector("n", lambda: 1, nsight.CollectionScope.ONCE)
    assert (collector.name, collector.scope) == ("n", nsight.CollectionScope.ONCE)
    with nsight.analyze.ignore_failures():
        raise RuntimeError("swallowed, as in nsight-python")


def test_panel_marker_classes_are_empty_like_nsight_pythons():
    for cls in (nsight.row_panel, nsight.col_panel):
        assert inspect.isclass(cls)
        assert isinstance(cls(), cls)
        assert not [a for a in vars(cls) if not a.startswith("__")]


def test_names_resolve_in_a_fresh_interpreter_after_import_nsightx_as_nsight():
    probe = (
        "import json, nsightx as nsight; "
        "print(json.dumps([nsight.exceptions.ProfilerException.__name__, nsight.col_panel.__name__, "
        "nsight.experimental.CollectionScope.RUN.value]))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == ["NsightxError", "col_panel", "run"]
