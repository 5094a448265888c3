"""torch.profiler, then an nsightx CUPTI sweep, then torch.profiler again: are nsightx's kernel times still right?

    python3 benchmarks/profiler_sandwich.py [--json OUT]

torch.profiler (Kineto) leaves CUPTI stamping records with CPU cycle counts for the rest of the process; nsightx
maps them back to nanoseconds (``backends/nsightx_cupti/_clock.py``). This script runs the same sweep (fp32 matmul
n = 1024, 2048, 4096, inputs allocated once, 20 runs each, cache flushed, cupti backend) in a fresh process and,
in a second process, between two torch.profiler sessions, and prints per size the median kernel time of both and
their ratio (issue 36's target: within 2%), the clock the sandwiched call used (``CuptiClock``), and each
profiler session's median kernel time of the same matmul (the later session must still read its own clock).
Exit status 1 when a size is off by more than 2%. Never changes GPU clocks.
"""

from __future__ import annotations

import argparse
import json
import operator
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

SIZES = (1024, 2048, 4096)
RUNS = 20
LIMIT = 0.02


def sweep() -> dict[str, Any]:
    """The nsightx sweep; per size the median of the runs' kernel time, ns, and the clock CUPTI used."""
    import torch

    import nsightx

    inputs = {n: torch.randn(n, n, device="cuda") for n in SIZES}

    @nsightx.analyze.kernel(
        configs=[(n,) for n in SIZES],
        runs=RUNS,
        backend="cupti",
        verbosity=nsightx.VerbosityLevel.SILENT,
        combine_kernel_metrics=operator.add,
    )
    def matmul(n: int) -> None:
        a = inputs[n]
        with nsightx.annotate("matmul"):
            a @ a

    result = matmul()
    per: dict[int, list[float]] = {}
    for r in result.records:
        per.setdefault(SIZES[r.config], []).append(r.value)
    return {
        "median_ns": {str(n): statistics.median(v) for n, v in per.items()},
        "clock": result.environment.get("CuptiClock"),
    }


def profiler_median_us(torch: Any) -> float:
    """Median kernel time torch.profiler reports for a 2048 matmul, us."""
    a = torch.randn(2048, 2048, device="cuda")
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(10):
            a @ a
        torch.cuda.synchronize()
    kernels = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    return statistics.median(float(e.device_time_total) for e in kernels)


def sandwich() -> dict[str, Any]:
    import torch

    torch.zeros(1, device="cuda")
    before = profiler_median_us(torch)
    out = sweep()
    out["profiler_before_us"] = before
    out["profiler_after_us"] = profiler_median_us(torch)
    return out


def child(mode: str) -> dict[str, Any]:
    cmd = [sys.executable, __file__, "--child", mode]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False, env=os.environ.copy())
    if done.returncode != 0:
        raise SystemExit(f"{mode} process failed:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", type=Path)
    ap.add_argument("--child", choices=("fresh", "sandwich"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(sweep() if args.child == "fresh" else sandwich()))
        return 0
    fresh, sand = child("fresh"), child("sandwich")
    ratios = {n: sand["median_ns"][n] / fresh["median_ns"][n] for n in fresh["median_ns"]}
    print(f"clock: fresh process {fresh['clock']!r}; between profiler sessions {sand['clock']!r}")
    for n, ratio in ratios.items():
        print(
            f"n={n:>5}: fresh {fresh['median_ns'][n] / 1e3:9.2f} us  sandwiched {sand['median_ns'][n] / 1e3:9.2f} us"
            f"  ratio {ratio:.4f}  {'ok' if abs(ratio - 1) <= LIMIT else 'OFF'}"
        )
    before, after = sand["profiler_before_us"], sand["profiler_after_us"]
    print(f"torch.profiler 2048 matmul: before {before:.2f} us, after {after:.2f} us")
    if args.json:
        args.json.write_text(json.dumps({"fresh": fresh, "sandwich": sand, "ratios": ratios}, indent=1))
    return 0 if all(abs(r - 1) <= LIMIT for r in ratios.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
