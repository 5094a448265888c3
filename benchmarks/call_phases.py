"""Where the wall time of one decorated sweep call goes, phase by phase (GPU; a probe for issue 35).

The cupti call of backend_overhead's matmul sweep costs ~1.1-1.5 ms more than on d6b4a1c (H100, session 17)
while the events call costs the same, so the extra is cupti's own. The host launches every run ahead of the GPU
and waits once, in the session's ``collect_runs``; this probe wraps that method (both trees have it) and the
device wait inside it, and times, per call:

- ``launch``: from the call's start until the loop asks for the runs (host work ahead of the GPU),
- ``first``: from the call's start to the first ``region_enter`` (the session's start, the warm-up's set-up: what
  delays the GPU's first kernel of the call; part of ``launch``),
- ``wait``: the device wait (cupti: the driver's synchronise; events: 0, its waits are in ``collect``),
- ``collect``: the rest of ``collect_runs`` (cupti: flush, decode, attribution; events: reading the events; where
  the events session hands its runs back one by one, ``completed_runs``, until its last run came back: the runs'
  writes and the columns of all configs but the last happen in there, between the waits),
- ``after``: from ``collect_runs``' return until the call returns (sink, result, provenance, environment),
- ``frame``: ``to_dataframe()`` of the returned result,
- ``total``: the call plus the frame; ``bare``: the hand-written events loop, interleaved.

With ``--flush-probe``, after the sweep's calls, a cupti tracer started as the sweep's session starts it times
forced flushes (``cuptiActivityFlushAll``) after the device wait: with nothing launched since the last one, then
after N tiny kernels (``--flush-counts``, default 1, 10 and 100; launched under a pushed external id, as in a
region, so each leaves its kernel, launch and external record). Each flush is split into the buffer callbacks' own
decode (the tracer's ``decode`` counter) and the rest (CUPTI's), with the records and buffers delivered, so that
the fixed cost of a forced flush can be told from its cost per record: whether draining finished configs during
the wait can pay. Nothing of ours after the flush (attribution, records) is timed there.

``--per-run`` then times what one more run costs, the call's fixed part left out: the bare loop, each backend's
call and its call plus ``to_dataframe()``, at the workload's runs and at twice them, interleaved; the difference
over the extra runs, and its ratio to the bare loop's (issue 35's per-run target for the 16 KiB op:
``--workload tiny --per-run``).

Usage (GPU machine): ``python benchmarks/call_phases.py --reps 15 [--tree OLD_TREE] [--json FILE] [--flush-probe]
[--per-run]``.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import io
import json
import pstats
import statistics
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import backend_overhead as bo

PHASES = ("launch", "wait", "collect", "after", "frame", "total")


class Clock:
    """The marks of the call being timed (one call at a time); with ``after``, a profiler of the after phase; with
    ``start``, one of the start (enabled as the call begins, disabled at its first region)."""

    def __init__(self) -> None:
        self.marks: dict[str, int] = {}
        self.after: cProfile.Profile | None = None
        self.start: cProfile.Profile | None = None

    def mark(self, name: str) -> None:
        first = name not in self.marks
        self.marks.setdefault(name, time.perf_counter_ns())
        if first and name == "first_region" and self.start is not None:
            self.start.disable()
            self.start = None
        if first and name == "collect_end" and self.after is not None:  # a call collected in batches marks it again
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
    wrap(_session.CuptiSession, "region_enter", "first_region", None)
    wrap(events.EventsSession, "region_enter", "first_region", None)
    wrap(_driver, "synchronize", None, "wait_end")
    if "completed_runs" in vars(events.EventsSession):  # the loop writes each run as it comes back (overlap)
        wrap_iterator(events.EventsSession, "completed_runs")
    else:
        wrap(events.EventsSession, "collect_runs", "collect_start", "collect_end")


class GcTimer:
    """The garbage collector's passes as (start, end, generation), from ``gc.callbacks`` (see :meth:`install`)."""

    def __init__(self) -> None:
        self.passes: list[tuple[int, int, int]] = []
        self._start = 0

    def install(self) -> None:
        """Start noting passes (once per process: :func:`main` calls it; importing this module installs nothing)."""
        if self._note not in gc.callbacks:
            gc.callbacks.append(self._note)

    def _note(self, phase: str, info: dict[str, int]) -> None:
        now = time.perf_counter_ns()
        if phase == "start":
            self._start = now
        else:
            self.passes.append((self._start, now, info.get("generation", -1)))

    def within(self, start: int, end: int) -> tuple[float, int]:
        """Microseconds of collection between ``start`` and ``end``, and how many full (generation 2) passes."""
        inside = [(a, b, g) for a, b, g in self.passes if a >= start and b <= end]
        return sum(b - a for a, b, _ in inside) / 1e3, sum(g == 2 for *_, g in inside)


