"""The after phase of a small GPU call, reproduced on CPU (a probe for issue 35's whole call).

``call_phases.py`` splits the matmul sweep's call on the GPU; its **after** phase (from the session's
``collect_runs`` return until the call returns) cost 1.0 ms on events and 1.3 ms on cupti (H100). This probe
replays that phase without a GPU:

- ``cupti`` / ``events``: the runs of ``tests/fixtures/gpu-results/sweep-{cupti,events}.parquet`` (the sweep's real
  H100 results: 4 configs x 10 runs and the ONCE run, the nvml plugin's values) handed to a sink as the run loop
  hands them (compact rows, records as ``Record`` objects, collector values as tuples), then what the call does
  after its loop: the sink's close, the environment and provenance (in a tree that asks the call's facts while
  the GPU works, ``nsightx._api.callfacts``, they are asked before the clock starts, as during the wait, and
  only added after it; the ``cupti`` runs are expected and the frame's pieces computed from them before the
  clock starts too, as during a profiled call's wait), and ``build_results`` with the plan's
  ``combine_kernel_metrics=operator.add`` (the split-K 512 runs have two kernels a region, so combine works);
- ``events-loop`` / ``cupti-loop``: the same runs as the run loop of a deferred session leaves them: the nvml
  plugin's values of a run as its one answer (a ``RunValues`` over the sample it shares with other runs, as
  ``gather_run`` keeps it), every run but the last handed to the sink during the wait (untimed, with the sink's
  ``build_ahead`` at each config's end, as ``_write_pending`` calls it), then, timed, the last run's hand-over
  and what ``events`` times after it;
- ``cupti-rows``: the ``cupti`` runs as the deferred cupti session and the run loop hand them over: the session's
  ``collect_runs`` mapping (records as ``record_rows`` tuples, no record object), written by the run loop's own
  ``_write_pending`` (the sink's ``expect_runs`` and ``prepare_frame`` before the wait, untimed), timed from
  ``collect_runs``' return (``_run_row`` and ``add_run`` per run), then what ``cupti`` times after its runs;
- ``host``: the host backend's 4 x 11 call (``combine_kernel_metrics=operator.add``, silent), timed from the end
  of its last run (``_Sweep.run`` returns) until the call returns: the collectors' stop, the session's close,
  its environment, the first-run check's aftermath and the call's tail, as on the GPU;
- ``host+nvml``: the same call with the nvml plugin's collectors over the NVML double the tests use
  (``tests/nvml_double.py``; no sampler thread, as there): their stop and release and seven values a run in the
  result.

It does not replay the cupti tracer's stop (GPU only).

On this CPU the replay has no CUDA driver, so ``gpu_facts`` tries to find a loaded ``libcuda`` at every call (on
the GPU machine the library is loaded and, since after8, its answers are kept).

Each figure is the median over ``--reps`` rounds of the per-call time (microseconds), the three interleaved.

Usage: ``python benchmarks/after_phase.py [--reps 30] [--tree OTHER_TREE] [--case NAME ...] [--json FILE]
[--profile FILE]``.
"""

from __future__ import annotations

import argparse
import cProfile
import functools
import io
import json
import operator
import pstats
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
FIXTURES = HERE.parent / "tests" / "fixtures" / "gpu-results"


def use_tree(tree: str | None) -> dict[str, Any]:
    """Put ``tree`` first on ``sys.path`` (before importing nsightx); say which nsightx is imported."""
    if tree:
        root = Path(tree).resolve()
        for sub in ("plugins", "backends", ""):
            sys.path.insert(0, str(root / sub) if sub else str(root))
    import nsightx

    return {"tree": tree, "nsightx_file": nsightx.__file__}


def loop_rows(runs: Any) -> list[tuple[Any, ...]]:
    """The runs as the run loop hands them to the sink (``_run_row``): compact rows."""
    rows = []
    for run in runs:
        regions = tuple((g.annotation, g.host_ns, g.failed) for g in run.regions)
        attributes = {g.annotation: g.attributes for g in run.regions if g.attributes}
        values = tuple((v.name, v.scope, v.config, v.run, v.annotation, v.value) for v in run.collectors)
        rows.append((run.config, run.run, tuple(run.records), regions, attributes, values))
    return rows


