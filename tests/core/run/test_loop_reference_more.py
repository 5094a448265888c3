"""The run-loop reference of ``test_loop_reference.py``, extended to what it left out.

The same random programs (regions that pass, fail, nest, repeat; exceptions outside regions, caught or let out)
now also run:

- with ONCE and CONFIG collectors beside the RUN and ANNOTATION ones, each answering ints, floats, str, None, NaN,
  True, or raising; docs/plugins.md ("Scopes"): ``once`` is asked once per call before the first config,
  ``config`` once per config before its warm-up runs, ``run`` before every measured run (warm-up runs are not
  collected), ``annotation`` each time a region opens in a measured run; ("Failures") a collector that raises
  gives an empty value and the run is kept; ("Columns") the per-run frame has one column per collector, the
  aggregated frame ``<name>_Avg/_Std/_Min/_Max`` for a numeric config/run/annotation collector and one column
  for a ``once`` collector or non-numeric values;
- on the host session made deferred (``tests/_sessions.DeferredHost``: runs handed back only when the loop
  collects them, the GPU backends' path, with the frame's pieces computed during the wait,
  ``nsightx/_results/frameahead.py``): the result must be the same as on the plain session; the first
  ``to_dataframe()`` (which takes those pieces) must equal a later one and the frame of the saved file;
- under ``runs="auto"`` (docs/api.md, ``runs`` .. ``time_budget_s`` and the ``StopReason`` paragraph): a config
  stops at the first run from ``min_runs`` on where every (annotation, metric) seen has a 95 % CI within
  ``target_ci_pct`` of its mean (``target``), or at ``max_runs``; the target is either tiny (met only by runs
  all equal) or huge (met by any two finite values), the budget never reached, so the runs that must exist follow
  from the values recorded;
- with ``derive_metric`` and ``normalize_against`` (docs/api.md): the derived metric per run from the run's
  measured value and config, every row divided by the baseline annotation's mean of its config and metric.

Compared exactly as the first reference does (``check_runs`` and friends are reused). The host times are not
predictable: the adaptive and derived references read them from the result's records.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import math
import os
import tempfile
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from unittest import mock

import pandas as pd
from _sessions import DeferredHost
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from nsightx_host import HostBackend
from test_loop_reference import (
    ANSWERS,
    METRIC,
    RAISE,
    Boom,
    Expected,
    Outcome,
    Outside,
    Program,
    Region,
    Side,
    _answer,
    _cell_matches,
    _collector,
    _events,
    _missing,
    _same,
    _value,
    check_collectors_asked,
    check_frame,
    check_records,
    check_runs_frame,
    check_stop,
    no_default_collectors,
    programs,
    reference,
    run_program,
)

import nsightx
from nsightx import AnnotationError, CollectionScope, InfoCollector

__all__ = ["no_default_collectors"]  # the fixture, used by name

EXAMPLES = int(os.environ.get("NSIGHTX_REFERENCE_EXAMPLES", "60"))
"""Examples per test (more while hunting: ``NSIGHTX_REFERENCE_EXAMPLES=300``)."""

HYPOTHESIS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    derandomize="NSIGHTX_REFERENCE_RANDOM" not in os.environ,
)


@contextlib.contextmanager
def deferred_session(deferred: bool) -> Iterator[None]:
    """The host backend's session, made deferred (a GPU backend's run loop) when asked."""
    if not deferred:
        yield
        return

    @contextlib.contextmanager
    def session(self: Any, plan: Any) -> Iterator[Any]:
        yield DeferredHost()

    with mock.patch.object(HostBackend, "session", session):
        yield


# --- every collector scope ------------------------------------------------------------------------------------


@dataclass
class Scoped:
    """A program and its ONCE and CONFIG collectors' answers; ``deferred``: run on the deferred session."""

    program: Program
    once: Any
    config_answers: list[Any]
    deferred: bool
    once_asked: list[Any] = field(default_factory=list)
    config_asked: list[Any] = field(default_factory=list)


@st.composite
def scoped(draw: st.DrawFn) -> Scoped:
    """A random program with collectors of every scope (the ONCE and CONFIG ones always there)."""
    program = draw(programs())
    return Scoped(program, draw(ANSWERS), draw(st.lists(ANSWERS, min_size=1, max_size=3)), draw(st.booleans()))


