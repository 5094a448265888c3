"""Where the GPU of a deferred cupti call waits for the host (issue 35: what the whole call pays beyond the GPU work).

A deferred session does not synchronise between runs, so the GPU runs a region's kernels as soon as the host has
queued them, or later when it is still busy. Both the region's host window (``enter_ns``) and its kernels' GPU
start and end are CUPTI timestamps of one clock, so for every run of a profiled call this script reads:

- ``host``: the host's time per run (the difference of consecutive regions' ``enter_ns``, same config);
- ``gpu``: the GPU's time per run (the difference of consecutive regions' first kernel starts, same config);
- ``lead``: first kernel start minus ``enter_ns``; near the launch latency (some us) the kernel ran as soon as
  it was queued, so the GPU was waiting for the host; large, the host was ahead;
- ``inside``, ``between``, ``boundary``: the host's time in a region (the user's work and our enter and exit),
  from a region's exit to the next one's enter in a config (the run loop, the flush, the collectors), and from a
  config's last exit to the next config's first enter;
- ``idle``: the GPU's time between the previous region's last kernel end and this region's first kernel start,
  minus what the L2 flush between them takes (the median of that gap in the last config, where the host is far
  ahead); summed per config, it is how long the GPU waited for the host in that config.

It prints each config's medians and the idle sums of the median call (by total idle), and when the first region
was entered and its first kernel started, from the call's start (CUPTI's clock read just before the call).
Usage (GPU machine):
``python benchmarks/gpu_lag.py [--workload sweep_once] [--calls 9] [--json FILE]``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import backend_overhead as bo

STAMPS = ("enter", "exit", "start", "end")
"""The fields of a row that are CUPTI timestamps (written relative to the call's start)."""


class Capture:
    """The windows and kernels of the cupti session's collections since :meth:`reset` (``collect_runs`` wrapped;
    a call may collect its runs in several batches)."""

    def __init__(self) -> None:
        self.windows: dict[int, Any] = {}
        self.kernels: dict[int, list[Any]] = {}

    def reset(self) -> None:
        self.windows, self.kernels = {}, {}

    def install(self) -> None:
        from nsightx_cupti import _session

        inner_collect, inner_outputs = _session.CuptiSession.collect_runs, _session.to_run_outputs

        def collect_runs(session: Any) -> Any:
            self.windows.update((w.external_id, w) for w in session._windows)
            return inner_collect(session)

        def to_run_outputs(attribution: Any, *args: Any, **kwargs: Any) -> Any:
            self.kernels.update((ext, [a.kernel for a in placed]) for ext, placed in attribution.by_region.items())
            return inner_outputs(attribution, *args, **kwargs)

        _session.CuptiSession.collect_runs = collect_runs  # type: ignore[method-assign,assignment]
        _session.to_run_outputs = to_run_outputs


def runs_of(cap: Capture) -> list[dict[str, Any]]:
    """One row per region with kernels: config, run, enter, first kernel start, last kernel end (ns)."""
    rows = []
    for w in sorted(cap.windows.values(), key=lambda w: w.enter_ns):
        ks = cap.kernels.get(w.external_id)
        if ks:
            rows.append(
                {
                    "config": w.config,
                    "run": w.run,
                    "enter": w.enter_ns,
                    "exit": w.exit_ns,
                    "start": min(k.start for k in ks),
                    "end": max(k.end for k in ks),
                }
            )
    return rows


def per_config(rows: list[dict[str, Any]], flush_ns: float) -> dict[int, dict[str, float]]:
    """Each config's medians of host, gpu and lead per run, of ``inside`` (the host's time in a region: the user's
    work and our enter and exit) and ``between`` (exit to the next enter: the run loop, the flush, the collectors),
    ``boundary`` (the previous config's last exit to this config's first enter), and its summed idle, us."""
    out: dict[int, dict[str, float]] = {}
    prev: dict[str, Any] | None = None
    acc: dict[int, dict[str, list[float]]] = {}
    for r in rows:
        keys = ("host", "gpu", "lead", "inside", "between", "boundary", "idle")
        a = acc.setdefault(r["config"], {k: [] for k in keys})
        a["lead"].append((r["start"] - r["enter"]) / 1e3)
        a["inside"].append((r["exit"] - r["enter"]) / 1e3)
        if prev is not None:
            a["idle"].append(max(0.0, (r["start"] - prev["end"] - flush_ns) / 1e3))
            if prev["config"] == r["config"]:
                a["host"].append((r["enter"] - prev["enter"]) / 1e3)
                a["gpu"].append((r["start"] - prev["start"]) / 1e3)
                a["between"].append((r["enter"] - prev["exit"]) / 1e3)
            else:
                a["boundary"].append((r["enter"] - prev["exit"]) / 1e3)
        prev = r
    for c, a in acc.items():
        out[c] = {k: statistics.median(v) if v else 0.0 for k, v in a.items() if k != "idle"}
        out[c]["idle_sum"] = sum(a["idle"])
    return out


def flush_gap_ns(rows: list[dict[str, Any]]) -> float:
    """The median gap between consecutive regions of the last config (the host far ahead: the flush alone)."""
    last = [r for r in rows if r["config"] == rows[-1]["config"]]
    gaps = [b["start"] - a["end"] for a, b in itertools.pairwise(last)]
    return float(statistics.median(gaps)) if gaps else 0.0


def one_call(fn: Any, cap: Capture) -> dict[str, Any]:
    """One whole call: its per-config table, and ``first`` (call start to first kernel, us)."""
    from nsightx_cupti._tracer import ActivityTracer

    tracer = ActivityTracer.get()
    cap.reset()
    cupti_t0 = int(tracer._cupti.get_timestamp())  # CUPTI's clock, as the records' stamps
    fn().to_dataframe()
    rows = runs_of(cap)
    flush = flush_gap_ns(rows)
    return {
        "configs": per_config(rows, flush),
        "flush_us": flush / 1e3,
        "first_us": (rows[0]["start"] - cupti_t0) / 1e3,
        "first_enter_us": (rows[0]["enter"] - cupti_t0) / 1e3,
        "regions": len(rows),
        "rows": [{k: v - cupti_t0 if k in STAMPS else v for k, v in r.items()} for r in rows],
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workload", default="sweep_once", choices=sorted(bo.WORKLOADS))
    ap.add_argument("--calls", type=int, default=9)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    import torch

    if not torch.cuda.is_available():
        raise SystemExit("gpu_lag.py needs a CUDA device; torch sees none here (run it on the GPU machine)")
    w = bo.WORKLOADS[args.workload]
    cap = Capture()
    cap.install()
    fn = bo.make_profiled(torch, w, "cupti", collectors=True)
    fn().to_dataframe()  # warm
    calls = []
    for _ in range(args.calls):
        torch.cuda.synchronize()
        calls.append(one_call(fn, cap))
    total_idle = [sum(c["idle_sum"] for c in call["configs"].values()) for call in calls]
    mid = calls[sorted(range(len(calls)), key=lambda i: total_idle[i])[len(calls) // 2]]
    print(f"gpu_lag {args.workload}: {len(calls)} calls; the median call by idle ({mid['regions']} regions):")
    print(
        f"  first region entered {mid['first_enter_us']:.0f} us and its first kernel started {mid['first_us']:.0f} us "
        f"after the call's start; flush gap {mid['flush_us']:.1f} us"
    )
    for c, row in sorted(mid["configs"].items()):
        shown = ", ".join(f"{k} {v:.1f}" for k, v in row.items())
        print(f"  config {c}: {shown} us")
    print(f"  GPU idle beyond the flush, whole call: {statistics.median(total_idle):.0f} us (median of calls)")
    if args.json:
        args.json.write_text(json.dumps({"calls": calls, "idle_us": total_idle}, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
