"""analyze.kernel end to end on the real host backend: decorator forms, configs, call semantics."""

from __future__ import annotations

import importlib
import sys
from typing import Any

import pandas as pd
import pytest

import nsightx
from nsightx import ConfigError, NsightxError

SILENT = nsightx.VerbosityLevel.SILENT


def kernel(**options):
    options.setdefault("verbosity", SILENT)
    options.setdefault("backend", "host")
    options.setdefault("runs", 2)
    return nsightx.analyze.kernel(**options)


def test_bare_decorator_profiles_zero_arg_function(plugin_host):
    calls = []

    @nsightx.analyze.kernel
    def f():
        calls.append(1)
        with nsightx.annotate("a"):
            pass

    df = f().to_dataframe()
    assert len(calls) == 11  # 1 warm-up + 10 runs by default
    assert df["NumRuns"].tolist() == [10]
    assert df["Tool"].tolist() == ["host"]  # auto picks host on a machine without a GPU backend


def test_empty_parentheses(plugin_host):
    @nsightx.analyze.kernel()
    def f():
        with nsightx.annotate("a"):
            pass

    assert isinstance(f(), nsightx.ProfileResults)


def test_configs_at_decoration_scalar_and_tuple(plugin_host):
    seen = []

    @kernel(configs=[1, 2, 3], warmup=0)
    def f(n):
        seen.append(n)
        with nsightx.annotate("a"):
            pass

    df = f().to_dataframe()
    assert seen == [1, 1, 2, 2, 3, 3]
    assert df["n"].tolist() == [1, 2, 3]
    assert list(df.columns[:3]) == ["Annotation", "Metric", "n"]


def test_configs_at_call_time_and_single_config(plugin_host):
    seen = []

    @kernel(warmup=0, runs=1)
    def f(n, m):
        seen.append((n, m))
        with nsightx.annotate("a"):
            pass

    f(configs=[(1, 2), (3, 4)])
    f(5, 6)
    assert seen == [(1, 2), (3, 4), (5, 6)]


def test_generator_configs_and_default_padding(plugin_host):
    seen = []

    @kernel(configs=((n,) for n in (1, 2)), warmup=0, runs=1)
    def f(n, k=7, *, tag="x"):
        seen.append((n, k, tag))
        with nsightx.annotate("a"):
            pass

    df = f().to_dataframe()
    assert seen == [(1, 7, "x"), (2, 7, "x")]
    assert df["tag"].tolist() == ["x", "x"]


def test_keyword_only_parameters_filled_in_order(plugin_host):
    seen = []

    @kernel(configs=[(1, "a")], warmup=0, runs=1)
    def f(n, *, label):
        seen.append((n, label))
        with nsightx.annotate("r"):
            pass

    f()
    assert seen == [(1, "a")]


def test_warmup_runs_are_discarded(plugin_host):
    calls = []

    @kernel(configs=[(1,)], warmup=3, runs=2)
    def f(n):
        calls.append(n)
        with nsightx.annotate("a"):
            pass

    assert f().to_dataframe()["NumRuns"].tolist() == [2]
    assert len(calls) == 5


@pytest.mark.parametrize(
    ("decoration", "call", "message"),
    [
        ({}, {}, "no configs"),
        ({"configs": []}, {}, "configs cannot be empty"),
        ({"configs": [(1,), (1, 2)]}, {}, "same number of arguments"),
        ({"configs": [(1, 2, 3)]}, {}, "expects between 1 and 2"),
        ({"configs": [(1,)]}, {"configs": [(2,)]}, r"at runtime\. \(f was called with configs= as well\)$"),
        ({"configs": [(1,)]}, {"args": (2,)}, r"at runtime\. \(f was called with positional arguments as well\)$"),
        ({"configs": [(1,)]}, {"kwargs": {"n": 3}}, "Keyword arguments are not supported yet"),
    ],
)
def test_config_errors_before_any_run(plugin_host, decoration, call, message):
    ran = []

    def f(n, k=0):
        ran.append(n)

    with pytest.raises(ConfigError, match=message):
        profiled = kernel(**decoration)(f)
        profiled(*call.get("args", ()), configs=call.get("configs"), **call.get("kwargs", {}))
    assert ran == []