def _plain(name: str, scope: CollectionScope, answer: Any, asked: list[Any]) -> InfoCollector:
    def collect(ctx: Any) -> Any:
        key = () if scope is CollectionScope.ONCE else (ctx.config,)
        asked.append(key)
        value = answer(*key)
        if value == RAISE:
            raise Boom(f"collector {name} at {key}")
        return value

    return InfoCollector(name, collect, scope)


def run_scoped(case: Scoped, folder: Path) -> tuple[Side, Any, str]:
    """Run the program with collectors of every scope: the side record, the result or error, stderr."""
    collectors = [
        _plain("onceval", CollectionScope.ONCE, lambda: case.once, case.once_asked),
        _plain("cfgval", CollectionScope.CONFIG, lambda c: _answer(case.config_answers, c), case.config_asked),
    ]
    return run_program(case.program, folder, collectors=collectors, around=deferred_session(case.deferred))


def check_scoped_runs(result: Any, case: Scoped, done: list[Expected], where: str) -> None:
    """The first reference's checks, then the ONCE and CONFIG values in the runs and in both frames."""
    program = case.program
    runs = check_run_objects(result, program, done, where)
    once = [(c.name, c.scope, c.value) for r in result.data.runs if r.config < 0 for c in r.collectors]
    assert len(once) == 1 and once[0][:2] == ("onceval", "once") and _same(once[0][2], _value(case.once)), once
    configs = sorted({e.config for e in done})
    got_cfg = [(c.config, c.value) for r in runs for c in r.collectors if c.scope == "config"]
    assert [c for c, _ in got_cfg] == configs, (where, got_cfg)
    for ci, v in got_cfg:
        assert _same(v, _value(_answer(case.config_answers, ci))), (where, ci, v)
    check_records(result, done, where)
    check_runs_frame(result, program, done, where)
    check_scoped_runs_frame(result, case, done, where)
    check_frame(result, program, done, where)
    check_collector_columns(result, case, done, where)


def check_run_objects(result: Any, program: Program, done: list[Expected], where: str) -> list[Any]:
    """``data.runs``: the runs, regions, records and RUN/ANNOTATION values the reference says; the runs."""
    runs = [r for r in result.data.runs if r.config >= 0]
    assert [(r.config, r.run) for r in runs] == [(e.config, e.run) for e in done], where
    for got, exp in zip(runs, done, strict=True):
        assert [(g.annotation, g.failed) for g in got.regions] == exp.regions, (where, exp)
        live = [name for name, failed in exp.regions if not failed]
        assert [(rec.annotation, rec.kernel, rec.metric) for rec in got.records] == [
            (name, "region", METRIC) for name in live
        ], (where, exp)
        values = [(c.name, c.scope, c.config, c.run, c.annotation, c.value) for c in got.collectors]
        values = [v for v in values if v[1] in ("run", "annotation")]
        want = _run_values(program, exp)
        assert len(values) == len(want), (where, values, want)
        for g, w in zip(values, want, strict=True):
            assert g[:5] == w[:5] and _same(g[5], w[5]), (where, g, w)
    return runs


def _run_values(program: Program, exp: Expected) -> list[tuple[Any, ...]]:
    """The RUN and ANNOTATION values one measured run holds, in order."""
    if not program.collectors:
        return []
    run_value = _value(_answer(program.run_answers, exp.config, exp.run))
    return [("runval", "run", exp.config, exp.run, None, run_value)] + [
        (
            "annval",
            "annotation",
            exp.config,
            exp.run,
            name,
            _value(_answer(program.annotation_answers, exp.config, exp.run, name)),
        )
        for name in exp.opened
    ]


def check_scoped_runs_frame(result: Any, case: Scoped, done: list[Expected], where: str) -> None:
    """``runs_dataframe()``: every row shows the ONCE value and its config's CONFIG value."""
    frame = result.runs_dataframe()
    if len(frame) == 0:
        return
    for i, ci in enumerate(frame["Config"]):
        assert _cell_matches(frame["onceval"].iloc[i], _value(case.once)), (where, i, frame["onceval"].iloc[i])
        want = _value(_answer(case.config_answers, int(ci)))
        assert _cell_matches(frame["cfgval"].iloc[i], want), (where, ci, frame["cfgval"].iloc[i], want)


