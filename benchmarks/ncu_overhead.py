"""Wall time of the ncu backend against the plain ``ncu`` command line on the canonical sweep.

The sweep: fp32 matmul, n = 512, 1024, 2048, 4096, 10 measured runs each after one warm-up run, inputs drawn
with ``torch.randn`` in every run, the matmul inside an NVTX range named like the backend names it. Two metric
sets: one metric (``gpu__time_duration.sum``) and five metrics (several replay passes per kernel).

* plain: ``ncu <same options, same --nvtx-include filter> python3 plain.py`` (an equivalent script, no nsightx,
  with the same process-wide start/end NVTX ranges the backend opens by default).
* nsightx: a call of the ``@nsightx.analyze.kernel(backend="ncu")``-decorated function, from the call to the
  returned result (worker start, ncu, report parsing and merging included).

Usage (GPU machine; never locks clocks)::

    PYTHONPATH=.:backends:plugins python3 benchmarks/ncu_overhead.py --repeats 2 --json out.json
"""

from __future__ import annotations

import argparse
import json
import operator
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SIZES = (512, 1024, 2048, 4096)
RUNS = 10
WARMUP = 1
METRIC_SETS = {
    "1 metric": ("gpu__time_duration.sum",),
    "5 metrics": (
        "gpu__time_duration.sum",
        "sm__throughput.avg.pct_of_peak_sustained_elapsed",
        "dram__bytes_read.sum",
        "gpc__cycles_elapsed.avg.per_second",
        "l1tex__t_bytes.sum",
    ),
}

PLAIN = r"""
import sys
import nvtx
import torch

sizes = [int(s) for s in sys.argv[1].split(",")]
runs, warmup = int(sys.argv[2]), int(sys.argv[3])
for c, n in enumerate(sizes):
    for r in range(-warmup, runs):
        a = torch.randn(n, n, device="cuda")
        b = torch.randn(n, n, device="cuda")
        rng = nvtx.start_range(message=f"matmul|config={c}|run={r}", domain="nsightx") if r >= 0 else None
        a @ b
        if rng is not None:
            nvtx.end_range(rng)
torch.cuda.synchronize()
"""


def matmul(n: int) -> None:
    """The profiled function (defined in ``__main__``: it reaches the worker through cloudpickle)."""
    import torch

    import nsightx

    a = torch.randn(n, n, device="cuda")
    b = torch.randn(n, n, device="cuda")
    with nsightx.annotate("matmul"):
        a @ b


def run_plain(metrics: tuple[str, ...], sizes: tuple[int, ...], runs: int, work: Path) -> dict[str, float]:
    from nsightx_ncu._command import build_command
    from nsightx_ncu._locate import require_ncu

    script = work / "plain.py"
    script.write_text(PLAIN, encoding="utf-8")
    cmd = build_command(
        require_ncu().path,
        report=work / "plain.ncu-rep",
        app=[sys.executable, str(script), ",".join(map(str, sizes)), str(runs), str(WARMUP)],
        metrics=metrics,
        replay_mode="kernel",
        cache_control="all",
        clock_control="none",
    )
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise RuntimeError(f"plain ncu failed ({proc.returncode}):\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
    return {"wall_s": wall}


def run_nsightx(metrics: tuple[str, ...], sizes: tuple[int, ...], runs: int) -> dict[str, object]:
    import nsightx

    profiled = nsightx.analyze.kernel(
        configs=[(n,) for n in sizes],
        runs=runs,
        warmup=WARMUP,
        backend="ncu",
        metrics=list(metrics),
        combine_kernel_metrics=operator.add,  # cuBLAS runs n=512 as two kernels (split-K)
        cache_control="all",
        clock_control="none",
        replay_mode="kernel",
        verbosity=0,
    )(matmul)
    start = time.perf_counter()
    res = profiled()
    wall = time.perf_counter() - start
    df = res.to_dataframe()
    times = df[df["Metric"] == "gpu__time_duration.sum"]
    report = res.environment.get("ncu_report")
    parse_s = None
    if isinstance(report, str):
        with tempfile.TemporaryDirectory() as tmp:
            args = json.dumps(
                {
                    "report": report,
                    "metrics": list(metrics),
                    "deep": False,
                    "reader_dir": _reader_dir(),
                    "out": str(Path(tmp) / "a.json"),
                }
            )
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-m", "nsightx_ncu._reader", args], check=True)
            parse_s = time.perf_counter() - t0
    return {
        "wall_s": wall,
        "report_parse_s": parse_s,
        "avg_ns": dict(zip(map(int, times["n"]), times["AvgValue"].round(1), strict=False)),
    }


def _reader_dir() -> str | None:
    from nsightx_ncu._locate import reader_location, require_ncu

    where = reader_location(require_ncu())
    return where[1] if where else None


def warm_metric_list() -> dict[str, object]:
    """Ask ncu for its metric list once (the backend's check caches it per ncu version and GPU), timed apart.

    A user pays this once per machine; leaving it in the first timed call would charge it to one measurement.
    """
    from nsightx_ncu._locate import require_ncu
    from nsightx_ncu._metrics import load_known

    install = require_ncu()
    start = time.perf_counter()
    known, gpu = load_known(install.path, install.version_string, 0)
    return {
        "metric_list_s": round(time.perf_counter() - start, 2),
        "gpu": gpu,
        "names": None if known is None else len(known.names),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=1, help="measurements of each side (alternating)")
    parser.add_argument("--runs", type=int, default=RUNS)
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)))
    parser.add_argument("--json", help="write the measurements here")
    args = parser.parse_args()
    sizes = tuple(int(s) for s in args.sizes.split(","))
    results: list[dict[str, object]] = [warm_metric_list()]
    print(json.dumps(results[0]), flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        for label, metrics in METRIC_SETS.items():
            for rep in range(args.repeats):
                order = ("plain", "nsightx") if rep % 2 == 0 else ("nsightx", "plain")
                for side in order:
                    row: dict[str, object] = {"metrics": label, "side": side, "repeat": rep}
                    if side == "plain":
                        row.update(run_plain(metrics, sizes, args.runs, Path(tmp)))
                    else:
                        row.update(run_nsightx(metrics, sizes, args.runs))
                    results.append(row)
                    print(json.dumps(row), flush=True)
    summary = []
    for label in METRIC_SETS:
        plain = statistics.median(
            float(r["wall_s"])
            for r in results  # type: ignore[arg-type]
            if r.get("metrics") == label and r.get("side") == "plain"
        )
        ours = statistics.median(
            float(r["wall_s"])
            for r in results  # type: ignore[arg-type]
            if r.get("metrics") == label and r.get("side") == "nsightx"
        )
        summary.append(
            {"metrics": label, "plain_s": round(plain, 2), "nsightx_s": round(ours, 2), "ratio": round(ours / plain, 3)}
        )
    print("\n| metrics | plain ncu (s) | nsightx ncu backend (s) | ratio |\n|---|---|---|---|")
    for s in summary:
        print(f"| {s['metrics']} | {s['plain_s']} | {s['nsightx_s']} | {s['ratio']} |")
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {
                    "machine": platform.node(),
                    "python": platform.python_version(),
                    "sizes": sizes,
                    "runs": args.runs,
                    "repeats": args.repeats,
                    "measurements": results,
                    "summary": summary,
                },
                indent=1,
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
