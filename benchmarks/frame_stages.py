"""Where ``to_dataframe()`` of one result spends its time, stage by stage (a probe for issue 35's whole call).

Usage: python benchmarks/frame_stages.py RESULT [RESULT ...] [--calls 200] [--cold] [--json OUT]
       python benchmarks/frame_stages.py --sweep OUTDIR [--calls 200]     (GPU: makes the results first)
       python benchmarks/frame_stages.py --insitu REPS [--json OUT]       (GPU: the frame inside the whole call)
       python benchmarks/frame_stages.py --fresh [RESULT ...] [--calls 200] [--reps 5] [--tree BEFORE] [--json OUT]
                                         [--prefix DIR]
       python benchmarks/frame_stages.py --ahead [--calls 200] [--json OUT]
       python benchmarks/frame_stages.py --policy WAIT_MS [--calls 12] [--json OUT]
       python benchmarks/frame_stages.py --per-run RUNS [--calls 50] [--json OUT]     (CPU: the frame's per-run cost)

For each saved result (``nsightx.load``), ``to_dataframe()`` of a fresh ``ProfileResults`` over the same columns
is called ``--calls`` times; each call's wall time is taken, and the time spent in each stage of the frame (the
functions of ``nsightx._results.dataframe`` named in :data:`STAGES`, timed by wrappers that add ~1 us each) is
summed. Printed per result: the median call, and each stage's mean share. ``--cold`` runs ``gc.collect()`` before
each call (what the data-path benchmark calls cold); without it the calls follow each other (warm), which is what
the whole call of ``benchmarks/backend_overhead.py --whole-call`` sees after its first repetition.

``--sweep OUTDIR`` first runs the matmul sweep of ``backend_overhead.py`` (n = 512..4096, 10 runs, inputs
allocated once, default collectors) on cupti and on events and saves both results to OUTDIR (as
``sweep-<backend>.parquet``), then measures them: the real results of the whole call, to bring back as fixtures.

``--fresh`` times what the user's ``f().to_dataframe()`` meets: the *first* ``to_dataframe()`` of a result just
made, never a warm one. Each kind of result is measured in ``--reps`` child processes of its own (pandas and
pyarrow imported first, as a user's script has them; bytecode cached, as an installed package has it), for this
tree and each ``--tree`` in turn, so that before and after come from one run of the machine. The kinds: each named
RESULT, loaded anew (``nsightx.load``) for each call, and ``host-call``, a call of the real host backend, 4 configs
x 11 runs with the default collectors, made deferred as the GPU sessions are (``run_loop_cost.py``'s session) and
with the nvml plugin reading the NVML double of ``tests/nvml_double.py`` (so the result carries the nvml columns a
GPU sweep has). Printed per tree and kind, medians over the processes (wall time, and the calling thread's CPU
time, steadier on a shared machine): the first ``to_dataframe()`` of the process
(the frame modules' imports, pandas' and pyarrow's set-up on first use, the dtype probes), the median first call
of a fresh result (and the garbage collector's mean time inside it), the median second call of the same result,
the median warm call of the default mode (a new ``ProfileResults`` over columns already read), and the stages of
the fresh results' first calls. ``--prefix DIR`` puts DIR first on each child's ``PYTHONPATH`` (the children's
path is otherwise the tree's alone): another pandas, such as an unpacked wheel of the GPU machine's version.

``--ahead`` times, in one process, the first ``to_dataframe()`` right after a ``host-call`` call (the deferred
host backend with the NVML double, as ``--fresh`` makes it) with the frame's pieces computed during the call's
wait (:mod:`nsightx._results.frameahead`) and, alternating, with them dropped (the frame then computes them, as
before): the medians of each, and how many calls' frames took the pieces. ``--fresh --tree BEFORE`` compares the
same first call with another tree in separate processes. ``--policy WAIT_MS`` shows which calls compute those
pieces when the session's wait lasts WAIT_MS (:mod:`nsightx._api.aheadpolicy`; see :func:`policy`).
"""

from __future__ import annotations

