"""Why can an events span be shorter than the CUPTI kernel sum it brackets? (tests/test_events_gpu.py)

For ``a @ a`` at n = 512 (a split-K matmul: two kernels), alternating several times, prints and writes:
a bare loop of CUDA events around the matmul after the same kind of L2 flush; nsightx events spans; nsightx
CUPTI per-kernel durations (names and medians); each with cache_control "all" and "none".

    python3 benchmarks/span_vs_kernels.py --out DIR [--rounds 3] [--after-profiler]

With ``--after-profiler`` the rounds are repeated after a ``torch.profiler`` session (CUDA activities) in the same
process, then again after switching off CUPTI's serialising ``KERNEL`` activity kind, which that session may have
left enabled (the events test ran after the torch.profiler tests in the GPU suite and failed there only).
"""

from __future__ import annotations

import argparse
import json
import operator
import statistics
from collections import defaultdict
from pathlib import Path

import torch

import nsightx
from nsightx import VerbosityLevel

N = 512


def bare(a: torch.Tensor, flush: torch.Tensor | None, runs: int = 10) -> float:
    spans = []
    for _ in range(runs + 1):
        if flush is not None:
            flush.zero_()
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        a @ a
        e.record()
        e.synchronize()
        spans.append(s.elapsed_time(e) * 1e3)
    return statistics.median(spans[1:])


def measured(a: torch.Tensor, backend: str, cache: str) -> nsightx.ProfileResults:
    @nsightx.analyze.kernel(
        runs=10,
        backend=backend,
        cache_control=cache,
        combine_kernel_metrics=operator.add,
        verbosity=VerbosityLevel.SILENT,
    )
    def mm() -> None:
        with nsightx.annotate("mm"):
            a @ a

    return mm()


def kernel_table(res: nsightx.ProfileResults) -> dict[str, float]:
    by: dict[str, list[float]] = defaultdict(list)
    for r in res.records:
        by[r.kernel].append(r.value / 1e3)
    return {k: statistics.median(v) for k, v in by.items()}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--after-profiler", action="store_true")
    args = ap.parse_args()
    a = torch.randn(N, N, device="cuda")
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    flush = torch.empty(2 * l2 // 4, dtype=torch.float32, device="cuda")
    rows: list[dict] = []
    rounds(a, flush, args.rounds, "fresh", rows)
    if args.after_profiler:
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            for _ in range(5):
                a @ a
            torch.cuda.synchronize()
        print("torch.profiler saw", len(prof.key_averages()), "event kinds", flush=True)
        rounds(a, flush, args.rounds, "after_profiler", rows)
        from cupti import cupti

        cupti.activity_disable(cupti.ActivityKind.KERNEL)
        rounds(a, flush, args.rounds, "after_profiler_kernel_kind_off", rows)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "span_vs_kernels.json").write_text(json.dumps({"n": N, "rows": rows}, indent=1))


def rounds(a: torch.Tensor, flush: torch.Tensor, count: int, phase: str, rows: list[dict]) -> None:
    for i in range(count):
        for cache in ("all", "none"):
            row = {"phase": phase, "round": i, "cache": cache, "bare_us": bare(a, flush if cache == "all" else None)}
            ev = measured(a, "events", cache)
            row["events_span_us"] = statistics.median(r.value / 1e3 for r in ev.records)
            cu = measured(a, "cupti", cache)
            per_run = defaultdict(float)
            for r in cu.records:
                per_run[r.run] += r.value / 1e3
            row["cupti_sum_us"] = statistics.median(per_run.values())
            row["cupti_kernels_us"] = kernel_table(cu)
            print(json.dumps(row), flush=True)
            rows.append(row)


if __name__ == "__main__":
    main()
