"""What a profiled call records against a naive reference, over random programs run on the real host backend.

A random *program* is what a user's benchmark function may do inside one decorated call: per run, a list of
steps, each a region (``nsightx.annotate``) that passes, raises (swallowed by ``ignore_failures``, caught by the
function outside the region, or let out), opens another region inside itself, or reuses a name already used in
the run; or an exception raised outside any region (inside ``analyze.ignore_failures()`` or let out). A RUN and
an ANNOTATION collector return ints, floats, str, None, NaN, or raise. The function keeps, in plain lists, what
it did; the reference says from that and the docs what the result must hold:

- docs/api.md (``annotate``): names are unique within one run and regions cannot nest (``AnnotationError``); with
  ``ignore_failures=True`` an exception inside the region is swallowed and its values are NaN
  (``Kernel="failed"``); docs/api.md (the backend contract) and docs/plugins.md: a failed region is one that
  raised and whose exception ``ignore_failures`` swallowed, and it gets no record; "Collectors": a collector that
  raises gets an empty cell and never costs a run; warm-up runs are discarded.
- docs/reliability.md ("When a run fails"): an exception that leaves the function stops the sweep, is re-raised
  unchanged after one stop line that counts the completed runs (none printed when none completed), and the raw
  file holds exactly the runs completed before it, which ``nsightx.load`` gives back.

Compared exactly: which (config, run) runs exist and in what order, their regions (name, failed) in closing
order, their records (one per region that did not fail), their collector values (None for a raise, NaN kept),
``runs_dataframe()``'s rows and collector cells, ``to_dataframe()``'s rows and ``NumRuns``, and the same after
``save`` (.parquet and .json) and ``load``, and ``load`` of the raw file. The host times are not predictable:
only their presence is compared.

The two wrong answers hunt20b found here, once tolerated, are fixed (fix20): a failed region's host record, and a
collector's NaN read back as None from JSON; the comparison is strict.
"""

from __future__ import annotations

import contextlib
import io
import math
import os
import tempfile
import warnings
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import nsightx
from nsightx import AnnotationError, CollectionScope, InfoCollector

METRIC = "host__time_duration.sum"
NAMES = ("a", "b", "c")
EXAMPLES = int(os.environ.get("NSIGHTX_REFERENCE_EXAMPLES", "40"))
"""Examples per run (more while hunting: ``NSIGHTX_REFERENCE_EXAMPLES=400``)."""

RAISE = "raise"
"""A collector answer that stands for a raise."""


class Boom(Exception):
    """What the program raises on purpose."""


# --- the program ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Region:
    """One region step: open ``name`` and run ``body``; ``catch``: the function catches what leaves the region.

    ``body``: ``"pass"``, ``"raise"`` (a :class:`Boom` inside the region), or a nested :class:`Region`.
    """

    name: str
    ignore: bool
    body: Any
    catch: bool


@dataclass(frozen=True)
class Outside:
    """A :class:`Boom` raised outside any region, in ``analyze.ignore_failures()`` when ``caught``."""

    caught: bool


@dataclass
class Program:
    """Configs, runs, and per call of the function (the k-th call of a config uses ``scripts[k % len]``)."""

    configs: list[Any]
    runs: int
    warmup: int
    scripts: list[list[Any]]
    run_answers: list[Any]
    annotation_answers: list[Any]
    collectors: bool
    output: bool = True


@dataclass
class Side:
    """What the function and the collectors did, kept in plain lists while the call ran."""

    calls: list[tuple[Any, list[tuple[str, ...]]]] = field(default_factory=list)
    """Per call of the function: the argument it got, and its events."""
    raised: BaseException | None = None
    """The exception that left the function, if one did."""
    run_asked: list[tuple[int | None, int | None]] = field(default_factory=list)
    annotation_asked: list[tuple[int | None, int | None, str | None]] = field(default_factory=list)


ANSWERS = st.sampled_from([0, 7, -3, 2.5, math.nan, "text", "", None, True, RAISE])