GC = GcTimer()
RUNS = [44]
"""Measured runs per call of the workload being timed (the cupti session's step costs are per run)."""


def phases(clock: Clock, fn: Any) -> dict[str, float]:
    """One call of ``fn`` and its frame, in microseconds per phase (and the collector's time in the call)."""
    clock.marks = {}
    GC.passes = []
    t0 = time.perf_counter_ns()
    result = fn()
    t1 = time.perf_counter_ns()
    result.to_dataframe()
    t2 = time.perf_counter_ns()
    gc_call, full_call = GC.within(t0, t1)
    gc_frame, full_frame = GC.within(t1, t2)
    m = clock.marks
    gc_launch = GC.within(t0, m.get("collect_start", t1))[0]
    gc_after = GC.within(m.get("collect_end", t1), t1)[0]
    env = getattr(result, "environment", {})
    env = env() if callable(env) else env
    costs = {k[len("CuptiUsPerRun_") :]: float(v) for k, v in env.items() if k.startswith("CuptiUsPerRun_") and v}
    start, end = m.get("collect_start", t1), m.get("collect_end", t1)
    wait_end = m.get("wait_end", start)
    return {
        "launch": (start - t0) / 1e3,
        "first": (m.get("first_region", start) - t0) / 1e3,
        "wait": (wait_end - start) / 1e3,
        "collect": (end - wait_end) / 1e3,
        "after": (t1 - end) / 1e3,
        "frame": (t2 - t1) / 1e3,
        "total": (t2 - t0) / 1e3,
        "gc_call": gc_call,
        "gc_frame": gc_frame,
        "gc_launch": gc_launch,
        "gc_after": gc_after,
        "gc_full": float(full_call + full_frame),
        **{f"cupti_{k}": v * RUNS[0] for k, v in costs.items()},  # the session's own step costs, us per call
    }


def profiles(clock: Clock, fns: dict[str, Any], calls: int) -> str:
    """cProfiles of ``calls`` calls per backend: the start (from the call to its first region: what delays the
    GPU's first kernel), the after phase (from ``collect_runs``' return to the call's), then ``to_dataframe()``;
    the top functions of each by own time and by cumulative time."""
    text = io.StringIO()
    for b, fn in fns.items():
        start, after, frame = cProfile.Profile(), cProfile.Profile(), cProfile.Profile()
        for _ in range(calls):
            clock.marks, clock.after, clock.start = {}, after, start
            start.enable()
            result = fn()
            after.disable()
            if clock.start is not None:  # a call that opened no region (none here): its start ran to the end
                clock.start.disable()
            clock.after = clock.start = None
            frame.enable()
            result.to_dataframe()
            frame.disable()
        for name, prof in (("start", start), ("after", after), ("frame", frame)):
            for order in ("tottime", "cumulative"):
                text.write(f"##### {b} {name} ({calls} calls), by {order}\n")
                pstats.Stats(prof, stream=text).sort_stats(order).print_stats(45)
    return text.getvalue()