def _per_row(case: Scoped, name: str, ci: int, r: int, ann: str) -> Any:
    """The value collector ``name`` gives the per-run row of (ci, r, ann) (docs/plugins.md, "Columns")."""
    program = case.program
    if name == "onceval":
        return _value(case.once)
    if name == "cfgval":
        return _value(_answer(case.config_answers, ci))
    if name == "runval":
        return _value(_answer(program.run_answers, ci, r))
    return _value(_answer(program.annotation_answers, ci, r, ann))


def check_collector_columns(result: Any, case: Scoped, done: list[Expected], where: str) -> None:
    """``to_dataframe()``'s collector columns over the per-run rows of each (annotation, config).

    docs/plugins.md ("Columns"): a numeric config/run/annotation collector (every value in its per-run column a
    number) gives ``<name>_Avg/_Std/_Min/_Max``; a ``once`` collector and non-numeric values keep one column.
    Which value one column shows where a group's values differ is not documented: only a value the group holds
    is accepted there (the first non-empty one, as tests/core/results/test_frame_reference.py says).
    """
    groups: dict[tuple[str, int], list[int]] = {}
    for e in done:
        for name, _ in e.regions:
            groups.setdefault((name, e.config), []).append(e.run)
    if not groups:
        return
    frame = result.to_dataframe()
    names = ["onceval", "cfgval"] + (["runval", "annval"] if case.program.collectors else [])
    rows = {(a, int(ci)): i for i, (a, ci) in enumerate(zip(frame["Annotation"], _configs(frame, case), strict=True))}
    for name in names:
        column = pd.Series(
            [_per_row(case, name, ci, r, a) for (a, ci), runs in groups.items() for r in runs], dtype=object
        )
        converted = pd.to_numeric(column, errors="coerce")
        numeric = name != "onceval" and converted.notna().sum() == column.notna().sum() and converted.notna().any()
        for (a, ci), runs in groups.items():
            seen = pd.Series([_per_row(case, name, ci, r, a) for r in runs], dtype=object)
            i = rows[(a, ci)]
            if numeric:
                nums = pd.to_numeric(seen, errors="coerce").astype("float64")
                for suffix, want in (("Avg", nums.mean()), ("Std", nums.std(ddof=1))):
                    assert _close(frame[f"{name}_{suffix}"].iloc[i], want), (where, name, a, ci, suffix)
                for suffix, want in (("Min", nums.min()), ("Max", nums.max())):
                    assert _close(frame[f"{name}_{suffix}"].iloc[i], want), (where, name, a, ci, suffix)
            elif not seen.isna().all():
                cell = frame[name].iloc[i]
                present = [v for v in seen if not _missing(v)]
                assert any(_cell_matches(cell, v) for v in present), (where, name, a, ci, cell, present)


def _close(got: Any, want: float) -> bool:
    if pd.isna(want):
        return bool(pd.isna(got))
    return not pd.isna(got) and math.isclose(float(got), float(want), rel_tol=1e-9, abs_tol=1e-12)


def _configs(frame: pd.DataFrame, case: Scoped) -> list[int]:
    """The config index of each aggregated row (as ``test_loop_reference._config_of_rows``)."""
    from test_loop_reference import _config_of_rows

    return _config_of_rows(frame, case.program)


