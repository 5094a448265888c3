"""Where ``to_dataframe()`` of one result spends its time, stage by stage (a probe for issue 35's whole call).

Usage: python benchmarks/frame_stages.py RESULT [RESULT ...] [--calls 200] [--cold] [--json OUT]
       python benchmarks/frame_stages.py --sweep OUTDIR [--calls 200]     (GPU: makes the results first)
       python benchmarks/frame_stages.py --insitu REPS [--json OUT]       (GPU: the frame inside the whole call)
       python benchmarks/frame_stages.py --fresh [RESULT ...] [--calls 200] [--json OUT]   (CPU: first calls)

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
made, never a warm one. Each call gets a new result: each named RESULT loaded anew (``nsightx.load``), and
``host-call``, a call of the real host backend, 4 configs x 11 runs with the default collectors, made deferred as
the GPU sessions are (``run_loop_cost.py``'s session) and with the nvml plugin reading the NVML double of
``tests/nvml_double.py`` (so the result carries the nvml columns a GPU sweep has). Printed per kind: the first
``to_dataframe()`` of the process (imports, pandas' and pyarrow's lazy set-up, caches filled), the median first
call of a fresh result (and the garbage collector's mean time inside it), the median second call of the same
result (the cached frame's copy), the median warm call of the default mode (a new ``ProfileResults`` over columns
already read: the gap to the fresh call is what reading a new result's columns costs the frame), and the stages
of the fresh calls (summed over each result's first and second call).
"""

from __future__ import annotations

import argparse
import functools
import gc
import json
import statistics
import sys
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


def host_call() -> Callable[[], Any]:
    """A function that makes a new result per call: the host backend, deferred, with the nvml double (see --fresh)."""
    sys.path.insert(0, str(HERE))
    import run_loop_cost as rlc  # type: ignore[import-not-found]

    rlc._install_double("thread")
    rlc._install_deferred()
    import nsightx

    silent = nsightx.VerbosityLevel.SILENT

    configs = [(n,) for n in (512, 1024, 2048, 4096)]

    @nsightx.analyze.kernel(configs=configs, runs=11, warmup=0, backend="host", verbosity=silent)
    def call(n: int) -> None:
        with nsightx.annotate("work"):
            sum(range(n))

    return call  # type: ignore[no-any-return]


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


def fresh(paths: list[Path], calls: int, acc: dict[str, float]) -> list[dict[str, Any]]:
    """``--fresh``: per kind of new result, the first ``to_dataframe()`` of a result made anew for each call."""
    import nsightx
    from nsightx._results.profileresults import ProfileResults

    makers: dict[str, Callable[[], Any]] = {str(p): functools.partial(nsightx.load, p) for p in paths}
    makers["host-call"] = host_call()
    clock = _GcClock()
    rows = []
    for name, make in makers.items():
        result = make()
        acc.clear()
        t0 = time.perf_counter()
        result.to_dataframe()
        first = (time.perf_counter() - t0) * 1e6
        firsts, seconds, warms, in_gc = [], [], [], []
        acc.clear()
        for _ in range(calls):
            result = make()
            clock.spent = 0.0
            gc.callbacks.append(clock.on_gc)
            t0 = time.perf_counter()
            result.to_dataframe()
            t1 = time.perf_counter()
            gc.callbacks.remove(clock.on_gc)
            in_gc.append(clock.spent * 1e6)
            result.to_dataframe()
            firsts.append((t1 - t0) * 1e6)
            seconds.append((time.perf_counter() - t1) * 1e6)
        stages = {k: round(v / calls * 1e6, 1) for k, v in sorted(acc.items(), key=lambda kv: -kv[1])}
        rebuild = functools.partial(ProfileResults.from_columns, result._shell, result.columns, result._configs)
        for _ in range(calls):
            again = rebuild()
            t0 = time.perf_counter()
            again.to_dataframe()
            warms.append((time.perf_counter() - t0) * 1e6)
        med = statistics.median
        rows.append(
            {
                "result": name,
                "values": result.columns.values.n,
                "first_in_process_us": first,
                "fresh_median_us": med(firsts),
                "gc_in_fresh_mean_us": statistics.fmean(in_gc),
                "second_median_us": med(seconds),
                "warm_median_us": med(warms),
                "fresh_stages_us": stages,
            }
        )
    return rows


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
    args = ap.parse_args()
    if args.insitu:
        rows = insitu(args.insitu)
        if args.json:
            args.json.write_text(json.dumps(rows, indent=1), encoding="utf-8")
        return 0
    paths = list(args.results) + (sweep(args.sweep) if args.sweep else [])
    if not paths and not args.fresh:
        ap.error("name a result, or --sweep OUTDIR, or --fresh")
    from nsightx._results import dataframe

    acc: dict[str, float] = defaultdict(float)
    wrap = timed(acc)
    for name in STAGES:
        if hasattr(dataframe, name):
            wrap(dataframe, name)
    if args.fresh:
        rows = fresh(paths, args.calls, acc)
        for row in rows:
            print(
                f"{row['result']}: {row['values']} values, first to_dataframe of the process "
                f"{row['first_in_process_us']:.0f} us; fresh median {row['fresh_median_us']:.0f} us (collector "
                f"{row['gc_in_fresh_mean_us']:.0f} us mean), second call "
                f"{row['second_median_us']:.0f} us, warm {row['warm_median_us']:.0f} us"
            )
            print("   ", row["fresh_stages_us"])
        if args.json:
            args.json.write_text(json.dumps(rows, indent=1), encoding="utf-8")
        return 0
    rows = [measure(p, args.calls, args.cold, acc) for p in paths]
    for row in rows:
        print(f"{row['result']}: {row['values']} values, to_dataframe median {row['median_us']:.0f} us")
        print("   ", row["stages_us"])
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