def one_flush(tracer: Any, forced: bool = True) -> dict[str, float]:
    """One flush of ``tracer`` (device already waited for): its time, its callbacks' decode and the rest.

    ``forced=False`` times CUPTI's default flush (``cuptiActivityFlushAll(0)``: only buffers whose records are
    all complete, which after the wait should be all of them) and then empties CUPTI with an untimed forced
    flush; ``left`` is how many records only that forced flush delivered.
    """
    stats = tracer.stats
    decode, records, buffers = (stats.get(k, 0) for k in ("decode", "records", "buffers"))
    t0 = time.perf_counter_ns()
    if forced:
        tracer._forced_flush()
    else:
        tracer._cupti.activity_flush_all(0)
    flush_ns = time.perf_counter_ns() - t0
    callbacks_ns = stats.get("decode", 0) - decode
    got = stats.get("records", 0) - records
    if not forced:
        tracer._forced_flush()
    tracer._discard()  # what was delivered is not ours to attribute here
    return {
        "flush_us": flush_ns / 1e3,
        "callbacks_us": callbacks_ns / 1e3,
        "cupti_us": (flush_ns - callbacks_ns) / 1e3,
        "records": got,
        "left": stats.get("records", 0) - records - got,
        "buffers": stats.get("buffers", 0) - buffers,
    }


def flush_probe(torch: Any, counts: tuple[int, ...], reps: int) -> dict[str, Any]:
    """Medians of :func:`one_flush` with nothing pending (``"0"``) and after each count of kernels.

    The ``reps`` samples of each count alternate a forced flush (key ``"<n>"``) and CUPTI's default flush (key
    ``"<n> default"``), to tell whether the default flush after the wait costs less and delivers everything.

    The tracer is started with the options' defaults (those of the sweep's cupti session) and stopped after.
    ``per_record_us`` is the slope of the flush time between the smallest and the largest count, per record.
    """
    from nsightx_cupti._options import CuptiOptions
    from nsightx_cupti._tracer import DEFAULT_BUFFER_BYTES, ActivityTracer

    opts = CuptiOptions.parse({}, "cupti")
    tracer = ActivityTracer.get()
    tracer.start(
        opts.buffer_bytes or DEFAULT_BUFFER_BYTES,
        api_tracing=opts.api_tracing,
        flush_flag="forced",
        api_filter=opts.api_filter,
        decode=opts.cupti_decode,
    )
    x = torch.zeros(1, device="cuda")
    out: dict[str, Any] = {"decoder": tracer.decoder, "api_tracing": opts.api_tracing, "reps": reps}
    try:
        torch.cuda.synchronize()
        one_flush(tracer)  # the canary's records and anything else pending
        for n in (0, *counts):
            samples = []
            for i in range(reps + 2):  # two warm-ups
                if n:  # as a region: API records on (``api_tracing="region"``), an external id pushed
                    if opts.api_tracing == "region":
                        tracer.region_open()
                    tracer.push(1_000_000 + i)
                    for _ in range(n):
                        x.add_(1)
                    tracer.pop()
                    if opts.api_tracing == "region":
                        tracer.region_close()
                torch.cuda.synchronize()
                samples.append(one_flush(tracer, forced=i % 2 == 0))
            for key, kept in ((str(n), samples[2::2]), (f"{n} default", samples[3::2])):
                out[key] = {k: statistics.median(s[k] for s in kept) for k in samples[0]}
    finally:
        tracer.stop()
    lo, hi = out[str(min(counts))], out[str(max(counts))]
    extra = hi["records"] - lo["records"]
    out["per_record_us"] = (hi["flush_us"] - lo["flush_us"]) / extra if extra else None
    return out


def print_flush_probe(probe: dict[str, Any]) -> None:
    """The probe's figures, one line per kernel count."""
    print(f"flush probe (decoder {probe['decoder']}, api_tracing {probe['api_tracing']}, median of {probe['reps']}):")
    for key, row in probe.items():
        if isinstance(row, dict):
            print(
                f"  {key:>4} kernels: flush {row['flush_us']:.1f} us = callbacks {row['callbacks_us']:.1f} + "
                f"CUPTI {row['cupti_us']:.1f}; {row['records']:.0f} records ({row['left']:.0f} left), "
                f"{row['buffers']:.0f} buffers"
            )
    per = probe["per_record_us"]
    print(f"  per record: {per:.3f} us" if per is not None else "  per record: no more records at the larger count")


