"""How often the CI gate cries wolf (A/A) and how often it catches a planted slowdown (A/B), process against process.

Usage:
    python benchmarks/gate_rates.py [--backend host|cupti] [--pairs 40] [--slowdown 0.10] [--busy 2] [--json FILE]
                                    [--minutes M]
    python benchmarks/gate_rates.py --merge FILE [FILE ...] [--json FILE]

``--minutes M`` starts no new pair after M minutes (the GPU machine's calls are limited to 10 minutes), and
``--json`` is rewritten after every pair, so a run cut short keeps what it measured. ``--merge`` adds up the
trials of several such files (each run on its own machine or job, its own history: between-job variation is what
CI sees too) and prints the rates of the whole.

Every side runs in its own pytest process, as CI runs it: the test times one region (``--runs`` runs) with the
``nsightx_bench`` fixture. One process of "A" is saved first (``--nsightx-save``); then each of the ``--pairs``
trials runs

- **A/A**: the same code, gated against the stored history (``--nsightx-compare``, with the plugin's re-measures,
  ``--nsightx-confirm``), and then saved into the history as a push to main would be;
- **A/B**: the region does ``--slowdown`` more of the same work (``+10%`` more iterations of the host loop, or
  ``+10%`` more matmuls on the GPU: the same kernels, more of them, summed), gated the same way and not saved.

A false alarm is an A/A trial whose gate fails; a detection an A/B trial whose gate fails. For each trial the
same saved results are also compared with ``nsightx.compare`` (what ``nsightx compare`` runs: no re-measure) and
judged by the rule of d6b4a1c (significant and larger than the threshold: no noise floor, no re-measure), so the
three gates' rates are printed, with 95% Wilson intervals. ``--busy N`` starts N ``while 1: pass`` processes for
the whole run and ends them (by process id) however the run ends.

Workloads: ``host``: a pure-Python loop of ``--work`` iterations (60,000: about 2 ms on a 2-core AMD EPYC VM);
``cupti``: ``--work`` matmuls of 1024x1024 float32 inside the region (torch on the GPU, or CuPy with
``--library cupy``, whose processes start faster), their kernel times summed.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

TEST = """
import operator
import os

import nsightx

SCALE = float(os.environ["GATE_SCALE"])
WORK = int(os.environ["GATE_WORK"])
RUNS = int(os.environ["GATE_RUNS"])
BACKEND = os.environ["GATE_BACKEND"]
LIBRARY = os.environ.get("GATE_LIBRARY", "torch")


def host_loop(n):
    todo = round(n * SCALE)  # the planted extra work: more of the same iterations, the same config
    with nsightx.annotate("work"):
        s = 0
        for i in range(todo):
            s += i * i


def gpu_matmuls(k):
    if LIBRARY == "cupy":  # a process starts in about a second, against ~5 s with torch
        import cupy

        a = cupy.random.standard_normal((1024, 1024), dtype=cupy.float32)
    else:
        import torch

        a = torch.randn(1024, 1024, device="cuda")
    todo = round(k * SCALE)
    with nsightx.annotate("work"):
        for _ in range(todo):
            a @ a


def test_work(nsightx_bench):
    if BACKEND == "host":
        nsightx_bench(host_loop, configs=[WORK], runs=RUNS)
    else:
        nsightx_bench(gpu_matmuls, configs=[WORK], runs=RUNS, combine_kernel_metrics=operator.add)
