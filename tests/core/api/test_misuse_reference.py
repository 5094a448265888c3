"""The mistakes of a first hour with nsightx, against what README.md, docs/tutorial.md and docs/api.md promise.

The reference is the docs' rule, written as a table: bad input is refused by an ``NsightxError`` (also the
matching builtin, ``ValueError``/``TypeError``) that names the value and says what is accepted, before the
function's body runs (``calls == 0``); a mistake only the function's own code can show (an ``annotate`` inside
it) fails at that line of the first run, before any region is measured. Each case runs the real host backend.
Cases the docs leave open, decided here only where a user would obviously expect a refusal:

- ``annotate(name, ignore_failures="no")``: any non-bool was taken for its truth value, so ``"no"``,
  ``"False"`` and ``1`` swallowed every exception of the region (a silent NaN result); now a ``ConfigTypeError``.
- A decorated method called as ``obj.method()``: ``self`` is not bound (as in nsight-python); the count error
  now says so instead of only asking for tuples.

Also here: ``to_dataframe()`` of a result that holds no run (a sweep interrupted in its first run, loaded from its
raw file) has the documented columns, and ``filter_flags`` keeps them; ``nsightx.load(5)`` is a
``ConfigTypeError``; a misspelt backend or option name gets a did-you-mean.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import nsightx
from nsightx import ConfigError, ConfigTypeError, NsightxError

SILENT = nsightx.VerbosityLevel.SILENT
BASE: dict[str, Any] = {"backend": "host", "verbosity": SILENT, "runs": 2, "warmup": 0}
COLUMNS = ["Annotation", "Metric", "n", "AvgValue", "MedianValue", "StdDev", "MinValue", "MaxValue", "NumRuns"]
COLUMNS += ["Kernel", "GPU", "Host", "ComputeClock", "MemoryClock", "Unit", "CI95_Lower", "CI95_Upper"]
COLUMNS += ["RelativeStdDevPct", "StableMeasurement", "Flags", "Normalized", "Geomean", "Tool"]
"""The aggregated columns of a host result of ``f(n)``, as docs/api.md lists them."""


class Body:
    """A function body that counts its calls and opens one region."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, *args: Any) -> None:
        self.calls += 1
        with nsightx.annotate("r"):
            pass


def _refused(call: Callable[[], Any], body: Body, error: type[Exception], *named: str) -> str:
    """Run ``call``; it must raise ``error`` (an NsightxError) naming every ``named`` text, before ``body`` ran."""
    with pytest.raises(error) as info:
        call()
    message = str(info.value)
    assert isinstance(info.value, NsightxError), message
    assert body.calls == 0, f"the function ran {body.calls} time(s) before the error: {message}"
    for text in named:
        assert text in message, f"{text!r} not in {message!r}"
    return message


# --- the table: option and config mistakes, all refused before the body runs ----------------------------------

OPTION_CASES: list[tuple[str, dict[str, Any], type[Exception], tuple[str, ...]]] = [
    ("runs=0", {"runs": 0}, ConfigError, ("runs", "0", ">= 1")),
    ("runs=-1", {"runs": -1}, ConfigError, ("runs", "-1")),
    ("runs=2.0", {"runs": 2.0}, ConfigTypeError, ("runs", "2.0", "int")),
    ("runs=True", {"runs": True}, ConfigTypeError, ("runs", "bool True")),
    ("runs=nan", {"runs": math.nan}, ConfigTypeError, ("runs", "nan")),
    ("runs='3'", {"runs": "3"}, ConfigTypeError, ("runs", "'3'", "'auto'")),
    ("warmup=-1", {"warmup": -1}, ConfigError, ("warmup", "-1", ">= 0")),
    ("warmup=0.5", {"warmup": 0.5}, ConfigTypeError, ("warmup", "0.5")),
    ("metrics as a str", {"metrics": "host__time_duration.sum"}, ConfigTypeError, ("metrics", "list", "str")),
    ("metrics=[]", {"metrics": []}, ConfigError, ("metrics", "[]")),
    ("metrics unknown", {"metrics": ["nope"]}, ConfigError, ("nope", "host__time_duration.sum")),
    ("output_prefix=''", {"output_prefix": ""}, ConfigError, ("output_prefix", "''")),
    ("output_prefix=5", {"output_prefix": 5}, ConfigTypeError, ("output_prefix", "int 5")),
    ("verbosity='debug'", {"verbosity": "debug"}, ConfigError, ("verbosity", "'debug'", "DEBUG")),
    ("backend=''", {"backend": ""}, ConfigTypeError, ("backend", "''")),
]


