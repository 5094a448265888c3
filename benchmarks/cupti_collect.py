"""The cupti session's host work after the GPU wait, replayed on CPU (a probe for issue 35's whole call).

On an H100 (``call_phases.py``, 06:45) the cupti backend's collect of the matmul sweep (4 configs x 11 runs)
cost ~1.0 ms after the GPU was done: the forced flush (~0.5 ms, of which the decode of the last buffers ~0.2 ms),
attribution (~0.08 ms) and ~0.4 ms after it. This probe replays both parts without a GPU:

- ``collect``: a fixture of ``tests/fixtures/cupti`` (one real H100/H200 run: its kernel, API and external records
  and its region windows) replicated to 44 runs (fresh external and correlation ids, times shifted per run), then
  the session's ``collect_runs`` over it with a tracer that hands the batch back and a device that does nothing:
  everything the session does around its wait and flush (``attribute``, the silent-launch check, the
  incomplete-record check, grouping by run, ``to_run_outputs``, the cost counters); ``collect_runs after the wait``
  times only what follows the device's wait (what a session does before it overlaps the GPU's work).
  ``attribute`` and ``to_run_outputs`` are timed alone as well. The fixtures are those of ``api_tracing="region"``
  and of ``api_always/`` (``"always"``, the default: every kernel launched outside a region has its launch record,
  so attribution bisects the windows).
- ``decode``: ``RawBuffers._decode`` of the ctypes decoder over one buffer in CUPTI 13's layout (the records of the
  sweep's 44 runs: per run the flush kernel's launch and, per kernel of the fixture, an external correlation, a
  runtime launch record and the kernel record), with a double of libcupti's record walk (as
  ``tests/backends/cupti/test_cupti_raw.py``).
- ``run of one region``: the session's per-run host work around the user's code, a deferred session's
  ``start_run``, ``region_enter``, ``region_exit`` and ``finish_run`` for one region, through the real
  ``ActivityTracer``'s ``push``/``pop``/``timestamp`` over a cupti-python double whose calls are C builtins that do
  nothing (the Python work around CUPTI's calls, not CUPTI's own); per run (100 runs a call).

Trees are compared in separate processes, interleaved (``--tree A --tree B``, round by round); each figure is the
median over rounds of each round's median per-call time, microseconds.

Usage: ``python benchmarks/cupti_collect.py [--tree A --tree B] [--rounds 7] [--reps 200] [--only TEXT] [--json FILE]``
(``--only``: the steps whose label contains TEXT, e.g. ``decode`` or ``region``).
"""

from __future__ import annotations

import argparse
import ctypes
import inspect
import json
import statistics
import struct
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
FIXTURES = HERE.parent / "tests" / "fixtures" / "cupti"
CONFIGS, RUNS = 4, 11

K_KERNEL, K_RUNTIME, K_DRIVER, K_EXTERNAL = 10, 5, 4, 39
EXT_KIND = 2
SIZES = {K_KERNEL: 216, K_RUNTIME: 40, K_DRIVER: 40, K_EXTERNAL: 24}
"""CUPTI 13.0's record sizes (``CUpti_ActivityKernel10`` is 216 bytes)."""


def replicate(fixture: Path) -> tuple[Any, list[Any], str]:
    """The fixture's run as 44 runs: a batch and its windows, ids fresh per run, times shifted."""
    from nsightx_cupti._attribution import ActivityBatch, ApiActivity, KernelActivity, RegionWindow, batch_from_json

    batch, windows, meta = batch_from_json(fixture.read_text())
    out, wins = ActivityBatch(), []
    step_corr = 1 + max([k.correlation_id for k in batch.kernels] + list(batch.apis) + list(batch.externals))
    step_ext = 1 + max(w.external_id for w in windows)
    step_ns = 10_000_000
    for i in range(CONFIGS * RUNS):
        c, e, t = i * step_corr, i * step_ext, i * step_ns
        for k in batch.kernels:
            out.kernels.append(k._replace(start=k.start + t, end=k.end + t, correlation_id=k.correlation_id + c))
        for a in batch.apis.values():
            out.apis[a.correlation_id + c] = ApiActivity(*a._replace(correlation_id=a.correlation_id + c))
        for corr, ext in batch.externals.items():
            out.externals[corr + c] = ext + e
        for w in windows:
            config, run = divmod(i, RUNS)
            wins.append(
                RegionWindow(
                    w.external_id + e, w.annotation, config, run, w.enter_ns + t, w.exit_ns + t, w.thread_id, w.failed
                )
            )
    assert all(isinstance(k, KernelActivity) for k in out.kernels)
    return out, wins, str(meta.get("CuptiApiTracing", "always"))


