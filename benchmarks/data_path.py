"""The CPU data path of a result: ``to_dataframe()`` against the floor of the same work in pandas, plus save, load,
bytes per record and peak memory.

Usage: python benchmarks/data_path.py [--tree PATH ...] [--shapes 4x10x1,10x100x100,...] [--collectors]
       [--fixture RESULT ...] [--repeat 7] [--suffix parquet|json] [--json OUT]

Each shape is configs x runs x regions (one metric, so records = values = their product). The result is built
synthetically through the real schema and builder (``build_results`` over ``RunRecords`` such as the host backend
writes: one ``host__time_duration.sum`` record and one region execution per region and run; with
``--collectors``, the values the nvml plugin writes as well: seven per run, clocks as ints as NVML gives them,
and six once per call, as in the H100 result under ``tests/fixtures/gpu-results``).
``--fixture PATH`` (repeatable) also times ``to_dataframe()`` of a saved result (loaded once, a fresh
``ProfileResults`` per call), for the small GPU results of issue 35. Per shape, in one process:

- ``to_dataframe()`` of a fresh result (a new ``ProfileResults`` with no cache: in a tree whose results hold
  columns, over the columns ``build_results`` made; in an older tree, over a new ``ResultData`` object), and the
  floor: a DataFrame built from numpy columns (annotation code, metric code, config, value) and one
  ``groupby`` with mean, median, std, min and max; the two interleaved, each the median of
  ``--repeat`` runs (fewer for 1e6 records), and their ratio, in wall time and in CPU time of the process; each
  timed call starts after a full garbage collection (the garbage collector stays on while it runs);
- ``runs_dataframe()`` of a fresh result (median);
- ``build_results`` over the runs (the result a call returns, made from the objects the sink delivers; where
  results hold columns, this is where they are made);
- ``ProfileResults.save`` to ``result.<--suffix>`` (``parquet`` by default; a tree whose ``save`` ignores the
  suffix writes its JSON there), ``nsightx.load`` of the saved file, and ``nsightx.load(...).to_dataframe()``
  (medians), and the file's bytes per record;
- in more subprocesses: one saves the result; then, each in its own process that only loads that file, the peak
  of Python allocations (``tracemalloc``; Arrow's own buffers are outside it) while loading the file and then
  while building ``to_dataframe()``, and the growth of the peak resident set (``ru_maxrss``, after the imports)
  over load plus frame, and the size of the loaded result's columns (``nbytes`` of each distinct array it
  holds) with that growth's ratio to it (issue 35's target: under 2x at 1e6 records).

``--tree PATH`` (repeatable) measures another checkout the same way: each tree runs in its own subprocess with
``PYTHONPATH=PATH:PATH/backends:PATH/plugins``, shape by shape, the trees alternating, so a before/after comes from
one run. Without ``--tree`` the tree this script sits in is measured. The machine is shared and noisy: compare the
ratios to the floor, which are taken side by side in the same process.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
OWN_TREE = HERE.parent
DEFAULT_SHAPES = "4x10x1,10x10x10,10x100x10,10x1000x10,10x100x100,10x100x1000"
METRIC = "host__time_duration.sum"


def _profileresults() -> Any:
    """The module holding ``ProfileResults`` and ``build_results`` (``_results.results`` in trees before the
    session-14 renames, so that ``--tree`` still measures them)."""
    import importlib

    try:
        return importlib.import_module("nsightx._results.profileresults")
    except ModuleNotFoundError:
        return importlib.import_module("nsightx._results.results")


def build(configs: int, runs: int, regions: int, collectors: bool, seed: int = 0) -> Any:
    """A synthetic result of the given shape, through ``build_results`` (the one result builder)."""
    build_results = _profileresults().build_results

    return build_results(*make_runs(configs, runs, regions, collectors, seed), created="2026-12-05T00:00:00+00:00")


def make_runs(configs: int, runs: int, regions: int, collectors: bool, seed: int = 0) -> tuple[Any, Any, Any]:
    """The plan, runs and environment ``build_results`` takes for a synthetic result of the given shape."""
    from nsightx._results.records import CollectorValue, Record, RegionRun, RunRecords
    from nsightx._results.schema import PlanInfo

    rng = random.Random(seed)
    names = [f"region{i}" for i in range(regions)]
    out = []
    for c in range(configs):
        for r in range(runs):
            ns = [1000.0 + rng.random() * 100.0 * (c + 1) for _ in names]
            cols: tuple[CollectorValue, ...] = ()
            if collectors:
                per_run: dict[str, float | int | str | bool] = {
                    "ThermalPauseS": 0.0,
                    "MeasuredSMClockMHz": 1980 - rng.randint(0, 1) * 15,
                    "MeasuredMemClockMHz": 2619,
                    "GPUTemperatureC": rng.randint(40, 70),
                    "GPUPowerW": round(100.0 + rng.random() * 50.0, 3),
                    "ClockEventReasons": "none",
                    "NvmlSampleAgeMs": round(rng.random() * 0.1, 3),
                }
                cols = tuple(CollectorValue(name=k, scope="run", config=c, run=r, value=v) for k, v in per_run.items())
            out.append(
                RunRecords(
                    config=c,
                    run=r,
                    records=tuple(
                        Record(annotation=a, config=c, run=r, kernel="region", metric=METRIC, value=v, unit="ns")
                        for a, v in zip(names, ns, strict=True)
                    ),
                    regions=tuple(
                        RegionRun(annotation=a, config=c, run=r, host_ns=int(v)) for a, v in zip(names, ns, strict=True)
                    ),
                    collectors=cols,
                )
            )
    if collectors:  # the nvml plugin's once-per-call values, in a run of their own as the run loop hands them over
        once: dict[str, float | int | str | bool] = {
            "DriverVersion": "580.159.04",
            "GPUName": "NVIDIA H100 80GB HBM3",
            "GPUUUID": "GPU-00000000-0000-0000-0000-000000000000",
            "PowerLimitW": 700.0,
            "ECCEnabled": True,
            "SlowdownTempC": 89,
        }
        values = tuple(CollectorValue(name=k, scope="once", config=None, run=None, value=v) for k, v in once.items())
        out.insert(0, RunRecords(config=-1, run=-1, records=(), regions=(), collectors=values))
    plan = PlanInfo(
        function="bench",
        params=("n",),
        configs=tuple((c,) for c in range(configs)),
        runs=runs,
        warmup=0,
        metrics=(METRIC,),
        backend="host",
        cache_control="all",
        clock_control="none",
        replay_mode="kernel",
    )
    env: dict[str, Any] = {"GPU": "none", "Host": "bench"}
    if collectors:
        env.update({"GPU": "NVIDIA H100 80GB HBM3", "ComputeClock": 1980000, "MemoryClock": 2619000})
    return plan, out, env


def floor(data: Any) -> tuple[float, float]:
    """Seconds (wall, CPU) for the same statistics in plain pandas: numpy columns, one DataFrame, one groupby."""
    import numpy as np
    import pandas as pd

    vals = data.values
    n = len(vals)
    names = {name: i for i, name in enumerate(dict.fromkeys(v.annotation for v in vals))}
    columns = {  # prepared before the clock starts: the floor is the pandas work alone
        "annotation": np.fromiter((names[v.annotation] for v in vals), dtype=np.int64, count=n),
        "metric": np.zeros(n, dtype=np.int64),
        "config": np.fromiter((v.config for v in vals), dtype=np.int64, count=n),
        "value": np.fromiter((v.value for v in vals), dtype=np.float64, count=n),
    }
    gc.collect()  # else a collection of the result's objects, due by chance, lands in the 10 ms being timed
    t, c = time.perf_counter(), time.process_time()
    frame = pd.DataFrame(columns)
    frame.groupby(["annotation", "metric", "config"], sort=False)["value"].agg(["mean", "median", "std", "min", "max"])
    return time.perf_counter() - t, time.process_time() - c


def timed(fn: Any) -> tuple[float, float]:
    """Seconds (wall, CPU of this process) that ``fn()`` took (after a full garbage collection, see ``floor``)."""
    gc.collect()
    t, c = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - t, time.process_time() - c


def child_time(shape: str, collectors: bool, repeat: int, suffix: str) -> dict[str, Any]:
    """The timings of one shape in this process (the tree on ``sys.path``)."""
    import nsightx

    module = _profileresults()
    ProfileResults, build_results = module.ProfileResults, module.build_results

    configs, runs, regions = map(int, shape.split("x"))
    plan, run_objects, env = make_runs(configs, runs, regions, collectors)
    result = build_results(plan, run_objects, env, created="2026-12-05T00:00:00+00:00")
    data = result.data
    n = len(data.values)
    if hasattr(ProfileResults, "from_columns"):  # a tree whose results hold columns: as build_results made them
        columns = result.columns

        def fresh() -> Any:
            return ProfileResults.from_columns(data, columns)
    else:

        def fresh() -> Any:
            return ProfileResults(data.model_copy())

    fresh().to_dataframe()  # imports and first-call costs out of the way
    floor(data)
    frames, floors, runs_frames = [], [], []
    for _ in range(repeat):  # interleaved: the machine's load moves both alike
        frames.append(timed(lambda: fresh().to_dataframe()))
        floors.append(floor(data))
        runs_frames.append(timed(lambda: fresh().runs_dataframe()))
    builds = [timed(lambda: build_results(plan, run_objects, env)) for _ in range(max(1, min(repeat, 3)))]
    saves, loads, load_frames = [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"result.{suffix}"
        for _ in range(max(1, min(repeat, 3))):
            saves.append(timed(lambda: result.save(path)))
            loads.append(timed(lambda: nsightx.load(path)))
            load_frames.append(timed(lambda: nsightx.load(path).to_dataframe()))
        size = path.stat().st_size
    wall = [f[0] for f in frames]
    cpu = [f[1] for f in frames]
    floor_wall = [f[0] for f in floors]
    floor_cpu = [f[1] for f in floors]
    return {
        "shape": shape,
        "records": n,
        "suffix": suffix,
        "collectors": collectors,
        "repeat": repeat,
        "to_dataframe_s": statistics.median(wall),
        "floor_s": statistics.median(floor_wall),
        "ratio": statistics.median(wall) / statistics.median(floor_wall),
        "to_dataframe_cpu_s": statistics.median(cpu),
        "floor_cpu_s": statistics.median(floor_cpu),
        "cpu_ratio": statistics.median(cpu) / statistics.median(floor_cpu),
        "runs_dataframe_s": statistics.median(r[0] for r in runs_frames),
        "build_results_s": statistics.median(r[0] for r in builds),
        "save_s": statistics.median(r[0] for r in saves),
        "load_s": statistics.median(r[0] for r in loads),
        "load_to_dataframe_s": statistics.median(r[0] for r in load_frames),
        "bytes_per_record": size / n,
        "all_to_dataframe_s": wall,
        "all_floor_s": floor_wall,
        "all_to_dataframe_cpu_s": cpu,
        "all_floor_cpu_s": floor_cpu,
    }


def child_fixture(path: Path, repeat: int) -> dict[str, Any]:
    """``to_dataframe()`` of the saved result at ``path``: loaded once, a fresh ``ProfileResults`` per call."""
    import nsightx

    ProfileResults = _profileresults().ProfileResults
    loaded = nsightx.load(path)
    if hasattr(ProfileResults, "from_columns"):

        def fresh() -> Any:
            return ProfileResults.from_columns(loaded.data, loaded.columns)
    else:

        def fresh() -> Any:
            return ProfileResults(loaded.data.model_copy())

    fresh().to_dataframe()
    wall = [timed(lambda: fresh().to_dataframe())[0] for _ in range(repeat)]
    return {"fixture": str(path), "to_dataframe_s": statistics.median(wall), "all_to_dataframe_s": wall}


def child_save(shape: str, collectors: bool, path: Path) -> dict[str, Any]:
    """Save a result of ``shape`` to ``path`` (in its own process, so the memory children only load)."""
    configs, runs, regions = map(int, shape.split("x"))
    build(configs, runs, regions, collectors).save(path)
    return {"path": str(path)}


def child_memory(path: Path, mode: str) -> dict[str, Any]:
    """Peak memory of loading the saved result at ``path`` and of its ``to_dataframe()``, in this process."""
    import resource
    import tracemalloc

    import pandas  # noqa: F401  (imported before measuring: its import is not the frame's memory)
    import pyarrow.parquet  # noqa: F401  (likewise)

    import nsightx
    import nsightx._results.dataframe

    gc.collect()
    if mode == "tracemalloc":
        tracemalloc.start()
        loaded = nsightx.load(path)
        load_peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        loaded.to_dataframe()
        frame_peak = tracemalloc.get_traced_memory()[1] - base
        tracemalloc.stop()
        return {"load_tracemalloc_peak_bytes": load_peak, "frame_tracemalloc_peak_bytes": frame_peak}
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    loaded = nsightx.load(path)
    loaded.to_dataframe()
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return {"load_and_frame_maxrss_growth_bytes": max(after - before, 0), "columns_bytes": columns_bytes(loaded)}


def columns_bytes(result: Any) -> int:
    """The size of the columns a loaded result holds: ``nbytes`` of each distinct numpy array in its
    ``ResultColumns`` (an array two tables share counted once; names and collector lists left out); 0 in a tree
    whose results hold no columns."""
    import numpy as np

    seen: dict[int, int] = {}

    def walk(item: Any) -> None:
        if isinstance(item, np.ndarray):
            seen[id(item)] = item.nbytes
        elif hasattr(item, "__dataclass_fields__"):
            for name in item.__dataclass_fields__:
                walk(getattr(item, name))

    walk(getattr(result, "columns", None))
    return sum(seen.values())


def run_child(tree: Path, args: list[str]) -> dict[str, Any]:
    """This script's child mode in a subprocess that imports ``tree``."""
    paths = [str(tree), str(tree / "backends"), str(tree / "plugins")]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}
    out = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), *args], capture_output=True, text=True, env=env, check=False
    )
    if out.returncode != 0:
        raise SystemExit(f"child {args} of {tree} failed:\n{out.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    """Measure every shape in every tree (alternating), print the table, optionally write JSON."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tree", type=Path, action="append", default=None, help="a checkout to measure (repeatable)")
    p.add_argument("--shapes", default=DEFAULT_SHAPES, help="configs x runs x regions, comma-separated")
    p.add_argument("--collectors", action="store_true", help="add the nvml plugin's four run-scope values")
    p.add_argument("--repeat", type=int, default=7, help="timed repeats per shape (3 at 1e6 records and more)")
    p.add_argument("--no-memory", action="store_true", help="skip the two memory subprocesses")
    p.add_argument("--suffix", default="parquet", help="the saved file's suffix (save picks the format by it)")
    p.add_argument("--fixture", type=Path, action="append", default=[], help="a saved result to time (repeatable)")
    p.add_argument("--json", type=Path, default=None, help="write the numbers here")
    p.add_argument("--child", choices=["time", "fixture", "save", "tracemalloc", "maxrss"], help=argparse.SUPPRESS)
    p.add_argument("--shape", help=argparse.SUPPRESS)
    p.add_argument("--path", type=Path, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        if args.child == "time":
            out = child_time(args.shape, args.collectors, args.repeat, args.suffix)
        elif args.child == "fixture":
            out = child_fixture(args.path, args.repeat)
        elif args.child == "save":
            out = child_save(args.shape, args.collectors, args.path)
        else:
            out = child_memory(args.path, args.child)
        print(json.dumps(out))
        return
    trees = [t.resolve() for t in args.tree] if args.tree else [OWN_TREE]
    flag = [*(["--collectors"] if args.collectors else []), "--suffix", args.suffix]
    rows: list[dict[str, Any]] = []
    for shape in args.shapes.split(","):
        records = 1
        for part in shape.split("x"):
            records *= int(part)
        repeat = 3 if records >= 1_000_000 else args.repeat
        for tree in trees:
            row = {
                "tree": str(tree),
                **run_child(tree, ["--child", "time", "--shape", shape, "--repeat", str(repeat), *flag]),
            }
            if not args.no_memory:
                with tempfile.TemporaryDirectory() as tmp:
                    path = str(Path(tmp) / f"result.{args.suffix}")
                    run_child(tree, ["--child", "save", "--shape", shape, "--path", path, *flag])
                    for mode in ("tracemalloc", "maxrss"):
                        row.update(run_child(tree, ["--child", mode, "--path", path, *flag]))
            rows.append(row)
            print(_line(row), flush=True)
    fixtures: list[dict[str, Any]] = []
    for fixture in args.fixture:
        for tree in trees:
            got = run_child(tree, ["--child", "fixture", "--path", str(fixture.resolve()), "--repeat", "31"])
            fixtures.append({"tree": str(tree), **got})
            print(f"{tree.name:>12} {fixture.name}  to_dataframe {got['to_dataframe_s'] * 1e3:7.2f} ms", flush=True)
    report = {
        "command": "python " + " ".join(sys.argv),
        "machine": {"arch": platform.machine(), "python": platform.python_version(), "platform": platform.platform()},
        "rows": rows,
        "fixtures": fixtures,
    }
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")


def _line(row: dict[str, Any]) -> str:
    mem = ""
    if "load_tracemalloc_peak_bytes" in row:
        mem = (
            f" load peak {row['load_tracemalloc_peak_bytes'] / 1e6:7.1f} MB"
            f" frame peak {row['frame_tracemalloc_peak_bytes'] / 1e6:7.1f} MB"
            f" rss+ {row['load_and_frame_maxrss_growth_bytes'] / 1e6:7.1f} MB"
        )
        if row.get("columns_bytes"):
            cols = row["columns_bytes"]
            mem += f" columns {cols / 1e6:7.1f} MB ({cols / row['records']:5.1f} B/rec)"
            mem += f" rss+/columns {row['load_and_frame_maxrss_growth_bytes'] / cols:5.2f}x"
    return (
        f"{Path(row['tree']).name:>12} {row['shape']:>11} {row['records']:>8} rec"
        f"  to_dataframe {row['to_dataframe_s'] * 1e3:9.1f} ms  floor {row['floor_s'] * 1e3:7.1f} ms"
        f"  ratio {row['ratio']:6.2f}x  (CPU {row['cpu_ratio']:5.2f}x)"
        f"  runs_dataframe {row['runs_dataframe_s'] * 1e3:8.1f} ms"
        f"  build {row.get('build_results_s', math.nan) * 1e3:8.1f} ms"
        f"  save {row['save_s'] * 1e3:8.1f} ms  load {row['load_s'] * 1e3:8.1f} ms"
        f"  load+frame {row.get('load_to_dataframe_s', math.nan) * 1e3:8.1f} ms"
        f"  {row['bytes_per_record']:6.1f} B/rec{mem}"
    )


if __name__ == "__main__":
    main()
