"""Every row of docs/compat.md's message table: nsightx's message starts with nsight-python's sentence.

A user's test suite written for nsight-python matches its texts (``pytest.raises(..., match=...)``); nsightx's
message for the same condition starts with that sentence, word for word, and then goes on with its own detail.
The host backend runs in CI; conditions only the ncu backend meets use the fake ncu (``fixtures/ncu``).

``python tests/library/test_compat_messages.py`` prints the table for docs/compat.md (each row's full nsightx message).
"""

from __future__ import annotations

import operator
import re
import sys
import tempfile
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import nsightx as nsight

TESTS = Path(__file__).resolve().parents[1]
"""``tests/``, found from here rather than through ``_paths``: this file also runs as a script (see above)."""
FIXTURES = TESTS / "fixtures" / "ncu"
HOST: dict[str, Any] = {"backend": "host", "runs": 2, "verbosity": 0}


@dataclass(frozen=True)
class Row:
    condition: str
    their: str
    """nsight-python's sentence (from NVIDIA/nsight-python's ``nsight/``, word for word)."""
    trigger: Callable[[Path, pytest.MonkeyPatch], Any]
    error: type[BaseException] | None = None
    """The exception nsightx raises, or None for a warning."""
    warning: type[Warning] | None = None
    backend: str = "host"


def _decorate(**options: Any) -> Callable[[Callable[..., Any]], Any]:
    return nsight.analyze.kernel(**{**HOST, **options})


def _one(n: int) -> None:
    with nsight.annotate("a"):
        sum(range(10))


def _two(n: int, k: int = 0) -> None:
    with nsight.annotate("a"):
        sum(range(10))


def _none() -> None:
    with nsight.annotate("a"):
        sum(range(10))


# --- triggers (each raises or warns) -------------------------------------------------------------------------


def no_configs(tmp: Path, mp: pytest.MonkeyPatch) -> None:
    _decorate()(_one)()


def configs_twice(tmp: Path, mp: pytest.MonkeyPatch) -> None:
    _decorate(configs=[(1,)])(_one)(configs=[(2,)])


def empty_configs(tmp: Path, mp: pytest.MonkeyPatch) -> None:
    _decorate(configs=[])(_one)()


def lengths_differ(tmp: Path, mp: pytest.MonkeyPatch) -> None:
    _decorate(configs=[(1,), (1, 2), (1,)])(_two)()


def arity(tmp: Path, mp: pytest.MonkeyPatch) -> None:
    _decorate(configs=[(1, 2)])(_one)()


def arity_between(tmp: Path, mp: pytest.MonkeyPatch) -> None:
    _decorate(configs=[(1, 2, 3)])(_two)()


def arity_generator(tmp: Path, mp: pytest.MonkeyPatch) -> None:
    _decorate(configs=((1, 2, 3) for _ in range(2)))(_two)()


def keyword_arguments(tmp: Path, mp: pytest.MonkeyPatch) -> None:
    _decorate()(_two)(1, y=2)


def nested(tmp: Path, mp: pytest.MonkeyPatch) -> None:
    def f() -> None:
        with nsight.annotate("outer"), nsight.annotate("inner"):
            pass

    _decorate()(f)()


def reused(tmp: Path, mp: pytest.MonkeyPatch) -> None:
    def f() -> None:
        for _ in range(2):
            with nsight.annotate("a"):
                pass

    _decorate()(f)()


def derived_without_unit(tmp: Path, mp: pytest.MonkeyPatch) -> None:
    def twice(t: float, n: int) -> float:
        return 2 * t

    _decorate(configs=[(1,)], derive_metric=twice)(_one)()


def returns_a_value(tmp: Path, mp: pytest.MonkeyPatch) -> None:
    def f() -> int:
        with nsight.annotate("a"):
            pass
        return 1

    _decorate()(f)()


def plot_unknown_metric(tmp: Path, mp: pytest.MonkeyPatch) -> None:
    _decorate()(_none)().plot(str(tmp / "x.png"), metric="nope")


def plot_several_metrics(tmp: Path, mp: pytest.MonkeyPatch) -> None:
    _decorate(configs=[(1,)], derive_metric=lambda t, n: (t, "ns"))(_one)().plot(str(tmp / "x.png"))