"""


@dataclass
class Trial:
    kind: str
    """``AA`` or ``AB``."""
    plugin_failed: bool
    compare_failed: bool
    old_failed: bool
    """The rule of d6b4a1c on the same files: significant and larger than the threshold (no floor, no re-measure)."""
    change_pct: float
    floor_pct: float
    processes: int
    remeasured: str
    seconds: float


def _pytest(folder: Path, scale: float, args: argparse.Namespace, *options: str) -> tuple[int, str, float]:
    env = {
        **os.environ,
        "GATE_SCALE": str(scale),
        "GATE_WORK": str(args.work),
        "GATE_RUNS": str(args.runs),
        "GATE_BACKEND": args.backend,
        "GATE_LIBRARY": args.library,
        # this tree first, then what the caller's path held (the GPU machine installs the dependencies and
        # nsightx's pytest11 entry point with `pip --target` into a folder named only there)
        "PYTHONPATH": os.pathsep.join(
            [str(ROOT), str(ROOT / "backends"), str(ROOT / "plugins"), *filter(None, [os.environ.get("PYTHONPATH")])]
        ),
    }
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--nsightx-backend={args.backend}"]
    cmd += [f"--nsightx-threshold={args.threshold}", f"--nsightx-confirm={args.confirm}", *options, "test_gate.py"]
    start = time.perf_counter()
    out = subprocess.run(cmd, cwd=folder, env=env, capture_output=True, text=True, timeout=600, check=False)
    if out.returncode not in (0, 1):
        raise SystemExit(f"pytest failed to run ({out.returncode}):\n{out.stdout[-3000:]}\n{out.stderr[-2000:]}")
    return out.returncode, out.stdout, time.perf_counter() - start


def _trial(kind: str, rc: int, out: str, secs: float, hist: Path, new: Path, args: argparse.Namespace) -> Trial:
    """One trial's verdicts: the plugin's (its exit status) and ``nsightx.compare``'s on the same saved results."""
    import nsightx
    from nsightx._report.compare import gate_failed

    base_ref = str(args.base_ref) if kind == "AA" else None
    frame = nsightx.compare(hist, new, threshold_pct=args.threshold, base_ref=base_ref)
    row = frame.iloc[0]
    return Trial(
        kind,
        rc == 1,
        gate_failed(frame),
        bool(row["Significant"]) and float(row["ChangePct"]) > args.threshold,
        float(row["ChangePct"]),
        float(row["NoiseFloorPct"]),
        int(row["BaselineProcesses"]),
        _remeasured(out),
        secs,
    )


def _newest(store: Path) -> tuple[int, Path]:
    from nsightx._report import history

    (found,) = history.scan(store).values()
    return found[-1].number, found[-1].path


def _remeasured(stdout: str) -> str:
    for key in ("cleared by re-measure", "confirmed by"):
        if key in stdout:
            return key.split()[0]
    return ""


def run_trials(folder: Path, args: argparse.Namespace) -> list[Trial]:
    """The saved first process of A, then ``args.pairs`` A/A and A/B trials (see the module docstring), or fewer
    when ``args.minutes`` run out; ``args.json`` is rewritten after each pair."""
    started = time.perf_counter()
    hist = folder / "hist"
    rc, out, _ = _pytest(folder, 1.0, args, f"--nsightx-save={hist}")
    if rc != 0:
        raise SystemExit(f"the first process of A failed:\n{out[-3000:]}")
    trials: list[Trial] = []
    for t in range(args.pairs):
        if args.minutes and time.perf_counter() - started > args.minutes * 60:
            print(f"# {args.minutes} minutes are up: {t} of {args.pairs} pairs ran", flush=True)
            break
        args.base_ref, _ = _newest(hist)  # the baseline the A/A process is gated against
        rc, out, secs = _pytest(folder, 1.0, args, f"--nsightx-compare={hist}", f"--nsightx-save={hist}")
        trials.append(_trial("AA", rc, out, secs, hist, _newest(hist)[1], args))
        new = folder / f"b{t}"
        rc, out, secs = _pytest(folder, 1.0 + args.slowdown, args, f"--nsightx-compare={hist}", f"--nsightx-save={new}")
        trials.append(_trial("AB", rc, out, secs, hist, new, args))
        for tr in trials[-2:]:
            print(
                f"{t + 1:3d} {tr.kind}  change {tr.change_pct:+7.1f}%  floor {tr.floor_pct:5.1f}% "
                f"({tr.processes} proc)  plugin {'FAIL' if tr.plugin_failed else 'ok  '} {tr.remeasured:<9}  "
                f"compare {'FAIL' if tr.compare_failed else 'ok  '}  old rule {'FAIL' if tr.old_failed else 'ok  '}  "
                f"({tr.seconds:.1f} s)",
                flush=True,
            )
        if args.json:
            write(args, trials, started)
    return trials