region_leaf = st.builds(
    Region, st.sampled_from(NAMES), st.booleans(), st.sampled_from(["pass", "pass", "raise"]), st.booleans()
)
region_step = st.one_of(
    region_leaf,
    st.builds(Region, st.sampled_from(NAMES), st.booleans(), region_leaf, st.booleans()),
)
step = st.one_of(region_step, region_step, region_step, st.builds(Outside, st.booleans()))
CONFIG_VALUES = st.sampled_from([1, 2, 1.0, 2.5, True, "a", "b", None])


@st.composite
def programs(draw: st.DrawFn) -> Program:
    """A random program: mostly runs that complete, sometimes one that stops the sweep."""
    configs = draw(st.lists(CONFIG_VALUES, min_size=1, max_size=3, unique_by=lambda v: (type(v), v)))
    runs = draw(st.sampled_from([1, 2, 3, 5, 130]))
    scripts = draw(st.lists(st.lists(step, min_size=1, max_size=4), min_size=1, max_size=4))
    return Program(
        configs=configs,
        runs=runs,
        warmup=draw(st.integers(0, 2)),
        scripts=scripts,
        run_answers=draw(st.lists(ANSWERS, min_size=1, max_size=4)),
        annotation_answers=draw(st.lists(ANSWERS, min_size=1, max_size=4)),
        collectors=draw(st.booleans()),
        output=draw(st.booleans()),
    )


def _answer(answers: list[Any], *key: Any) -> Any:
    """The collector answer of one (config, run[, annotation]): a pure function of its key."""
    return answers[hash(key) % len(answers)]


def _collector(name: str, scope: CollectionScope, answers: list[Any], asked: list[Any]) -> InfoCollector:
    def collect(ctx: Any) -> Any:
        key = (ctx.config, ctx.run) if scope is CollectionScope.RUN else (ctx.config, ctx.run, ctx.annotation)
        asked.append(key)
        value = _answer(answers, *key)
        if value == RAISE:
            raise Boom(f"collector {name} at {key}")
        return value

    return InfoCollector(name, collect, scope)


def _region(step: Region, events: list[tuple[str, ...]]) -> None:
    """Run one region step, noting what happened (opened, raised inside, what left it and whether caught)."""
    try:
        with nsightx.annotate(step.name, ignore_failures=step.ignore):
            events.append(("open", step.name))
            if step.body == "raise":
                raise Boom(step.name)
            if isinstance(step.body, Region):
                _region(step.body, events)
    except Exception as e:
        events.append(("left", step.name, type(e).__name__))
        if not step.catch:
            raise


def _call(program: Program, side: Side, x: Any) -> None:
    """The body of the profiled function: the script of this call, every event noted."""
    events: list[tuple[str, ...]] = []
    side.calls.append((x, events))
    per_config = program.warmup + program.runs
    script = program.scripts[(len(side.calls) - 1) % per_config % len(program.scripts)]
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


def run_program(
    program: Program,
    folder: Path,
    *,
    collectors: Sequence[InfoCollector] = (),
    around: contextlib.AbstractContextManager[Any] | None = None,
    **options: Any,
) -> tuple[Side, Any, str]:
    """Run ``program`` through ``analyze.kernel`` on the host backend: the side record, the result or error, stderr.

    ``collectors`` come before the program's own; the call runs inside ``around``; ``options`` add to (or replace)
    the call's options.
    """
    side = Side()
    own = (
        [
            _collector("runval", CollectionScope.RUN, program.run_answers, side.run_asked),
            _collector("annval", CollectionScope.ANNOTATION, program.annotation_answers, side.annotation_asked),
        ]
        if program.collectors
        else []
    )
    settings = {
        "configs": program.configs,
        "runs": program.runs,
        "warmup": program.warmup,
        "backend": "host",
        "thermal_mode": "off",
        "info_collectors": [*collectors, *own],
        "output_prefix": str(folder) + "/" if program.output else None,
        "verbosity": nsightx.VerbosityLevel.INFO,
    }

    @nsightx.analyze.kernel(**(settings | options))
    def work(x: Any) -> None:
        _call(program, side, x)

    err = io.StringIO()
    with contextlib.redirect_stderr(err), warnings.catch_warnings(), around or contextlib.nullcontext():
        warnings.simplefilter("ignore")
        try:
            outcome: Any = work()
        except BaseException as e:  # compared with what left the function
            outcome = e
    return side, outcome, err.getvalue()