def plot_several_metrics_at_decoration(tmp: Path, mp: pytest.MonkeyPatch) -> None:
    nsight.analyze.plot(str(tmp / "x.png"))(_decorate(derive_metric=lambda t: (t, "ns"))(_none))()


def plot_no_metrics(tmp: Path, mp: pytest.MonkeyPatch) -> None:
    import pandas as pd

    from nsightx._plot.render import plot_frame

    plot_frame(pd.DataFrame(columns=["Annotation", "Metric", "AvgValue"]), tmp / "x.png")


def plot_x_keys_unknown(tmp: Path, mp: pytest.MonkeyPatch) -> None:
    nsight.analyze.plot(str(tmp / "x.png"), x_keys=["q"])(_decorate(configs=[(1, 2)])(_two))()


def plot_x_keys_overlap(tmp: Path, mp: pytest.MonkeyPatch) -> None:
    nsight.analyze.plot(str(tmp / "x.png"), row_panels=["n"], x_keys=["n"])(_decorate(configs=[(1, 2)])(_two))()


def bad_choice(option: str, value: str) -> Callable[[Path, pytest.MonkeyPatch], None]:
    def trigger(tmp: Path, mp: pytest.MonkeyPatch) -> None:
        _decorate(**{option: value})

    return trigger


def thermal_band(tmp: Path, mp: pytest.MonkeyPatch) -> None:
    _decorate(thermal_wait=30, thermal_cont=20)


def derive_not_callable(tmp: Path, mp: pytest.MonkeyPatch) -> None:
    _decorate(derive_metric="tflops")


def derive_arity(tmp: Path, mp: pytest.MonkeyPatch) -> None:
    _decorate(configs=[(1,)], derive_metric=lambda t, n, extra: t)(_one)()


def reducer_not_binary(tmp: Path, mp: pytest.MonkeyPatch) -> None:
    _decorate(combine_kernel_metrics=lambda a: a)


def normalize_unknown(tmp: Path, mp: pytest.MonkeyPatch) -> None:
    _decorate(normalize_against="nope")(_none)()


def collector(name: str, callback: Callable[..., Any] = lambda: 1, scope: str = "once") -> nsight.InfoCollector:
    return nsight.InfoCollector(name, callback, scope)


def collectors_duplicate(tmp: Path, mp: pytest.MonkeyPatch) -> None:
    _decorate(info_collectors=[collector("c"), collector("c")])(_none)


def collector_reserved(tmp: Path, mp: pytest.MonkeyPatch) -> None:
    _decorate(info_collectors=[collector("GPU")])(_none)


def collector_parameter(tmp: Path, mp: pytest.MonkeyPatch) -> None:
    _decorate(configs=[(1,)], info_collectors=[collector("n")])(_one)


def collector_fails(tmp: Path, mp: pytest.MonkeyPatch) -> None:
    def broken(*args: Any) -> None:
        raise OSError("sensor gone")

    _decorate(info_collectors=[("temp", broken, "run")])(_none)()


def collect_bad_scope(tmp: Path, mp: pytest.MonkeyPatch) -> None:
    nsight.experimental.collect(scope="sometimes")


def collector_bad_scope(tmp: Path, mp: pytest.MonkeyPatch) -> None:
    _decorate(info_collectors=[("a", print, "sometimes")])


def collector_tuple_length(tmp: Path, mp: pytest.MonkeyPatch) -> None:
    _decorate(info_collectors=[("a", print)])


def collector_tuple_types(tmp: Path, mp: pytest.MonkeyPatch) -> None:
    _decorate(info_collectors=[(1, 2, "run")])


def collector_undecorated(tmp: Path, mp: pytest.MonkeyPatch) -> None:
    def gpu_temp() -> int:
        return 40

    _decorate(info_collectors=[gpu_temp])


def collector_bad_type(tmp: Path, mp: pytest.MonkeyPatch) -> None:
    _decorate(info_collectors=[42])


def collect_not_callable(tmp: Path, mp: pytest.MonkeyPatch) -> None:
    nsight.experimental.collect(42, scope="run")