import argparse
import functools
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
STAGES = (
    "table_of",
    "_value_stats",
    "_collector_stats",
    "_scopes",
    "_run_columns",
    "_throttled_items",
    "flag_cells",
    "spread_of",
    "_stability",
    "_geomeans",
    "_top_kernels",
    "frame_of",
    "frame_copy",
)
"""Names looked up in ``nsightx._results.dataframe`` (those it does not have are skipped)."""


def sweep(outdir: Path) -> list[Path]:
    """The backend_overhead sweep on cupti and events, each result saved under ``outdir``."""
    sys.path.insert(0, str(HERE))
    import backend_overhead as bo  # type: ignore[import-not-found]
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    outdir.mkdir(parents=True, exist_ok=True)
    paths = []
    for backend in ("cupti", "events"):
        fn = bo.make_profiled(torch, bo.WORKLOADS["sweep_once"], backend, True)
        fn()  # warm-up call: cuBLAS, CUPTI, plugin host
        path = outdir / f"sweep-{backend}.parquet"
        fn().save(path)
        paths.append(path)
    return paths


def insitu(reps: int) -> list[dict[str, Any]]:
    """The sweep's whole call on cupti and events, ``reps`` times: the call, then ``to_dataframe()`` of its result,
    each timed, with the garbage collector's time and collections inside each (``gc.callbacks``), and the frame's
    stages; the frame as the whole call meets it (a fresh result straight from the call, not a loaded one)."""
    sys.path.insert(0, str(HERE))
    import backend_overhead as bo  # type: ignore[import-not-found]
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    gc_time = [0.0, 0]
    started = [0.0]

    def on_gc(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            started[0] = time.perf_counter()
        else:
            gc_time[0] += time.perf_counter() - started[0]
            gc_time[1] += 1 if info.get("generation") == 2 else 0

    rows = []
    for backend in ("cupti", "events"):
        fn = bo.make_profiled(torch, bo.WORKLOADS["sweep_once"], backend, True)
        fn().to_dataframe()
        calls, frames, gc_call, gc_frame, full = [], [], [], [], 0
        gc.callbacks.append(on_gc)
        try:
            for _ in range(reps):
                torch.cuda.synchronize()
                gc_time[0] = 0.0
                t0 = time.perf_counter()
                result = fn()
                t1 = time.perf_counter()
                in_call, gc_time[0] = gc_time[0], 0.0
                result.to_dataframe()
                t2 = time.perf_counter()
                calls.append((t1 - t0) * 1e3)
                frames.append((t2 - t1) * 1e3)
                gc_call.append(in_call * 1e3)
                gc_frame.append(gc_time[0] * 1e3)
            full = gc_time[1]
        finally:
            gc.callbacks.remove(on_gc)
        med = statistics.median
        rows.append(
            {
                "backend": backend,
                "call_ms": med(calls),
                "frame_ms": med(frames),
                "frame_ms_all": frames,
                "gc_in_call_ms_mean": statistics.fmean(gc_call),
                "gc_in_frame_ms_mean": statistics.fmean(gc_frame),
                "full_collections": full,
            }
        )
        print(json.dumps({k: v for k, v in rows[-1].items() if k != "frame_ms_all"}), flush=True)
    return rows


@functools.cache
def _install_doubles() -> None:
    """Put the NVML double and the deferred host session in place (once per process)."""
    sys.path.insert(0, str(HERE))
    import run_loop_cost as rlc  # type: ignore[import-not-found]

    rlc._install_double("thread")
    rlc._install_deferred()


def host_call(sizes: tuple[int, ...] = (512, 1024, 2048, 4096), runs: int = 11) -> Callable[[], Any]:
    """A function that makes a new result per call: the host backend, deferred, with the nvml double (see --fresh)."""
    _install_doubles()
    import nsightx

    silent = nsightx.VerbosityLevel.SILENT

    configs = [(n,) for n in sizes]

    @nsightx.analyze.kernel(configs=configs, runs=runs, warmup=0, backend="host", verbosity=silent)
    def call(n: int) -> None:
        with nsightx.annotate("work"):
            sum(range(n))

    return call


class _GcClock:
    """The garbage collector's time, summed by a ``gc.callbacks`` entry while it is installed."""

    def __init__(self) -> None:
        self.spent = 0.0
        self._start = 0.0

    def on_gc(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._start = time.perf_counter()
        else:
            self.spent += time.perf_counter() - self._start


def fresh_kind(make: Callable[[], Any], calls: int, acc: dict[str, float]) -> dict[str, Any]:
    """In this process: the first ``to_dataframe()`` of a result of ``make``, then ``calls`` fresh results' first
    and second calls, then ``calls`` warm calls (new ``ProfileResults`` over the last result's columns)."""
    from nsightx._results.profileresults import ProfileResults

    clock = _GcClock()
    result = make()
    c0, t0 = time.thread_time(), time.perf_counter()
    result.to_dataframe()
    first, first_cpu = (time.perf_counter() - t0) * 1e6, (time.thread_time() - c0) * 1e6
    firsts, firsts_cpu, seconds, warms, in_gc = [], [], [], [], []
    acc.clear()
    for _ in range(calls):
        result = make()
        clock.spent = 0.0
        gc.callbacks.append(clock.on_gc)
        c0, t0 = time.thread_time(), time.perf_counter()
        result.to_dataframe()
        t1 = time.perf_counter()
        firsts_cpu.append((time.thread_time() - c0) * 1e6)
        gc.callbacks.remove(clock.on_gc)
        kept = dict(acc)
        result.to_dataframe()
        acc.clear()
        acc.update(kept)  # the stages of first calls only
        firsts.append((t1 - t0) * 1e6)
        seconds.append((time.perf_counter() - t1) * 1e6)
        in_gc.append(clock.spent * 1e6)
    stages = {k: round(v / calls * 1e6, 1) for k, v in sorted(acc.items(), key=lambda kv: -kv[1])}
    rebuild = functools.partial(ProfileResults.from_columns, result._shell, result.columns, result._configs)
    for _ in range(calls):
        again = rebuild()
        t0 = time.perf_counter()
        again.to_dataframe()
        warms.append((time.perf_counter() - t0) * 1e6)
    med = statistics.median
    return {
        "values": result.columns.values.n,
        "first_in_process_us": first,
        "first_in_process_cpu_us": first_cpu,
        "fresh_median_us": med(firsts),
        "fresh_median_cpu_us": med(firsts_cpu),
        "gc_in_fresh_mean_us": statistics.fmean(in_gc),
        "second_median_us": med(seconds),
        "warm_median_us": med(warms),
        "fresh_stages_us": stages,
    }


def ahead(calls: int) -> dict[str, Any]:
    """``--ahead``: the first ``to_dataframe()`` of ``host-call`` results with and without their ahead pieces."""
    import pandas  # noqa: F401  # a user's script has it imported
    import pyarrow  # noqa: F401

    from nsightx._results import frameahead

    make = host_call()
    make().to_dataframe()  # the process's first frame: imports, pandas' set-up
    taken: list[bool] = []
    take = frameahead.FrameAhead.take

    def noted(self: Any, table: Any) -> Any:
        pieces = take(self, table)
        taken.append(pieces is not None)
        return pieces

    frameahead.FrameAhead.take = noted  # type: ignore[method-assign]
    walls: dict[str, list[float]] = {"with": [], "without": []}
    for i in range(2 * calls):
        make._ahead.enabled = True  # the pieces whatever the policy (this call has no wait to hide them behind)
        result = make()
        mode = "with" if i % 2 == 0 else "without"
        if mode == "without":
            result._frame_ahead = None
        t0 = time.perf_counter()
        result.to_dataframe()
        walls[mode].append((time.perf_counter() - t0) * 1e6)
    med = statistics.median
    row = {"calls": calls, "with_median_us": med(walls["with"]), "without_median_us": med(walls["without"])}
    row["saved_us"] = row["without_median_us"] - row["with_median_us"]
    row["taken"] = sum(taken)
    print(json.dumps(row))
    return row


def policy(calls: int, wait_ms: float) -> list[dict[str, Any]]:
    """``--policy WAIT_MS``: which calls compute the frame's pieces when the GPU's wait lasts ``wait_ms``.

    The deferred host session of ``host-call`` collects its runs after sleeping ``wait_ms`` (a GPU still working
    through queued runs); the 4x11 sweep and a 1x201 call of an empty region are each called ``calls`` times. Per
    shape: whether each call computed the pieces (:mod:`nsightx._api.aheadpolicy`), the policy's last verdict and
    measured cost, and the median call and frame after the first two calls.
    """
    import nsightx_host

    host_call()  # installs the NVML double and the deferred session
    import nsightx

    collect = nsightx_host.HostSession.collect_runs

    def waited(self: Any) -> Any:
        time.sleep(wait_ms / 1e3)
        return collect(self)

    nsightx_host.HostSession.collect_runs = waited  # type: ignore[method-assign]
    silent = nsightx.VerbosityLevel.SILENT
    rows = []
    for configs, runs in (([(n,) for n in (512, 1024, 2048, 4096)], 11), ([(1,)], 201)):

        @nsightx.analyze.kernel(configs=configs, runs=runs, warmup=0, backend="host", verbosity=silent)
        def call(n: int) -> None:
            with nsightx.annotate("work"):
                pass

        took, walls, frames = [], [], []
        for _ in range(calls):
            t0 = time.perf_counter()
            result = call()
            t1 = time.perf_counter()
            took.append(result._frame_ahead is not None)
            result.to_dataframe()
            walls.append((t1 - t0) * 1e3)
            frames.append((time.perf_counter() - t1) * 1e3)
        row = {
            "wait_ms": wait_ms,
            "shape": f"{len(configs)}x{runs}",
            "pieces": "".join("y" if t else "-" for t in took),
            "enabled": call._ahead.enabled,
            "cost_us": round(call._ahead.cost_ns / 1e3),
            "call_ms": round(statistics.median(walls[2:]), 3),
            "frame_ms": round(statistics.median(frames[2:]), 3),
        }
        print(json.dumps(row))
        rows.append(row)
    return rows


def fresh_child(kind: str, calls: int) -> dict[str, Any]:
    """``--fresh`` in a child process: pandas and pyarrow imported (as a user's script has them), then one kind."""
    import pandas
    import pyarrow  # noqa: F401

    if kind == "host-call":
        make = host_call()
    else:
        import nsightx

        make = functools.partial(nsightx.load, Path(kind))
    return {**fresh_kind(make, calls, wrapped_stages()), "pandas": pandas.__version__}


def fresh_main(
    kinds: list[str], calls: int, reps: int, trees: list[Path], prefix: Path | None = None
) -> list[dict[str, Any]]:
    """``--fresh``: ``reps`` child processes per tree and kind, trees alternating; per tree and kind the medians.

    Each child's bytecode comes from a cache filled by one untimed child per tree and kind (a user's installed
    package has its ``.pyc``; a checkout run with ``PYTHONDONTWRITEBYTECODE`` would compile in the first call).
    """
    cache = tempfile.mkdtemp(prefix="nsightx-frame-stages-pyc-")
    runs: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for rep in range(reps + 1):
        for kind in kinds:
            for tree in trees:
                got = _child(tree, kind, calls if rep else 2, cache, prefix)
                if rep:
                    runs[(str(tree), kind)].append(got)
    return [_fresh_row(name, kind, got) for (name, kind), got in runs.items()]


def _fresh_row(tree: str, kind: str, got: list[dict[str, Any]]) -> dict[str, Any]:
    """Per tree and kind, the medians over its processes (and every process's row, as ``all``)."""
    row: dict[str, Any] = {"tree": tree, "result": kind, "values": got[0]["values"], "processes": len(got)}
    row["pandas"] = sorted({g.get("pandas", "?") for g in got})
    for key in (*_FRESH_KEYS, "warm_median_us"):
        row[key] = statistics.median(g[key] for g in got)
    names = {k for g in got for k in g["fresh_stages_us"]}
    stages = {k: statistics.median(g["fresh_stages_us"].get(k, 0.0) for g in got) for k in names}
    row["fresh_stages_us"] = dict(sorted(stages.items(), key=lambda kv: -kv[1]))
    row["all"] = got
    return row


_FRESH_KEYS = (
    "first_in_process_us",
    "first_in_process_cpu_us",
    "fresh_median_us",
    "fresh_median_cpu_us",
    "gc_in_fresh_mean_us",
    "second_median_us",
)


def _child(tree: Path, kind: str, calls: int, cache: str, prefix: Path | None = None) -> dict[str, Any]:
    """One ``--fresh-child`` process on ``tree`` (its ``nsightx``, ``backends`` and ``plugins`` first; ``prefix``
    before them)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    paths = [str(tree / p) if p else str(tree) for p in ("", "backends", "plugins")]
    env["PYTHONPATH"] = os.pathsep.join([str(prefix), *paths] if prefix is not None else paths)
    env["PYTHONPYCACHEPREFIX"] = str(Path(cache) / tree.name)
    cmd = [sys.executable, str(Path(__file__).resolve()), "--fresh-child", kind, "--calls", str(calls)]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


PER_RUN_STAGES = ("frame_pieces", "collector_prep", "_collector_columns")
"""Stages :func:`per_run` times besides :data:`STAGES`: the collector values' share of the frame."""


def per_run(runs: int, calls: int) -> dict[str, Any]:
    """``--per-run RUNS``: what one more run adds to ``to_dataframe()``, stage by stage (CPU).

    The deferred host call with the nvml double (six run-scope values a run, as a GPU call with the nvml plugin
    has) at one config of ``runs`` and of ``2 * runs`` runs, a fresh result per frame, interleaved ``calls`` times;
    per run: the difference of the median frames, and of each stage's mean, over the extra runs. On the H100 the
    frame alone cost ~5.3-6.2 us a run of the 16 KiB op (``call_phases.py --per-run``, session 27).
    """
    from nsightx._results import dataframe

    acc = wrapped_stages()
    wrap = timed(acc)
    for name in PER_RUN_STAGES:
        wrap(dataframe, name)
    sizes = (runs, 2 * runs)
    makes = {n: host_call((1,), n) for n in sizes}
    for make in makes.values():
        make().to_dataframe()  # warm
    walls: dict[int, list[float]] = {n: [] for n in sizes}
    stages: dict[int, dict[str, float]] = {n: defaultdict(float) for n in sizes}
    for _ in range(calls):
        for n, make in makes.items():
            result = make()
            before = dict(acc)
            t0 = time.perf_counter()
            result.to_dataframe()
            walls[n].append(time.perf_counter() - t0)
            for key, total in acc.items():
                stages[n][key] += total - before.get(key, 0.0)
    short, long = (statistics.median(walls[n]) * 1e6 for n in sizes)
    per_stage = {k: (stages[2 * runs][k] - stages[runs].get(k, 0.0)) / calls / runs * 1e6 for k in stages[2 * runs]}
    return {
        "runs": list(sizes),
        "frame_us": [short, long],
        "per_run_us": (long - short) / runs,
        "stages_per_run_us": {k: round(v, 3) for k, v in sorted(per_stage.items(), key=lambda kv: -kv[1])},
    }


def wrapped_stages() -> dict[str, float]:
    """The stage functions of :data:`STAGES` wrapped to add their time up; the dictionary they add to."""
    from nsightx._results import dataframe

    acc: dict[str, float] = defaultdict(float)
    wrap = timed(acc)
    for name in STAGES:
        if hasattr(dataframe, name):
            wrap(dataframe, name)
    return acc


def timed(acc: dict[str, float]) -> Callable[[Any, str], None]:
    """A function that wraps ``module.name`` so that its time is added to ``acc[name]``."""

    def wrap(module: Any, name: str) -> None:
        f = getattr(module, name)

        @functools.wraps(f)
        def inner(*args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return f(*args, **kwargs)
            finally:
                acc[name] += time.perf_counter() - t0

        setattr(module, name, inner)

    return wrap


def measure(path: Path, calls: int, cold: bool, acc: dict[str, float]) -> dict[str, Any]:
    """``calls`` calls of ``to_dataframe()`` of fresh results over the columns of ``path``."""
    import nsightx
    from nsightx._results.profileresults import ProfileResults

    loaded = nsightx.load(path)
    fresh = functools.partial(ProfileResults.from_columns, loaded.data, loaded.columns)
    fresh().to_dataframe()
    walls = []
    acc.clear()
    for _ in range(calls):
        result = fresh()
        if cold:
            gc.collect()
        t0 = time.perf_counter()
        result.to_dataframe()
        walls.append((time.perf_counter() - t0) * 1e6)
    stages = {k: round(v / calls * 1e6, 1) for k, v in sorted(acc.items(), key=lambda kv: -kv[1])}
    return {
        "result": str(path),
        "values": len(loaded.data.values),
        "median_us": statistics.median(walls),
        "stages_us": stages,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("results", nargs="*", type=Path)
    ap.add_argument("--sweep", type=Path, help="GPU: run the sweep on cupti and events first, saving here")
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--cold", action="store_true", help="gc.collect() before each call")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--insitu", type=int, metavar="REPS", help="GPU: time the frame inside the sweep's whole call")
    ap.add_argument("--fresh", action="store_true", help="time the first to_dataframe() of new results")
    ap.add_argument("--reps", type=int, default=5, help="--fresh: child processes per tree and kind")
    ap.add_argument("--tree", type=Path, action="append", default=[], help="--fresh: another source tree too")
    ap.add_argument("--prefix", type=Path, help="--fresh: put this folder first on each child's PYTHONPATH")
    ap.add_argument("--fresh-child", help=argparse.SUPPRESS)
    ap.add_argument("--ahead", action="store_true", help="the frame right after a call, with and without its pieces")
    ap.add_argument("--policy", type=float, metavar="WAIT_MS", help="which calls compute the pieces, given a wait")
    ap.add_argument("--per-run", type=int, metavar="RUNS", help="what one more run adds to the frame, by stage")
    args = ap.parse_args()
    if args.fresh_child:
        print(json.dumps(fresh_child(args.fresh_child, args.calls)))
        return 0
    if args.per_run:
        rows = [per_run(args.per_run, min(args.calls, 50))]
        print(json.dumps(rows[0]))
    elif args.insitu:
        rows = insitu(args.insitu)
    elif args.ahead:
        rows = [ahead(args.calls)]
    elif args.policy is not None:
        rows = policy(min(args.calls, 12), args.policy)
    elif args.fresh:
        kinds = [str(p.resolve()) for p in args.results] + ["host-call"]
        trees = [HERE.parent, *(t.resolve() for t in args.tree)]
        rows = fresh_main(kinds, args.calls, args.reps, trees, args.prefix.resolve() if args.prefix else None)
        print_fresh(rows)
    else:
        paths = list(args.results) + (sweep(args.sweep) if args.sweep else [])
        if not paths:
            ap.error("name a result, or --sweep OUTDIR, or --fresh")
        acc = wrapped_stages()
        rows = [measure(p, args.calls, args.cold, acc) for p in paths]
        for row in rows:
            print(f"{row['result']}: {row['values']} values, to_dataframe median {row['median_us']:.0f} us")
            print("   ", row["stages_us"])
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1), encoding="utf-8")
    return 0


def print_fresh(rows: list[dict[str, Any]]) -> None:
    """The ``--fresh`` table: per tree and kind, the medians over its processes."""
    for row in rows:
        print(
            f"{row['tree']} {Path(row['result']).name} (pandas {', '.join(row['pandas'])}): {row['values']} values, "
            f"{row['processes']} processes: "
            f"first to_dataframe of the process {row['first_in_process_us']:.0f} us (CPU "
            f"{row['first_in_process_cpu_us']:.0f}); fresh {row['fresh_median_us']:.0f} us (CPU "
            f"{row['fresh_median_cpu_us']:.0f}; collector {row['gc_in_fresh_mean_us']:.0f} us mean); second call "
            f"{row['second_median_us']:.0f} us; warm {row['warm_median_us']:.0f} us"
        )
        print("   ", {k: round(v, 1) for k, v in row["fresh_stages_us"].items()})


if __name__ == "__main__":
    sys.exit(main())