# --- the reference --------------------------------------------------------------------------------------------


@dataclass
class Expected:
    """What the docs say one measured run holds."""

    config: int
    run: int
    regions: list[tuple[str, bool]] = field(default_factory=list)
    """(name, failed) in closing order."""
    opened: list[str] = field(default_factory=list)
    """Names of the regions opened, in opening order (each asks the ANNOTATION collector once)."""


@dataclass
class Outcome:
    """What the reference says a whole call does."""

    done: list[Expected]
    """The measured runs that complete, in order."""
    events: list[list[tuple[str, ...]]]
    """Per call of the function, the events :func:`_region` notes."""
    stopped: Expected | None = None
    """The measured run from which an exception left the function (asked its collectors, then discarded)."""
    raised_by_function: bool = False
    """Whether an exception left the function (else, when the call fails, nsightx's first-run check raised)."""
    nothing_measured: bool = False
    """The first measured run opened no region: ``AnnotationError`` after it (docs/reliability.md, "Bad input")."""


def reference(program: Program) -> Outcome:
    """The measured runs that complete, every call's events as the docs predict them, and what stops the call.

    A call is (config, k): k < warmup is a warm-up run, discarded. The first call from which an exception leaves
    the function stops the sweep: no run after it exists, and it is not a completed run. A first measured run
    that opened no region is stored, then the call raises ``AnnotationError`` ("nothing was measured").
    """
    out = Outcome([], [])
    per_config = program.warmup + program.runs
    for ci in range(len(program.configs)):
        for k in range(per_config):
            script = program.scripts[k % len(program.scripts)]
            run = Expected(ci, k - program.warmup)
            used: set[str] = set()
            call: list[tuple[str, ...]] = []
            out.events.append(call)
            for s in script:
                if isinstance(s, Outside):
                    if s.caught:
                        continue
                    left: str | None = "Boom"
                else:
                    left = _events(s, None, used, run, call)
                if left is not None:
                    out.raised_by_function = True
                    out.stopped = run if k >= program.warmup else None
                    return out
            if k >= program.warmup:
                out.done.append(run)
                if len(out.done) == 1 and not run.regions:
                    out.nothing_measured = True
                    return out
    return out


def _events(step: Region, open_name: str | None, used: set[str], run: Expected, out: list[tuple[str, ...]]) -> Any:
    """:func:`simulate`, also writing the events :func:`_region` notes (opened, what left each region)."""
    if open_name is not None or step.name in used:
        left: str | None = "AnnotationError"
    else:
        used.add(step.name)
        run.opened.append(step.name)
        out.append(("open", step.name))
        inner: str | None = None
        if step.body == "raise":
            inner = "Boom"
        elif isinstance(step.body, Region):
            inner = _events(step.body, step.name, used, run, out)
        swallowed = inner is not None and step.ignore
        run.regions.append((step.name, swallowed))
        left = None if swallowed else inner
    if left is not None:
        out.append(("left", step.name, left))
    return None if step.catch else left


def _value(answer: Any) -> Any:
    """The stored value of a collector answer: None for a raise, else the answer."""
    return None if answer == RAISE else answer


