"""What one run costs beside an empty region on the host backend, and whether it grows with the size of the call.

    python benchmarks/run_loop_cost.py [--sizes 1000,10000,100000,300000] [--reps 3]
                                       [--tree PATH ...] [--gc-variants] [--prefreeze] [--derive] [--deferred]
                                       [--json OUT]

For each size N a profiled call with ``runs=N``, ``warmup=0`` and one empty region (``with nsightx.annotate``)
is timed end to end on the host backend with the default collectors (the nvml set: on a machine without NVML
it has nothing to say), in a fresh process each time, so that the heap the garbage collector walks is the
same for every tree. Beside it the same process times the bare loop: the undecorated function called N times
(the ``annotate`` in it then does nothing). Reported per run, in CPU time of the process (steadier than wall
time on a shared machine; wall time is kept in the JSON): the call, the bare loop, the part of the call spent in
the run stage (``execute``: the run loop and the sink; the rest is mostly building the result), the part spent
in the garbage collector (through ``gc.callbacks``), and how many full collections ran.

``--tree`` (repeatable) measures other source trees (their ``nsightx``, ``backends`` and ``plugins`` first on
``PYTHONPATH``) in the same run, alternating trees within each repetition, so that before/after ratios come
from one run on a shared machine. ``--gc-variants`` also measures this tree with the garbage collector handled
in other ways, for comparison: ``nofreeze`` (never freezes: ``nsightx._run.heap.FREEZE_EVERY`` out of reach),
``threshold`` (never freezes, gen-0 threshold 100,000 for the call) and ``off`` (collector disabled for the
call: the floor). ``--prefreeze`` makes every child process call ``gc.freeze()`` once at its start, before it
imports nsightx, as the GPU machine's Python has objects frozen at start-up (375, session 18): there
:func:`nsightx._run.heap.holding` cannot freeze (it would unfreeze the process's objects too) and takes its pause
mode instead (trees before it took no measure at all there). ``--derive`` gives the call a ``derive_metric``,
so that building the result makes every run's objects (what :func:`nsightx._run.heap.settle` is for).
``--deferred`` takes the path of a GPU backend's runs (a deferred session on the host backend, see
:func:`_install_deferred`: the runs are handed over in batches, as rows). ``--json`` writes every number.

``--nvml`` measures instead what the nvml plugin (its RUN collector and the thermal guard) costs each run: see
:func:`nvml_main`; with ``--deferred``, on the path a GPU backend's runs take (a deferred session, see
:func:`_install_deferred`), also with ``to_dataframe()``. ``--fixed`` measures instead what a call costs
whatever its number of runs: see :func:`fixed_main`. ``--events`` measures instead the events session's own work
per run, with torch and the CUDA driver as the tests' doubles: see :func:`events_main`.
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import inspect
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


CHILD_FLAGS = ("prefreeze", "derive", "deferred")
"""The options of the main mode that its children take too (see the module's docstring)."""


def child(runs: int, variant: str, flags: frozenset[str] = frozenset()) -> dict[str, Any]:
    """Time one call of ``runs`` runs and the bare loop in this process (the tree is set by ``PYTHONPATH``).

    ``flags`` (of :data:`CHILD_FLAGS`): ``prefreeze``, the objects of the process are frozen first, before nsightx
    is imported; ``derive``, the call has a ``derive_metric`` (the result then makes every run's objects);
    ``deferred``, the host session is deferred (a GPU backend's path).
    """
    if "prefreeze" in flags:
        gc.freeze()
    frozen = gc.get_freeze_count()
    import nsightx
    from nsightx._api import kernel as _kernel

    if "deferred" in flags:
        _install_deferred()
    derive = "derive" in flags

    if variant != "default":
        from nsightx._run import heap

        heap.FREEZE_EVERY = 1 << 62

    def body() -> None:
        with nsightx.annotate("r"):
            pass

    silent = nsightx.VerbosityLevel.SILENT
    extra: dict[str, Any] = {"derive_metric": lambda t: (t, "ns")} if derive else {}
    warm = nsightx.analyze.kernel(runs=200, warmup=0, backend="host", verbosity=silent, **extra)(body)
    call = nsightx.analyze.kernel(runs=runs, warmup=0, backend="host", verbosity=silent, **extra)(body)
    warm()  # plugins loaded, caches filled

    execute = _kernel.execute
    spent = {"execute": 0.0, "gc": 0.0, "full": 0}
    gc_start = [0.0]

    def timed_execute(*args: Any, **kwargs: Any) -> Any:
        t0 = time.process_time()
        try:
            return execute(*args, **kwargs)
        finally:
            spent["execute"] += time.process_time() - t0

    def on_gc(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            gc_start[0] = time.process_time()
        else:
            spent["gc"] += time.process_time() - gc_start[0]
            spent["full"] += info["generation"] == 2

    _kernel.execute = timed_execute
    gc.callbacks.append(on_gc)
    thresholds = gc.get_threshold()
    if variant == "threshold":
        gc.set_threshold(100_000, *thresholds[1:])
    elif variant == "off":
        gc.disable()
    t0, c0 = time.perf_counter(), time.process_time()
    result = call()
    elapsed, cpu = time.perf_counter() - t0, time.process_time() - c0
    gc.enable()
    gc.set_threshold(*thresholds)
    gc.callbacks.remove(on_gc)
    assert len(result.to_dataframe()) == (2 if derive else 1)  # a derived metric has its own row
    del result
    c0 = time.process_time()
    for _ in range(runs):
        body()
    bare = time.process_time() - c0
    return {
        "runs": runs,
        "call_us": cpu * 1e6 / runs,
        "wall_us": elapsed * 1e6 / runs,
        "bare_us": bare * 1e6 / runs,
        "execute_us": spent["execute"] * 1e6 / runs,
        "gc_us": spent["gc"] * 1e6 / runs,
        "full_collections": spent["full"],
        "frozen_at_start": frozen,
    }


def run_child(tree: Path, runs: int, variant: str, flags: frozenset[str] = frozenset()) -> dict[str, Any]:
    """Run :func:`child` in a fresh process with ``tree`` first on the path."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(str(p) for p in (tree, tree / "backends", tree / "plugins"))
    out = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--child", str(runs), "--variant", variant]
        + [f"--{f}" for f in sorted(flags)],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode != 0:
        raise SystemExit(f"child for {tree} with {runs} runs failed:\n{out.stderr}")
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def flags_of(args: argparse.Namespace) -> frozenset[str]:
    """The :data:`CHILD_FLAGS` given on the command line."""
    return frozenset(f for f in CHILD_FLAGS if getattr(args, f))


def median_of(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The median of every number over the repetitions."""
    keys = [k for k in rows[0] if k != "runs"]
    return {"runs": rows[0]["runs"], **{k: statistics.median(r[k] for r in rows) for k in keys}}


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--sizes", default="1000,10000,100000,300000", help="runs per call, comma-separated")
    ap.add_argument("--reps", type=int, default=3, help="fresh processes per (tree, size); the median is shown")
    ap.add_argument("--tree", type=Path, action="append", default=[], help="another source tree to measure")
    ap.add_argument("--gc-variants", action="store_true", help="also this tree with the GC handled otherwise")
    ap.add_argument("--json", type=Path, help="write every number here")
    ap.add_argument("--prefreeze", action="store_true", help="children freeze objects first (as the GPU machine)")
    ap.add_argument("--derive", action="store_true", help="the call has a derive_metric (run objects are made)")
    ap.add_argument("--nvml", action="store_true", help="measure the nvml plugin's cost per run instead")
    ap.add_argument("--runs", type=int, default=20_000, help="--nvml: runs per call (and per parts loop)")
    ap.add_argument("--rounds", type=int, default=3, help="--nvml: off/nvml/parts rounds in each process")
    ap.add_argument("--samplers", default="process,thread", help="--nvml: comma-separated: process, thread")
    ap.add_argument("--deferred", action="store_true", help="through a deferred session (a GPU backend's path)")
    ap.add_argument(
        "--slow-clock-ns", type=int, default=0, help="--nvml: every host-clock read busy-waits this long (a slow host)"
    )
    ap.add_argument("--fixed", action="store_true", help="measure the fixed cost of a call instead")
    ap.add_argument("--calls", type=int, default=300, help="--fixed: timed calls per shape (the median is shown)")
    ap.add_argument("--events", action="store_true", help="measure the events session's work per run instead")
    ap.add_argument("--events-child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--fixed-child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--child", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--variant", default="default", help=argparse.SUPPRESS)
    ap.add_argument("--nvml-child", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--sampler", default="process", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child is not None:
        print(json.dumps(child(args.child, args.variant, flags_of(args))))
        return 0
    if args.nvml_child is not None:
        print(json.dumps(nvml_child(args.nvml_child, args.sampler, args.rounds, args.deferred, args.slow_clock_ns)))
        return 0
    if args.events_child:
        print(json.dumps(events_child(args.runs)))
        return 0
    if args.events:
        return events_main(args)
    if args.fixed_child:
        print(json.dumps(fixed_child(args.calls)))
        return 0
    if args.fixed:
        return fixed_main(args)
    if args.nvml:
        return nvml_main(args)
    here = HERE.parent
    cases = [(here, "default"), *[(t.resolve(), "default") for t in args.tree]]
    if args.gc_variants:
        cases += [(here, v) for v in VARIANTS]
    sizes = [int(float(s)) for s in args.sizes.split(",")]
    raw: dict[str, dict[int, list[dict[str, Any]]]] = {label(*c): {n: [] for n in sizes} for c in cases}
    for n in sizes:
        for _ in range(args.reps):
            for c in cases:
                raw[label(*c)][n].append(run_child(c[0], n, c[1], flags_of(args)))
    table = {k: {n: median_of(rows) for n, rows in by_size.items()} for k, by_size in raw.items()}
    print_table(table, sizes)
    if args.json:
        data = {"cases": list(table), "median": table, "raw": raw, "flags": sorted(flags_of(args))}
        args.json.write_text(json.dumps(data, indent=1))
    return 0


TESTS = HERE.parent / "tests"

FAKE_PYNVML = """
# The NVML double of tests/nvml_double.py as the ``pynvml`` module (written by this script for ``--nvml``).
from nvml_double import GPU_A, FakeGpu, FakeNvml

_fake = FakeNvml([FakeGpu(GPU_A)])


def __getattr__(name):
    return getattr(_fake, name)
"""


def _install_double(sampler: str) -> None:
    """Put the NVML double in place of ``pynvml`` (and the CUDA driver), for a sampler process or thread."""
    folder = tempfile.mkdtemp(prefix="nsightx-bench-nvml-")
    Path(folder, "pynvml.py").write_text(FAKE_PYNVML)
    sys.path[:0] = [folder, str(TESTS)]  # the sampler process gets this path too
    from nsightx_nvml import _collectors
    from nsightx_nvml._lib import import_pynvml
    from nvml_double import GPU_A, FakeCuda

    load: Any = import_pynvml  # the real loader: the plugin starts a sampler process
    if sampler == "thread":
        module = import_pynvml()
        load = lambda: module  # noqa: E731  # not the real loader: a sampler thread
    _collectors._provider = _collectors.Provider(load=load, cuda=FakeCuda({0: GPU_A[4:]}))


def _install_deferred() -> None:
    """Make the host backend's session deferred, as the events and cupti sessions are (for ``--nvml --deferred``).

    Its runs are handed back only by ``collect_runs``, each region one record of its host time, so the run loop
    takes the path of a GPU backend's runs (pending runs, written in batches) on the real host backend.
    """
    import nsightx_host

    from nsightx.ext import RunOutput, new_record

    class DeferredHostSession(nsightx_host.HostSession):  # type: ignore[misc]
        host_timed = False
        timed_records = None
        deferred = True

        def __init__(self) -> None:
            super().__init__()
            self._open: dict[Any, int] = {}
            self._done: list[tuple[Any, int]] = []
            self._finished: list[tuple[int, int]] = []

        def region_enter(self, region: Any) -> None:
            self._open[region] = time.perf_counter_ns()

        def region_exit(self, region: Any, failed: bool) -> None:
            self._done.append((region, time.perf_counter_ns() - self._open.pop(region)))

        def finish_run(self, config: int, run: int) -> Any:
            self._finished.append((config, run))
            return RunOutput()

        def collect_runs(self) -> dict[tuple[int, int], Any]:
            out = {key: RunOutput() for key in self._finished}
            self._finished = []
            for region, ns in self._done:
                record = new_record(
                    region.annotation, region.config, region.run, "region", nsightx_host.METRIC, ns, "ns", 0
                )
                out[(region.config, region.run)].records.append(record)
            self._done = []
            return out

    nsightx_host.HostSession = DeferredHostSession


def _slow_clocks(ns: int) -> None:
    """Make every read of :mod:`time`'s monotonic clocks take at least ``ns`` (a busy wait), before nsightx loads.

    What a host whose clock source is read through a system call (``hpet``, some virtual machines) pays for each
    read (``nsightx doctor`` prints the cost here). Installed before anything of nsightx is imported, so that the
    names its modules bind at import (``_clock = time.perf_counter_ns``) are the slow ones too. On Linux all four
    are CLOCK_MONOTONIC, so one real clock serves them; CPU time (``process_time``, what is reported) is not slowed.
    """
    real = time.perf_counter_ns

    def read_ns() -> int:
        end = real() + ns
        now = real()
        while now < end:
            now = real()
        return now

    def read_s() -> float:
        return read_ns() / 1e9

    time.perf_counter_ns = time.monotonic_ns = read_ns  # type: ignore[assignment]
    time.perf_counter = time.monotonic = read_s  # type: ignore[assignment]


def nvml_child(runs: int, sampler: str, rounds: int, deferred: bool = False, slow_ns: int = 0) -> dict[str, Any]:
    """Time ``off``, ``nvml`` and ``parts`` ``rounds`` times each in this process (tree set by ``PYTHONPATH``).

    ``deferred``: through a deferred session (:func:`_install_deferred`), and also ``off_df`` and ``nvml_df``,
    the call and ``to_dataframe()`` of its result. ``slow_ns``: every clock read costs that much (see
    :func:`_slow_clocks`).
    """
    if slow_ns:
        _slow_clocks(slow_ns)
    _install_double(sampler)
    if deferred:
        _install_deferred()
    import nsightx_host
    from nsightx_nvml._collectors import NvmlTemperatureSource

    import nsightx
    from nsightx._api import kernel as _kernel
    from nsightx._enums import CollectionScope
    from nsightx._run import loop as loop_module
    from nsightx._run.loop import _Collectors
    from nsightx._run.thermal import make_guard

    mode = {"now": "nvml"}
    plans: list[Any] = []
    execute = _kernel.execute

    def as_gpu_call(backend: Any, plan: Any, sink: Any) -> Any:
        if mode["now"] == "nvml":
            thermal = dataclasses.replace(plan.thermal, source=NvmlTemperatureSource(plan.device))
            plan = dataclasses.replace(plan, needs_gpu=True, thermal=thermal)
        else:
            kept = tuple(c for c in plan.collectors if not c.name.startswith("nvml"))
            plan = dataclasses.replace(plan, collectors=kept, thermal=dataclasses.replace(plan.thermal, mode="off"))
        plans.append(plan)
        return execute(backend, plan, sink)

    _kernel.execute = as_gpu_call

    def body() -> None:
        with nsightx.annotate("r"):
            pass

    silent = nsightx.VerbosityLevel.SILENT
    call = nsightx.analyze.kernel(runs=runs, warmup=0, backend="host", verbosity=silent)(body)
    for m in ("off", "nvml"):  # plugins loaded, the sampler started, caches filled
        mode["now"] = m
        call()
    nvml_plan = plans[-1]

    def timed_call(m: str) -> float:
        mode["now"] = m
        c0 = time.process_time()
        call()
        return (time.process_time() - c0) * 1e6 / runs

    def timed_frame(m: str) -> float:
        mode["now"] = m
        c0 = time.process_time()
        call().to_dataframe()
        return (time.process_time() - c0) * 1e6 / runs

    def timed_parts() -> float:
        collectors = _Collectors(nvml_plan)
        collectors.start()
        guard = make_guard(nvml_plan)
        try:
            materialize, run_scope = collectors.materialize, CollectionScope.RUN
            rows = getattr(collectors, "collect_run", None)  # what the tree's run loop calls
            ask = rows if rows is not None else lambda ci, r: collectors.gather(run_scope, config=ci, run=r)
            clock = getattr(loop_module, "_run_clock", None)  # a tree whose loop reads the clock once a run
            runner = loop_module._Runner(nvml_plan, nsightx_host.HostSession(), collectors, lambda p, c: None)
            c0 = time.process_time()
            if deferred and clock is not None and hasattr(runner, "deferred_values"):  # the deferred loop's path
                takes_ci = "ci" in inspect.signature(runner.deferred_values).parameters
                before, values_of = runner.deferred_values(0) if takes_ci else runner.deferred_values()
                for r in range(runs):
                    now = clock()
                    before(now)
                    values = values_of(0, r, now)
                    tuple(values) if type(values) is tuple else tuple(materialize(values))  # as _write_pending
            elif clock is not None:
                for r in range(runs):
                    now = clock()
                    guard.before_run(now)
                    materialize(guard.take_values(0, r) + ask(0, r, now))
            else:
                for r in range(runs):
                    guard.before_run()
                    values = guard.take_values(0, r) + ask(0, r)
                    materialize(values)
            return (time.process_time() - c0) * 1e6 / runs
        finally:
            collectors.stop()

    out: dict[str, list[float]] = {"off": [], "nvml": [], "parts": []}
    if deferred:
        out.update(off_df=[], nvml_df=[])
    for _ in range(rounds):
        out["off"].append(timed_call("off"))
        out["nvml"].append(timed_call("nvml"))
        out["parts"].append(timed_parts())
        if deferred:
            out["off_df"].append(timed_frame("off"))
            out["nvml_df"].append(timed_frame("nvml"))
    from nsightx_nvml import _sampler

    kinds = {type(s.sampler).__name__ for s in _sampler._leases.values()} | {
        type(s).__name__ for s in _sampler._parked.values()
    }
    frames = {f"{k}_us": statistics.median(out[k]) for k in ("off_df", "nvml_df") if k in out}
    return {
        "runs": runs,
        "deferred": deferred,
        **frames,
        "sampler_class": sorted(kinds),
        "off_us": statistics.median(out["off"]),
        "nvml_us": statistics.median(out["nvml"]),
        "nvml_minus_off_us": statistics.median(n - o for n, o in zip(out["nvml"], out["off"], strict=True)),
        "parts_us": statistics.median(out["parts"]),
        "raw": out,
    }


def nvml_run_child(
    tree: Path, runs: int, sampler: str, rounds: int, deferred: bool = False, slow_ns: int = 0
) -> dict[str, Any]:
    """Run :func:`nvml_child` in a fresh process with ``tree`` first on the path."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(str(p) for p in (tree, tree / "backends", tree / "plugins"))
    env.pop("NSIGHTX_BLOCK_PLUGINS", None)
    argv = [sys.executable, str(Path(__file__).resolve()), "--nvml-child", str(runs), "--sampler", sampler]
    argv += ["--deferred"] if deferred else []
    argv += ["--slow-clock-ns", str(slow_ns)] if slow_ns else []
    out = subprocess.run([*argv, "--rounds", str(rounds)], env=env, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise SystemExit(f"child for {tree} ({sampler}) failed:\n{out.stderr}")
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def nvml_main(args: argparse.Namespace) -> int:
    """What the nvml plugin costs each run on the CPU: the thermal guard and the RUN collector, on the run loop's path.

        python benchmarks/run_loop_cost.py --nvml [--runs 20000] [--reps 3] [--rounds 3]
                                           [--samplers process,thread] [--deferred] [--slow-clock-ns NS]
                                           [--tree PATH ...] [--json OUT]

    On the GPU the nvml plugin added ~22 us to every run of a 16 KiB op (issue 35's run-loop target: 1.10x the bare
    loop, so ~1-2 us for the plugin). Most of that is Python on the host, which this measures without a GPU: NVML
    is the scripted double of ``tests/nvml_double.py`` (the library boundary, installed as the ``pynvml`` module,
    so that the plugin takes the path it takes on a GPU machine: a sampler *process* reading the double, or with
    ``thread`` a sampler thread), the CUDA driver a double that answers device 0 (CUDA is up). The host backend
    cannot be guarded (it measures no GPU), so the plan of each call is changed on its way to the run loop: it
    says it measures a GPU and carries the nvml temperature source, as a GPU call's plan does.

    Each child process times, on the real host backend and run loop, a call of ``--runs`` runs, each an empty region
    (``with nsightx.annotate``), alternately:

    - ``off``: without the nvml collectors and the guard (the loop's plain path; what a call costs without NVML);
    - ``nvml``: with both, as a GPU call has them;
    - ``parts``: the per-run work alone, outside a call, ``--runs`` times: ``guard.before_run()``,
      ``guard.take_values()``, the RUN collectors called as the tree's run loop calls them (``collect_run``, or
      ``gather`` in trees before it; in a tree with ``loop._run_clock`` the clock read once and handed to both)
      and ``materialize`` (what the loop does with their answers when it writes the run). With ``--deferred``, in
      a tree whose runner has ``deferred_values``, what the deferred loop calls instead (its guard check and
      values, and what :func:`_write_pending` makes of them).

    Reported per run, in CPU time of the measuring process (a sampler thread's reads count, a sampler process's do
    not): ``nvml - off``, the plugin's part of a run (the headline), and ``parts``. With ``--deferred`` the host
    session is made deferred (:func:`_install_deferred`), so the calls take the path of a GPU backend's runs, and
    ``off+df`` and ``nvml+df`` time each call with ``to_dataframe()`` of its result too. ``--tree`` (repeatable)
    measures other source trees in the same run, alternating trees within each repetition, so before/after ratios
    come from one run on a shared machine. ``--slow-clock-ns NS`` makes every read of the host clock in the
    measuring process busy-wait NS ns (:func:`_slow_clocks`): what a host with a slow clock source gains from
    fewer reads. ``--json`` writes every number.
    """
    trees = [HERE.parent, *[t.resolve() for t in args.tree]]
    samplers = args.samplers.split(",")
    raw: dict[str, list[dict[str, Any]]] = {f"{t} [{s}]": [] for s in samplers for t in trees}
    for _ in range(args.reps):
        for s in samplers:
            for t in trees:
                raw[f"{t} [{s}]"].append(
                    nvml_run_child(t, args.runs, s, args.rounds, args.deferred, args.slow_clock_ns)
                )
    keys = ("off_us", "nvml_us", "nvml_minus_off_us", "parts_us", *(("off_df_us", "nvml_df_us") * args.deferred))
    table = {case: {k: statistics.median(r[k] for r in rows) for k in keys} for case, rows in raw.items()}
    frame_head = f" {'off+df':>8} {'nvml+df':>8}" if args.deferred else ""
    print(f"{'case':<44} {'off us/run':>10} {'nvml':>8} {'nvml-off':>9} {'parts':>7}{frame_head}")
    for case, m in table.items():
        frames = f" {m['off_df_us']:>8.2f} {m['nvml_df_us']:>8.2f}" if args.deferred else ""
        print(
            f"{case[-44:]:<44} {m['off_us']:>10.2f} {m['nvml_us']:>8.2f} {m['nvml_minus_off_us']:>9.2f} "
            f"{m['parts_us']:>7.2f}{frames}"
        )
    if args.json:
        doc = {
            "nvml": True,
            "deferred": args.deferred,
            "slow_clock_ns": args.slow_clock_ns,
            "runs": args.runs,
            "cases": list(table),
            "median": table,
            "raw": raw,
        }
        args.json.write_text(json.dumps(doc, indent=1))
    return 0


FIXED_SHAPES = {"1x1": (1, 1, 0), "4x11": (4, 10, 1), "4x101": (4, 100, 1)}
"""--fixed: the calls timed, as (configs, runs, warmup): 1 run, 44 runs (the matmul sweep's shape), 404 runs."""


def fixed_child(calls: int) -> dict[str, Any]:
    """Median wall time of ``calls`` calls of each :data:`FIXED_SHAPES` call, in this process (its tree)."""
    import nsightx

    def fn(n: int) -> None:
        with nsightx.annotate("r"):
            pass

    silent = nsightx.VerbosityLevel.SILENT
    decorated = {
        name: nsightx.analyze.kernel(
            configs=[(i,) for i in range(configs)], runs=runs, warmup=warmup, backend="host", verbosity=silent
        )(fn)
        for name, (configs, runs, warmup) in FIXED_SHAPES.items()
    }
    out: dict[str, Any] = {}
    for name, call in decorated.items():
        for _ in range(20):  # plugins loaded, caches filled
            call()
        times = []
        for _ in range(calls):
            t0 = time.perf_counter()
            call()
            times.append(time.perf_counter() - t0)
        out[f"{name}_us"] = statistics.median(times) * 1e6
    return out


def fixed_main(args: argparse.Namespace) -> int:
    """The fixed cost of a call (issue 35: the call alone regressed by ~0.8 ms on the GPU, whatever its runs).

        python benchmarks/run_loop_cost.py --fixed [--calls 300] [--reps 3] [--tree PATH ...] [--json OUT]

    In a fresh process per tree and repetition (trees alternating), the median wall time of a host-backend call
    beside an empty region of 1 config x 1 run, of 4 configs x (10 + 1 warm-up) runs and of 4 x (100 + 1). The
    per-run cost is the slope between the last two; the 4x11 call's fixed part is that call less 44 runs at that
    slope. Shown: the median over repetitions of each.
    """
    env_trees = [HERE.parent, *[t.resolve() for t in args.tree]]
    raw: dict[str, list[dict[str, Any]]] = {str(t): [] for t in env_trees}
    for _ in range(args.reps):
        for tree in env_trees:
            env = dict(os.environ)
            env["PYTHONPATH"] = os.pathsep.join(str(p) for p in (tree, tree / "backends", tree / "plugins"))
            cmd = [sys.executable, str(Path(__file__).resolve()), "--fixed-child", "--calls", str(args.calls)]
            out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
            if out.returncode != 0:
                raise SystemExit(f"fixed-cost child for {tree} failed:\n{out.stderr}")
            row = json.loads(out.stdout.strip().splitlines()[-1])
            per_run = (row["4x101_us"] - row["4x11_us"]) / (404 - 44)
            row["per_run_us"] = per_run
            row["4x11_fixed_us"] = row["4x11_us"] - 44 * per_run
            raw[str(tree)].append(row)
    median = {t: {k: statistics.median(r[k] for r in rows) for k in rows[0]} for t, rows in raw.items()}
    print(f"{'tree':<34} {'1x1 us':>8} {'4x11 us':>8} {'4x11 fixed':>10} {'us/run':>7} {'4x101 us':>9}")
    for tree, m in median.items():
        print(
            f"{tree[-34:]:<34} {m['1x1_us']:8.1f} {m['4x11_us']:8.1f} {m['4x11_fixed_us']:10.1f} "
            f"{m['per_run_us']:7.2f} {m['4x101_us']:9.1f}"
        )
    if args.json:
        args.json.write_text(json.dumps({"fixed": True, "cases": list(median), "median": median, "raw": raw}, indent=1))
    return 0


EVENTS_CASES = {"no-set-aside": 0, "set-aside-possible": 1 << 20}
"""--events: the device's largest persisting-L2 size the driver double answers, per case (0: none can be made)."""


def events_child(runs: int) -> dict[str, Any]:
    """Per run of an events session (flush on): CPU time, stream objects made, driver queries; in this tree.

    torch and the CUDA driver are the doubles of ``tests/backends/events/test_events_session.py``, so the time is
    the session's own Python around them (a real ``torch.cuda.current_stream`` costs ~2-3 us on the H100's host,
    a driver query ~1 us: the counts say how many a run makes).
    """
    sys.path[:0] = [str(TESTS), str(TESTS / "backends" / "events")]
    import test_events_session as doubles
    from nsightx_events import _backend as backend_module

    from nsightx._run.backend import RegionId

    _backend: Any = backend_module  # its driver entry points are replaced by the doubles
    out: dict[str, Any] = {}
    for case, max_persisting in EVENTS_CASES.items():
        torch, lib = doubles.FakeTorch(), doubles.FakeLibcuda()
        sys.modules["torch"] = torch
        _backend.load_libcuda = lambda lib=lib: lib
        _backend.device_attribute = lambda attribute, index, m=max_persisting: m
        session = _backend.EventsSession(device=0, flush=True)
        for _pass in ("warm-up", "timed"):
            regions = [RegionId("r", 0, r) for r in range(runs)]
            made, queries, c0 = torch.made_streams, lib.queries, time.process_time()
            for region in regions:
                session.region_enter(region)
                session.region_exit(region, failed=False)
                session.finish_run(0, region.run)
                if len(session._finished) >= 64:
                    session.collect_runs()
            cpu = time.process_time() - c0
        out[case] = {
            "us_per_run": cpu * 1e6 / runs,
            "stream_objects_per_run": (torch.made_streams - made) / runs,
            "driver_queries_per_run": (lib.queries - queries) / runs,
        }
    return out


def events_main(args: argparse.Namespace) -> int:
    """The events session's host work per run (issue 35: the 16 KiB op), this tree and each ``--tree``.

        python benchmarks/run_loop_cost.py --events [--runs 20000] [--reps 3] [--tree PATH ...] [--json OUT]

    In a fresh process per tree and repetition (trees alternating), ``--runs`` runs of one region each through
    the session's ``region_enter``, ``region_exit`` and ``finish_run`` (collected every 64 runs), see
    :func:`events_child`. Shown: the median over repetitions.
    """
    trees = [HERE.parent, *[t.resolve() for t in args.tree]]
    raw: dict[str, list[dict[str, Any]]] = {str(t): [] for t in trees}
    for _ in range(args.reps):
        for tree in trees:
            env = dict(os.environ)
            env["PYTHONPATH"] = os.pathsep.join(str(p) for p in (tree, tree / "backends", tree / "plugins"))
            cmd = [sys.executable, str(Path(__file__).resolve()), "--events-child", "--runs", str(args.runs)]
            done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
            if done.returncode != 0:
                raise SystemExit(f"events child for {tree} failed:\n{done.stderr}")
            raw[str(tree)].append(json.loads(done.stdout.strip().splitlines()[-1]))
    keys = ("us_per_run", "stream_objects_per_run", "driver_queries_per_run")
    median = {
        t: {c: {k: statistics.median(r[c][k] for r in rows) for k in keys} for c in EVENTS_CASES}
        for t, rows in raw.items()
    }
    print(f"{'tree':<34} {'case':<20} {'us/run':>7} {'streams/run':>11} {'queries/run':>11}")
    for tree, by_case in median.items():
        for case, m in by_case.items():
            print(
                f"{tree[-34:]:<34} {case:<20} {m['us_per_run']:7.2f} {m['stream_objects_per_run']:11.2f} "
                f"{m['driver_queries_per_run']:11.2f}"
            )
    if args.json:
        doc = {"events": True, "cases": list(median), "median": median, "raw": raw}
        args.json.write_text(json.dumps(doc, indent=1))
    return 0


VARIANTS = ("nofreeze", "threshold", "off")


def label(tree: Path, variant: str) -> str:
    """How a (tree, variant) case is named in the table."""
    return str(tree) if variant == "default" else f"{tree} [{variant}]"


def print_table(table: dict[str, dict[int, dict[str, Any]]], sizes: list[int]) -> None:
    """The medians per case and size, the growth from 10,000 runs (or the first size) to the last, the ratios."""
    print(
        f"{'case':<34} {'runs':>7} {'call us/run':>11} {'wall':>6} {'bare':>6} {'execute':>8} {'gc':>6} {'full gc':>7}"
    )
    base_n = 10_000 if 10_000 in sizes else sizes[0]
    for case, by_size in table.items():
        for n, m in by_size.items():
            print(
                f"{case[-34:]:<34} {n:>7} {m['call_us']:>11.2f} {m['wall_us']:>6.2f} {m['bare_us']:>6.3f} "
                f"{m['execute_us']:>8.2f} {m['gc_us']:>6.2f} {m['full_collections']:>7.0f}"
            )
        last = by_size[sizes[-1]]
        print(
            f"{'':<34} at {sizes[-1]} / at {base_n} runs: call {last['call_us'] / by_size[base_n]['call_us']:.2f}x, "
            f"execute {last['execute_us'] / by_size[base_n]['execute_us']:.2f}x"
        )
    cases = list(table)
    if len(cases) > 1:
        print(f"\nratio to {cases[0]} (call us/run):")
        for case in cases[1:]:
            ratios = [table[case][n]["call_us"] / table[cases[0]][n]["call_us"] for n in sizes]
            print(f"{case[-34:]:<34} " + "  ".join(f"{n}: {r:.2f}x" for n, r in zip(sizes, ratios, strict=True)))


if __name__ == "__main__":
    sys.exit(main())
