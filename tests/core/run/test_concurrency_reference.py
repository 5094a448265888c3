"""Concurrent and nested profiled calls against a naive reference, over random programs on the real host backend.

A random *program* is a few threads, started together, each making a few profiled calls of functions from one
shared pool (so the same decorated function is called from several threads), with configs given at call time
as a list or a generator, or at decoration as a generator; some functions write ``output_prefix`` files to one
shared folder. Per run, a function runs a script of steps: a region (``nsightx.annotate``) that passes, raises,
opens another region inside itself, or calls a profiled function of the pool inside itself; a profiled call
outside any region; each exception caught by the function, swallowed by ``ignore_failures`` or let out. Before
and after its calls (a barrier apart from every call), each thread opens regions outside any profiled call.

What the docs say each call's result must hold, whatever the threads' schedule:

- docs/reliability.md ("Threads and nested calls"), docs/api.md ("Threads and nesting"): calls from several
  threads are measured one after the other, each result holding exactly its own regions and runs; a profiled
  call inside a profiled call of the same thread (recursion included) raises ``NestedCallError`` before it does
  anything (no run of its body, no file); the outer call fails with it like with any exception of its function.
- docs/api.md (``annotate``): names unique within one run and no nesting (``AnnotationError``); with
  ``ignore_failures=True`` an exception inside the region is swallowed with a warning and the region failed;
  outside a profiled call ``annotate`` does nothing. ("Configs"): generators are fine.
- docs/reliability.md ("When a run fails", "When two sweeps share a folder"): an exception leaving the function
  stops the sweep and is re-raised unchanged; the raw file holds exactly the completed runs; every call gets its
  own tag, so each call's files are its own. ("Bad input"): a first measured run that opens no region is an
  ``AnnotationError`` ("nothing was measured").

Compared exactly, per call: the calls of the function body (config value, run, events), the outcome (result, or
the very exception), the runs (config, run, regions with their failed flag in closing order) and records; per
function, the multiset of its raw files and result files loaded back (which tag a call gets depends on the
schedule, so files are matched as a multiset); the number of "region raised" warnings.

Docs silent, so left out: a region opened by a thread that is neither in a profiled call nor started by the
profiled function *while* another thread's call measures (the run's state is process-wide, so it is taken into
that call's run; "annotate does nothing outside a profiled call" and "regions are process-wide" disagree there);
a region closed on another thread than the one that opened it (thr21's); which call waits, and so whether the
once-per-process ``ConcurrentCallWarning`` is given.
"""

from __future__ import annotations

import os
import tempfile
import threading
import time
import warnings
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import nsightx
from nsightx import AnnotationError

EXAMPLES = int(os.environ.get("NSIGHTX_REFERENCE_EXAMPLES", "60"))
"""Examples per run (more while hunting: ``NSIGHTX_REFERENCE_EXAMPLES=300``)."""
TIMEOUT = 120.0
"""Seconds a thread may take (generous: a loaded 2-core CI box is slow, never this slow)."""
NAMES = ("a", "b")


class Boom(Exception):
    """What a program raises on purpose."""


# --- the program ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Region:
    """Open ``name``, run ``body``; ``catch``: the function catches what leaves the region.

    ``body``: ``"pass"``, ``"raise"`` (a :class:`Boom`), ``"nest"`` (opens region ``"n"`` inside: an
    ``AnnotationError``) or ``"call"`` (calls profiled function ``target`` of the pool: a ``NestedCallError``).
    """

    name: str
    ignore: bool
    body: str
    catch: bool
    target: int


@dataclass(frozen=True)
class CallOutside:
    """A profiled call of pool function ``target`` outside any region; ``catch``: the function catches it."""

    target: int
    catch: bool


@dataclass(frozen=True)
class Function:
    """One decorated function of the pool, ``g<index>``; ``decorated``: configs given at decoration (a generator)."""

    runs: int
    warmup: int
    output: bool
    decorated: tuple[int, ...] | None
    scripts: tuple[tuple[Any, ...], ...]


@dataclass(frozen=True)
class Call:
    """One profiled call a thread makes: function ``index``; call-time configs (a generator when ``gen``)."""

    index: int
    configs: tuple[int, ...]
    gen: bool