@pytest.mark.parametrize(("options", "error", "named"), [c[1:] for c in OPTION_CASES], ids=[c[0] for c in OPTION_CASES])
def test_a_bad_option_is_refused_naming_it_before_the_body_runs(options, error, named):
    body = Body()

    def f(n):
        body(n)

    _refused(lambda: nsightx.analyze.kernel(f, configs=[1], **{**BASE, **options})(), body, error, *named)


def _two(a, b):
    raise AssertionError("never called: the configs are refused first")


CONFIG_CASES: list[tuple[str, Any, Any, type[Exception], tuple[str, ...]]] = [
    ("empty", _two, [], ConfigError, ("empty",)),
    ("a str", _two, "ab", ConfigTypeError, ("'ab'",)),
    ("a set", _two, {(1, 2)}, ConfigTypeError, ("set", "order")),
    ("a dict", _two, {1: 2}, ConfigTypeError, ("dict", "keys")),
    ("tuple too short", _two, [(1,)], ConfigError, ("1 arguments", "_two(a, b)")),
    ("tuple too long", _two, [(1, 2, 3)], ConfigError, ("3 arguments", "_two(a, b)")),
    ("lengths differ", _two, [(1, 2), (1, 2, 3)], ConfigError, ("[2, 3]", "Config 1")),
    ("scalar for two parameters", _two, [1], ConfigError, ("config 1", "(a, b)", "tuple")),
]


@pytest.mark.parametrize(
    ("fn", "configs", "error", "named"), [c[1:] for c in CONFIG_CASES], ids=[c[0] for c in CONFIG_CASES]
)
def test_bad_configs_are_refused_by_the_call_before_the_body_runs(fn, configs, error, named):
    body = Body()
    _refused(lambda: nsightx.analyze.kernel(fn, configs=configs, **BASE)(), body, error, *named)


def test_call_mistakes_are_refused_before_the_body_runs():
    body = Body()

    def f(n):
        body(n)

    given = nsightx.analyze.kernel(f, configs=[1], **BASE)
    _refused(lambda: given(3), body, ConfigError, "decoration time and at runtime", "positional")
    _refused(lambda: given(configs=[2]), body, ConfigError, "decoration time and at runtime")
    none = nsightx.analyze.kernel(f, **BASE)
    _refused(lambda: none(), body, ConfigError, "no configs", "f(configs=[...])")
    _refused(lambda: none(n=3), body, ConfigError, "['n']", "positional")
    _refused(lambda: nsightx.analyze.kernel(f, configs=[1], **BASE, run=3), body, ConfigError, "'run'", "runs")


def test_a_parameter_named_like_a_result_column_is_refused():
    body = Body()

    def f(Annotation):
        body(Annotation)

    _refused(lambda: nsightx.analyze.kernel(f, configs=[1], **BASE)(), body, ConfigError, "'Annotation'", "rename")


# --- what the fixes changed (each failed on 150421c) -------------------------------------------------------------


@pytest.mark.parametrize("flag", ["no", "False", "yes", 0, 1, None])
def test_annotate_refuses_an_ignore_failures_that_is_not_a_bool(flag):
    """``"no"`` was truthy: every exception of the region was swallowed and the result was NaN, silently."""
    body = Body()

    def f(n):
        body(n)
        with nsightx.annotate("r", ignore_failures=flag):
            raise ValueError("the region's own failure")

    with pytest.raises(ConfigTypeError, match=r"ignore_failures=True or False, got ") as info:
        nsightx.analyze.kernel(f, configs=[1], **BASE)()
    assert f"{type(flag).__name__} {flag!r}" in str(info.value)
    assert body.calls == 1  # the first run's first region: nothing was measured
    with pytest.raises(ConfigTypeError, match="ignore_failures"):
        nsightx.annotate("r", ignore_failures=flag)  # outside a profiled call too, as a bad name is


def test_annotate_keeps_taking_true_false_and_numpy_bools():
    np = pytest.importorskip("numpy")
    for flag in (True, False, np.True_, np.False_):
        assert nsightx.annotate("r", ignore_failures=flag).ignore_failures == flag


def test_bare_annotate_decorator_says_how_to_write_it():
    with pytest.raises(ConfigTypeError, match=r"@nsightx\.annotate\('name'\)"):

        @nsightx.annotate  # the mistake under test: no name
        def region() -> None:
            pass


def test_a_decorated_method_says_that_self_is_not_bound():
    body = Body()

    class Model:
        @nsightx.analyze.kernel(configs=[1, 2], **BASE)
        def step(self, n):
            body(n)

    message = _refused(lambda: Model().step(), body, ConfigError, "(self, n)", "does not bind methods")
    assert "obj.method(n)" in message
    plain = _refused(lambda: nsightx.analyze.kernel(_two, configs=[1], **BASE)(), body, ConfigError)
    assert "bind" not in plain  # only a first parameter named self or cls gets the hint