def cooling_timeout(tmp: Path, mp: pytest.MonkeyPatch) -> None:
    from nsightx_nvml._collectors import NvmlTemperatureSource
    from nvml_double import GPU_A, FakeClock, FakeGpu, install

    from nsightx._run.thermal import ThermalGuard

    clock = FakeClock()
    install(mp, [FakeGpu(GPU_A, temp_c=85)], clock=clock)
    guard = ThermalGuard(
        NvmlTemperatureSource(None), mode="manual", timeout=5, clock=clock.monotonic, sleep=clock.sleep
    )
    guard.before_run()


def thermal_unsupported(tmp: Path, mp: pytest.MonkeyPatch) -> None:
    from nsightx_nvml import _collectors

    from nsightx._pluginhost import plugins as _plugins
    from nsightx._run.thermal import ThermalSettings
    from nsightx._spec import makeplan as _makeplan

    def missing() -> None:
        raise ImportError("No module named 'pynvml'")

    mp.setattr(_collectors, "_provider", _collectors.Provider(load=missing))
    mp.setattr(_makeplan, "_warned_no_source", set())
    # what a call's plan builder asks the plugin host for a GPU backend with thermal control on
    _makeplan.temperature_source(_plugins.PluginHost(_plugins.LoaderSettings()).load(), ThermalSettings(), None)


def fake_ncu(mp: pytest.MonkeyPatch, tmp: Path, **env: str) -> None:
    from nsightx_ncu import _backend

    wrapper = tmp / "fake-bin" / "ncu"
    wrapper.parent.mkdir(exist_ok=True)
    wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{FIXTURES / "fake_ncu.py"}" "$@"\n')
    wrapper.chmod(0o755)
    mp.setenv("NSIGHTX_NCU", str(wrapper))
    mp.setenv("PATH", str(tmp / "empty-bin"))
    mp.setenv("XDG_CACHE_HOME", str(tmp / "cache"))
    mp.setattr(_backend._locate, "STANDARD_GLOBS", ())
    for var in ("FAKE_NCU_EXIT", "FAKE_NCU_SAY", "FAKE_NCU_REPORT", "FAKE_NCU_QUERY_LOG"):
        mp.delenv(var, raising=False)
    for key, value in env.items():
        mp.setenv(key, value)


NCU: dict[str, Any] = {
    "backend": "ncu",
    "runs": 2,
    "verbosity": 0,
    "clock_control": "none",
    "thermal_mode": "off",
    "info_collectors": [],
}


def ncu_invalid_metric(tmp: Path, mp: pytest.MonkeyPatch) -> None:
    fake_ncu(mp, tmp)
    nsight.analyze.kernel(**NCU, metrics=["gpu__time_duraton.sum"])(_none)()


def ncu_two_kernels(tmp: Path, mp: pytest.MonkeyPatch) -> None:
    fake_ncu(mp, tmp, FAKE_NCU_REPORT=str(FIXTURES / "two_kernels.ncu-rep"))

    def pair() -> None:
        with nsight.annotate("pair/a|b@c 1%"):
            pass
        with nsight.annotate("single"):
            pass

    nsight.analyze.kernel(**NCU)(pair)()


def ncu_failed(tmp: Path, mp: pytest.MonkeyPatch) -> None:
    fake_ncu(mp, tmp, FAKE_NCU_EXIT="1", FAKE_NCU_SAY="==ERROR== something went wrong")
    nsight.analyze.kernel(**NCU)(_none)()


def ncu_no_report(tmp: Path, mp: pytest.MonkeyPatch) -> None:
    fake_ncu(mp, tmp)
    nsight.analyze.kernel(**NCU)(_none)()


CFG, ANN, KC = nsight.ConfigError, nsight.AnnotationError, nsight.KernelCountError
TYPE = nsight.ConfigTypeError