@dataclass
class Program:
    pool: list[Function]
    threads: list[list[Call]]
    loose: list[list[str]]
    """Per thread, names of the regions it opens (nested) outside any profiled call, before and after its calls."""


@dataclass
class Side:
    """What one call's function body did, kept by the calling thread while the call ran."""

    count: int = 0
    calls: list[tuple[Any, list[tuple[str, ...]]]] = field(default_factory=list)
    raised: BaseException | None = None


TARGETS = st.integers(0, 2)
region = st.builds(
    Region,
    st.sampled_from(NAMES),
    st.booleans(),
    st.sampled_from(["pass", "pass", "raise", "nest", "call"]),
    st.booleans(),
    TARGETS,
)
step = st.one_of(region, region, region, st.builds(CallOutside, TARGETS, st.booleans()))
function = st.builds(
    Function,
    st.integers(1, 3),
    st.integers(0, 1),
    st.booleans(),
    st.one_of(st.none(), st.lists(st.integers(0, 9), min_size=1, max_size=2, unique=True).map(tuple)),
    st.lists(st.lists(step, min_size=1, max_size=3).map(tuple), min_size=1, max_size=3).map(tuple),
)


@st.composite
def programs(draw: st.DrawFn) -> Program:
    pool = draw(st.lists(function, min_size=3, max_size=3))
    threads: list[list[Call]] = []
    n = 0
    for _ in range(draw(st.integers(2, 3))):
        calls = []
        for index in draw(st.lists(st.integers(0, 2), min_size=1, max_size=3)):
            size = draw(st.integers(1, 2))
            calls.append(Call(index, tuple(range(100 * n, 100 * n + size)), draw(st.booleans())))
            n += 1
        threads.append(calls)
    loose = [draw(st.lists(st.sampled_from(NAMES), max_size=2)) for _ in threads]
    return Program(pool, threads, loose)


def _script(fn: Function, x: int, k: int) -> tuple[Any, ...]:
    """The steps of call ``k`` (warm-up runs first) of config value ``x``: a pure function of both."""
    return fn.scripts[(7 * x + k) % len(fn.scripts)]


# --- running it -----------------------------------------------------------------------------------------------

_TLS = threading.local()
"""The :class:`Side` of the call the current thread makes."""


def _profiled(program: Program, folder: Path) -> list[Any]:
    """The pool, decorated: ``g<i>`` runs its scripts, noting every event in the calling thread's :class:`Side`."""
    out: list[Any] = []
    for i, fn in enumerate(program.pool):
        options: dict[str, Any] = {
            "runs": fn.runs,
            "warmup": fn.warmup,
            "backend": "host",
            "thermal_mode": "off",
            "verbosity": nsightx.VerbosityLevel.SILENT,
            "output_prefix": f"{folder}/" if fn.output else None,
            "output_csv": fn.output,
        }
        if fn.decorated is not None:
            options["configs"] = (v for v in fn.decorated)  # a generator at decoration
        body = _body(fn, out)
        body.__name__ = body.__qualname__ = f"g{i}"
        out.append(nsightx.analyze.kernel(**options)(body))
    return out


def _body(fn: Function, pool: list[Any]) -> Any:
    def body(x: int) -> None:
        side: Side = _TLS.side
        k = side.count % (fn.warmup + fn.runs)
        side.count += 1
        events: list[tuple[str, ...]] = []
        side.calls.append((x, events))
        try:
            for s in _script(fn, x, k):
                if isinstance(s, Region):
                    _region(s, events, pool)
                else:
                    try:
                        _call_inner(pool, s.target)
                    except Exception as e:
                        events.append(("left", "call", type(e).__name__))
                        if not s.catch:
                            raise
        except BaseException as e:
            side.raised = e
            raise

    return body


def _call_inner(pool: list[Any], target: int) -> None:
    """A profiled call with valid arguments (nested: it must raise ``NestedCallError`` before anything)."""
    inner = pool[target]
    if inner._decoration_configs:
        inner()
    else:
        inner(configs=[target + 50])


def _region(s: Region, events: list[tuple[str, ...]], pool: list[Any]) -> None:
    try:
        with nsightx.annotate(s.name, ignore_failures=s.ignore):
            events.append(("open", s.name))
            time.sleep(0.0002)  # workload that lets other threads run inside the region (not synchronisation)
            if s.body == "raise":
                raise Boom(s.name)
            if s.body == "nest":
                with nsightx.annotate("n"):
                    events.append(("open", "n"))  # never: regions cannot nest
            if s.body == "call":
                _call_inner(pool, s.target)
    except Exception as e:
        events.append(("left", s.name, type(e).__name__))
        if not s.catch:
            raise


