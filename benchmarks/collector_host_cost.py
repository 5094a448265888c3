"""What the default nvml collectors cost per run in this process's Python, on any machine (no GPU, no NVML).

    python benchmarks/collector_host_cost.py [--tree PATH] [--runs 200] [--reps 15] [--json OUT]

The real collectors, sampler, run loop and result building run over the NVML double of the tests
(``tests/nvml_double.py``: only the library calls are scripted), sampling every 5 ms on a thread as a GPU sweep
samples in its child process. A host-backend call with an empty region and ``--runs`` runs is timed with the
nvml plugin on and blocked, alternately, ``--reps`` times; the difference of the medians per run is what the
collectors add to every run of a host-bound sweep (the 16 KiB op of ``backend_overhead.py``, where they are
about 27 of the 44 us per run that nsightx adds on an H100's host). ``--tree`` measures another source tree
(a copy of older code) in the same way, for before/after pairs of processes.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def use_tree(tree: Path) -> None:
    """Put ``tree``'s nsightx, backends and plugins first on ``sys.path``, and the tests' NVML double after them."""
    sys.path[:0] = [str(tree), str(tree / "backends"), str(tree / "plugins"), str(HERE.parent / "tests"), str(HERE)]


def install_double() -> None:
    """Replace NVML with the tests' double, sampling on a thread every 5 ms as the plugin does by default."""
    import nvml_double
    import pytest
    from nsightx_nvml import _collectors, _fields, _sampler

    mp = pytest.MonkeyPatch()
    nvml_double.install(mp, [nvml_double.FakeGpu(uuid="GPU-host-cost")])
    mp.setattr(_sampler, "SAMPLE_PERIOD_S", 0.005)  # install() turns the sampler off for scripted tests
    mp.setattr(_collectors, "RUN_READ_MAX_AGE_S", 0.010)
    mp.setattr(_fields, "SLOW_FIELDS_MAX_AGE_S", 0.1)


def make_call(runs: int, collectors: bool) -> Callable[[], Any]:
    """A host-backend call of ``runs`` runs whose region is empty, with the nvml plugin on or blocked."""
    from backend_overhead import without_nvml

    import nsightx

    @nsightx.analyze.kernel(configs=[(1,)], runs=runs, warmup=1, backend="host", verbosity=0)
    def fn(n: int) -> None:
        with nsightx.annotate("work"):
            pass

    return fn if collectors else without_nvml(fn)


def measure(runs: int, reps: int) -> dict[str, Any]:
    """Median wall time per run with the collectors on and blocked, timed alternately."""
    calls = {"on": make_call(runs, True), "blocked": make_call(runs, False)}
    for call in calls.values():
        call()  # warm: plugin host, sampler, caches
    times: dict[str, list[float]] = {k: [] for k in calls}
    for _ in range(reps):
        for name, call in calls.items():
            t0 = time.perf_counter()
            call()
            times[name].append(time.perf_counter() - t0)
    per_run = {k: statistics.median(v) * 1e6 / (runs + 1) for k, v in times.items()}
    return {"us_per_run": per_run, "collectors_us_per_run": per_run["on"] - per_run["blocked"]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tree", type=Path, default=HERE.parent, help="source tree to measure (default: this one)")
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    use_tree(args.tree.resolve())
    warnings.simplefilter("ignore")
    install_double()
    out = {"tree": str(args.tree), "runs": args.runs, "reps": args.reps, **measure(args.runs, args.reps)}
    per_run = {k: round(v, 1) for k, v in out["us_per_run"].items()}
    print(f"{args.tree}: {per_run} us per run; the collectors add {out['collectors_us_per_run']:.1f} us per run")
    if args.json:
        args.json.write_text(json.dumps(out, indent=1, default=str), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