class ReplayTracer:
    """Hands the replicated batch to ``collect``; every API launches a kernel (the silent-launch check runs).

    ``api_tracing`` is the fixture's: with ``region`` (API records only inside regions) the kernels launched
    outside every region (input setup) have no launch record and are left out silently, as in the session that
    recorded them."""

    def __init__(self, batch: Any, api_tracing: str) -> None:
        self.batch = batch
        self.api_tracing = api_tracing

    def collect(self) -> Any:
        return self.batch

    def launches_kernels(self, api: Any) -> bool:
        return True


class NullDevice:
    """The device's wait: returns at once, noting when (the session's work after it is timed from there)."""

    def __init__(self) -> None:
        self.waited_ns = 0

    def synchronize(self) -> None:
        self.waited_ns = time.perf_counter_ns()


def collect_timers(fixture: Path) -> dict[str, Callable[[], object]]:
    """The timed steps over one fixture replicated to 44 runs."""
    from nsightx_cupti._attribution import attribute, to_run_outputs
    from nsightx_cupti._session import CuptiSession

    batch, windows, tracing = replicate(fixture)
    finished = [(c, r) for c in range(CONFIGS) for r in range(RUNS)]
    device = NullDevice()
    session = CuptiSession(ReplayTracer(batch, tracing), device, deferred=True)  # type: ignore[arg-type]

    def collect() -> object:
        session._windows = list(windows)
        session._finished = list(finished)
        return session.collect_runs()

    def after_wait() -> int:
        session._windows = list(windows)
        session._finished = list(finished)
        session.collect_runs()
        return time.perf_counter_ns() - device.waited_ns

    attribution = attribute(batch, windows)
    rows = {"rows": True} if "rows" in inspect.signature(to_run_outputs).parameters else {}  # as the session does
    by_run: dict[Any, list[Any]] = {key: [] for key in finished}
    for w in windows:
        by_run[(w.config, w.run)].append(w)
    return {
        "collect_runs": collect,
        "collect_runs after the wait": after_wait,
        "attribute": lambda: attribute(batch, windows),
        "to_run_outputs": lambda: to_run_outputs(attribution, by_run, **rows),
    }


def kernel_record(name: Any, start: int, end: int, corr: int, stream: int = 7) -> bytes:
    rec = bytearray(SIZES[K_KERNEL])
    struct.pack_into("<I", rec, 0, K_KERNEL)
    struct.pack_into("<QQQ", rec, 16, start, end, end)
    struct.pack_into("<III", rec, 40, 0, 1, stream)
    struct.pack_into("<I", rec, 92, corr)
    struct.pack_into("<Q", rec, 104, ctypes.addressof(name))
    return bytes(rec)


def api_record(kind: int, cbid: int, start: int, corr: int) -> bytes:
    return struct.pack("<IIQQIII4x", kind, cbid, start, start + 3000, 99, 4242, corr)


def external_record(eid: int, corr: int) -> bytes:
    return struct.pack("<IIQI4x", K_EXTERNAL, EXT_KIND, eid, corr)


class FakeLib:
    """libcupti's ``cuptiActivityGetNextRecord`` over buffers of the sizes above (the library boundary)."""

    def cuptiActivityGetNextRecord(self, buffer: int, valid: int, ref: Any) -> int:
        record: ctypes.c_void_p = ref._obj
        if record.value is None:
            nxt = buffer
        else:
            nxt = record.value + SIZES[ctypes.c_uint32.from_address(record.value).value]
        if nxt - buffer >= valid:
            return 12
        record.value = nxt
        return 0


NAMES = [ctypes.create_string_buffer(b"_Z10flush_l2Pv")] + [
    ctypes.create_string_buffer(f"_ZN7cutlass6KernelI{i}EEvNT_6ParamsE".encode()) for i in range(2)
]


def sweep_buffer(kernels_per_run: int) -> bytes:
    """44 runs' records as CUPTI 13 lays them out: per run, the flush launch and each kernel's launch, then kernels."""
    parts: list[bytes] = []
    corr, t = 100, 1_000_000_000
    for run in range(CONFIGS * RUNS):
        launches = [(corr, None)] + [(corr + 1 + j, run + 1) for j in range(kernels_per_run)]
        corr += 1 + kernels_per_run
        for c, ext in launches:
            if ext is not None:
                parts.append(external_record(ext, c))
            parts.append(api_record(K_DRIVER if ext is None else K_RUNTIME, 211, t + c, c))
        for j, (c, _) in enumerate(launches):
            parts.append(kernel_record(NAMES[min(j, 2)], t + 10_000 * j, t + 10_000 * j + 5000, c))
        t += 1_000_000
    return b"".join(parts)


def decode_timer(kernels_per_run: int) -> Callable[[], object]:
    """``RawBuffers._decode`` over the sweep's buffer, in memory laid out as CUPTI hands it back."""
    from nsightx_cupti._raw import RawBuffers

    payload = sweep_buffer(kernels_per_run)
    got: list[Any] = []
    raw = RawBuffers(FakeLib(), (K_KERNEL, K_RUNTIME, K_DRIVER, K_EXTERNAL), EXT_KIND, lambda *a: got.append(a), print)
    mem = ctypes.create_string_buffer(len(payload) + 8)
    addr = (ctypes.addressof(mem) + 7) & ~7
    ctypes.memmove(addr, payload, len(payload))

    def decode() -> object:
        got.clear()
        assert mem  # the buffer lives as long as the timer
        raw._decode(addr, len(payload))
        return got

    decode()  # the kinds' sizes and the names are learned once per process, as in a session
    return decode


