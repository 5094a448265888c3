"""What a deferred call leaves after its device's last run: a simulated GPU on CPU (a probe for issue 35).

On the H100 the matmul sweep's decorated call (4 configs x 11 runs) launches every run ahead of the GPU in ~3.5
ms, then the events session waits on each run's end event in launch order (~33 ms of GPU work); what the call
does after the GPU finished (rows, sink, result) is on the path of the whole call. This probe replays that shape
without a GPU: a backend (``simdevice``, registered here) whose session is deferred like the events one, and a
device model in which each run's work starts when it was launched and the run before it finished, and takes
``--gap-us`` (0.7 ms); the user's function spends ``--launch-us`` of host time in its region (the launches).
Reading a run waits, spinning as a CUDA event wait does, until its completion time, then makes its record and
span as the events session does. The session hands back a mapping from ``collect_runs`` (every tree has it) and
one run at a time from ``completed_runs`` (a tree whose run loop asks for it writes each run during the wait).

Per call it reports, in microseconds: ``call`` (the decorated call, start to return), ``device`` (start to the
last run's completion) and ``tail`` (the last completion to the call's return: the host work left after the
device); ``frame``: ``.to_dataframe()`` of the result. ``--trees A B``: each tree in its own process, the
processes alternated ``--rounds`` times (interleaved), medians per tree; without it, the importable tree once.

Usage: ``python benchmarks/overlap_wait.py [--reps 20] [--runs 10] [--trees BEFORE AFTER --rounds 3] [--json FILE]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

METRIC = "sim__span_duration"


def use_tree(tree: str | None) -> dict[str, Any]:
    """Put ``tree`` first on ``sys.path`` (before importing nsightx); say which nsightx is imported."""
    if tree:
        root = Path(tree).resolve()
        for sub in ("plugins", "backends", ""):
            sys.path.insert(0, str(root / sub) if sub else str(root))
    import nsightx

    return {"tree": tree, "nsightx_file": nsightx.__file__}


def _spin_until(ns: int) -> None:
    """Wait until ``perf_counter_ns`` reaches ``ns``, spinning (as a CUDA event wait does by default)."""
    clock = time.perf_counter_ns
    while clock() < ns:
        pass


class Device:
    """The simulated GPU: runs queue in launch order, each taking ``gap_ns`` once the one before it finished."""

    def __init__(self, gap_ns: int) -> None:
        self.gap_ns = gap_ns
        self.free_at = 0
        self.last = 0

    def launch(self) -> int:
        """Queue one run now; return when it completes."""
        done = max(time.perf_counter_ns(), self.free_at) + self.gap_ns
        self.free_at = self.last = done
        return done


def make_backend(device: Device) -> type:
    """The ``simdevice`` backend class over ``device`` (built after the tree is on ``sys.path``)."""
    from nsightx.ext import Availability, Backend, Capabilities, RegionId, RunOutput, Session, new_record

    class SimSession(Session):
        deferred = True

        def __init__(self) -> None:
            self.done: list[tuple[RegionId, bool, int]] = []
            self.finished: list[tuple[int, int]] = []
            self.starts: dict[RegionId, int] = {}

        def region_enter(self, region: RegionId) -> None:
            self.starts[region] = time.perf_counter_ns()

        def region_exit(self, region: RegionId, failed: bool) -> None:
            self.starts.pop(region)
            self.done.append((region, failed, device.launch()))

        def finish_run(self, config: int, run: int) -> RunOutput:
            self.finished.append((config, run))
            return RunOutput()

        def collect_runs(self) -> dict[tuple[int, int], RunOutput]:
            return dict(self._read())

        def completed_runs(self) -> Iterator[tuple[tuple[int, int], RunOutput]]:
            return self._read()

        def _read(self) -> Iterator[tuple[tuple[int, int], RunOutput]]:
            finished, self.finished = self.finished, []
            done, self.done = self.done, []
            by_run: dict[tuple[int, int], list[tuple[RegionId, bool, int]]] = {key: [] for key in finished}
            for item in done:
                by_run.setdefault((item[0].config, item[0].run), []).append(item)
            return self._outputs(by_run)

        def _outputs(self, by_run: dict[Any, list[tuple[RegionId, bool, int]]]) -> Iterator[Any]:
            for key, regions in by_run.items():
                out = RunOutput()
                for region, failed, completes in regions:
                    _spin_until(completes)
                    ns = float(device.gap_ns)
                    out.region_attributes[region.annotation] = {"span_ns": device.gap_ns}
                    if not failed:
                        out.records.append(
                            new_record(region.annotation, region.config, region.run, "region", METRIC, ns, "ns", 0)
                        )
                yield key, out

    class SimBackend(Backend):
        name = "simdevice"
        description = "a simulated GPU for benchmarks/overlap_wait.py"
        capabilities = Capabilities(metrics=frozenset({METRIC}), default_metrics=(METRIC,), needs_gpu=False)

        @classmethod
        def availability(cls) -> Availability:
            return Availability(available=True, reason="simulated")

        @contextmanager
        def session(self, plan: Any) -> Iterator[Session]:
            yield SimSession()

    return SimBackend


def one_tree(tree: str | None, reps: int, gap_us: float, launch_us: float, runs: int = 10) -> dict[str, Any]:
    """``reps`` timed calls of the 4 x (1 + ``runs``) sweep on the simulated device, in this process."""
    info = use_tree(tree)
    import nsightx

    device = Device(round(gap_us * 1e3))
    backend = make_backend(device)

    class Plugin:
        @nsightx.hookimpl
        def nsightx_register_backends(self, register: Any) -> None:
            register(backend)

    nsightx.register_plugin(Plugin(), name="overlap_wait")
    launch_ns = round(launch_us * 1e3)

    @nsightx.analyze.kernel(
        configs=[(n,) for n in (512, 1024, 2048, 4096)],
        runs=runs,
        warmup=1,
        backend="simdevice",
        verbosity=nsightx.VerbosityLevel.SILENT,
    )
    def sweep(n: int) -> None:
        with nsightx.annotate("matmul"):
            _spin_until(time.perf_counter_ns() + launch_ns)  # the host's launches

    times: dict[str, list[float]] = {"call": [], "device": [], "tail": [], "frame": []}
    for i in range(reps + 3):  # the first three warm imports and caches
        device.free_at = 0
        t0 = time.perf_counter_ns()
        result = sweep()
        t1 = time.perf_counter_ns()
        result.to_dataframe()
        t2 = time.perf_counter_ns()
        if i >= 3:
            times["call"].append((t1 - t0) / 1e3)
            times["device"].append((device.last - t0) / 1e3)
            times["tail"].append((t1 - device.last) / 1e3)
            times["frame"].append((t2 - t1) / 1e3)
    return {**info, "reps": reps, **{k: statistics.median(v) for k, v in times.items()}}


def interleaved(trees: list[str], rounds: int, argv: list[str]) -> dict[str, Any]:
    """Each tree in its own process, alternated ``rounds`` times; per tree the medians of its processes' medians."""
    per_tree: dict[str, list[dict[str, Any]]] = {t: [] for t in trees}
    for _ in range(rounds):
        for tree in trees:
            cmd = [sys.executable, __file__, "--tree", tree, *argv]
            out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
            per_tree[tree].append(json.loads(out.splitlines()[-1]))
    summary: dict[str, Any] = {}
    for tree, runs in per_tree.items():
        summary[tree] = {k: [round(r[k], 1) for r in runs] for k in ("call", "device", "tail", "frame")}
    return summary


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--gap-us", type=float, default=700.0, help="the device's time per run")
    ap.add_argument("--launch-us", type=float, default=80.0, help="the host's time per run in the region")
    ap.add_argument("--runs", type=int, default=10, help="measured runs per config (after one warm-up run)")
    ap.add_argument("--tree", help="source tree of the nsightx to measure (default: the importable one)")
    ap.add_argument("--trees", nargs="+", help="trees to compare, each in its own processes, interleaved")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    if args.trees:
        argv = ["--reps", str(args.reps), "--gap-us", str(args.gap_us), "--launch-us", str(args.launch_us)]
        argv += ["--runs", str(args.runs)]
        out = interleaved(args.trees, args.rounds, argv)
        for tree, figures in out.items():
            print(f"{tree}: " + "; ".join(f"{k} {v}" for k, v in figures.items()) + " (us, one per process)")
    else:
        out = one_tree(args.tree, args.reps, args.gap_us, args.launch_us, args.runs)
        print(json.dumps(out))
    if args.json:
        args.json.write_text(json.dumps(out, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