def per_run(torch: Any, w: Any, reps: int) -> dict[str, Any]:
    """``--per-run``: what one more run costs, the call's fixed part left out (the issue's per-run target).

    The bare loop, each backend's call alone and its call plus ``to_dataframe()``, each at ``w.runs`` and at twice
    that many runs per config, interleaved, ``reps`` times; a row's per-run cost is the difference of its two
    medians over the extra runs, and its ratio is that over the bare loop's (the same difference).

    For the ``_dataframe`` rows, ``to_dataframe()`` is also timed alone, with the garbage collector's time inside
    it (``frame per run``): what the frame's share of one more run is, and whether collections make it.
    """
    long = bo.Workload(w.name, w.sizes, 2 * w.runs, randn=w.randn, tiny=w.tiny)
    extra = len(w.sizes) * w.runs
    timed: dict[str, tuple[Any, Any]] = {"bare": (bo.make_bare(torch, w), bo.make_bare(torch, long))}
    frames: dict[str, tuple[list[Framed], list[Framed]]] = {}
    for b in ("cupti", "events"):
        short_fn, long_fn = (bo.make_profiled(torch, x, b, collectors=True) for x in (w, long))
        timed[b] = (short_fn, long_fn)
        seen = frames[b] = ([], [])
        timed[f"{b}_dataframe"] = (
            lambda f=short_fn, s=seen[0]: _framed(f, s),
            lambda f=long_fn, s=seen[1]: _framed(f, s),
        )
    walls: dict[str, tuple[list[float], list[float]]] = {k: ([], []) for k in timed}
    for rep in range(reps + 1):  # the first round warms up
        for name, pair in timed.items():
            for i, fn in enumerate(pair):
                torch.cuda.synchronize()
                t0 = time.perf_counter_ns()
                fn()
                if rep:
                    walls[name][i].append((time.perf_counter_ns() - t0) / 1e3)
    med = statistics.median
    out_frames = _frame_per_run(frames, extra)
    out: dict[str, Any] = {"runs": [w.runs, long.runs], "configs": len(w.sizes), "reps": reps}
    bare = (med(walls["bare"][1]) - med(walls["bare"][0])) / extra
    for name, (short, longer) in walls.items():
        row = out[name] = {"short_us": med(short), "long_us": med(longer)}
        row["per_run_us"] = (row["long_us"] - row["short_us"]) / extra
        row["per_run_ratio"] = row["per_run_us"] / bare
        print(
            f"per run, {name}: {row['per_run_us']:.2f} us ({w.runs} runs {row['short_us']:.0f} us, "
            f"{long.runs} runs {row['long_us']:.0f} us); / bare {row['per_run_ratio']:.3f}"
        )
    out["frame"] = out_frames
    return out


Framed = tuple[float, float, int, tuple[int, int, int]]
"""One frame of :func:`_framed`: its wall time and the collector's time inside it (us), the full (generation 2)
passes inside it, and the collector's counts (``gc.get_count()``) as it began."""


def _framed(fn: Any, seen: list[Framed]) -> None:
    """``fn().to_dataframe()``, noting what :data:`Framed` holds (why a frame meets full collections)."""
    result = fn()
    GC.passes = []
    counts = gc.get_count()
    t1 = time.perf_counter_ns()
    result.to_dataframe()
    t2 = time.perf_counter_ns()
    gc_us, full = GC.within(t1, t2)
    seen.append(((t2 - t1) / 1e3, gc_us, full, counts))


def _frame_per_run(frames: dict[str, tuple[list[Framed], list[Framed]]], extra: int) -> dict[str, Any]:
    """Per backend, the frame's (``to_dataframe()`` alone) cost of one more run, and the collector's share of it.

    Also, for the longer calls' frames, how many full passes they met and the collector's counts as each began
    (``full_long``, ``counts_long``): whether what the call left in the young generations brings them. The first
    of each list is the warm-up round's (dropped).
    """
    med = statistics.median
    out: dict[str, Any] = {}
    for b, (short, longer) in frames.items():
        fs, fl = med(x[0] for x in short[1:]), med(x[0] for x in longer[1:])
        gs, gl = statistics.fmean(x[1] for x in short[1:]), statistics.fmean(x[1] for x in longer[1:])
        full = [x[2] for x in longer[1:]]
        out[b] = {
            "short_us": fs,
            "long_us": fl,
            "per_run_us": (fl - fs) / extra,
            "gc_short_us": gs,
            "gc_long_us": gl,
            "full_long": full,
            "counts_long": [list(x[3]) for x in longer[1:]],
        }
        print(
            f"frame per run, {b}: {(fl - fs) / extra:.2f} us (frame {fs:.0f} -> {fl:.0f} us; collector, mean "
            f"{gs:.0f} -> {gl:.0f} us; full passes in the longer frames {sum(full)} of {len(full)}, counts as they "
            f"began {longer[-1][3]})"
        )
    return out