def run_program(program: Program, folder: Path) -> tuple[dict[Call, tuple[Side, Any]], int]:
    """Every call's side record and outcome (result or exception), and the number of "region raised" warnings."""
    pool = _profiled(program, folder)
    out: dict[tuple[int, int], tuple[Side, Any]] = {}
    loose_errors: list[BaseException] = []
    start, done = threading.Barrier(len(program.threads)), threading.Barrier(len(program.threads))

    def loose(names: list[str]) -> None:
        try:
            for name in names:  # nested and repeated names: outside a call, annotate does nothing
                with nsightx.annotate(name), nsightx.annotate(name + "_inner"):
                    pass
        except BaseException as e:
            loose_errors.append(e)

    def thread(t: int) -> None:
        loose(program.loose[t])
        start.wait(TIMEOUT)  # no profiled call before every thread's loose regions are closed
        for c, call in enumerate(program.threads[t]):
            side = _TLS.side = Side()
            configs = (v for v in call.configs) if call.gen else list(call.configs)
            try:
                outcome: Any = (
                    pool[call.index]() if program.pool[call.index].decorated else pool[call.index](configs=configs)
                )
            except BaseException as e:
                outcome = e
            out[(t, c)] = (side, outcome)
        done.wait(TIMEOUT)  # every call is over before any loose region opens
        loose(program.loose[t])

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        threads = [threading.Thread(target=thread, args=(t,), name=f"t{t}") for t in range(len(program.threads))]
        for th in threads:
            th.start()
        for th in threads:
            th.join(TIMEOUT)
            assert not th.is_alive(), f"thread {th.name} still runs after {TIMEOUT} s"
    assert loose_errors == [], loose_errors
    raised = sum(1 for w in caught if str(w.message).startswith("region '") and " raised " in str(w.message))
    return {program.threads[t][c]: v for (t, c), v in out.items()}, raised


# --- the reference --------------------------------------------------------------------------------------------


@dataclass
class Expected:
    """One call as the docs say it goes."""

    done: list[tuple[int, int, tuple[tuple[str, bool], ...]]] = field(default_factory=list)
    """(config index, run, regions (name, failed) in closing order) of each completed measured run."""
    events: list[tuple[int, list[tuple[str, ...]]]] = field(default_factory=list)
    """Per call of the body: its config value and events."""
    raised: bool = False
    """An exception left the function (the call re-raises it)."""
    nothing_measured: bool = False
    """The first measured run opened no region: ``AnnotationError``."""
    swallowed: int = 0
    """Regions whose exception ``ignore_failures`` swallowed (each gives one warning), warm-up runs included."""


def reference(fn: Function, values: tuple[int, ...]) -> Expected:
    """The call of ``fn`` over config values ``values``: its runs, its body's events, how it ends."""
    out = Expected()
    for ci, x in enumerate(values):
        for k in range(fn.warmup + fn.runs):
            events: list[tuple[str, ...]] = []
            out.events.append((x, events))
            regions: list[tuple[str, bool]] = []
            used: set[str] = set()
            for s in _script(fn, x, k):
                left = _step(s, used, regions, events, out)
                if left is not None:
                    out.raised = True
                    return out
            if k >= fn.warmup:
                out.done.append((ci, k - fn.warmup, tuple(regions)))
                if len(out.done) == 1 and not regions:
                    out.nothing_measured = True
                    return out
    return out


def _step(s: Any, used: set[str], regions: list[Any], events: list[tuple[str, ...]], out: Expected) -> str | None:
    """One step: note its events and regions; the name of the exception that leaves the function, if any."""
    if isinstance(s, CallOutside):
        events.append(("left", "call", "NestedCallError"))
        return None if s.catch else "NestedCallError"
    if s.name in used:
        left: str | None = "AnnotationError"
    else:
        used.add(s.name)
        events.append(("open", s.name))
        inner = {"pass": None, "raise": "Boom", "nest": "AnnotationError", "call": "NestedCallError"}[s.body]
        swallowed = inner is not None and s.ignore
        out.swallowed += swallowed
        regions.append((s.name, swallowed))
        left = None if swallowed else inner
    if left is None:
        return None
    events.append(("left", s.name, left))
    return None if s.catch else left