def test_scalar_config_for_two_parameter_function_is_error():
    profiled = kernel(configs=[1])(lambda n, m: None)
    with pytest.raises(ConfigError, match="single value"):
        profiled()


def test_return_value_is_ignored_with_warning(plugin_host):
    @kernel(configs=[(1,)], runs=1, warmup=0)
    def f(n):
        with nsightx.annotate("a"):
            pass
        return 42

    with pytest.warns(RuntimeWarning, match="return value"):
        assert isinstance(f(), nsightx.ProfileResults)


def test_unknown_backend_is_error_before_run(plugin_host):
    with pytest.raises(ConfigError, match="unknown backend 'nope'"):
        kernel(configs=[(1,)], backend="nope")(lambda n: (_ for _ in ()).throw(AssertionError()))()


def test_host_backend_refuses_gpu_metric_and_names_who_can(plugin_host):
    profiled = kernel(configs=[(1,)], metrics=["gpu__time_duration.sum"])(lambda n: None)
    with pytest.raises(ConfigError, match="cannot deliver metrics"):
        profiled()


def test_auto_without_gpu_backend_explains(plugin_host):
    profiled = nsightx.analyze.kernel(configs=[(1,)], metrics=["sm__throughput.avg"], verbosity=SILENT)(lambda n: None)
    with pytest.raises(nsightx.BackendUnavailableError, match="no available backend"):
        profiled()


def test_normalize_against_unknown_annotation_fails_after_first_run(plugin_host):
    runs = []

    @kernel(configs=[(1,), (2,)], runs=5, warmup=0, normalize_against="nope")
    def f(n):
        runs.append(n)
        with nsightx.annotate("a"):
            pass

    with pytest.raises(ConfigError, match="normalize_against='nope' names no annotation") as info:
        f()
    assert isinstance(info.value, NsightxError) and isinstance(info.value, ValueError)
    assert runs == [1]


def test_derive_metric_scalar_tuple_and_mapping(plugin_host):
    def per_n(t, n):
        return {"per_n": (t / n, "ns/item"), "twice": 2 * t}

    @kernel(configs=[(10,)], derive_metric=per_n)
    def f(n):
        with nsightx.annotate("a"):
            pass

    with pytest.warns(UserWarning, match="does not have a unit specified"):
        df = f().to_dataframe()
    units = dict(zip(df["Metric"], df["Unit"], strict=True))
    assert units["host__time_duration.sum"] == "ns" and units["per_n"] == "ns/item"
    assert pd.isna(units["twice"])  # no unit given: NaN, as nsight-python
    row = df.set_index("Metric")
    assert row.loc["per_n", "AvgValue"] == pytest.approx(row.loc["host__time_duration.sum", "AvgValue"] / 10)


def test_region_from_another_thread_is_measured(plugin_host):
    import threading

    @kernel(configs=[(1,)])
    def f(n):
        def work():
            with nsightx.annotate("threaded"):
                pass

        t = threading.Thread(target=work)
        t.start()
        t.join()

    assert f().to_dataframe()["Annotation"].tolist() == ["threaded"]


def test_switching_tools(plugin_host):
    @nsightx.analyze.kernel(configs=[(1,)], runs=1, verbosity=SILENT)
    def f(n):
        with nsightx.annotate("a"):
            pass

    try:
        nsightx.activate(nsightx.Tool.HOST)
        assert nsightx.get_active_tool() is nsightx.Tool.HOST
        assert f().backend == "host"
        nsightx.deactivate()
        assert nsightx.get_active_tool() is None
        nsightx.activate("host")
        assert f().backend == "host"
    finally:
        nsightx.deactivate()
    with pytest.raises(ConfigError, match="unknown backend"):
        nsightx.activate("nope")


def _stopping(prefix, error, at=5, verbosity=nsightx.VerbosityLevel.INFO):
    calls = {"n": 0}

    @nsightx.analyze.kernel(
        configs=[(1,), (2,)], runs=3, warmup=0, backend="host", verbosity=verbosity, output_prefix=prefix
    )
    def f(n):
        calls["n"] += 1
        if calls["n"] == at:
            raise error
        with nsightx.annotate("a"):
            pass

    return f