def cycles(fns: dict[str, Any], calls: int = 5) -> dict[str, Any]:
    """``--cycles``: per backend, the objects each call (and its frame) leaves in reference cycles, and keeps alive.

    With the collector disabled, ``calls`` calls and frames are made and dropped; one collection with
    ``gc.DEBUG_SAVEALL`` then finds what only the collector could free. Cycles left per call feed the collector's
    full collections, which walk the whole process (torch's objects too).
    """
    out: dict[str, Any] = {}
    for name, fn in fns.items():
        fn().to_dataframe()
        gc.collect()
        gc.disable()
        try:
            for _ in range(calls):
                fn().to_dataframe()
            gc.set_debug(gc.DEBUG_SAVEALL)
            gc.collect()
            kinds = _by_type(gc.garbage)
        finally:
            gc.set_debug(0)
            gc.garbage.clear()
            gc.enable()
        kept = _kept_per_call(fn, calls)
        out[name] = {"per_call": sum(kinds.values()) / calls, "types": dict(kinds.most_common(15)), "kept": kept}
        print(f"cycles, {name}: {out[name]['per_call']:.0f} objects a call; {kinds.most_common(15)}")
        print(f"kept, {name}: {kept['per_call']:.1f} objects a call stay alive; {kept['types']}")
        print(f"held, {name}: {kept['held']} tracked objects held by a result after its frame; {kept['held_types']}")
    return out


def _by_type(objects: list[Any]) -> Counter[str]:
    """How many of ``objects`` there are of each type (``module.qualname``)."""
    return Counter(f"{type(o).__module__}.{type(o).__qualname__}" for o in objects)


def _kept_per_call(fn: Any, calls: int) -> dict[str, Any]:
    """What stays alive after ``calls`` calls and frames whose results were dropped (a leak, if any), by type."""
    gc.collect()
    before = _by_type(gc.get_objects())
    for _ in range(calls):
        fn().to_dataframe()
    gc.collect()
    after = _by_type(gc.get_objects())
    grown = after - before
    result = fn()
    result.to_dataframe()
    gc.collect()
    held = _by_type(gc.get_objects()) - after
    del result
    return {
        "per_call": sum(grown.values()) / calls,
        "types": dict(grown.most_common(12)),
        "held": sum(held.values()),
        "held_types": dict(held.most_common(12)),
    }


def counts_arg(text: str) -> tuple[int, ...]:
    """``--flush-counts``: positive kernel counts separated by commas."""
    try:
        counts = tuple(int(part) for part in text.split(","))
    except ValueError:
        counts = ()
    if not counts or min(counts) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: give positive kernel counts separated by commas, e.g. 1,10,100")
    return counts


def require_gpu() -> Any:
    """torch, if it sees a CUDA device; otherwise exit with a message (this probe times GPU work only)."""
    try:
        import torch
    except ImportError:
        raise SystemExit("call_phases.py needs torch with a CUDA device; torch is not installed here") from None
    if not torch.cuda.is_available():
        raise SystemExit("call_phases.py needs a CUDA device; torch sees none here (run it on the GPU machine)")
    return torch


def no_checkpoint(fn: Any) -> Any:
    """``fn`` called with ``heap.CHECKPOINT_BEFORE_WAIT`` off (a tree without it: nothing to switch)."""
    from nsightx._run import heap

    def call() -> Any:
        was: Any = getattr(heap, "CHECKPOINT_BEFORE_WAIT", None)
        heap.CHECKPOINT_BEFORE_WAIT = False
        try:
            return fn()
        finally:
            heap.CHECKPOINT_BEFORE_WAIT = was

    return call


