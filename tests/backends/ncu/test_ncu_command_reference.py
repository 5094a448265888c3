"""The ncu command line each option combination gives, against a naive reference from the docs.

The reference is docs/backends.md ("Options" and the NVTX paragraph) and docs/api.md's option table:
``--replay-mode`` is ``replay_mode`` (default ``kernel``), ``--cache-control`` is ``cache_control`` (default
``all``), ``--clock-control`` is ``clock_control`` (default ``none``), ``--metrics`` the metric names joined by
commas in the order given (default ``gpu__time_duration.sum``), ``--nvtx-include regex:nsightx@.+`` (``/``
appended for ``ncu_nvtx_ranges="push_pop"``), ``--set`` for ``ncu_set``, one ``--section`` per section, the extra
arguments verbatim and one argument each, then the worker's command last; each flag once. A bad value is an
error before anything runs that names the value.

The docs are silent on upper-case values (``"ALL"``): the test accepts either outcome there (refused naming the
value, or taken as the lower-case one), and does not assert ``--verbose`` (not documented per verbosity).

Hypothesis draws the options; each goes through the real decorator (``ProfileSpec``), the real backend choice
(:func:`nsightx._spec.select.choose`), the real plan (:func:`nsightx._spec.makeplan.build_plan`), the ncu backend's
own ``validate`` and ``_run_ncu``; only ``supervise`` (the boundary where the ncu binary would start) is replaced
by a stand-in that keeps the command.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any
from unittest import mock

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, event, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from nsightx_ncu import _backend  # noqa: E402
from nsightx_ncu._command import NcuOptions, check_metrics, parse_range_name, range_name  # noqa: E402
from nsightx_ncu._supervise import Outcome  # noqa: E402

import nsightx  # noqa: E402
from nsightx import ConfigError, ConfigTypeError  # noqa: E402
from nsightx._pluginhost.plugins import default_host  # noqa: E402
from nsightx._results.records import RegionId  # noqa: E402
from nsightx._spec.configs import normalize  # noqa: E402
from nsightx._spec.makeplan import build_plan  # noqa: E402
from nsightx._spec.select import choose  # noqa: E402

EXAMPLES = int(os.environ.get("NSIGHTX_HUNT_EXAMPLES", "150"))
"""Examples (the hunt ran 3000; the committed count keeps the file short on a loaded box)."""

MISSING = object()
APP = ["/py", "-m", "nsightx_ncu._worker", "/tmp/x/plan"]
VOCABULARY = {
    "cache_control": (("all", "none"), "all"),
    "clock_control": (("none", "base"), "none"),
    "replay_mode": (("kernel", "range", "application"), "kernel"),
}
"""Per option: the documented values and the default (docs/backends.md, Options)."""
BAD = {"cache_control": ["some", "", " all", 1], "clock_control": ["boost", True], "replay_mode": ["graph", "app"]}
CASED = {"cache_control": ["ALL", "None"], "clock_control": ["BASE"], "replay_mode": ["Range", "KERNEL"]}
METRICS = ["gpu__time_duration.sum", "dram__bytes.sum", "sm__cycles_elapsed.avg", "l1tex__t_bytes.sum"]
FLAGS = ("--export", "--nvtx-include", "--replay-mode", "--cache-control", "--clock-control")


@st.composite
def options(draw: Any) -> tuple[dict[str, Any], str | None]:
    """Decorator options, with at most one bad value; also the bad value's kind (``None``: all valid)."""
    bad = draw(st.sampled_from([None, None, None, "vocabulary", "metrics", "backend_options"]))
    opts: dict[str, Any] = {}
    for option, (values, _) in VOCABULARY.items():
        pick = draw(st.sampled_from([MISSING, None, *values, *values, *CASED[option]]))
        if pick is not MISSING:
            opts[option] = pick
    if bad == "vocabulary":
        option = draw(st.sampled_from(sorted(BAD)))
        opts[option] = draw(st.sampled_from(BAD[option]))
    if draw(st.booleans()):
        names = draw(st.lists(st.sampled_from(METRICS), min_size=1, max_size=4, unique=True))
        opts["metrics"] = [f" {n} " if draw(st.integers(0, 4)) == 0 else n for n in names]  # spaces are stripped
    if bad == "metrics":
        opts["metrics"] = draw(st.sampled_from([["a,b"], [""], "gpu__time_duration.sum", METRICS[:1] * 2]))
    backend_options: dict[str, Any] = {"ncu_check_metrics": False}  # the names are the docs' concern, not ncu's
    if draw(st.booleans()):
        backend_options["ncu_set"] = draw(st.sampled_from(["basic", "full", "detailed"]))
    if draw(st.booleans()):
        backend_options["ncu_sections"] = draw(st.lists(st.sampled_from(["SpeedOfLight", "Occupancy"]), max_size=2))
    if draw(st.booleans()):
        backend_options["ncu_extra_args"] = draw(
            st.lists(st.sampled_from(["--print-summary", "none", "--launch-count", "3", "a b", "x;y"]), max_size=3)
        )
    if draw(st.booleans()):
        backend_options["ncu_nvtx_ranges"] = draw(st.sampled_from(["start_end", "push_pop"]))
    if bad == "backend_options":
        key, value = draw(
            st.sampled_from([("ncu_set", ""), ("ncu_sections", "SpeedOfLight"), ("ncu_nvtx_ranges", "x")])
        )
        backend_options[key] = value
    opts["backend_options"] = backend_options
    opts["verbosity"] = draw(st.sampled_from([0, 3, 4]))
    return opts, bad