@pytest.mark.parametrize("error", [KeyboardInterrupt(), ValueError("bad input")])
def test_stopped_sweep_prints_one_line_with_where_and_how_to_load(plugin_host, tmp_path, capsys, error):
    with pytest.raises(type(error)):
        _stopping(str(tmp_path) + "/", error)()
    lines = capsys.readouterr().err.splitlines()
    raw = tmp_path / "raw_data-f-0.jsonl"
    what = "interrupted" if isinstance(error, KeyboardInterrupt) else "stopped by ValueError"
    assert lines == [
        f"nsightx: f {what} after 4 completed run(s), saved in {raw}; load them with nsightx.load({str(raw)!r})"
    ]
    assert nsightx.load(raw).to_dataframe()["NumRuns"].tolist() == [3, 1]  # the hint works as printed


def test_stopped_sweep_without_output_prefix_says_how_to_keep_runs(plugin_host, capsys):
    with pytest.raises(KeyboardInterrupt):
        _stopping(None, KeyboardInterrupt())()
    assert capsys.readouterr().err.splitlines() == [
        "nsightx: f interrupted after 4 completed run(s); they were not saved "
        "(give output_prefix='out/' to keep the runs of a sweep that stops)"
    ]


def test_stopped_sweep_is_quiet_when_silent(plugin_host, tmp_path, capsys):
    with pytest.raises(KeyboardInterrupt):
        _stopping(str(tmp_path) + "/", KeyboardInterrupt(), verbosity=nsightx.VerbosityLevel.SILENT)()
    assert capsys.readouterr().err == ""


def test_sweep_stopped_before_any_run_completed_prints_nothing(plugin_host, tmp_path, capsys):
    with pytest.raises(ValueError, match="bad input"):
        _stopping(str(tmp_path) + "/", ValueError("bad input"), at=1)()
    assert capsys.readouterr().err == ""


def test_ctrl_c_in_the_first_run_says_nothing_was_measured(plugin_host, tmp_path, capsys):
    # the raw file holds the header only; the stop line and load both say no run was measured (session 23)
    with pytest.raises(KeyboardInterrupt):
        _stopping(str(tmp_path) + "/", KeyboardInterrupt(), at=1)()
    raw = tmp_path / "raw_data-f-0.jsonl"
    assert capsys.readouterr().err.splitlines() == [
        f"nsightx: f interrupted before any run completed; nothing was measured ({raw} holds the sweep's plan and "
        "no run)"
    ]
    with pytest.warns(nsightx.IncompleteResultWarning, match="holds 0 of 6 planned runs .* no run was measured"):
        assert nsightx.load(raw).to_dataframe().empty


def test_ctrl_c_in_the_first_run_without_a_file_prints_nothing(plugin_host, capsys):
    with pytest.raises(KeyboardInterrupt):
        _stopping(None, KeyboardInterrupt(), at=1)()
    assert capsys.readouterr().err == ""


# --- nsight-python raises these when the decorated function is called, so nsightx does too (issue 36) ----------

AT_CALL = [
    ({"configs": []}, "configs cannot be empty"),
    (
        {"configs": [(1024,), (2048, 512), (4096,)]},
        r"All configs must have the same number of arguments. Found lengths: \[1, 2, 1\]",
    ),
    (
        {"configs": [(100, 200), 200, (300, 400)]},
        r"All configs must have the same number of arguments. Found lengths: \[2, 1, 2\]",
    ),
    ({"configs": [(1024, 512), (2048, 1024)]}, "Configs have 2 arguments, but function expects 1"),
    ({"configs": (c for c in [(1, 2, 3)])}, "Function 'one' does not support the input configuration"),
    (
        {"configs": [(1,)], "metrics": ["m"], "derive_metric": lambda t, n, extra: t},
        "derive_metric expects 2 parameters",
    ),
]


