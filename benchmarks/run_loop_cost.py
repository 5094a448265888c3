"""What one run costs beside an empty region on the host backend, and whether it grows with the size of the call.

    python benchmarks/run_loop_cost.py [--sizes 1000,10000,100000,300000] [--reps 3]
                                       [--tree PATH ...] [--gc-variants] [--json OUT]

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
call: the floor). ``--json`` writes every number.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def child(runs: int, variant: str) -> dict[str, Any]:
    """Time one call of ``runs`` runs and the bare loop in this process (the tree is set by ``PYTHONPATH``)."""
    import nsightx
    from nsightx._api import kernel as _kernel

    if variant != "default":
        from nsightx._run import heap

        heap.FREEZE_EVERY = 1 << 62

    def body() -> None:
        with nsightx.annotate("r"):
            pass

    silent = nsightx.VerbosityLevel.SILENT
    warm = nsightx.analyze.kernel(runs=200, warmup=0, backend="host", verbosity=silent)(body)
    call = nsightx.analyze.kernel(runs=runs, warmup=0, backend="host", verbosity=silent)(body)
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
    assert len(result.to_dataframe()) == 1
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
    }


def run_child(tree: Path, runs: int, variant: str) -> dict[str, Any]:
    """Run :func:`child` in a fresh process with ``tree`` first on the path."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(str(p) for p in (tree, tree / "backends", tree / "plugins"))
    out = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--child", str(runs), "--variant", variant],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode != 0:
        raise SystemExit(f"child for {tree} with {runs} runs failed:\n{out.stderr}")
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


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
    ap.add_argument("--child", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--variant", default="default", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child is not None:
        print(json.dumps(child(args.child, args.variant)))
        return 0
    here = HERE.parent
    cases = [(here, "default"), *[(t.resolve(), "default") for t in args.tree]]
    if args.gc_variants:
        cases += [(here, v) for v in VARIANTS]
    sizes = [int(float(s)) for s in args.sizes.split(",")]
    raw: dict[str, dict[int, list[dict[str, Any]]]] = {label(*c): {n: [] for n in sizes} for c in cases}
    for n in sizes:
        for _ in range(args.reps):
            for c in cases:
                raw[label(*c)][n].append(run_child(c[0], n, c[1]))
    table = {k: {n: median_of(rows) for n, rows in by_size.items()} for k, by_size in raw.items()}
    print_table(table, sizes)
    if args.json:
        args.json.write_text(json.dumps({"cases": list(table), "median": table, "raw": raw}, indent=1))
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
