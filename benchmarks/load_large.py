"""``nsightx.load`` of a result of a million records, under one or more source trees (before/after a change).

Usage: python benchmarks/load_large.py [--configs 2000] [--runs 100] [--regions 5] [--repeat 3]
       [--root PATH ...] [--keep DIR]

The result has the shape of a host-backend sweep (``--configs`` x ``--runs`` runs x ``--regions`` regions, one
metric: 1e6 records, 1e6 regions and 1e6 values for the defaults; about 370 MB as JSON) and is built directly with
``build_results`` from synthetic runs (a real sweep of that size takes minutes), then saved as JSON and as a raw
file. Each ``--root`` (a checkout: its ``nsightx``, ``backends`` and ``plugins`` go first on ``PYTHONPATH``; default:
this one) loads both files in fresh subprocesses, alternating with the other roots, ``--repeat`` times; the best
wall and CPU seconds are printed. CPU time is the steadier figure on a shared machine. The files are written by
the tree this script runs in, so every root reads the same bytes.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

_CHILD = r"""
import json, sys, time, warnings
import nsightx
nsightx.load  # import the loader before measuring
warnings.simplefilter("ignore")
t, c = time.perf_counter(), time.process_time()
result = nsightx.load(sys.argv[1])
print(json.dumps({"wall": time.perf_counter() - t, "cpu": time.process_time() - c, "values": len(result.data.values)}))
"""


def build(folder: Path, configs: int, runs: int, regions: int) -> tuple[Path, Path]:
    """Write the synthetic result as ``result.json`` and ``raw.jsonl`` in ``folder``."""
    from nsightx._results.records import Record, RegionRun, RunRecords
    from nsightx._results.results import build_results
    from nsightx._results.schema import PlanInfo, RawHeader
    from nsightx._results.sink import RunSink

    metric = "host__time_duration.sum"
    plan = PlanInfo(
        function="sweep",
        params=("n",),
        configs=tuple((i,) for i in range(configs)),
        runs=runs,
        warmup=0,
        metrics=(metric,),
        backend="host",
        cache_control="all",
        clock_control="base",
        replay_mode="kernel",
    )
    rnd = random.Random(1)
    names = [f"region{i}" for i in range(regions)]
    measured = [
        RunRecords(
            c,
            r,
            tuple(Record(a, c, r, "region", metric, float(rnd.randrange(1000, 90000)), "ns", 0) for a in names),
            tuple(RegionRun(a, c, r, rnd.randrange(1000, 90000)) for a in names),
        )
        for c in range(configs)
        for r in range(runs)
    ]
    result = build_results(plan, measured, {"GPU": None, "Host": "bench"}, created="2026-12-05T00:00:00+00:00")
    saved = result.save(folder / "result.json")
    raw = folder / "raw.jsonl"
    sink = RunSink(raw, RawHeader(sweep="0" * 32, nsightx_version="bench", created=result.data.created, plan=plan))
    for run in measured:
        sink.write(run)
    sink.close()
    return saved, raw


def load_once(root: Path, path: Path) -> dict[str, float]:
    """Load ``path`` in a fresh subprocess with ``root``'s nsightx first on the path."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(str(root / p) for p in ("", "backends", "plugins")))
    out = subprocess.run([sys.executable, "-c", _CHILD, str(path)], capture_output=True, text=True, check=True, env=env)
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    """Build the files, load them under each root in turn, print the best times."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--configs", type=int, default=2000)
    p.add_argument("--runs", type=int, default=100)
    p.add_argument("--regions", type=int, default=5)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--root", type=Path, action="append", default=None, help="a checkout to measure (repeatable)")
    p.add_argument("--keep", type=Path, default=None, help="write the files here and keep them")
    args = p.parse_args()
    roots = [r.resolve() for r in (args.root or [Path(__file__).resolve().parents[1]])]
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        t = time.perf_counter()
        files = build(folder, args.configs, args.runs, args.regions)
        shape = f"{args.configs} configs x {args.runs} runs x {args.regions} regions"
        print(f"built {shape} in {time.perf_counter() - t:.0f} s")
        for path in files:
            best = {root: {"wall": float("inf"), "cpu": float("inf")} for root in roots}
            for _ in range(args.repeat):
                for root in roots:
                    got = load_once(root, path)
                    best[root] = {k: min(best[root][k], got[k]) for k in ("wall", "cpu")}
            print(f"{path.name} ({path.stat().st_size / 1e6:.0f} MB), best of {args.repeat}:")
            for root in roots:
                print(f"  {root!s:40s} wall {best[root]['wall']:6.2f} s   cpu {best[root]['cpu']:6.2f} s")


if __name__ == "__main__":
    main()