# --- comparisons ----------------------------------------------------------------------------------------------


def _runs(result: Any) -> tuple[Any, ...]:
    """The runs of a result, file or not: (config, run, regions (name, failed), record names)."""
    return tuple(
        (
            r.config,
            r.run,
            tuple((g.annotation, g.failed) for g in r.regions),
            tuple((rec.annotation, rec.config, rec.run) for rec in r.records),
        )
        for r in result.data.runs
        if r.config >= 0
    )


def _want(exp: Expected) -> tuple[Any, ...]:
    return tuple((ci, run, regions, tuple((n, ci, run) for n, f in regions if not f)) for ci, run, regions in exp.done)


def _loaded(path: Path) -> tuple[Any, ...]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = nsightx.load(path)
    return (result.data.plan.function, tuple(c[0] for c in result.data.plan.configs), _runs(result))


def check_call(call: Call, fn: Function, side: Side, outcome: Any, exp: Expected) -> None:
    where = (call, fn)
    assert [(x, ev) for x, ev in side.calls] == exp.events, (where, side.calls, exp.events)
    if exp.raised:
        assert side.raised is not None and outcome is side.raised, (where, outcome, side.raised)
    elif exp.nothing_measured:
        assert side.raised is None and isinstance(outcome, AnnotationError), (where, outcome)
        assert "nothing was measured" in str(outcome), (where, outcome)
    else:
        assert side.raised is None and isinstance(outcome, nsightx.ProfileResults), (where, outcome)
        assert _runs(outcome) == _want(exp), (where, _runs(outcome), _want(exp))
        assert outcome.data.plan.function == f"g{call.index}", where


def check_program(program: Program, folder: Path) -> None:
    outcomes, warned = run_program(program, folder)
    raws: Counter[Any] = Counter()
    results: Counter[Any] = Counter()
    swallowed = 0
    for calls in program.threads:
        for call in calls:
            fn = program.pool[call.index]
            values = fn.decorated if fn.decorated is not None else call.configs
            exp = reference(fn, values)
            swallowed += exp.swallowed
            check_call(call, fn, *outcomes[call], exp)
            if fn.output:
                raws[(f"g{call.index}", values, _want(exp))] += 1
                if not (exp.raised or exp.nothing_measured):
                    results[(f"g{call.index}", values, _want(exp))] += 1
    assert warned == swallowed, (warned, swallowed)
    assert Counter(_loaded(p) for p in folder.glob("raw_data-*.jsonl")) == raws
    assert Counter(_loaded(p) for p in folder.glob("result-*")) == results
    check_csvs(folder)


def check_csvs(folder: Path) -> None:
    """Each result file has its two CSVs, of the same tag and the same rows; no other file is there."""
    others = {p.name for p in folder.iterdir() if not p.name.startswith(("raw_data-", "result-"))}
    for path in folder.glob("result-*.parquet"):
        tag = path.name.removeprefix("result-").removesuffix(".parquet")
        result = nsightx.load(path)
        for name, frame in (
            (f"profiled_data-{tag}.csv", result.runs_dataframe()),
            (f"processed_data-{tag}.csv", result.to_dataframe()),
        ):
            assert name in others, (name, sorted(others))
            others.remove(name)
            csv = pd.read_csv(folder / name, dtype=str, keep_default_na=False)
            assert Counter(csv["Annotation"]) == Counter(frame["Annotation"]), name
    assert others == set()


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    derandomize="NSIGHTX_REFERENCE_RANDOM" not in os.environ,
)
@given(program=programs())
def test_concurrent_and_nested_calls_each_hold_exactly_what_the_docs_say(
    program: Program, no_default_collectors: None
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        check_program(program, Path(tmp))


@pytest.fixture
def no_default_collectors(monkeypatch: pytest.MonkeyPatch) -> None:
    """A plugin host without default sets (no nvml), so only the program's regions are measured."""
    from nsightx._pluginhost import plugins as _plugins

    host = _plugins.PluginHost(_plugins.LoaderSettings(autoload=False, blocked=("nvml",))).load()
    monkeypatch.setattr(_plugins, "_default", host)
