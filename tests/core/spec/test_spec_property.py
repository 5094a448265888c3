"""Property: any combination of analyze.kernel options either runs or raises an NsightxError, early.

Hypothesis draws valid and invalid values for every option (and unknown option names), decorates a small
function, calls it on the real host backend and builds the DataFrame. Whatever it draws, the outcome is one of:

- the sweep runs and gives a DataFrame;
- an :class:`NsightxError` before the function body runs (option validation, backend choice, configs);
- for mistakes only a run can show (a derive function's result, a baseline annotation that never opens, a body
  that annotates nothing), an :class:`NsightxError` after at most one measured run.

Never a raw ``TypeError``/``ValueError`` from pandas, pydantic, ``float()`` or the OS.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import operator
import tempfile
import warnings
from pathlib import Path
from typing import Any

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, event, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import nsightx  # noqa: E402
from nsightx import AnnotationError, MeasurementError, NsightxError, TransformError  # noqa: E402

MISSING = object()
"""Marks an option left out of the call."""


def _pick(valid: tuple[Any, ...], invalid: tuple[Any, ...] = ()) -> st.SearchStrategy[Any]:
    """A valid value three times in four (so that many draws get past validation), else an invalid one."""
    if not invalid:
        return st.sampled_from(valid)
    return st.integers(0, 3).flatmap(lambda i: st.sampled_from(invalid if i == 0 else valid))


def good_derive(t, n=3):
    return {"per_n": (t / max(n, 1), "ns/item")}


def str_derive(t, n=3):
    return "fast"


def none_derive(t, n=3):
    return None


def raising_derive(t, n=3):
    raise ZeroDivisionError("boom")


def unit_derive(t, n=3):
    return t, 3


def clash_derive(t, n=3):
    return {"host__time_duration.sum": t}


OPTIONS: dict[str, st.SearchStrategy[Any]] = {
    "runs": _pick((1, 2, 3, "auto"), (0, -1, 1.5, "10", None, True, [], math.nan)),
    "warmup": _pick((0, 1, 2), (-1, 1.5, "1", None, False)),
    "min_runs": _pick((2, 3), (0, "x", 1.5)),
    "max_runs": _pick((6, 8), (1, -5, 2.5)),
    "target_ci_pct": _pick((50.0, 10), (0, -1.0, "1%", math.inf)),
    "time_budget_s": _pick((0.2, 1), (0, -1, "1s", math.nan)),
    "metrics": _pick(
        (None, ["host__time_duration.sum"], ("host__time_duration.sum",)),
        (
            "host__time_duration.sum",
            [],
            [""],
            [1],
            ["a", "a"],
            ["gpu__time_duration.sum"],
            5,
            {"host__time_duration.sum"},
            b"metric",
            [None],
        ),
    ),
    "derive_metric": _pick(
        (None, good_derive, str_derive, none_derive, raising_derive, unit_derive, clash_derive), (lambda: 0, "per_n", 3)
    ),
    "normalize_against": _pick((None, "a", "missing"), ("", 1, ["a"])),
    "combine_kernel_metrics": _pick((None, operator.add, max, lambda a, b: "x"), (lambda a: a, "add", 1)),
    "ignore_kernel_list": _pick((None, [], ["k"], ("k",), ["region"]), ("k", [1], {"k": 1})),
    "cache_control": _pick((None, "none", "NONE"), ("all", "bogus", 1, ["all"])),
    "clock_control": _pick((None, "none"), ("base", 3, "turbo")),
    "replay_mode": _pick((None, "kernel"), ("range", "application", "x", 1)),
    "thermal_mode": _pick(("auto", "off", "manual"), ("bogus", 1, None)),
    "thermal_wait": _pick((None, 5), (-1, "5", 2.5, True)),
    "thermal_cont": _pick((None, 30), (0, "x")),
    "thermal_timeout": _pick((None, 10), (0, -3, "1")),
    "thermal_device": _pick((None, 0), (-1, "gpu0", 1.5)),
    "output_prefix": _pick((None, "out/", "prefix_", Path("pathlike/"), "deep/er/"), (123, b"bytes/", ["x"])),
    "output_csv": _pick((False, True), ("yes", 1, None)),
    "verbosity": _pick((nsightx.VerbosityLevel.SILENT, 0), (5, -1, "loud", None, 1.5)),
    "info_collectors": _pick(((), [], ["env"]), ("nvml", [42], ["no-such-set"], [("a", print)], None)),
    "backend": _pick(("host", None, "auto", nsightx.Tool.HOST), ("nonexistent", "", 3, "cupti", "ncu", "events")),
    "device": _pick((None,), (0, -1, "x", 1.5, True)),
    "parallel_devices": _pick((None,), ([], [-1], "some", [True], [0, 0], 7)),  # valid lists spawn processes
    "backend_options": _pick(({}, None), ({"x": 1}, [("x", 1)], "x", {1: 2})),
}

CONFIGS = _pick(
    (MISSING, None, [1, 2], [(1,), (2,)], range(1, 3), (3,), [object()]),
    ({"a": 1}, {1, 2}, "ab", b"ab", 5, [], [(1, 2, 3)], [[1], [1, 2]], frozenset({1})),
)

UNKNOWN = ("runz", "metric", "output", "configs_")
"""Misspelt option names."""

ADAPTIVE = ("min_runs", "max_runs", "target_ci_pct", "time_budget_s")
"""Options that apply only with runs="auto" (refused with a fixed count)."""


@st.composite
def cases(draw: st.DrawFn) -> Case:
    """Options (most left out), the function's shape, how it is called, and whether it annotates a region."""
    options: dict[str, Any] = {
        "backend": "host",
        "verbosity": nsightx.VerbosityLevel.SILENT,
        "runs": 2,
        "thermal_mode": "off",
    }
    names = [n for n in sorted(OPTIONS) if n not in ADAPTIVE]
    for name in draw(st.permutations(names))[: draw(st.integers(0, 6))]:
        options[name] = draw(OPTIONS[name])
    adaptive = draw(st.integers(0, 19))
    if adaptive < 3:  # runs="auto" with some of its options
        options["runs"] = "auto"
        for name in draw(st.permutations(ADAPTIVE))[: draw(st.integers(0, 4))]:
            options[name] = draw(OPTIONS[name])
    elif adaptive == 3:  # one of them with a fixed runs: refused
        name = draw(st.sampled_from(ADAPTIVE))
        options[name] = draw(OPTIONS[name])
    configs = draw(CONFIGS)
    if configs is not MISSING:
        options["configs"] = configs
    if draw(st.integers(0, 19)) == 0:
        options[draw(st.sampled_from(UNKNOWN))] = 1
    call = draw(
        _pick(
            (((), ()),),
            (
                ((3,), ()),
                (("x",), ()),
                ((1, 2), ()),
                ((), (("configs", [1, 2]),)),
                ((), (("configs", {"n": 1}),)),
                ((), (("configs", "ab"),)),
                ((), (("n", 1),)),
            ),
        )
    )
    return Case(options, draw(st.sampled_from(SHAPES)), call[0], dict(call[1]), draw(st.integers(0, 19)) > 0)