def command_of(opts: dict[str, Any]) -> list[str]:
    """The ncu command of a call of a one-parameter function with ``opts``, built by the real code up to ncu."""

    def fn(n: int) -> None:
        pass

    profiled = nsightx.analyze.kernel(configs=[(1,)], backend="ncu", runs=1, thermal_mode="off", **opts)(fn)
    choice = choose(profiled.spec, default_host(), None, here=False)
    plan = build_plan(
        profiled.spec,
        fn=fn,
        name="fn",
        shape=profiled.shape,
        configs=normalize(profiled.shape, [(1,)]),
        choice=choice,
        collectors=(),
        host=default_host(),
    )
    _backend.NcuBackend().validate(plan)  # what the loop asks before the first run
    ncu_options = NcuOptions.from_mapping(plan.backend_options)
    metrics = check_metrics(plan.metrics or _backend.NcuBackend.capabilities.default_metrics)  # as execute() does
    art = mock.Mock(report=Path("/tmp/x/fn.ncu-rep"), log=Path("/tmp/x/fn.log"))
    call = mock.Mock(command=lambda module: APP, serving=contextlib.nullcontext)
    kept: list[list[str]] = []

    def supervise(cmd: list[str], **_: Any) -> Outcome:  # the ncu binary's boundary: keep the command
        kept.append(cmd)
        return Outcome(returncode=0, timed_out=False, permission_denied=False)

    with mock.patch.object(_backend, "supervise", supervise):
        _, cmd = _backend._run_ncu(plan, art, ncu_options, metrics, Path("/opt/ncu"), call)
    assert kept == [cmd]
    return cmd


def value(cmd: list[str], flag: str) -> str:
    assert cmd.count(flag) == 1, (flag, cmd)
    return cmd[cmd.index(flag) + 1]


def check_valid(opts: dict[str, Any], cmd: list[str]) -> None:
    """Assert ``cmd`` is the reference's command for ``opts``."""
    assert cmd[0] == "/opt/ncu" and cmd[-len(APP) :] == APP
    for flag in FLAGS:
        assert cmd.count(flag) == 1, (flag, cmd)
    for option, (_, default) in VOCABULARY.items():
        given = opts.get(option)
        want = default if given is None else given.lower()  # a cased value got here only if it was accepted
        assert value(cmd, "--" + option.replace("_", "-")) == want
    metrics = [m.strip() for m in opts.get("metrics") or ["gpu__time_duration.sum"]]
    assert value(cmd, "--metrics") == ",".join(metrics)
    bopts = opts["backend_options"]
    push_pop = bopts.get("ncu_nvtx_ranges") == "push_pop"
    assert value(cmd, "--nvtx-include") == ("regex:nsightx@.+/" if push_pop else "regex:nsightx@.+")
    assert value(cmd, "--export") == "/tmp/x/fn.ncu-rep"
    if "ncu_set" in bopts:
        assert value(cmd, "--set") == bopts["ncu_set"]
    else:
        assert "--set" not in cmd
    sections = [cmd[i + 1] for i, a in enumerate(cmd[: -len(APP)]) if a == "--section"]
    assert sections == list(bopts.get("ncu_sections", []))
    extra = list(bopts.get("ncu_extra_args", []))
    head = cmd[: -len(APP)]
    assert not extra or any(head[i : i + len(extra)] == extra for i in range(len(head))), (extra, cmd)


def named(opts: dict[str, Any], bad: str) -> list[str]:
    """Texts one of which the error for the bad value must hold."""
    if bad == "vocabulary":
        return [repr(opts[o]) for o in VOCABULARY if opts.get(o) in BAD[o] and opts.get(o) is not None]
    if bad == "metrics":
        m = opts["metrics"]
        return [repr(m), repr(m[0])] if not isinstance(m, str) else [repr(m)]
    bopts = opts["backend_options"]
    return [repr(bopts[k]) for k in ("ncu_set", "ncu_sections", "ncu_nvtx_ranges") if k in bopts]


@settings(
    max_examples=EXAMPLES, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow], database=None
)
@given(options())
def test_command_line_matches_the_reference(case: tuple[dict[str, Any], str | None]) -> None:
    opts, bad = case
    cased = any(opts.get(o) in CASED[o] for o in VOCABULARY)
    event(f"bad={bad} cased={cased}")
    try:
        cmd = command_of(opts)
    except (ConfigError, ConfigTypeError) as e:
        if bad is None:
            assert cased, f"valid options refused: {opts}: {e}"
            assert any(repr(opts.get(o)) in str(e) for o in VOCABULARY if opts.get(o) in CASED[o])
            return
        assert any(text in str(e) for text in named(opts, bad)), (str(e), named(opts, bad))
        return
    assert bad is None, f"bad {bad} accepted: {opts} -> {cmd}"
    check_valid(opts, cmd)


@settings(max_examples=EXAMPLES * 4, deadline=None, derandomize=True, database=None)
@given(st.text(min_size=1), st.integers(0, 10**6), st.integers(-1, 10**6))
def test_any_annotation_text_round_trips_through_its_range_name(annotation: str, config: int, run: int) -> None:
    # backends.md: the range is '<annotation>|config=<i>|run=<j>' in domain nsightx, '%', '|', '/' and '@' escaped,
    # so that the --nvtx-include expression (domain '@', push/pop level '/') and the parse cannot be misled.
    region = RegionId(annotation=annotation, config=config, run=run)
    name = range_name(region)
    assert parse_range_name(name) == region
    assert "/" not in name and "@" not in name and name.count("|") == 2