def answer_rows(rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """``rows`` with each run's nvml values (all RUN values after the guard's first) as the one answer they were."""
    from nsightx._results.rows import RunValues

    samples: dict[tuple[Any, ...], dict[str, Any]] = {}
    out = []
    for row in rows:
        values = row[5]
        if row[0] < 0 or len(values) < 3:
            out.append(row)
            continue
        guard, *shared, own = values
        key = tuple((v[0], v[5]) for v in shared)
        sample = samples.setdefault(key, dict(key))  # one mapping per sample, shared by the runs that took it
        out.append((*row[:5], (guard, RunValues(sample, own[0], own[5]))))
    return out


def gpu_after_loop(fixture: Path) -> Callable[[], float]:
    """One replay of a deferred call's after phase, its runs as the run loop hands them (see the docstring)."""
    import nsightx
    from nsightx._results.sink import RunSink

    data = nsightx.load(fixture).data
    rows = answer_rows(loop_rows(data.runs))
    backend_env = {k: v for k, v in data.environment.items() if k.startswith(("Cupti", "Events", "L2", "Flush"))}
    backend_env.update(GPU=data.environment.get("GPU"), Device=0)
    configs = [tuple(c) for c in data.plan.configs]
    ahead = _call_facts()

    def after() -> float:
        facts = ahead()  # during the wait: the facts, then every run but the last as it comes back
        sink = RunSink()
        for row, following in zip(rows, rows[1:], strict=False):  # noqa: RUF007 - the last has none
            sink.add_run(row)
            if row[0] >= 0 and following[0] != row[0]:
                sink.build_ahead()
        t0 = time.perf_counter_ns()
        sink.add_run(rows[-1])
        _finish(sink, backend_env, facts, data.plan, configs)
        return (time.perf_counter_ns() - t0) / 1e3

    return after


def _finish(sink: Any, backend_env: dict[str, Any], facts: Any, plan: Any, configs: list[tuple[Any, ...]]) -> Any:
    """The end of the after phase, as the call does it: close the sink, the environment, the result (returned).

    ``facts`` of a tree without ``CallFacts`` is ``None``: its ``_add_environment`` asks for them itself.
    """
    from nsightx._api.kernel import _add_environment
    from nsightx._results.profileresults import build_results
    from nsightx._results.schema import gc_paused

    sink.close()
    environment = dict(backend_env)
    if facts is None:
        _add_environment(environment, None, None)
    else:
        _add_environment(environment, None, None, facts)
    with gc_paused():
        return build_results(plan, sink.stored(), environment, combine=operator.add, configs=configs)


def _call_facts() -> Callable[[], Any]:
    """What makes a call's facts before its last wait: a prepared ``CallFacts`` (a tree without one: ``None``)."""
    try:
        from nsightx._api.callfacts import CallFacts
    except ImportError:
        return lambda: None

    def prepared() -> Any:
        facts = CallFacts()
        facts.prepare()
        return facts

    return prepared


def gpu_after(fixture: Path, expected: bool = False) -> Callable[[], float]:
    """One replay of the after phase of the call that made ``fixture`` (a fresh sink, result and environment).

    The replay returns its microseconds: what a tree does while the GPU works (the call's facts) is not timed.
    ``expected``: a session collected in batches (cupti), whose runs' rows without outputs the run loop hands the
    sink before the wait (``expect_runs``), then has the frame's pieces computed from them (``prepare_frame``,
    untimed, as during the wait; a tree since after23 keeps their columns for the result too).
    """
    import nsightx
    from nsightx._results.sink import RunSink

    saved = nsightx.load(fixture)
    data = saved.data
    rows = loop_rows(data.runs)
    backend_env = {k: v for k, v in data.environment.items() if k.startswith(("Cupti", "Events", "L2", "Flush"))}
    backend_env.update(GPU=data.environment.get("GPU"), Device=0)
    configs = [tuple(c) for c in data.plan.configs]

    ahead = _call_facts()

    bare = [(c, r, (), regions, {}, values) for c, r, _, regions, _, values in rows]

    def after() -> float:
        facts = ahead()  # during the wait: the facts and, in a tree that has it, the expected runs' columns
        sink = RunSink()
        if expected:
            sink.expect_runs(bare)
            sink.prepare_frame()
        t0 = time.perf_counter_ns()
        for row in rows:
            sink.add_run(row)
        _finish(sink, backend_env, facts, data.plan, configs)
        return (time.perf_counter_ns() - t0) / 1e3

    return after


def gpu_after_rows(fixture: Path) -> Callable[[], float]:
    """One replay of cupti's after phase through the run loop's own hand-over (see the docstring's ``cupti-rows``).

    The measured runs are the pending runs of a deferred call's one batch: their values as the run loop keeps them
    (:func:`answer_rows`), their outputs as the cupti session's ``collect_runs`` makes them (no record object: the
    records as ``record_rows`` tuples, the regions' attributes). ``_write_pending`` is called as the loop calls it
    (the sink's ``expect_runs`` and ``prepare_frame`` before the wait, untimed), the clock starting when the
    session's ``collect_runs`` returns; then the sink's close, the environment and the result, as ``cupti``.
    """
    import nsightx
    from nsightx._results.records import RunRecords
    from nsightx._results.sink import RunSink
    from nsightx._run import loop
    from nsightx._run.backend import RunOutput

    data = nsightx.load(fixture).data
    runs = [run for run in data.runs if run.config >= 0]
    once = [run for run in data.runs if run.config < 0]
    values = [row[5] for row in answer_rows(loop_rows(runs))]
    outputs = {
        (run.config, run.run): RunOutput(
            [],
            {g.annotation: dict(g.attributes) for g in run.regions if g.attributes},
            [(x.annotation, x.config, x.run, x.kernel, x.metric, x.value, x.unit, x.seq) for x in run.records],
        )
        for run in runs
    }
    states = [_State(tuple((g.annotation, g.host_ns, g.failed) for g in run.regions)) for run in runs]
    backend_env = {k: v for k, v in data.environment.items() if k.startswith(("Cupti", "Events", "L2", "Flush"))}
    backend_env.update(GPU=data.environment.get("GPU"), Device=0)
    configs = [tuple(c) for c in data.plan.configs]
    ahead = _call_facts()
    clock = [0]

    def collect_runs() -> Any:
        got = dict(outputs)  # the session's mapping, made for each call
        clock[0] = time.perf_counter_ns()
        return got

    def after() -> float:
        facts = ahead()
        sink = RunSink()
        for run in once:
            sink.write(RunRecords(run.config, run.run, collectors=run.collectors))
        pending: list[Any] = [
            (run.config, run.run, state, RunOutput([], {}), v)
            for run, state, v in zip(runs, states, values, strict=True)
        ]
        session = _session(collect_runs)
        hand, waiting = loop._hand_over(sink), [sink.prepare_frame]
        loop._write_pending(
            session,
            hand,
            pending,
            _NO_COLLECTORS,  # type: ignore[arg-type]
            collect=True,
            waiting=waiting,
            expect=sink.expect_runs,
            blocked=sink.note_blocked,
            unreturned=[],
        )
        _finish(sink, backend_env, facts, data.plan, configs)
        return (time.perf_counter_ns() - clock[0]) / 1e3

    return after


class _State:
    """A run's state as ``_run_row`` reads it: its regions."""

    def __init__(self, regions: tuple[Any, ...]) -> None:
        self.regions = regions


class _NoCollectors:
    """The run loop's collectors as ``_write_pending`` asks them: each run's values are a tuple, nothing to make."""

    @staticmethod
    def materialize(values: Any) -> list[Any]:
        return list(values)


_NO_COLLECTORS = _NoCollectors()


def _session(collect_runs: Callable[[], Any]) -> Any:
    """A deferred session that hands its runs back as one mapping (cupti's way): ``collect_runs``, and the
    default ``completed_runs`` over it, the one thing ``_write_pending`` asks of a session."""
    from nsightx._run.backend import Session

    class Replayed(Session):
        deferred = True

        def region_enter(self, region: Any) -> None:
            pass

        def region_exit(self, region: Any, failed: bool) -> None:
            pass

        def finish_run(self, config: int, run: int) -> Any:
            raise NotImplementedError

        @classmethod
        def availability(cls) -> Any:
            raise NotImplementedError

    session = Replayed()
    session.collect_runs = collect_runs  # type: ignore[method-assign]
    return session


def use_nvml_double() -> None:
    """The nvml plugin's collectors over the tests' NVML double (one H200), as ``tests/plugins/nvml`` install it."""
    import pytest

    sys.path.insert(0, str(HERE.parent / "tests"))
    from nvml_double import GPU_A, FakeGpu, install

    install(pytest.MonkeyPatch(), [FakeGpu(GPU_A)])


class HostCall:
    """The host backend's 4 x 11 call, its after phase timed from its last run's end to the call's return."""

    def __init__(self) -> None:
        import nsightx
        from nsightx._run import loop

        self.end = 0
        inner = loop._Sweep.run

        def timed(sweep: Any) -> Any:
            out = inner(sweep)
            self.end = time.perf_counter_ns()
            return out

        loop._Sweep.run = timed  # type: ignore[method-assign]

        @nsightx.analyze.kernel(
            configs=[(n,) for n in (1, 2, 3, 4)],
            runs=11,
            backend="host",
            combine_kernel_metrics=operator.add,
            verbosity=nsightx.VerbosityLevel.SILENT,  # no done line per call on stderr
        )
        def work(n: int) -> None:
            with nsightx.annotate("work"):
                sum(range(n))

        self.fn = work

    def __call__(self) -> float:
        """One call; the after phase's microseconds."""
        self.fn()
        return (time.perf_counter_ns() - self.end) / 1e3


_NVML: dict[str, Any] = {}


def with_nvml(call: HostCall) -> float:
    """``call`` with the nvml double in place (the plugin's provider set back to the real one after it)."""
    from nsightx_nvml import _collectors

    if not _NVML:
        real = _collectors._provider
        use_nvml_double()
        _NVML.update(real=real, double=_collectors._provider)
    _collectors._provider = _NVML["double"]
    try:
        return call()
    finally:
        _collectors._provider = _NVML["real"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--tree", help="source tree of the nsightx to measure (default: the importable one)")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--case", action="append", help="time only this case (repeat for more; default: every case)")
    ap.add_argument("--profile", type=Path, help="write a cProfile of 50 cupti replays here")
    args = ap.parse_args()
    info = use_tree(args.tree)
    cases: dict[str, Callable[[], float]] = {}
    for name in ("cupti", "events"):
        cases[name] = gpu_after(FIXTURES / f"sweep-{name}.parquet", expected=name == "cupti")
        cases[f"{name}-loop"] = gpu_after_loop(FIXTURES / f"sweep-{name}.parquet")
    cases["cupti-rows"] = gpu_after_rows(FIXTURES / "sweep-cupti.parquet")
    host = HostCall()
    cases["host"] = host
    cases["host+nvml"] = functools.partial(with_nvml, host)
    if args.case:
        cases = {name: cases[name] for name in args.case}
    for case in cases.values():  # warm: imports, caches, first-call costs
        for _ in range(3):
            case()
    times: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(args.reps):
        for name, case in cases.items():
            times[name].append(case())
    out: dict[str, Any] = {**info, "reps": args.reps}
    print(json.dumps(info))
    for name, ts in times.items():
        out[name] = {"median_us": statistics.median(ts), "min_us": min(ts)}
        print(f"{name}: after phase median {statistics.median(ts):.0f} us, min {min(ts):.0f} us")
    if args.json:
        args.json.write_text(json.dumps(out, indent=1), encoding="utf-8")
    if args.profile:
        after = gpu_after(FIXTURES / "sweep-cupti.parquet", expected=True)
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(50):
            after()
        prof.disable()
        text = io.StringIO()
        pstats.Stats(prof, stream=text).sort_stats("cumulative").print_stats(50)
        args.profile.write_text(text.getvalue(), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