ROWS: list[Row] = [
    Row(
        "no configs for a function with parameters",
        "You have provided no configs. Provide configs at decoration time or at runtime.",
        no_configs,
        CFG,
    ),
    Row(
        "configs at decoration and at call time",
        "You have provided configs at decoration time and at runtime. Provide configs at decoration time or at "
        "runtime.",
        configs_twice,
        CFG,
    ),
    Row("`configs=[]`", "configs cannot be empty", empty_configs, CFG),
    Row(
        "configs of different lengths",
        "All configs must have the same number of arguments. Found lengths: [1, 2, 1]",
        lengths_differ,
        CFG,
    ),
    Row("config length does not fit the function", "Configs have 2 arguments, but function expects 1", arity, CFG),
    Row(
        "config length outside required..all parameters",
        "Configs have 3 arguments, but function expects between 1 and 2",
        arity_between,
        CFG,
    ),
    Row(
        "a generator of configs that do not fit",
        "Function '_two' does not support the input configuration",
        arity_generator,
        CFG,
    ),
    Row("keyword arguments at call time", "Keyword arguments are not supported yet: ['y']", keyword_arguments, CFG),
    Row(
        "nested annotation",
        "Nested annotations are not supported. Cannot enter annotation 'inner' while another annotation is active.",
        nested,
        ANN,
    ),
    Row(
        "annotation name reused in one run",
        "Annotation name 'a' has already been used in this profiling run. Each annotation must have a unique name.",
        reused,
        ANN,
    ),
    Row(
        "a region launched more than one kernel, no combine function",
        "More than one (total=2) kernel is launched within the pair/a|b@c 1% annotation.\n"
        "We expect one kernel per annotation.",
        ncu_two_kernels,
        KC,
        backend="ncu (fake)",
    ),
    Row(
        "derived metric without a unit (warning)",
        "Derived metric 'twice' does not have a unit specified. Return "
        "a tuple (value, unit) instead of just the value. np.nan will be added to the 'Unit' column in the "
        "dataframe.",
        derived_without_unit,
        warning=UserWarning,
    ),
    Row(
        "the profiled function returns a value (warning)",
        "Function 'f' returns a value, but the return value for "
        "a function which is decorated with nsight.analyze.kernel is ignored and instead the ProfileResults object "
        "is returned.",
        returns_a_value,
        warning=RuntimeWarning,
    ),
    Row(
        "plotting a metric that is not in the result",
        "Metric 'nope' not found in the profile results. Please "
        "check the metric name and try again. The metrics found are: ['host__time_duration.sum'].",
        plot_unknown_metric,
        CFG,
    ),
    Row(
        "plotting a result with several metrics, no `metric=`",
        "Cannot visualize multiple metrics (2 > 1) with "
        "the @nsight.analyze.plot decorator. Please specify a metric to plot. The metrics found are: "
        "['host__time_duration.sum', '<lambda>']",
        plot_several_metrics,
        CFG,
    ),
    Row(
        "`analyze.plot` without `metric=` over several metrics (known from the options; raised by the call)",
        "Cannot visualize multiple "
        "metrics (at least 2 > 1) with the @nsight.analyze.plot decorator. Please specify a metric to plot.",
        plot_several_metrics_at_decoration,
        CFG,
    ),
    Row(
        "plotting a frame with no metric",
        "No metrics found in the profile results. Please ensure that the profiler is configured correctly.",
        plot_no_metrics,
        CFG,
    ),
    Row(
        "`x_keys` names no parameter",
        "Field 'q' is not present in the DataFrame. Available fields: ['n', 'k']",
        plot_x_keys_unknown,
        CFG,
    ),
    Row(
        "`x_keys` shares a parameter with the panels or variants",
        "x_keys cannot contain fields used in row_panels, col_panels, or variant_fields: {'n'}",
        plot_x_keys_overlap,
        CFG,
    ),
    Row(
        "an invalid metric name (ncu)",
        "Invalid value ['gpu__time_duraton.sum'] for 'metrics' parameter for "
        "nsight.analyze.kernel().\nPlease refer ncu --query-metrics for list of supported metrics.",
        ncu_invalid_metric,
        nsight.UnknownMetricError,
        backend="ncu (fake)",
    ),
    Row("bad `cache_control`", "cache_control must be 'none', or 'all'", bad_choice("cache_control", "some"), CFG),
    Row("bad `clock_control`", "clock_control must be 'none', or 'base'", bad_choice("clock_control", "turbo"), CFG),
    Row("bad `replay_mode`", "replay_mode must be 'kernel', or 'range'", bad_choice("replay_mode", "app"), CFG),
    Row(
        "`thermal_cont <= thermal_wait`",
        "Invalid thermal control parameters: thermal_cont (20°C) must be greater "
        "than thermal_wait (30°C). thermal_cont is the target thermal headroom after cooling, thermal_wait is the "
        "threshold that triggers cooling.",
        thermal_band,
        CFG,
    ),
    Row("`derive_metric` not callable", "derive_metric must be a callable function", derive_not_callable, TYPE),
    Row(
        "`derive_metric` takes the wrong number of arguments",
        "derive_metric expects 2 parameters (1 metric values + 1 configs), but has 3 parameters",
        derive_arity,
        CFG,
    ),
    Row(
        "`combine_kernel_metrics` not a binary function",
        "Profiler error: combine_kernel_metrics must be a binary function",
        reducer_not_binary,
        CFG,
    ),
    Row("`normalize_against` names no annotation", "Annotation 'nope' not found in data.", normalize_unknown, CFG),
    Row(
        "two collectors with one name",
        "Duplicate info collector name 'c'. Each collector must have a unique name "
        "(the function name becomes the column name).",
        collectors_duplicate,
        CFG,
    ),
    Row(
        "a collector named like a result column",
        "Info collector name 'GPU' collides with a reserved profiler column. Reserved names: [",
        collector_reserved,
        CFG,
    ),
    Row(
        "a collector named like a parameter",
        "Info collector name 'n' collides with a parameter of '_one'. Rename "
        "the collector so it does not shadow a function argument column.",
        collector_parameter,
        CFG,
    ),
    Row(
        "a collector raises (warning)",
        "Info collector 'temp' (run scope) raised OSError: sensor gone. Its column will be None for failed runs.",
        collector_fails,
        warning=RuntimeWarning,
    ),
    Row(
        "`experimental.collect` with a bad scope",
        "Invalid collection scope 'sometimes'. Expected one of 'once', "
        "'config', 'run', 'annotation' or a CollectionScope.",
        collect_bad_scope,
        CFG,
    ),
    Row(
        "a collector entry with a bad scope",
        "Invalid scope 'sometimes' for collector 'a'. Expected one of "
        "['annotation', 'config', 'once', 'run'] or a CollectionScope.",
        collector_bad_scope,
        CFG,
    ),
    Row(
        "a collector tuple of the wrong length",
        "Tuple-format info collector must be (name, callback, scope); got ('a', <built-in function print>).",
        collector_tuple_length,
        CFG,
    ),
    Row(
        "a collector tuple of the wrong types",
        "Tuple-format info collector must be (str name, callable callback, scope); got (1, 2, 'run').",
        collector_tuple_types,
        TYPE,
    ),
    Row(
        "a plain function as a collector",
        "Collector function gpu_temp is missing @nsight.experimental.collect(scope=...) decorator",
        collector_undecorated,
        TYPE,
    ),
    Row(
        "a collector of another type",
        "Invalid collector type: <class 'int'>. Expected tuple (name, callback, scope) or decorated function.",
        collector_bad_type,
        TYPE,
    ),
    Row("`experimental.collect` on a non-callable", "collect can only decorate a callable", collect_not_callable, TYPE),
    Row(
        '`thermal_mode="manual"` and the GPU does not cool in time',
        "Timeout after 5s. Cannot reach thermal_cont=20°C (current thermal headroom: 4°C).",
        cooling_timeout,
        nsight.CoolingTimeoutError,
    ),
    Row(
        "no temperature can be read (warning)",
        "Nsight Python Thermovision is not supported on this machine",
        thermal_unsupported,
        warning=RuntimeWarning,
    ),
    Row("ncu failed", "PROFILING FAILED \nErrors:\n", ncu_failed, nsight.MeasurementError, backend="ncu (fake)"),
    Row(
        "ncu wrote no report",
        "No NVIDIA Nsight Compute report found.",
        ncu_no_report,
        nsight.MeasurementError,
        backend="ncu (fake)",
    ),
]


