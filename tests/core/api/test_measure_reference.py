"""``nsightx.measure`` against a naive reference written from docs/api.md ("nsightx.measure").

The docs say ``measure(fn, runs=..., name=..., **options)`` "is ``analyze.kernel`` applied to a function of no
parameter that annotates the call", with ``combine_kernel_metrics=operator.add`` and ``verbosity=SILENT`` unless
given, the region and the function named after ``fn`` (``lambda`` for a lambda) or ``name=``. The reference is
that sentence written out: a plain function ``f()`` whose one ``nsightx.annotate(label)`` region wraps ``fn()``,
named ``label``, decorated with ``analyze.kernel(runs=..., **options)``. Both run on the real host backend with
the same scripted region times (``region_clock``), over random combinations of the options a single call takes
(runs, warm-up, ``runs="auto"`` and its limits, metrics, cache control, derive_metric, normalize_against,
ignore_kernel_list, combine_kernel_metrics, output_prefix, thermal_mode) and callables of every kind (functions,
lambdas, partials, callable objects, builtins, classes). Both frames (aggregated and per run), the plan, the
number of calls of ``fn`` and the written files must be the same. Bad input (one bad option drawn at random) must
be refused before ``fn`` is called, as the decorator refuses it, by an error that names the value.
"""

from __future__ import annotations

import functools
import math
import operator
import os
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import region_clock
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import nsightx
from nsightx import NsightxError

EXAMPLES = int(os.environ.get("NSIGHTX_REFERENCE_EXAMPLES", "60"))
"""Examples per test (more while hunting: ``NSIGHTX_REFERENCE_EXAMPLES=300``)."""
METRIC = "host__time_duration.sum"
SECONDS = (1e-3, 1.001e-3, 1.003e-3, 1.2e-3, 5e-3, 2e-6)
SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


class Work:
    """What ``fn`` does on each call: the region lasts the next scripted time; the calls are counted."""

    def __init__(self, clock: region_clock.RegionClock, seconds: list[float]) -> None:
        self.clock, self.seconds, self.calls = clock, seconds, 0

    def __call__(self) -> int:
        self.clock.advance(self.seconds[self.calls % len(self.seconds)])
        self.calls += 1
        return self.calls  # a value, which measure (as do_bench) ignores


def _kinds(work: Work) -> dict[str, tuple[Any, str]]:
    """Callables of every kind that call ``work`` once, with the name the docs give their region."""

    def step() -> None:
        work()

    class Stepper:
        def __call__(self) -> None:
            work()

    def with_default(n: int = 3) -> None:
        work()

    return {
        "function": (step, "step"),
        "lambda": (lambda: work(), "lambda"),
        "default": (with_default, "with_default"),
        "partial": (functools.partial(with_default, 4), "call"),  # docs: "call" only in the source
        "object": (Stepper(), "call"),
    }


def _double(t: float) -> float:
    return 2 * t


def _named(t: float) -> dict[str, Any]:
    return {"twice": (2 * t, "ns"), "half": t / 2}


@st.composite
def cases(draw: st.DrawFn) -> dict[str, Any]:
    """A callable kind, a name, and a combination of the options one call takes."""
    options: dict[str, Any] = {}
    runs = draw(st.one_of(st.integers(1, 5), st.just("auto"), st.none()))
    if runs == "auto":
        options.update(min_runs=draw(st.integers(2, 3)), max_runs=draw(st.integers(3, 6)))
        if draw(st.booleans()):
            options["target_ci_pct"] = draw(st.sampled_from([0.01, 0.5, 50.0]))
    if runs is not None:
        options["runs"] = runs
    flags = draw(st.fixed_dictionaries({k: st.booleans() for k in ("warmup", "metrics", "cache", "ignore", "out")}))
    if flags["warmup"]:
        options["warmup"] = draw(st.integers(0, 2))
    if flags["metrics"]:
        options["metrics"] = [METRIC]
    if flags["cache"]:
        options["cache_control"] = "none"
    if flags["ignore"]:
        options["ignore_kernel_list"] = draw(st.sampled_from([(), ["memset"], ("region",)]))
    options["_out"] = flags["out"]
    extra = draw(st.sampled_from(["none", "derive", "derive_dict", "normalize", "combine_max", "combine_none"]))
    name = draw(st.one_of(st.none(), st.sampled_from(["gemm", "x y", "a/b", "é"])))
    if extra == "derive":
        options["derive_metric"] = _double
    elif extra == "derive_dict":
        options["derive_metric"] = _named
    elif extra == "normalize":
        options["normalize_against"] = "<label>"
    elif extra == "combine_max":
        options["combine_kernel_metrics"] = max
    elif extra == "combine_none":
        options["combine_kernel_metrics"] = None
    if draw(st.booleans()):
        options["thermal_mode"] = "off"
    if draw(st.booleans()):
        options["verbosity"] = nsightx.VerbosityLevel.SILENT
    seconds = draw(st.lists(st.sampled_from(SECONDS), min_size=1, max_size=6))
    return {"kind": draw(st.sampled_from(["function", "lambda", "default", "partial", "object"])), "name": name,
            "options": options, "seconds": seconds}  # fmt: skip


