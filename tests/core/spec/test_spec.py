"""Every analyze.kernel option is validated at decoration time, with errors that subclass NsightxError and
ValueError/TypeError, before the function ever runs (``derive_metric``'s arity, which needs the function, is raised
by the call, as nsight-python raises it)."""

from __future__ import annotations

import operator

import pytest

import nsightx
from nsightx import ConfigError, ConfigTypeError, NsightxError


def never_called(n):  # the body must never run when decoration fails
    raise AssertionError("the profiled function ran although an option was invalid")


BAD_OPTIONS = [
    ({"metrics": "gpu__time_duration.sum"}, TypeError, "list of str"),
    ({"metrics": []}, ValueError, "at least one"),
    ({"metrics": ["a", "a"]}, ValueError, "more than once"),
    ({"metrics": [3]}, TypeError, "entries must be str"),
    ({"runs": 0}, ValueError, "runs must be >= 1"),
    ({"runs": -3}, ValueError, "runs must be >= 1"),
    ({"runs": 2.5}, TypeError, "runs must be an int"),
    ({"runs": True}, TypeError, "runs must be an int"),
    ({"warmup": -1}, ValueError, "warmup must be >= 0"),
    ({"cache_control": "some"}, ValueError, "cache_control must be 'none', or 'all'; got 'some'"),
    ({"clock_control": "turbo"}, ValueError, "clock_control must be 'none', or 'base'; got 'turbo'"),
    ({"replay_mode": "app"}, ValueError, "replay_mode must be 'kernel', or 'range'; got 'app'"),
    ({"thermal_mode": "hot"}, ValueError, "invalid thermal_mode 'hot'"),
    ({"thermal_wait": 20, "thermal_cont": 10}, ValueError, "thermal_cont"),
    ({"thermal_timeout": 0}, ValueError, "thermal_timeout must be >= 1"),
    ({"verbosity": 7}, ValueError, "invalid verbosity"),
    ({"ignore_kernel_list": "k"}, TypeError, "list of str"),
    ({"combine_kernel_metrics": 3}, TypeError, "combine_kernel_metrics must be a binary function"),
    ({"combine_kernel_metrics": lambda a: a}, ValueError, "two values"),
    ({"derive_metric": "x"}, TypeError, "derive_metric must be a callable function"),
    ({"normalize_against": 3}, TypeError, "normalize_against"),
    ({"output_csv": "yes"}, TypeError, "output_csv"),
    ({"info_collectors": "nvml"}, TypeError, "info_collectors must be a list"),
    ({"info_collectors": [42]}, TypeError, "not a collector"),
    ({"info_collectors": [("a", print)]}, ValueError, "Tuple-format info collector must be (name, callback, scope)"),
    ({"info_collectors": [("a", print, "sometimes")]}, ValueError, "Invalid scope 'sometimes' for collector 'a'"),
    ({"device": -1}, ValueError, "device must be >= 0"),
    ({"device": 1.5}, TypeError, "device must be"),
    ({"backend": 3}, TypeError, "backend must be"),
    ({"backend_options": {1: 2}}, TypeError, "backend_options keys must be option names (str), got [1]"),
    ({"no_such_option": 1}, ValueError, "unknown option"),
    ({"metric": "x"}, ValueError, "unknown option"),
]


@pytest.mark.parametrize(("options", "builtin", "text"), BAD_OPTIONS, ids=[str(o[0]) for o in BAD_OPTIONS])
def test_bad_option_fails_at_decoration(options, builtin, text):
    with pytest.raises(NsightxError) as info:
        nsightx.analyze.kernel(configs=[(1,)], **options)(never_called)
    assert isinstance(info.value, builtin)
    assert text in str(info.value)