@pytest.mark.parametrize(("typo", "meant"), [("hots", "host"), ("Host", "host"), ("ncu ", "ncu"), ("Auto", "auto")])
def test_a_misspelt_backend_gets_a_did_you_mean(typo, meant):
    body = Body()

    def f(n):
        body(n)

    message = _refused(lambda: nsightx.analyze.kernel(f, configs=[1], **{**BASE, "backend": typo})(), body, ConfigError)
    assert f"unknown backend {typo!r} (did you mean {meant!r}?)" in message
    assert "registered backends: " in message


def test_an_unrelated_backend_name_gets_no_guess():
    def f(n):
        pass

    with pytest.raises(ConfigError) as info:
        nsightx.analyze.kernel(f, configs=[1], **{**BASE, "backend": "xyz"})()
    assert "did you mean" not in str(info.value)


def test_a_misspelt_option_gets_a_did_you_mean():
    with pytest.raises(ConfigError) as info:
        nsightx.analyze.kernel(ouput_prefix="out/", run=3, zzz=1)
    message = str(info.value)
    assert "('ouput_prefix': did you mean 'output_prefix'?)" in message
    assert "('run': did you mean 'runs'?)" in message
    assert "'zzz': did" not in message


def test_load_of_something_that_is_not_a_path_is_a_config_type_error():
    with pytest.raises(ConfigTypeError, match=r"nsightx\.load needs a file path .* got int 5"):
        nsightx.load(5)  # type: ignore[arg-type]


def _interrupted_in_first_run(folder: Path) -> nsightx.ProfileResults:
    """A sweep stopped by Ctrl-C in its first run, loaded from the raw file it left: a result of no run."""

    def f(n):
        with nsightx.annotate("r"):
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        nsightx.analyze.kernel(f, configs=[1, 2], **BASE, output_prefix=f"{folder}/")()
    (raw,) = folder.glob("raw_data-f-*.jsonl")
    with pytest.warns(nsightx.IncompleteResultWarning, match="holds 0 of 4 planned runs"):
        return nsightx.load(raw)


def test_a_result_of_no_run_has_the_documented_columns(tmp_path):
    empty = _interrupted_in_first_run(tmp_path)
    frame = empty.to_dataframe()
    assert frame.empty
    assert list(frame.columns) == COLUMNS  # was Annotation, Metric, n, AvgValue: df[["CI95_Upper"]] a KeyError


def test_filter_flags_keeps_the_columns_of_a_frame_without_rows(tmp_path):
    def f(n):
        with nsightx.annotate("r"):
            pass

    frame = nsightx.analyze.kernel(f, configs=[1], **BASE)().to_dataframe()
    assert list(frame.columns) == COLUMNS
    for rows in (frame.iloc[0:0], _interrupted_in_first_run(tmp_path).to_dataframe()):
        kept = nsightx.filter_flags(rows, exclude=["unstable"])
        assert kept.empty
        assert list(kept.columns) == COLUMNS  # frame[[]] selected no column at all
    assert nsightx.filter_flags(frame).equals(frame)  # rows with no flag asked for: all kept, as before


def test_functools_partial_lambda_and_staticmethod_are_profiled():
    """The callables the docs accept run: a partial, a lambda, a staticmethod, called as the docs call them."""
    body = Body()

    class Holder:
        @staticmethod
        @nsightx.analyze.kernel(configs=[1, 2], **BASE)
        def step(n):
            body(n)

    def two(a, b):
        body(a, b)

    results = [
        Holder.step(),
        nsightx.analyze.kernel(functools.partial(two, 7), configs=[1, 2], **BASE)(),
        nsightx.analyze.kernel(lambda n: body(n), configs=[1, 2], **BASE)(),
    ]
    assert body.calls == 3 * 4
    for r in results:
        assert r.to_dataframe()["NumRuns"].tolist() == [2, 2]


def test_numpy_integer_counts_are_taken_as_ints_and_numpy_bools_and_floats_are_not() -> None:
    """nsight-python does not check ``runs``: a count taken from NumPy (``np.int64``) ran there, so it runs here,
    kept as a plain int; a NumPy bool or float is refused as a bool or float is."""
    np = pytest.importorskip("numpy")

    @nsightx.analyze.kernel(
        configs=[(1,)], runs=np.int64(3), warmup=np.uint8(0), backend="host", verbosity=nsightx.VerbosityLevel.SILENT
    )
    def f(n: int) -> None:
        with nsightx.annotate("a"):
            pass

    result = f()
    assert result.to_dataframe()["NumRuns"].tolist() == [3]
    assert type(result.data.plan.runs) is int and result.data.plan.warmup == 0
    for bad in (np.bool_(True), np.float64(3.0)):
        with pytest.raises(ConfigTypeError, match="runs must be an int"):
            nsightx.analyze.kernel(configs=[(1,)], runs=bad, backend="host")(lambda n: None)