def capture(row: Row, tmp: Path, mp: pytest.MonkeyPatch) -> str:
    """Run a row's trigger; return nsightx's full message (checking the type)."""
    if row.warning is not None:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            row.trigger(tmp, mp)
        texts = [str(w.message) for w in caught if issubclass(w.category, row.warning)]
        assert texts, f"no {row.warning.__name__} for {row.condition}"
        return next((t for t in texts if t.startswith(row.their)), texts[0])
    assert row.error is not None
    with pytest.raises(row.error) as info:
        row.trigger(tmp, mp)
    return str(info.value)


@pytest.mark.parametrize("row", ROWS, ids=[r.condition for r in ROWS])
def test_message_starts_with_nsight_pythons_sentence(
    row: Row, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, plugin_host: Any
) -> None:
    if row.backend.startswith("ncu"):
        pytest.importorskip("cloudpickle")
        pytest.importorskip("nvtx")
        pytest.importorskip("ncu_report")
    if row.warning is not None:
        with pytest.warns(row.warning, match=re.escape(row.their)) as record:
            row.trigger(tmp_path, monkeypatch)
        messages = [str(w.message) for w in record if issubclass(w.category, row.warning)]
    else:
        assert row.error is not None
        with pytest.raises(row.error, match=re.escape(row.their)) as info:
            row.trigger(tmp_path, monkeypatch)
        messages = [str(info.value)]
    message = next((m for m in messages if re.search(re.escape(row.their), m)), "")
    assert message.startswith(row.their), message  # first, word for word
    assert len(message) > len(row.their), "nsightx goes on with its own detail"