@pytest.mark.parametrize(("options", "message"), AT_CALL, ids=[m[:30] for _, m in AT_CALL])
def test_config_problems_at_decoration_are_raised_by_each_call_before_any_work(plugin_host, tmp_path, options, message):
    ran = []

    def one(n):
        ran.append(n)

    profiled = kernel(output_prefix=f"{tmp_path}/out/", **options)(one)  # decorating raises nothing
    for _ in range(2):
        with pytest.raises(ConfigError, match=r"^" + message):
            profiled()
    assert ran == [] and not (tmp_path / "out").exists()  # no run, no output folder: nothing was done


def test_call_time_configs_do_not_hide_bad_decoration_configs(plugin_host):
    """nsight-python refuses configs given in two places before it looks at either."""
    profiled = kernel(configs=[])(lambda n: None)
    with pytest.raises(ConfigError, match=r"^You have provided configs at decoration time and at runtime"):
        profiled(configs=[(1,)])


def test_module_with_a_bad_decorator_imports_and_its_call_raises(plugin_host, tmp_path, monkeypatch):
    """A test module written for nsight-python puts the call in pytest.raises: importing it must not raise."""
    (tmp_path / "bench_module.py").write_text(
        "import nsightx as nsight\n"
        "\n"
        "@nsight.analyze.plot('plot.png')\n"
        "@nsight.analyze.kernel(configs=[(1024,), (2048, 512)], metrics=['a', 'b'], backend='host', verbosity=0)\n"
        "def mismatched(n):\n"
        "    raise AssertionError('never runs')\n"
        "\n"
        "@nsight.analyze.plot('plot.png', x_keys=['q'])\n"
        "@nsight.analyze.kernel(configs=[(1,)], metrics=['a', 'b'], backend='host', verbosity=0)\n"
        "def unplottable(n):\n"
        "    raise AssertionError('never runs')\n"
        "\n"
        "@nsight.analyze.kernel(configs=[], backend='host', verbosity=0)\n"
        "def empty(n):\n"
        "    raise AssertionError('never runs')\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "bench_module", raising=False)
    module = importlib.import_module("bench_module")
    with pytest.raises(nsightx.ProfilerException, match=r"^All configs must have the same number of arguments"):
        module.mismatched()
    with pytest.raises(ValueError, match=r"^Cannot visualize multiple metrics"):
        module.unplottable()
    with pytest.raises(nsightx.ProfilerException, match=r"^configs cannot be empty"):
        module.empty()
    assert not (tmp_path / "plot.png").exists()


def test_options_nsight_python_checks_at_decoration_still_raise_there():
    """Thermal, clock, cache and replay options and the form of info collectors: nsight-python's decorator raises."""
    for options in (
        {"thermal_wait": 30, "thermal_cont": 20},
        {"clock_control": "turbo"},
        {"cache_control": "some"},
        {"replay_mode": "app"},
        {"info_collectors": [("a", print)]},
    ):
        with pytest.raises(ValueError):
            kernel(**options)
    with pytest.raises(ConfigError, match="Duplicate info collector name"):
        kernel(configs=[(1,)], info_collectors=[("c", lambda: 1, "once"), ("c", lambda: 2, "once")])(lambda n: None)


@pytest.mark.parametrize("name", ["Value", "Run", "Kernel", "AvgValue"])
def test_a_parameter_named_like_a_result_column_is_refused_before_any_run(name: str) -> None:
    """A parameter ``Value`` showed its own values as the measured ones in ``runs_dataframe()`` (``Run`` replaced
    the run index; others made two columns of one name): the call now refuses it, naming it, before running."""
    ran: list[int] = []
    namespace: dict[str, Any] = {"nsightx": nsightx, "ran": ran}
    exec(f"def bench({name}):\n    ran.append({name})\n    with nsightx.annotate('a'):\n        pass\n", namespace)
    profiled = nsightx.analyze.kernel(
        configs=[(5,), (6,)], runs=2, backend="host", verbosity=nsightx.VerbosityLevel.SILENT
    )(namespace["bench"])
    with pytest.raises(nsightx.ConfigError, match=f"parameter '{name}' of bench\\(\\) has the name of a result column"):
        profiled()
    assert ran == []