def _same(a: Any, b: Any) -> bool:
    """Equal values, NaN equal to NaN, and of the same type (True is not 1)."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return type(a) is type(b) and a == b


def _missing(v: Any) -> bool:
    """Whether ``v`` is an empty collector value (None or NaN)."""
    return v is None or (isinstance(v, float) and math.isnan(v))


def _cell_matches(cell: Any, expected: Any) -> bool:
    """A frame cell against a stored value: an empty one (None or NaN) as any missing cell, else equal."""
    if _missing(expected):
        return bool(pd.isna(cell))
    if isinstance(expected, str):
        return cell == expected
    return not pd.isna(cell) and float(cell) == float(expected)


# --- comparisons ----------------------------------------------------------------------------------------------


def check_runs(result: Any, program: Program, done: list[Expected], where: str) -> None:
    """``data.runs``, ``records`` and both frames of ``result`` against the runs the reference completes."""
    runs = [r for r in result.data.runs if r.config >= 0]
    assert [(r.config, r.run) for r in runs] == [(e.config, e.run) for e in done], where
    for got, exp in zip(runs, done, strict=True):
        assert [(g.annotation, g.failed) for g in got.regions] == exp.regions, (where, exp)
        assert all(g.host_ns >= 0 for g in got.regions), where
        live = [name for name, failed in exp.regions if not failed]
        records = [(rec.annotation, rec.config, rec.run, rec.kernel, rec.metric) for rec in got.records]
        assert records == [(name, exp.config, exp.run, "region", METRIC) for name in live], (where, exp)
        values = [(c.name, c.scope, c.config, c.run, c.annotation, c.value) for c in got.collectors]
        want: list[tuple[Any, ...]] = []
        if program.collectors:
            want.append(
                ("runval", "run", exp.config, exp.run, None, _value(_answer(program.run_answers, exp.config, exp.run)))
            )
            want += [
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
        assert len(values) == len(want), (where, values, want)
        for g, w in zip(values, want, strict=True):
            assert g[:5] == w[:5], (where, g, w)
            assert _same(g[5], w[5]), (where, g, w)
    check_records(result, done, where)
    check_runs_frame(result, program, done, where)
    check_frame(result, program, done, where)


def check_records(result: Any, done: list[Expected], where: str) -> None:
    """``records``: one per region that did not fail, with a finite time."""
    got = Counter((r.annotation, r.config, r.run) for r in result.records)
    want = Counter((name, e.config, e.run) for e in done for name, failed in e.regions if not failed)
    assert got == want, where
    assert all(math.isfinite(r.value) and r.value >= 0 for r in result.records), where


def check_runs_frame(result: Any, program: Program, done: list[Expected], where: str) -> None:
    """``runs_dataframe()``: one row per (run, region), NaN and ``failed`` for a failed one; collector cells."""
    frame = result.runs_dataframe()
    if not any(e.regions for e in done):
        assert len(frame) == 0, where
        return
    rows = list(zip(frame["Config"], frame["Run"], frame["Annotation"], frame["Metric"], strict=True))
    want = [(e.config, e.run, name, METRIC) for e in done for name, _ in e.regions]
    assert Counter(rows) == Counter(want), where
    failed = {(e.config, e.run, name) for e in done for name, f in e.regions if f}
    for i, (ci, r, name, _) in enumerate(rows):
        value, kernel = frame["Value"].iloc[i], frame["Kernel"].iloc[i]
        if (ci, r, name) in failed:
            assert pd.isna(value) and kernel == "failed", (where, ci, r, name)
        else:
            assert not pd.isna(value) and kernel == "region", (where, ci, r, name)
        assert _cell_matches(frame["x"].iloc[i], program.configs[ci]) or (
            program.configs[ci] is None and pd.isna(frame["x"].iloc[i])
        ), (where, ci)
        if program.collectors:
            run_value = _value(_answer(program.run_answers, ci, r))
            ann_value = _value(_answer(program.annotation_answers, ci, r, name))
            assert _cell_matches(frame["runval"].iloc[i], run_value), (where, ci, r, name, frame["runval"].iloc[i])
            assert _cell_matches(frame["annval"].iloc[i], ann_value), (where, ci, r, name, frame["annval"].iloc[i])


def check_frame(result: Any, program: Program, done: list[Expected], where: str) -> None:
    """``to_dataframe()``: a row per (annotation, config) that opened, ``NumRuns`` its runs that did not fail."""
    frame = result.to_dataframe()
    want: Counter[tuple[str, int]] = Counter()
    present: set[tuple[str, int]] = set()
    for e in done:
        for name, failed in e.regions:
            present.add((name, e.config))
            want[(name, e.config)] += 0 if failed else 1
    if not present:  # no region at all (a first run that measured nothing): the docs say nothing of its columns
        assert len(frame) == 0, where
        return
    configs = _config_of_rows(frame, program)
    got = {(a, ci): int(n) for a, ci, n in zip(frame["Annotation"], configs, frame["NumRuns"], strict=True)}
    assert len(got) == len(frame), (where, "two rows of one (annotation, config)")
    assert set(got) == present, (where, sorted(got), sorted(present))
    for key in present:
        assert got[key] == want[key], (where, key, got[key], want[key])


def _config_of_rows(frame: pd.DataFrame, program: Program) -> list[int]:
    """The config index of each aggregated row: the first config of its annotation not taken whose value it equals.

    By equality, not type: pandas makes a column of ``1`` and ``1.0`` float (both rows are there, one per config).
    """
    out: list[int] = []
    taken: set[tuple[str, int]] = set()
    for annotation, cell in zip(frame["Annotation"], frame["x"], strict=True):
        matches = [
            ci
            for ci, v in enumerate(program.configs)
            if (annotation, ci) not in taken and ((v is None and _missing(cell)) or (v is not None and cell == v))
        ]
        assert matches, (cell, program.configs)
        taken.add((annotation, matches[0]))
        out.append(matches[0])
    return out


def check_stop(program: Program, side: Side, outcome: Any, stderr: str, ref: Outcome, folder: Path) -> None:
    """A call that raised: the right exception, one stop line counting the completed runs, the raw file's runs."""
    done = ref.done
    if ref.raised_by_function:
        assert side.raised is not None and outcome is side.raised, (outcome, side.raised)
    else:
        assert side.raised is None and isinstance(outcome, AnnotationError), outcome
        assert "nothing was measured" in str(outcome)
    lines = [line for line in stderr.splitlines() if "completed run(s)" in line]
    if not done:
        assert lines == [], stderr
    else:
        assert len(lines) == 1, stderr
        assert f"work stopped by {type(outcome).__name__} after {len(done)} completed run(s)" in lines[0], lines
    if program.output:
        raw = list(folder.glob("raw_data-*.jsonl"))
        assert len(raw) == 1, raw
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            loaded = nsightx.load(raw[0])
        if done:
            assert f"saved in {raw[0]}" in lines[0], lines
            check_runs(loaded, program, done, "raw file")
        else:
            assert [r for r in loaded.data.runs if r.config >= 0] == []