SHAPES = ("n=3", "n", "n, *, k=1", "")
"""Parameter lists of the profiled function."""


@dataclasses.dataclass
class Case:
    """One drawn call: decorator options, the body's parameters, the call's arguments, whether it annotates."""

    options: dict[str, Any]
    params: str
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    annotates: bool  # one body in twenty annotates nothing

    def body(self, calls: list[object]) -> Any:
        """The profiled function: counts its calls, annotates "a" (or nothing)."""
        namespace: dict[str, Any] = {"nsightx": nsightx, "calls": calls}
        region = 'with nsightx.annotate("a"):\n        pass' if self.annotates else "pass"
        exec(f"def body({self.params}):\n    calls.append(1)\n    {region}\n", namespace)
        return namespace["body"]


LATE = (TransformError, MeasurementError, AnnotationError)
"""Errors a run has to show: derive_metric's results, a body that measured nothing."""

LATE_OPTIONS = ("normalize_against", "derive_metric", "ignore_kernel_list")
"""Options whose mistakes a ConfigError reports after the first run (a missing baseline, a clashing name, ...)."""


def _late_ok(error: NsightxError) -> bool:
    return isinstance(error, LATE) or any(option in str(error) for option in LATE_OPTIONS)


def _warmup(options: dict[str, Any]) -> int:
    w = options.get("warmup", 1)
    return w if isinstance(w, int) and not isinstance(w, bool) and w >= 0 else 1


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
@given(case=cases())
def test_any_option_combination_runs_or_raises_an_nsightx_error_early(plugin_host, case):
    calls: list[object] = []
    with tempfile.TemporaryDirectory() as tmp, contextlib.chdir(tmp), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            df = nsightx.analyze.kernel(**case.options)(case.body(calls))(*case.args, **case.kwargs).to_dataframe()
        except NsightxError as e:
            event(f"{type(e).__name__} after {'no' if not calls else 'a'} run")
            limit = _warmup(case.options) + 1 if _late_ok(e) else 0
            assert len(calls) <= limit, f"{type(e).__name__} after {len(calls)} call(s) of the body: {e}"
            return
    event("ran")
    assert len(df) > 0