def _reference(fn: Any, label: str, options: dict[str, Any]) -> nsightx.ProfileResults:
    """docs/api.md's sentence written out: ``analyze.kernel`` of a function whose one region wraps ``fn()``."""

    def f() -> None:
        with nsightx.annotate(label):
            fn()

    f.__name__ = f.__qualname__ = label
    decorated = {"combine_kernel_metrics": operator.add, "verbosity": nsightx.VerbosityLevel.SILENT, **options}
    return nsightx.analyze.kernel(**decorated)(f)()


def _missing(value: Any) -> bool:
    return value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value))


def _same_frames(got: pd.DataFrame, want: pd.DataFrame) -> None:
    assert list(got.columns) == list(want.columns)
    assert len(got) == len(want)
    for col in want.columns:
        for g, w in zip(got[col].tolist(), want[col].tolist(), strict=True):
            if _missing(w):
                assert _missing(g), (col, g, w)
            else:
                assert g == w, (col, g, w)


def _options(case: dict[str, Any], label: str, out: Path) -> dict[str, Any]:
    options = {k: v for k, v in case["options"].items() if k != "_out"}
    if options.get("normalize_against") == "<label>":
        options["normalize_against"] = label
    if case["options"]["_out"]:
        options["output_prefix"] = f"{out}/"
    return {"backend": "host", **options}


def _files(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


def _outcome(call: Any) -> Any:
    """The result of ``call()``, or the nsightx error it raised."""
    try:
        return call()
    except NsightxError as error:
        return error


@SETTINGS
@given(case=cases())
def test_measure_is_analyze_kernel_of_one_region_around_the_call(case, plugin_host, monkeypatch, tmp_path_factory):
    clock = region_clock.install(monkeypatch)
    seconds = case["seconds"]
    mine, theirs = Work(clock, seconds), Work(clock, seconds)
    fn, default_name = _kinds(mine)[case["kind"]]
    ref_fn = _kinds(theirs)[case["kind"]][0]
    label = case["name"] if case["name"] is not None else default_name
    got_dir, want_dir = tmp_path_factory.mktemp("measure"), tmp_path_factory.mktemp("reference")
    got = _outcome(lambda: nsightx.measure(fn, name=case["name"], **_options(case, label, got_dir)))
    want = _outcome(lambda: _reference(ref_fn, label, _options(case, label, want_dir)))
    assert mine.calls == theirs.calls
    event("refused" if isinstance(want, NsightxError) else "measured")
    if isinstance(want, NsightxError) or isinstance(got, NsightxError):
        assert (type(got), str(got)) == (type(want), str(want))
        return
    runs = case["options"].get("runs", 10)
    warmup = case["options"].get("warmup", 1)
    if runs != "auto":
        assert mine.calls == warmup + runs, "docs: fn() is called warmup (1) + runs times"
    assert got.backend == want.backend == "host"
    assert got.data.plan.function == want.data.plan.function == label
    plan_fields = ("params", "configs", "runs", "warmup", "metrics", "cache_control", "combine_kernel_metrics")
    assert {k: getattr(got.data.plan, k) for k in plan_fields} == {k: getattr(want.data.plan, k) for k in plan_fields}
    _same_frames(got.to_dataframe(), want.to_dataframe())
    _same_frames(got.runs_dataframe(), want.runs_dataframe())
    assert _files(got_dir) == _files(want_dir)


BAD: list[tuple[str, dict[str, Any], str]] = [
    ("runs=0", {"runs": 0}, "0"),
    ("runs=-2", {"runs": -2}, "-2"),
    ("runs='many'", {"runs": "many"}, "many"),
    ("runs=2.5", {"runs": 2.5}, "2.5"),
    ("runs=True", {"runs": True}, "True"),
    ("warmup=-1", {"warmup": -1}, "-1"),
    ("warmup='x'", {"warmup": "x"}, "x"),
    ("metrics str", {"metrics": METRIC}, METRIC),
    ("unknown metric", {"metrics": ["dram__bytes.sum"]}, "dram__bytes.sum"),
    ("unknown backend", {"backend": "nope"}, "nope"),
    ("cache_control", {"cache_control": "sometimes"}, "sometimes"),
    ("cache_control all on host", {"cache_control": "all"}, "all"),
    ("min_runs fixed", {"runs": 3, "min_runs": 2}, "min_runs"),
    ("max_runs < min_runs", {"runs": "auto", "min_runs": 4, "max_runs": 3}, "max_runs"),
    ("normalize unknown", {"normalize_against": "elsewhere"}, "elsewhere"),
    ("normalize not str", {"normalize_against": 5}, "5"),
    ("derive not callable", {"derive_metric": 5}, "5"),
    ("combine not callable", {"combine_kernel_metrics": "sum"}, "sum"),
    ("unknown option", {"repeat": 3}, "repeat"),
    ("configs", {"configs": [(1,)]}, "configs"),
    ("parallel_devices", {"parallel_devices": "all"}, "parallel_devices"),
    ("executor", {"executor": object()}, "executor"),
    ("name empty", {"name": ""}, "''"),
    ("name int", {"name": 7}, "7"),
    ("thermal_mode", {"thermal_mode": "cold"}, "cold"),
    ("verbosity", {"verbosity": "loud"}, "loud"),
    ("counters nothing here reads", {"counters": ["dram__bytes.sum"]}, "dram__bytes.sum"),
    ("counters with derive_metric", {"counters": ["dram__bytes.sum"], "derive_metric": _double}, "derive_metric"),
    ("info_collectors unknown", {"info_collectors": ["no_such_set"]}, "no_such_set"),
    ("output_prefix a file", {"output_prefix": __file__ + "/x/"}, "output_prefix"),
    ("ignore_kernel_list str", {"ignore_kernel_list": "memset"}, "memset"),
]


@SETTINGS
@given(bad=st.sampled_from(BAD), kind=st.sampled_from(["function", "lambda", "partial", "object"]))
def test_bad_input_is_refused_before_fn_runs_and_names_the_value(bad, kind, plugin_host, monkeypatch, tmp_path):
    clock = region_clock.install(monkeypatch)
    work = Work(clock, [1e-3])
    fn = _kinds(work)[kind][0]
    _what, options, named = bad
    with pytest.raises(NsightxError) as raised:
        nsightx.measure(fn, **{"backend": "host", "output_prefix": f"{tmp_path}/out/", **options})
    assert work.calls == 0, "refused before fn ran"
    assert named in str(raised.value), str(raised.value)
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir()), "no file before the refusal"