def gc_off(fn: Any) -> Any:
    """``fn`` called with the garbage collector disabled (as ``timeit`` times), enabled again after."""

    def call() -> Any:
        gc.disable()
        try:
            return fn()
        finally:
            gc.enable()

    return call


def variants_arg(text: str) -> tuple[str, ...]:
    """``--cupti-variants``: names of :data:`backend_overhead.CUPTI_VARIANTS`, separated by commas."""
    names = tuple(part for part in text.split(",") if part)
    unknown = [n for n in names if n not in bo.CUPTI_VARIANTS]
    if unknown:
        raise argparse.ArgumentTypeError(f"{unknown}: not cupti variants; known: {', '.join(bo.CUPTI_VARIANTS)}")
    return names


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--tree", help="source tree of the nsightx to measure (default: the importable one)")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--profile", type=Path, help="write cProfiles of the after phase and the frame here")
    ap.add_argument("--profile-calls", type=int, default=20)
    ap.add_argument("--flush-probe", action="store_true", help="after the sweep, time forced CUPTI flushes")
    ap.add_argument("--flush-counts", type=counts_arg, default=(1, 10, 100), help="kernels before a probed flush")
    ap.add_argument("--gc-off", action="store_true", help="also time each backend with the collector disabled")
    ap.add_argument(
        "--checkpoint-ab", action="store_true", help="also time each backend without heap.before_wait's checkpoint"
    )
    ap.add_argument(
        "--per-run", action="store_true", help="also the cost of one more run: each call at its runs and twice them"
    )
    ap.add_argument("--cycles", action="store_true", help="also what each call leaves in reference cycles")
    ap.add_argument(
        "--unfreeze",
        action="store_true",
        help="unfreeze the objects the interpreter froze before main (the GPU image's Python starts with 375): "
        "calls then run in the heap module's freeze mode, as in a user's usual Python",
    )
    ap.add_argument("--workload", default="sweep_once", choices=sorted(bo.WORKLOADS), help="what the call runs")
    ap.add_argument(
        "--cupti-variants",
        type=variants_arg,
        default=(),
        help="comma-separated cupti variants of backend_overhead.py (CUPTI_VARIANTS), timed phase by phase too",
    )
    args = ap.parse_args()
    if args.unfreeze:
        gc.unfreeze()
    info = bo.use_tree(args.tree)
    torch = require_gpu()

    w = bo.WORKLOADS[args.workload]
    RUNS[0] = len(w.sizes) * w.runs
    GC.install()
    clock = Clock()
    instrument(clock)
    bare = bo.make_bare(torch, w)
    fns = {b: bo.make_profiled(torch, w, b, collectors=True) for b in ("cupti", "events")}
    for name in args.cupti_variants:  # the cupti session with other backend_options (its drain modes)
        fns[name] = bo.make_profiled(torch, w, "cupti", True, bo.CUPTI_VARIANTS[name])
    if args.checkpoint_ab:  # the same calls without the young collection before the wait (heap.before_wait)
        fns.update({f"{b}_nockpt": no_checkpoint(bo.make_profiled(torch, w, b, True)) for b in ("cupti", "events")})
    if args.gc_off:  # the same calls with the garbage collector disabled during the call (not the frame)
        fns.update({f"{b}_gcoff": gc_off(bo.make_profiled(torch, w, b, collectors=True)) for b in ("cupti", "events")})
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
        med.update({f"{p}_mean": statistics.fmean(r[p] for r in rs) for p in keys if p.startswith("gc_")})
        out[b] = med
        shown = ", ".join(f"{p} {med[p]:.0f}" for p in keys)
        print(f"{b}: {shown} us; total / bare {med['total'] / out['bare_us']:.3f}")
    if args.per_run:
        out["per_run"] = per_run(torch, w, args.reps)
    if args.cycles:
        out["cycles"] = cycles(fns)
    if args.flush_probe:
        out["flush_probe"] = flush_probe(torch, args.flush_counts, args.reps)
        print_flush_probe(out["flush_probe"])
    if args.json:
        args.json.write_text(json.dumps(out, indent=1), encoding="utf-8")
    if args.profile:
        args.profile.write_text(profiles(clock, fns, args.profile_calls), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