def test_derive_metric_arity_checked_at_decoration_and_raised_by_the_call():
    def never_runs(n, k):
        raise AssertionError("ran")

    profiled = nsightx.analyze.kernel(configs=[(1, 2)], metrics=["m"], derive_metric=lambda t, n: t)(never_runs)
    with pytest.raises(ConfigError, match=r"derive_metric expects 3 parameters \(1 metric values \+ 2 configs\)"):
        profiled()


def test_derive_metric_arity_checked_before_run_when_metrics_default(plugin_host):
    profiled = nsightx.analyze.kernel(configs=[(1,)], backend="host", derive_metric=lambda t: t)(never_called)
    with pytest.raises(ConfigError, match=r"derive_metric expects 2 parameters \(1 metric values \+ 1 configs\)"):
        profiled()


def test_metrics_are_stripped():
    profiled = nsightx.analyze.kernel(configs=[(1,)], metrics=[" a ", "b"])(never_called)
    assert profiled.spec.metrics == ("a", "b")


@pytest.mark.parametrize("reducer", [operator.add, max, lambda a, b: a + b])
def test_any_binary_callable_is_accepted_as_reducer(reducer):
    profiled = nsightx.analyze.kernel(configs=[(1,)], combine_kernel_metrics=reducer)(never_called)
    assert profiled.spec.combine_kernel_metrics is reducer


def test_defaults():
    spec = nsightx.analyze.kernel(never_called).spec
    assert spec.runs == 10 and spec.warmup == 1
    assert spec.metrics is None and spec.cache_control is None and spec.clock_control is None
    assert spec.thermal_mode == "auto" and spec.verbosity is nsightx.VerbosityLevel.INFO


def test_spec_is_frozen():
    spec = nsightx.analyze.kernel(never_called).spec
    with pytest.raises(ValueError):
        spec.runs = 3  # type: ignore[misc]


def test_errors_subclass_builtins():
    assert issubclass(ConfigError, ValueError) and issubclass(ConfigTypeError, TypeError)
    assert nsightx.ProfilerException is NsightxError
    assert issubclass(nsightx.BackendUnavailableError, RuntimeError)


BAD_VALUES = {
    "runs": [0, "often", 1.5],
    "warmup": [-1, "1"],
    "metrics": ["gpu__time_duration.sum", [], [1]],
    "derive_metric": [1],
    "normalize_against": ["", 3],
    "verbosity": [7, "loud"],
    "ignore_kernel_list": ["k", [None]],
    "combine_kernel_metrics": [1, lambda a: a],
    "cache_control": ["some", 1],
    "clock_control": ["boost"],
    "replay_mode": ["graph"],
    "thermal_mode": ["hot", None],
    "thermal_wait": [-1, "10"],
    "thermal_cont": [1.5],
    "thermal_timeout": [0],
    "thermal_device": [-2],
    "output_prefix": [3, ""],
    "output_csv": ["yes"],
    "info_collectors": ["nvml", 3],
    "backend": [3, ""],
    "device": [-1, True, 1.0],
    "parallel_devices": [[], [0, 0], "some"],
    "backend_options": [[("a", 1)], {1: 2}],
}


@pytest.mark.parametrize(("option", "value"), [(o, v) for o, vs in BAD_VALUES.items() for v in vs])
def test_every_bad_option_is_our_error_never_a_pydantic_validation_error(option, value):
    """One validation, on the spec model: whatever goes wrong, the user sees an NsightxError with our message."""
    from pydantic import ValidationError

    with pytest.raises(nsightx.NsightxError) as info:
        nsightx.analyze.kernel(**{option: value})
    assert not isinstance(info.value, ValidationError)
    assert isinstance(info.value, ValueError | TypeError)
    assert option in str(info.value) or "nsight" in str(info.value).lower()


def test_every_option_has_one_default_on_the_spec_model():
    """build_spec() with nothing given is the model's defaults, field by field."""
    from nsightx._spec.options import ProfileSpec, build_spec

    spec = build_spec()
    for name, field in ProfileSpec.model_fields.items():
        assert getattr(spec, name) == field.default, name