SAID_ONCE: dict[str, dict[str, int]] = {
    "bad `cache_control`": {"'all'": 1, "'none'": 1},
    "bad `clock_control`": {"'none'": 1, "'base'": 1},
    "bad `replay_mode`": {"'kernel'": 1, "'range'": 1, "'application'": 1},
    "`x_keys` names no parameter": {"['n', 'k']": 1},
    "configs at decoration and at call time": {"decoration": 2},
    "configs of different lengths": {"same number": 1},
    "config length does not fit the function": {"2 ": 1, "1": 1},
    "config length outside required..all parameters": {"3 ": 1, "between 1 and 2": 1},
    "plotting a result with several metrics, no `metric=`": {"shows one": 0},
    "`analyze.plot` without `metric=` over several metrics (known from the options; raised by the call)": {
        "several metrics": 0,
        "shows one": 0,
    },
}
"""Fragments of nsight-python's sentence (or what it already implies) and how often the whole message holds each.

Issue 38: nsightx kept nsight-python's sentence and then said it again in its own words ("cache_control must be
'none', or 'all'; got 'some'. nsightx accepts 'all' or 'none'"). After the sentence comes only what is new.
"""


@pytest.mark.parametrize("condition", sorted(SAID_ONCE))
def test_what_nsight_python_says_is_said_once(
    condition: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, plugin_host: Any
) -> None:
    row = next(r for r in ROWS if r.condition == condition)
    message = capture(row, tmp_path, monkeypatch)
    counts = {fragment: message.count(fragment) for fragment in SAID_ONCE[condition]}
    assert counts == SAID_ONCE[condition], message


def test_every_error_is_a_profiler_exception_and_its_builtin() -> None:
    for row in ROWS:
        if row.error is not None:
            assert issubclass(row.error, nsight.exceptions.ProfilerException), row.condition


def render_table() -> str:
    """The markdown table of docs/compat.md (runs every trigger)."""
    from nsightx._pluginhost import plugins as _plugins

    lines = [
        "| condition | backend | nsight-python's sentence | nsightx raises / warns: full message |",
        "| --- | --- | --- | --- |",
    ]
    mp = pytest.MonkeyPatch()
    host = _plugins.PluginHost(_plugins.LoaderSettings()).load()
    previous = _plugins._default
    try:
        for row in ROWS:
            _plugins.set_default_host(host)
            with tempfile.TemporaryDirectory() as tmp:
                (Path(tmp) / "again").mkdir()
                message = capture(row, Path(tmp), mp)
            mp.undo()
            kind = (row.error or row.warning).__name__  # type: ignore[union-attr]
            lines.append(f"| {row.condition} | {row.backend} | {_cell(row.their)} | `{kind}`: {_cell(message)} |")
    finally:
        _plugins.set_default_host(previous)
    return "\n".join(lines)


def _cell(text: str) -> str:
    text = re.sub(r"/tmp/[^\s,;)]+", "<path>", text)
    text = re.sub(r" at 0x[0-9a-f]+>", ">", text)
    text = text.split("\nncu log:")[0]
    return "`" + text.replace("|", "\\|").replace("`", "'").replace("\n", "⏎") + "`"


if __name__ == "__main__":
    sys.path.insert(0, str(TESTS))
    print(render_table())
    _ = operator  # the reducer module is imported for readers copying the triggers