class NullCupti:
    """cupti-python's calls the per-region path makes, as C builtins doing nothing (the cost of a C call)."""

    class ActivityKind:
        CONCURRENT_KERNEL, RUNTIME, DRIVER, EXTERNAL_CORRELATION = K_KERNEL, K_RUNTIME, K_DRIVER, K_EXTERNAL

    class ExternalCorrelationKind:
        CUSTOM2 = EXT_KIND

    activity_push_external_correlation_id = staticmethod(max)
    activity_pop_external_correlation_id = staticmethod(abs)
    get_timestamp = staticmethod(time.time_ns)  # wall-clock ns, as CUPTI's own clock: no clock is mapped


class NullFlush:
    """A device whose L2 flush does nothing."""

    def flush_l2(self) -> None:
        pass


def region_timer(runs: int = 100) -> Callable[[], object]:
    """``runs`` runs of one region each through a deferred session: its per-run hooks, per run (ns)."""
    from nsightx_cupti._session import CuptiSession
    from nsightx_cupti._tracer import ActivityTracer

    from nsightx.ext import RegionId

    tracer = ActivityTracer(NullCupti(), canary=None, clock_check=True)
    tracer.clock = tracer._clock_map()  # the clock check of start(), which needs the rest of cupti-python
    session = CuptiSession(tracer, NullFlush(), deferred=True)  # type: ignore[arg-type]
    regions = [RegionId("matmul", 0, r) for r in range(runs)]

    def call() -> int:
        session._windows, session._finished = [], []
        start, enter, leave, finish = session.start_run, session.region_enter, session.region_exit, session.finish_run
        t0 = time.perf_counter_ns()
        for region in regions:
            start(0, region.run)
            enter(region)
            leave(region, False)
            finish(0, region.run)
        return (time.perf_counter_ns() - t0) // runs

    return call


def child(reps: int, only: str = "") -> dict[str, float]:
    """One round in this process: the median per-call time of each step (those named with ``only``), microseconds."""
    timers: dict[str, Callable[[], object]] = {}
    if only in "collect_runs after the wait attribute to_run_outputs":
        for name in ("splitk_512", "two_regions", "api_always/splitk_512", "api_always/two_regions"):
            for step, fn in collect_timers(FIXTURES / f"{name}.json").items():
                timers[f"{step} {name}"] = fn
    for k in (1, 2):
        timers[f"decode 44x{k}"] = decode_timer(k)
    timers["run of one region"] = region_timer()
    timers = {label: fn for label, fn in timers.items() if only in label}
    out = {}
    for label, fn in timers.items():
        for _ in range(20):
            fn()
        samples = []
        for _ in range(reps):
            t0 = time.perf_counter_ns()
            got = fn()
            elapsed = time.perf_counter_ns() - t0
            samples.append(got if type(got) is int else elapsed)  # a step that times itself returns its ns
        out[label] = statistics.median(samples) / 1e3
    return out


def round_in(tree: str | None, reps: int, only: str = "") -> dict[str, float]:
    """One round in a fresh process with ``tree`` first on the import path."""
    code = "import json, sys; import cupti_collect as c; print(json.dumps(c.child(int(sys.argv[1]), sys.argv[2])))"
    paths = [str(HERE)]
    if tree:
        root = Path(tree).resolve()
        paths = [str(root), str(root / "backends"), str(root / "plugins"), *paths]
    env = {"PYTHONPATH": ":".join(paths), "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "-c", code, str(reps), only], env=env, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(done.stderr)
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--tree", action="append", help="source tree to measure (repeat to compare; default: importable)")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument("--only", default="", help="time only the steps whose label contains this (e.g. decode, region)")
    ap.add_argument("--json", help="write the figures here")
    args = ap.parse_args()
    trees = args.tree or [None]
    rows: dict[str, dict[str, list[float]]] = {}
    for _ in range(args.rounds):
        for tree in trees:
            for label, us in round_in(tree, args.reps, args.only).items():
                rows.setdefault(label, {}).setdefault(str(tree), []).append(us)
    table = {
        label: {t: {"median": round(statistics.median(v), 2)} for t, v in by.items()} for label, by in rows.items()
    }
    for label, by in table.items():
        print(f"{label:34s} " + "  ".join(f"{t}: {s['median']:8.2f} us" for t, s in by.items()))
    if args.json:
        doc = {"after": table, "rounds": rows, "trees": trees, "configs": CONFIGS, "runs": RUNS}
        Path(args.json).write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