def write(args: argparse.Namespace, trials: list[Trial], started: float) -> dict[str, object]:
    """``args.json`` with the arguments, the rates and every trial so far; returns what it wrote."""
    result: dict[str, object] = {"args": {k: str(v) for k, v in vars(args).items()}, **summary(trials)}
    result["minutes"] = round((time.perf_counter() - started) / 60, 1)
    if args.json:
        args.json.write_text(json.dumps({**result, "trials": [asdict(t) for t in trials]}, indent=1))
    return result


def merge(files: list[Path], out: Path | None) -> None:
    """Print (and write to ``out``) the rates over every trial of ``files``."""
    trials = [Trial(**t) for f in files for t in json.loads(f.read_text())["trials"]]
    result = {"files": [str(f) for f in files], **summary(trials)}
    print(json.dumps(result, indent=1))
    if out:
        out.write_text(json.dumps({**result, "trials": [asdict(t) for t in trials]}, indent=1))


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """95% Wilson score interval of a proportion k/n."""
    if n == 0:
        return math.nan, math.nan
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def summary(trials: list[Trial]) -> dict[str, object]:
    """Each gate's false-alarm and detection rate, with 95% Wilson intervals."""
    out: dict[str, object] = {}
    for gate in ("plugin", "compare", "old"):
        for kind, name in (("AA", "false_alarms"), ("AB", "detections")):
            hits = [getattr(t, f"{gate}_failed") for t in trials if t.kind == kind]
            lo, hi = wilson(sum(hits), len(hits))
            out[f"{gate}_{name}"] = {"k": sum(hits), "n": len(hits), "ci95": [round(lo, 3), round(hi, 3)]}
    return out


def _busy(n: int) -> list[subprocess.Popen[bytes]]:
    return [subprocess.Popen([sys.executable, "-c", "while 1: pass"]) for _ in range(n)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="host", choices=("host", "cupti"))
    parser.add_argument("--pairs", type=int, default=40)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--work", type=int, default=None, help="host: loop iterations (60000); cupti: matmuls (10)")
    parser.add_argument("--library", default="torch", choices=("torch", "cupy"), help="cupti: whose matmul")
    parser.add_argument("--slowdown", type=float, default=0.10)
    parser.add_argument("--threshold", type=float, default=5.0)
    parser.add_argument("--confirm", type=int, default=2)
    parser.add_argument("--busy", type=int, default=0, help="busy-loop processes beside the trials")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--minutes", type=float, default=0.0, help="start no new pair after this many minutes")
    parser.add_argument("--merge", type=Path, nargs="+", help="add up the trials of these --json files")
    args = parser.parse_args()
    if args.merge:
        merge(args.merge, args.json)
        return
    args.work = args.work or (60_000 if args.backend == "host" else 10)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # run the finally below
    busy = _busy(args.busy)
    folder = Path(tempfile.mkdtemp(prefix="gate-rates-"))
    try:
        (folder / "test_gate.py").write_text(TEST)
        print(f"# {platform.node()}, {os.cpu_count()} CPUs, {args.busy} busy loop(s); {vars(args)}", flush=True)
        start = time.perf_counter()
        trials = run_trials(folder, args)
        result = write(args, trials, start)
        print(json.dumps({k: v for k, v in result.items() if k != "args"}, indent=1))
    finally:
        for p in busy:
            p.kill()
            p.wait()
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