def configs_started(program: Program, ref: Outcome) -> int:
    """How many configs the call began (each asks its CONFIG collector once, before its warm-up runs)."""
    per_config = program.warmup + program.runs
    return -(-len(ref.events) // per_config)


def check_same_frames(result: Any, folder: Path, where: str) -> None:
    """The first ``to_dataframe()`` (the pieces computed during the wait) equals a later one and the saved file's."""
    first, second = result.to_dataframe(), result.to_dataframe()
    pd.testing.assert_frame_equal(first, second, obj=where)
    loaded = nsightx.load(result.save(folder / "again.parquet")).to_dataframe()
    pd.testing.assert_frame_equal(first, loaded, obj=where)


def check_nothing_measured_deferred(side: Side, outcome: Any, ref: Outcome) -> None:
    """A deferred call whose first measured run opened no region: ``AnnotationError`` at the first collection.

    docs/reliability.md ("Bad input"): on a deferred backend the check is made "at its first collection"; when that
    is depends on the clock (a config end once a second has passed, docs/api.md ``collect_runs``), so only what
    holds either way is checked: the calls the host session makes come first, the error is the documented one, or
    the function's own when one of its later runs let one out before that collection (the docs do not say which
    of the two a call raises then: the one that stopped it).
    """
    assert [events for _, events in side.calls[: len(ref.events)]] == ref.events
    if side.raised is not None:  # a later run's exception left the function before that collection
        assert outcome is side.raised, (outcome, side.raised)
    else:
        assert isinstance(outcome, AnnotationError) and "nothing was measured" in str(outcome), outcome


@HYPOTHESIS
@given(case=scoped())
def test_a_program_with_collectors_of_every_scope_is_recorded_as_the_docs_say(
    case: Scoped, no_default_collectors: None
) -> None:
    program = case.program
    ref = reference(program)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        side, outcome, stderr = run_scoped(case, folder)
        if case.deferred and ref.nothing_measured:
            check_nothing_measured_deferred(side, outcome, ref)
            return
        assert [events for _, events in side.calls] == ref.events
        assert case.once_asked == [()]
        assert case.config_asked == [(ci,) for ci in range(configs_started(program, ref))]
        if program.collectors:
            check_collectors_asked(program, side, ref)
        if ref.raised_by_function or ref.nothing_measured:
            # the raw file is read below: the first reference's check of it knows no CONFIG value
            check_stop(dataclasses.replace(program, output=False), side, outcome, stderr, ref, folder)
            if program.output:
                (raw,) = folder.glob("raw_data-*.jsonl")
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    loaded = nsightx.load(raw)
                if ref.done:
                    assert f"saved in {raw}" in stderr, stderr
                    check_scoped_runs(loaded, case, ref.done, "raw file of a stopped call")
                else:
                    assert [r for r in loaded.data.runs if r.config >= 0] == []
            return
        assert isinstance(outcome, nsightx.ProfileResults), outcome
        check_same_frames(outcome, folder, "deferred" if case.deferred else "plain")
        check_scoped_runs(outcome, case, ref.done, "result")
        for suffix in (".parquet", ".json"):
            check_scoped_runs(nsightx.load(outcome.save(folder / f"saved{suffix}")), case, ref.done, suffix)
        if program.output:
            (raw,) = folder.glob("raw_data-*.jsonl")
            check_scoped_runs(nsightx.load(raw), case, ref.done, "raw file")


# --- runs="auto" ----------------------------------------------------------------------------------------------

TINY, HUGE = 1e-9, 1e9
"""The two targets (percent): met only by runs all equal; met by any two finite values of every region."""


@dataclass
class Adaptive:
    """A program under ``runs="auto"``: configs 0..n-1, the k-th call of a config runs ``scripts[k % len]``."""

    program: Program
    min_runs: int
    max_runs: int
    target: float
    deferred: bool
    made: dict[int, int] = field(default_factory=dict)
    """Calls of the function per config so far."""


@st.composite
def adaptive(draw: st.DrawFn) -> Adaptive:
    """A random program (its fixed ``runs`` unused), with random adaptive limits and target."""
    base = draw(programs())
    program = dataclasses.replace(base, configs=list(range(len(base.configs))), output=True)
    min_runs = draw(st.sampled_from([2, 3, 5]))
    max_runs = min_runs + draw(st.sampled_from([0, 1, 3, 12]))
    return Adaptive(program, min_runs, max_runs, draw(st.sampled_from([TINY, HUGE])), draw(st.booleans()))


def run_adaptive(case: Adaptive, folder: Path) -> tuple[Side, Any]:
    """Run the program under ``runs="auto"`` (a budget never reached): the side record, the result or error."""
    program, side = case.program, Side()
    collectors = (
        [
            _collector("runval", CollectionScope.RUN, program.run_answers, side.run_asked),
            _collector("annval", CollectionScope.ANNOTATION, program.annotation_answers, side.annotation_asked),
        ]
        if program.collectors
        else []
    )

    @nsightx.analyze.kernel(
        configs=program.configs,
        runs="auto",
        min_runs=case.min_runs,
        max_runs=case.max_runs,
        target_ci_pct=case.target,
        time_budget_s=1e6,
        warmup=program.warmup,
        backend="host",
        thermal_mode="off",
        info_collectors=collectors,
        output_prefix=str(folder) + "/",
        verbosity=nsightx.VerbosityLevel.SILENT,
    )
    def work(x: int) -> None:
        k = case.made[x] = case.made.get(x, 0) + 1
        events: list[tuple[str, ...]] = []
        side.calls.append((x, events))
        _script(program.scripts[(k - 1) % len(program.scripts)], events, side)

    with contextlib.redirect_stderr(io.StringIO()), warnings.catch_warnings(), deferred_session(case.deferred):
        warnings.simplefilter("ignore")
        try:
            outcome: Any = work()
        except BaseException as e:  # compared with what left the function
            outcome = e
    return side, outcome


def _script(script: list[Any], events: list[tuple[str, ...]], side: Side) -> None:
    """One call's script (as ``test_loop_reference._call`` runs it), noting every event."""
    from test_loop_reference import _region

    try:
        for s in script:
            if isinstance(s, Region):
                _region(s, events)
            elif s.caught:
                with nsightx.analyze.ignore_failures():
                    raise Boom("outside, caught")
            else:
                raise Boom("outside")
    except BaseException as e:
        side.raised = e
        raise


@dataclass
class AutoOutcome(Outcome):
    """What the reference says an adaptive call does, and why each config it finished stopped."""

    reasons: dict[int, set[str]] = field(default_factory=dict)
    """Per config finished, the stop reasons the docs allow (two where two hold at once: the docs give no order)."""


def adaptive_reference(case: Adaptive, values: dict[tuple[int, int], dict[str, float]]) -> AutoOutcome:
    """The runs of each config as ``runs="auto"`` makes them, from the values the runs recorded (``values``).

    docs/api.md: a config's measured runs go on until, from ``min_runs`` on, every (annotation, metric) has a 95 %
    CI within ``target_ci_pct`` of its mean (``target``), or ``max_runs`` were made (``max_runs``); the budget is
    never reached here. With :data:`TINY` the CI is within it only when the region's runs are all equal (the
    interval is then the mean itself), with :data:`HUGE` whenever there are two finite values (a single run has
    no interval). A config with no value at all stops at ``min_runs`` (``no_values``; the docs say so of a backend
    without values in process, and say nothing of a host config whose regions all failed: the code's reason is
    taken). Warm-up runs, stops and a first run without a region are as with a fixed count.
    """
    program = case.program
    out = AutoOutcome([], [])
    for ci in range(len(program.configs)):
        seen: dict[str, list[float]] = {}
        k = 0
        while True:
            run = Expected(ci, k - program.warmup)
            if _simulate(program.scripts[k % len(program.scripts)], run, out):
                out.raised_by_function = True
                out.stopped = run if k >= program.warmup else None
                return out
            k += 1
            if run.run < 0:
                continue
            out.done.append(run)
            if len(out.done) == 1 and not run.regions:
                out.nothing_measured = True
                return out
            assert (ci, run.run) in values, ("the reference needs a run the call did not make", ci, run.run)
            for name, value in values[(ci, run.run)].items():
                seen.setdefault(name, []).append(value)
            reasons = _reasons(case, seen, run.run + 1)
            if reasons:
                out.reasons[ci] = reasons
                break
    return out


def _simulate(script: list[Any], run: Expected, out: Outcome) -> bool:
    """Run ``script`` through the reference's region rules into ``run``; whether an exception left the call."""
    used: set[str] = set()
    call: list[tuple[str, ...]] = []
    out.events.append(call)
    for s in script:
        if isinstance(s, Outside):
            if not s.caught:
                return True
        elif _events(s, None, used, run, call) is not None:
            return True
    return False


def _reasons(case: Adaptive, seen: dict[str, list[float]], done: int) -> set[str]:
    """The stop reasons that hold after ``done`` measured runs, given each region's finite values so far."""
    if done < case.min_runs:
        return set()
    if not seen:
        return {"no_values"} | ({"max_runs"} if done >= case.max_runs else set())
    if case.target == TINY:
        met = all(len(v) >= 2 and len(set(v)) == 1 for v in seen.values())
    else:
        met = all(len(v) >= 2 for v in seen.values())
    return ({"target"} if met else set()) | ({"max_runs"} if done >= case.max_runs else set())


def recorded_values(result: Any) -> dict[tuple[int, int], dict[str, float]]:
    """Per measured run, each region's finite value (the rule's input: failed regions are skipped)."""
    out: dict[tuple[int, int], dict[str, float]] = {}
    for run in result.data.runs:
        if run.config >= 0:
            out[(run.config, run.run)] = {
                r.annotation: r.value for r in run.records if r.metric == METRIC and math.isfinite(r.value)
            }
    return out


@HYPOTHESIS
@given(case=adaptive())
def test_a_program_under_runs_auto_makes_the_runs_the_docs_say(case: Adaptive, no_default_collectors: None) -> None:
    program = case.program
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        side, outcome = run_adaptive(case, folder)
        (raw,) = folder.glob("raw_data-*.jsonl")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            loaded_raw = nsightx.load(raw)
        ref = adaptive_reference(case, recorded_values(loaded_raw))
        assert [events for _, events in side.calls] == ref.events
        if program.collectors:
            check_collectors_asked(program, side, ref)
        if ref.raised_by_function:
            assert outcome is side.raised, (outcome, side.raised)
        elif ref.nothing_measured:
            assert isinstance(outcome, AnnotationError) and "nothing was measured" in str(outcome), outcome
        if ref.raised_by_function or ref.nothing_measured:
            check_run_objects(loaded_raw, program, ref.done, "raw file of a stopped call")
            return
        assert isinstance(outcome, nsightx.ProfileResults), outcome
        for where, result in (("result", outcome), ("raw file", loaded_raw)):
            check_auto_result(result, case, ref, where)
        check_same_frames(outcome, folder, "auto")


def check_auto_result(result: Any, case: Adaptive, ref: AutoOutcome, where: str) -> None:
    """The runs, records and frames of a finished adaptive call; ``StopReason`` per config."""
    program = case.program
    runs = check_run_objects(result, program, ref.done, where)
    check_records(result, ref.done, where)
    check_runs_frame(result, program, ref.done, where)
    check_frame(result, program, ref.done, where)
    stored = {c.config: c.value for r in runs for c in r.collectors if c.name == "StopReason"}
    assert set(stored) == set(ref.reasons), (where, stored, ref.reasons)
    for ci, reason in stored.items():
        assert reason in ref.reasons[ci], (where, ci, reason, ref.reasons[ci])
    frame = result.to_dataframe()
    if len(frame):
        assert [stored[int(ci)] for ci in frame["x"]] == list(frame["StopReason"]), (where, stored)


# --- derive_metric and normalize_against ----------------------------------------------------------------------

DERIVED = ("twice", "shifted")
"""The metrics :func:`two_metrics` returns (a dict: docs/api.md, ``derive_metric``)."""


def two_metrics(t: float, x: Any) -> dict[str, tuple[float, str]]:
    """A derive function of the measured time and the config: two metrics, each with a unit."""
    shift = float(x) if isinstance(x, int | float) else 0.0
    return {"twice": (2.0 * t, "ns"), "shifted": (t + shift, "ns")}


@dataclass
class Transformed:
    """A program whose call derives :data:`DERIVED` and normalises against ``baseline`` (None: not at all)."""

    program: Program
    baseline: str | None
    deferred: bool


@st.composite
def transformed(draw: st.DrawFn) -> Transformed:
    """A random program that completes, and a baseline its first measured run opened (or none)."""
    program = draw(programs())
    ref = reference(program)
    opened = ref.done[0].opened if ref.done else []
    baseline = draw(st.sampled_from([None, *opened]))
    return Transformed(dataclasses.replace(program, output=False), baseline, draw(st.booleans()))


def run_transformed(case: Transformed) -> tuple[Side, Any]:
    """Run the program with ``derive_metric=derived`` and ``normalize_against=baseline`` (no collectors)."""
    program = dataclasses.replace(case.program, collectors=False)
    side, outcome, _ = run_program(
        program,
        Path(),
        around=deferred_session(case.deferred),
        derive_metric=two_metrics,
        normalize_against=case.baseline,
        verbosity=nsightx.VerbosityLevel.SILENT,
    )
    return side, outcome


def per_run_metrics(case: Transformed, result: Any, done: list[Expected]) -> dict[tuple[str, str, int], list[float]]:
    """(annotation, metric, config) -> the run values docs/api.md says: measured, then derived per run.

    A failed region's values are NaN (docs/api.md, ``annotate``), the derived ones too, under the names the
    function gives. Where no region of the call succeeded the function was never called and its names are not
    known: the docs do not say what the rows are called then; the code names them after the function (its
    docstring), which is taken here.
    """
    measured = {(r.annotation, r.config, r.run): r.value for r in result.records if r.metric == METRIC}
    names = DERIVED if measured else (two_metrics.__name__,)
    out: dict[tuple[str, str, int], list[float]] = {}
    for e in done:
        x = case.program.configs[e.config]
        for name, failed in e.regions:
            t = math.nan if failed else measured[(name, e.config, e.run)]
            values = {METRIC: t} | (
                dict.fromkeys(names, math.nan) if failed else {m: v for m, (v, _) in two_metrics(t, x).items()}
            )
            for metric, value in values.items():
                out.setdefault((name, metric, e.config), []).append(value)
    return out


def check_transformed(case: Transformed, result: Any, done: list[Expected], where: str) -> None:
    """Both frames' values against the per-run values and the docs' normalisation."""
    runs = per_run_metrics(case, result, done)
    frame = result.runs_dataframe()
    got: dict[tuple[str, str, int], list[float]] = {}
    for a, m, ci, v in zip(frame["Annotation"], frame["Metric"], frame["Config"], frame["Value"], strict=True):
        got.setdefault((a, m, int(ci)), []).append(float(v))
    assert sorted(got) == sorted(runs), (where, sorted(got), sorted(runs))
    for key, values in runs.items():
        assert _all_close(got[key], values), (where, key, got[key], values)
    agg = result.to_dataframe()
    configs = _config_of_rows(agg, case.program, by_metric=True)
    rows = {(a, m, ci): i for i, (a, m, ci) in enumerate(zip(agg["Annotation"], agg["Metric"], configs, strict=True))}
    assert sorted(rows) == sorted(runs), (where, sorted(rows), sorted(runs))
    for (a, m, ci), values in runs.items():
        series = pd.Series(values, dtype="float64")
        base = 1.0
        if case.baseline is not None:
            base = pd.Series(runs[(case.baseline, m, ci)], dtype="float64").mean()
            assert _close(agg["NormalizationValue"].iloc[rows[(a, m, ci)]], base), (where, a, m, ci)
            assert (
                agg["Normalized"].iloc[rows[(a, m, ci)]] == case.baseline
                and agg["Unit"].iloc[rows[(a, m, ci)]] == "ratio"
            )
        want = {
            "AvgValue": series.mean() / base,
            "MedianValue": series.median() / base,
            "StdDev": series.std(ddof=1) / base,
            "MinValue": series.min() / base,
            "MaxValue": series.max() / base,
            "NumRuns": series.count(),
        }
        for column, value in want.items():
            assert _close(agg[column].iloc[rows[(a, m, ci)]], value), (where, a, m, ci, column, value)


def _all_close(got: list[float], want: list[float]) -> bool:
    return len(got) == len(want) and all(_close(g, w) for g, w in zip(got, want, strict=True))


def _config_of_rows(frame: pd.DataFrame, program: Program, *, by_metric: bool) -> list[int]:
    """The config index of each aggregated row, matched per (annotation, metric) (see ``_configs``)."""
    from test_loop_reference import _config_of_rows as per_annotation

    if not by_metric:
        return per_annotation(frame, program)
    out = [0] * len(frame)
    for _metric, part in frame.groupby("Metric", sort=False):
        for i, ci in zip(part.index, per_annotation(part, program), strict=True):
            out[frame.index.get_loc(i)] = ci
    return out


@HYPOTHESIS
@given(case=transformed())
def test_a_program_with_derived_and_normalised_metrics_gives_the_values_the_docs_say(
    case: Transformed, no_default_collectors: None
) -> None:
    ref = reference(case.program)
    side, outcome = run_transformed(case)
    if ref.raised_by_function:
        assert outcome is side.raised, (outcome, side.raised)
        return
    if ref.nothing_measured and case.deferred:
        check_nothing_measured_deferred(side, outcome, ref)
        return
    if ref.nothing_measured:
        assert isinstance(outcome, AnnotationError), outcome
        return
    assert isinstance(outcome, nsightx.ProfileResults), outcome
    check_transformed(case, outcome, ref.done, "result")
    with tempfile.TemporaryDirectory() as tmp:
        for suffix in (".parquet", ".json"):
            check_transformed(case, nsightx.load(outcome.save(Path(tmp) / f"saved{suffix}")), ref.done, suffix)