def test_an_exception_of_fn_reaches_the_caller_as_the_decorator_lets_it(plugin_host):
    """docs: measure is ``analyze.kernel`` of a function annotating the call; an exception in a region propagates."""

    def boom() -> None:
        raise KeyError("boom")

    with pytest.raises(KeyError, match="boom"):
        nsightx.measure(boom, runs=2, backend="host")


def test_normalize_against_another_annotation_is_refused_before_fn_runs(plugin_host, tmp_path):
    """measure's call has one region, known before any run: a baseline naming another is refused up front.

    (Found by this hunt: the decorator's check, made after the first run, let ``fn`` run warm-up + 1 times and
    left a raw file behind before the ``ConfigError``.)
    """
    calls: list[int] = []
    with pytest.raises(nsightx.ConfigError, match=r"normalize_against='other' names no annotation"):
        nsightx.measure(
            lambda: calls.append(1), name="gemm", normalize_against="other", backend="host", output_prefix=tmp_path
        )
    assert calls == [] and list(tmp_path.iterdir()) == []
    result = nsightx.measure(lambda: calls.append(1), name="gemm", normalize_against="gemm", runs=2, backend="host")
    assert result.to_dataframe()[["Unit", "AvgValue"]].values.tolist() == [["ratio", 1.0]]


async def _coroutine() -> None:
    raise AssertionError("never run")


def _generator() -> Any:
    yield 1


async def _async_generator() -> Any:
    yield 1


@pytest.mark.parametrize(
    ("fn", "kind"),
    [
        (_coroutine, "an async function"),
        (_generator, "a generator function"),
        (_async_generator, "an async generator function"),
        (functools.partial(_coroutine), "an async function"),
    ],
)
def test_a_callable_whose_call_runs_none_of_its_body_is_refused(fn, kind, plugin_host, tmp_path):
    """Calling an async or generator function only makes a coroutine or generator: the time would be of nothing.

    (Found by this hunt: measure timed the creation of the object, silently, and ignored it, as it ignores any
    value ``fn`` returns.)
    """
    with pytest.raises(nsightx.ConfigError, match=rf"\({kind}\) only creates .* nothing of its body"):
        nsightx.measure(fn, runs=2, backend="host", output_prefix=tmp_path)
    assert list(tmp_path.iterdir()) == []
