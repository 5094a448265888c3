"""Time and peak memory of ``nsightx.load`` against a plain ``json.load`` of the same saved result.

Usage: python benchmarks/load_result.py [--configs 200] [--runs 50] [--regions 3] [--repeat 5]
       [--json benchmarks/results/<date>-load-result.json]

The file is a real result: a sweep of ``--configs`` configs x ``--runs`` runs x ``--regions`` annotated regions
measured with the host backend (about 10.6 MB for the defaults), saved with ``ProfileResults.save``. Each
measurement runs in a fresh subprocess, so one does not warm the other's caches or heap:

- time: the best of ``--repeat`` subprocesses, each timing one load after the imports (``time.perf_counter``);
- memory, two ways: the peak of Python allocations while loading (``tracemalloc``, its own subprocess because
  tracing slows the load down), and the growth of the process's peak resident set during the load
  (``ru_maxrss`` after minus the resident set just before, which also counts memory pydantic-core's Rust code
  allocates outside Python's allocator).

``nsightx.load`` reads the whole result (building the model objects, not the DataFrame). The target (issue 11)
is at most 2x ``json.load`` in time and in both memory figures.
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

_CHILD = r"""
import json, resource, sys, time, tracemalloc
mode, what, path = sys.argv[1], sys.argv[2], sys.argv[3]
import nsightx
nsightx.load  # import the loader (pydantic, the models) before measuring
text = open(path, "rb").read()
del text

def rss_kb():
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * resource.getpagesize() // 1024

def work():
    if what == "json":
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    return nsightx.load(path)

if mode == "time":
    t = time.perf_counter(); obj = work(); dt = time.perf_counter() - t
    print(json.dumps({"seconds": dt}))
elif mode == "tracemalloc":
    tracemalloc.start(); obj = work(); peak = tracemalloc.get_traced_memory()[1]; tracemalloc.stop()
    print(json.dumps({"peak_bytes": peak}))
else:
    before = rss_kb(); obj = work(); after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"maxrss_growth_bytes": max(after - before, 0) * 1024}))
"""


def build_result(path: Path, configs: int, runs: int, regions: int) -> float:
    """Measure the sweep with the host backend and save it to ``path``; returns the seconds it took."""
    import nsightx

    names = [f"region{i}" for i in range(regions)]

    @nsightx.analyze.kernel(
        configs=list(range(configs)), runs=runs, warmup=0, backend="host", verbosity=nsightx.VerbosityLevel.SILENT
    )
    def sweep(n: int) -> None:
        for name in names:
            with nsightx.annotate(name):
                sum(range(n))

    t = time.perf_counter()
    sweep().save(path)
    return time.perf_counter() - t


def _child(mode: str, what: str, path: Path) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, mode, what, str(path)], capture_output=True, text=True, check=True
    )
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def measure(path: Path, repeat: int) -> dict[str, dict[str, float]]:
    """Best time, tracemalloc peak and resident-set growth of ``json`` and ``nsightx`` loading ``path``."""
    out: dict[str, dict[str, float]] = {}
    for what in ("json", "nsightx"):
        seconds = min(_child("time", what, path)["seconds"] for _ in range(repeat))
        peak = _child("tracemalloc", what, path)["peak_bytes"]
        rss = min(_child("rss", what, path)["maxrss_growth_bytes"] for _ in range(max(repeat // 2, 1)))
        out[what] = {"seconds": seconds, "tracemalloc_peak_bytes": peak, "maxrss_growth_bytes": rss}
    return out


def main() -> None:
    """Build the file, measure both loaders side by side, print ratios and optionally write JSON."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--configs", type=int, default=200)
    p.add_argument("--runs", type=int, default=50)
    p.add_argument("--regions", type=int, default=3)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--json", type=Path, default=None, help="write the numbers here")
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "result.json"
        built = build_result(path, args.configs, args.runs, args.regions)
        size = path.stat().st_size
        numbers = measure(path, args.repeat)
    j, n = numbers["json"], numbers["nsightx"]
    ratios = {k: n[k] / j[k] if j[k] else float("inf") for k in j}
    print(f"machine: {platform.machine()}, Python {platform.python_version()}, {platform.platform()}")
    print(
        f"result: {args.configs} configs x {args.runs} runs x {args.regions} regions (host backend), "
        f"{size / 1e6:.1f} MB, measured and saved in {built:.1f} s"
    )
    print(f"{'':>10} {'time s':>9} {'tracemalloc MB':>15} {'maxrss growth MB':>17}")
    for name, row in (("json.load", j), ("nsightx", n)):
        print(
            f"{name:>10} {row['seconds']:9.3f} {row['tracemalloc_peak_bytes'] / 1e6:15.1f} "
            f"{row['maxrss_growth_bytes'] / 1e6:17.1f}"
        )
    print(
        f"{'ratio':>10} {ratios['seconds']:8.2f}x {ratios['tracemalloc_peak_bytes']:14.2f}x "
        f"{ratios['maxrss_growth_bytes']:16.2f}x   (target <= 2x)"
    )
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(
            json.dumps(
                {
                    "command": "python " + " ".join(sys.argv),
                    "machine": {
                        "arch": platform.machine(),
                        "python": platform.python_version(),
                        "platform": platform.platform(),
                    },
                    "file": {"configs": args.configs, "runs": args.runs, "regions": args.regions, "bytes": size},
                    "json_load": j,
                    "nsightx_load": n,
                    "ratios": ratios,
                },
                indent=2,
            )
            + "\n",
            encoding="utf-8",
        )


if __name__ == "__main__":
    main()
