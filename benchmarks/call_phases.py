"""Where the wall time of one decorated sweep call goes, phase by phase (GPU; a probe for issue 35).

The cupti call of backend_overhead's matmul sweep costs ~1.1-1.5 ms more than on d6b4a1c (H100, session 17)
while the events call costs the same, so the extra is cupti's own. The host launches every run ahead of the GPU
and waits once, in the session's ``collect_runs``; this probe wraps that method (both trees have it) and the
device wait inside it, and times, per call:

- ``launch``: from the call's start until the loop asks for the runs (host work ahead of the GPU),
- ``wait``: the device wait (cupti: the driver's synchronise; events: 0, its waits are in ``collect``),
- ``collect``: the rest of ``collect_runs`` (cupti: flush, decode, attribution; events: reading the events; where
  the events session hands its runs back one by one, ``completed_runs``, until its last run came back: the runs'
  writes and the columns of all configs but the last happen in there, between the waits),
- ``after``: from ``collect_runs``' return until the call returns (sink, result, provenance, environment),
- ``frame``: ``to_dataframe()`` of the returned result,
- ``total``: the call plus the frame; ``bare``: the hand-written events loop, interleaved.

Usage (GPU machine): ``python benchmarks/call_phases.py --reps 15 [--tree OLD_TREE] [--json FILE]``.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import backend_overhead as bo

PHASES = ("launch", "wait", "collect", "after", "frame", "total")


class Clock:
    """The marks of the call being timed (one call at a time); with ``after``, a profiler of the after phase."""

    def __init__(self) -> None:
        self.marks: dict[str, int] = {}
        self.after: cProfile.Profile | None = None

    def mark(self, name: str) -> None:
        self.marks.setdefault(name, time.perf_counter_ns())
        if name == "collect_end" and self.after is not None:
            self.after.enable()


def instrument(clock: Clock) -> None:
    """Wrap each backend's ``collect_runs`` and its device wait to mark the phases' ends."""
    from nsightx_cupti import _driver, _session
    from nsightx_events import _backend as events

    def wrap(owner: Any, name: str, before: str | None, after: str | None) -> None:
        inner = getattr(owner, name)

        def timed(*args: Any, **kwargs: Any) -> Any:
            if before:
                clock.mark(before)
            out = inner(*args, **kwargs)
            if after and (after != "wait_end" or "collect_start" in clock.marks):
                clock.mark(after)
            return out

        setattr(owner, name, timed)

    def wrap_iterator(owner: Any, name: str) -> None:
        """Mark ``collect_start`` when the loop asks for the runs, ``collect_end`` once the last came back."""
        inner = getattr(owner, name)

        def timed(*args: Any, **kwargs: Any) -> Any:
            clock.mark("collect_start")
            items = inner(*args, **kwargs)

            def marked() -> Any:
                yield from items
                clock.mark("collect_end")

            return marked()

        setattr(owner, name, timed)

    wrap(_session.CuptiSession, "collect_runs", "collect_start", "collect_end")
    wrap(_driver, "synchronize", None, "wait_end")
    if "completed_runs" in vars(events.EventsSession):  # the loop writes each run as it comes back (overlap)
        wrap_iterator(events.EventsSession, "completed_runs")
    else:
        wrap(events.EventsSession, "collect_runs", "collect_start", "collect_end")


def phases(clock: Clock, fn: Any) -> dict[str, float]:
    """One call of ``fn`` and its frame, in microseconds per phase."""
    clock.marks = {}
    t0 = time.perf_counter_ns()
    result = fn()
    t1 = time.perf_counter_ns()
    result.to_dataframe()
    t2 = time.perf_counter_ns()
    m = clock.marks
    env = getattr(result, "environment", {})
    env = env() if callable(env) else env
    costs = {k[len("CuptiUsPerRun_") :]: float(v) for k, v in env.items() if k.startswith("CuptiUsPerRun_") and v}
    start, end = m.get("collect_start", t1), m.get("collect_end", t1)
    wait_end = m.get("wait_end", start)
    return {
        "launch": (start - t0) / 1e3,
        "wait": (wait_end - start) / 1e3,
        "collect": (end - wait_end) / 1e3,
        "after": (t1 - end) / 1e3,
        "frame": (t2 - t1) / 1e3,
        "total": (t2 - t0) / 1e3,
        **{f"cupti_{k}": v * 44 for k, v in costs.items()},  # the session's own step costs, us per call
    }


def profiles(clock: Clock, fns: dict[str, Any], calls: int) -> str:
    """cProfiles of ``calls`` calls per backend: the after phase (from ``collect_runs``' return to the call's),
    then ``to_dataframe()``; the top functions of each by own time and by cumulative time."""
    text = io.StringIO()
    for b, fn in fns.items():
        after, frame = cProfile.Profile(), cProfile.Profile()
        for _ in range(calls):
            clock.marks, clock.after = {}, after
            result = fn()
            after.disable()
            clock.after = None
            frame.enable()
            result.to_dataframe()
            frame.disable()
        for name, prof in (("after", after), ("frame", frame)):
            for order in ("tottime", "cumulative"):
                text.write(f"##### {b} {name} ({calls} calls), by {order}\n")
                pstats.Stats(prof, stream=text).sort_stats(order).print_stats(45)
    return text.getvalue()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--tree", help="source tree of the nsightx to measure (default: the importable one)")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--profile", type=Path, help="write cProfiles of the after phase and the frame here")
    ap.add_argument("--profile-calls", type=int, default=20)
    args = ap.parse_args()
    info = bo.use_tree(args.tree)
    import torch

    w = bo.WORKLOADS["sweep_once"]
    clock = Clock()
    instrument(clock)
    bare = bo.make_bare(torch, w)
    fns = {b: bo.make_profiled(torch, w, b, collectors=True) for b in ("cupti", "events")}
    for fn in (bare, *fns.values()):
        fn() if fn is bare else fn().to_dataframe()  # warm
    rows: dict[str, list[dict[str, float]]] = {b: [] for b in fns}
    bare_us: list[float] = []
    for _ in range(args.reps):
        t0 = time.perf_counter_ns()
        bare()
        bare_us.append((time.perf_counter_ns() - t0) / 1e3)
        for b, fn in fns.items():
            torch.cuda.synchronize()
            rows[b].append(phases(clock, fn))
    out: dict[str, Any] = {**info, "reps": args.reps, "bare_us": statistics.median(bare_us)}
    print(json.dumps(info))
    print(f"bare loop: {out['bare_us']:.0f} us (median of {args.reps})")
    for b, rs in rows.items():
        keys = [k for k in rs[0] if all(k in r for r in rs)]
        med = {p: statistics.median(r[p] for r in rs) for p in keys}
        out[b] = med
        shown = ", ".join(f"{p} {med[p]:.0f}" for p in keys)
        print(f"{b}: {shown} us; total / bare {med['total'] / out['bare_us']:.3f}")
    if args.json:
        args.json.write_text(json.dumps(out, indent=1), encoding="utf-8")
    if args.profile:
        args.profile.write_text(profiles(clock, fns, args.profile_calls), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