def check_collectors_asked(program: Program, side: Side, ref: Outcome) -> None:
    """The RUN collector is asked once per measured run, the ANNOTATION one once per region opened in one.

    Warm-up runs ask neither; the run that stops the sweep asks them too (its values are discarded with it).
    """
    runs = [*ref.done, *([ref.stopped] if ref.stopped is not None else [])]
    assert side.run_asked == [(e.config, e.run) for e in runs]
    assert side.annotation_asked == [(e.config, e.run, name) for e in runs for name in e.opened]


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    derandomize="NSIGHTX_REFERENCE_RANDOM" not in os.environ,
)
@given(program=programs())
def test_a_random_program_is_recorded_as_the_docs_say(program: Program, no_default_collectors: None) -> None:
    ref = reference(program)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        side, outcome, stderr = run_program(program, folder)
        # the function ran exactly the calls the reference predicts, each with its config's value and events
        assert len(side.calls) == len(ref.events), (len(side.calls), len(ref.events))
        per_config = program.warmup + program.runs
        for n, ((x, got), want) in enumerate(zip(side.calls, ref.events, strict=True)):
            assert _same(x, program.configs[n // per_config]) or x is program.configs[n // per_config]
            assert got == want, (n, got, want)
        if program.collectors:
            check_collectors_asked(program, side, ref)
        if ref.raised_by_function or ref.nothing_measured:
            check_stop(program, side, outcome, stderr, ref, folder)
            return
        assert side.raised is None and isinstance(outcome, nsightx.ProfileResults), outcome
        check_runs(outcome, program, ref.done, "result")
        for suffix in (".parquet", ".json"):
            path = outcome.save(folder / f"saved{suffix}")
            check_runs(nsightx.load(path), program, ref.done, f"saved {suffix}")
        if program.output:
            (raw,) = folder.glob("raw_data-*.jsonl")
            check_runs(nsightx.load(raw), program, ref.done, "raw file")


@pytest.fixture
def no_default_collectors(monkeypatch: pytest.MonkeyPatch) -> None:
    """A plugin host without default sets (no nvml), so only the program's collectors add columns."""
    from nsightx._pluginhost import plugins as _plugins

    host = _plugins.PluginHost(_plugins.LoaderSettings(autoload=False, blocked=("nvml",))).load()
    monkeypatch.setattr(_plugins, "_default", host)
