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
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from unittest import mock

import pandas as pd
import pytest
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
    _call,
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
)

import nsightx
from nsightx import AnnotationError, CollectionScope, InfoCollector

__all__ = ["no_default_collectors"]  # the fixture, used by name

EXAMPLES = int(os.environ.get("NSIGHTX_REFERENCE_EXAMPLES", "25"))
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
    program, side = case.program, Side()
    collectors = [
        _plain("onceval", CollectionScope.ONCE, lambda: case.once, case.once_asked),
        _plain("cfgval", CollectionScope.CONFIG, lambda c: _answer(case.config_answers, c), case.config_asked),
    ]
    if program.collectors:
        collectors += [
            _collector("runval", CollectionScope.RUN, program.run_answers, side.run_asked),
            _collector("annval", CollectionScope.ANNOTATION, program.annotation_answers, side.annotation_asked),
        ]

    @nsightx.analyze.kernel(
        configs=program.configs,
        runs=program.runs,
        warmup=program.warmup,
        backend="host",
        thermal_mode="off",
        info_collectors=collectors,
        output_prefix=str(folder) + "/" if program.output else None,
        verbosity=nsightx.VerbosityLevel.INFO,
    )
    def work(x: Any) -> None:
        _call(program, side, x)

    err = io.StringIO()
    with contextlib.redirect_stderr(err), warnings.catch_warnings(), deferred_session(case.deferred):
        warnings.simplefilter("ignore")
        try:
            outcome: Any = work()
        except BaseException as e:  # compared with what left the function
            outcome = e
    return side, outcome, err.getvalue()


def check_scoped_runs(result: Any, case: Scoped, done: list[Expected], where: str) -> None:
    """The first reference's checks, then the ONCE and CONFIG values in the runs and in both frames."""
    program = case.program
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
    rows = {(a, int(ci)): i for i, (a, ci) in enumerate(zip(frame["Annotation"], _configs(frame, case)))}
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
