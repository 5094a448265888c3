"""Where the default collectors' cost goes on the matmul sweeps of issue 13 (cupti backend), on the H200.

    PYTHONPATH=.:backends:plugins python benchmarks/collector_cost.py --out OUTDIR [--reps 9]

``backend_overhead.py`` shows the default collectors (the nvml plugin) adding ~3% to the sweep with inputs
allocated once. This splits that figure, variant by variant, all timed interleaved in one process against the
same bare events loop (paired medians of the whole-call wall time):

* ``default``: the nvml collectors and the thermal guard's NVML temperatures (what a user gets);
* ``blocked``: the nvml plugin blocked (no collectors, no temperatures: the guard has no source);
* ``thermal_off``: the collectors, ``thermal_mode="off"``;
* ``thermal_only``: the guard's temperatures, no nvml collector;
* ``once_only`` / ``run_only``: one of the two nvml collectors, thermal guard off;
* ``run_direct``: the RUN collector with no sampler thread (each run reads NVML, shared within 10 ms);
* ``fake_sampler``: a RUN collector whose sampler thread reads nothing from NVML (the thread's own cost);
* ``default_thread``: ``default`` with the nvml sampler as a thread in this process (the design before the
  sampler process), for the before/after in one run.

Then one instrumented pass of ``default`` reports the time spent per call inside each collector entry point
(start, stop, collect, the guard's reads), on the measured thread. Writes OUTDIR/collector_cost.json.
"""

from __future__ import annotations

import argparse
import json
import operator
import statistics
import sys
import time
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from backend_overhead import WORKLOADS, Workload, make_bare, per_size

BACKEND = "cupti"
"""The backend measured (a CPU dry run of this script sets ``host``)."""


class FakeRun:
    """A RUN collector shaped like nvml.run (start/stop, a sampler thread) that reads no NVML."""

    name = "fake.run"
    scope = "run"

    def __init__(self) -> None:
        from nsightx_nvml import _sampler

        self._sampler_mod = _sampler
        self._sampler: Any = None
        self._values = {"A": 1980, "B": 2619, "C": 33, "D": 120.5, "E": "none"}

    def start(self, ctx: Any) -> None:
        self._sampler = self._sampler_mod.Sampler(lambda: self._values)
        self._sampler.start()

    def stop(self) -> None:
        self._sampler.stop()

    def collect(self, ctx: Any) -> Mapping[str, Any]:
        self._sampler.demand()
        sample = self._sampler.latest()
        values = dict(sample.values)
        values["Age"] = sample.age_ms(time.perf_counter_ns())
        return values


def make_variant(torch: Any, w: Workload, variant: str) -> Callable[[], Any]:
    """One decorated sweep on cupti, with the host and options ``variant`` asks for."""
    from nsightx_nvml._collectors import DeviceInfo, RunConditions

    import nsightx
    from nsightx._host import plugins as _plugins

    inputs = w.inputs(torch)
    options: dict[str, Any] = {}
    blocked = _plugins.PluginHost(_plugins.LoaderSettings(blocked=("nvml",))).load()
    host: Any = None  # None: the default host
    if variant == "blocked":
        host = blocked
    elif variant == "thermal_off":
        options["thermal_mode"] = "off"
    elif variant == "thermal_only":
        host = _plugins.PluginHost(_plugins.LoaderSettings()).load()
        host.collector_sets.pop("nvml")
    elif variant in ("once_only", "run_only", "run_direct", "fake_sampler"):
        host = blocked
        options["thermal_mode"] = "off"
        options["info_collectors"] = {
            "once_only": [DeviceInfo()],
            "run_only": [RunConditions()],
            "run_direct": [RunConditions()],
            "fake_sampler": [FakeRun()],
        }[variant]

    @nsightx.analyze.kernel(
        configs=[(n,) for n in w.sizes],
        runs=w.runs,
        warmup=1,
        backend=BACKEND,
        verbosity=nsightx.VerbosityLevel.SILENT,
        combine_kernel_metrics=operator.add,
        **options,
    )
    def fn(n: int) -> None:
        a, b = w.prepare(torch, inputs, n)
        with nsightx.annotate("work"):
            w.work(a, b)

    def call() -> Any:
        from nsightx_nvml import _collectors, _sampler

        # the loaded default host, not ``_plugins._default``: restoring None after a call made every later
        # default call load a new plugin host (~15 ms on the H200, and new collectors with cold caches), which
        # is what this script's "default" figures measured until session 10
        previous, period = _plugins.default_host(), _sampler.SAMPLE_PERIOD_S
        real = getattr(_collectors.Provider, "real", None)
        if host is not None:
            _plugins.set_default_host(host)
        if variant == "run_direct":
            _sampler.SAMPLE_PERIOD_S = 0
        if variant == "default_thread" and real is not None:
            _collectors.Provider.real = property(lambda self: False)  # type: ignore[method-assign,assignment]
        try:
            return fn()
        finally:
            _plugins.set_default_host(previous)
            _sampler.SAMPLE_PERIOD_S = period
            if real is not None:
                _collectors.Provider.real = real  # type: ignore[method-assign]

    return call


VARIANTS = (
    "default",
    "default_thread",
    "blocked",
    "thermal_off",
    "thermal_only",
    "once_only",
    "run_only",
    "run_direct",
    "fake_sampler",
)


def measure(torch: Any, w: Workload, reps: int) -> dict[str, Any]:
    """Every variant of ``w``, ``reps`` interleaved repetitions after a warm-up."""
    fns: dict[str, Callable[[], Any]] = {"bare": make_bare(torch, w)}
    fns.update({v: make_variant(torch, w, v) for v in VARIANTS})
    last = {k: fn() for k, fn in fns.items()}
    walls: dict[str, list[float]] = {k: [] for k in fns}
    names = list(fns)
    for rep in range(reps):
        for k in names[rep % len(names) :] + names[: rep % len(names)]:
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            last[k] = fns[k]()
            walls[k].append((time.perf_counter() - t0) * 1e3)
    runs = len(w.sizes) * (w.runs + 1)
    med = {k: statistics.median(v) for k, v in walls.items()}
    paired = {k: statistics.median(x / y for x, y in zip(walls[k], walls["bare"], strict=True)) for k in names}
    return {
        "runs_per_call": runs,
        "median_ms": med,
        "ratio_paired_median": paired,
        "us_per_run_over_blocked": {k: (med[k] - med["blocked"]) * 1e3 / runs for k in names},
        "all_ms": walls,
        "per_size_median_ns": {k: per_size(w, v) for k, v in last.items()},
    }


def instrumented(torch: Any, w: Workload, calls: int) -> dict[str, Any]:
    """Microseconds per call spent in each collector entry point during ``default`` calls (measured thread)."""
    from nsightx_nvml import _collectors

    from nsightx._run import loop as _runloop
    from nsightx._run import thermal as _thermal

    spent: dict[str, list[int]] = {}
    targets = [
        (_collectors.RunConditions, "start"),
        (_collectors.RunConditions, "stop"),
        (_collectors.RunConditions, "collect"),
        (_collectors.DeviceInfo, "collect"),
        (_collectors.NvmlTemperatureSource, "read"),
        (_runloop._Collectors, "materialize"),
        (_runloop._Collectors, "gather"),
    ]
    for name in dir(_thermal):
        obj = getattr(_thermal, name)
        if isinstance(obj, type) and hasattr(obj, "before_run"):
            targets.append((obj, "before_run"))
    originals = []
    for cls, attr in targets:
        original = getattr(cls, attr)
        key = f"{cls.__name__}.{attr}"
        spent[key] = [0, 0]

        def timed(*a: Any, _o: Any = original, _k: str = key, **kw: Any) -> Any:
            t0 = time.perf_counter_ns()
            try:
                return _o(*a, **kw)
            finally:
                spent[_k][0] += time.perf_counter_ns() - t0
                spent[_k][1] += 1

        originals.append((cls, attr, original))
        setattr(cls, attr, timed)
    fn = make_variant(torch, w, "default")
    try:
        fn()
        for v in spent.values():
            v[0] = v[1] = 0
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        wall = (time.perf_counter() - t0) * 1e3 / calls
    finally:
        for cls, attr, original in originals:
            setattr(cls, attr, original)
    return {
        "wall_ms_per_call": wall,
        "us_per_call": {k: round(v[0] / 1e3 / calls, 1) for k, v in spent.items() if v[1]},
        "calls_per_call": {k: v[1] / calls for k, v in spent.items() if v[1]},
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=Path("nsightx-out/collector-cost"))
    ap.add_argument("--reps", type=int, default=9)
    ap.add_argument("--only", default="sweep_once,sweep_randn")
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    args.out.mkdir(parents=True, exist_ok=True)
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.zeros(1, device="cuda")
    report: dict[str, Any] = {"argv": sys.argv, "gpu": torch.cuda.get_device_name(0), "workloads": {}}
    path = args.out / "collector_cost.json"
    for name in args.only.split(","):
        w = WORKLOADS[name]
        t0 = time.perf_counter()
        res = measure(torch, w, args.reps)
        res["instrumented_default"] = instrumented(torch, w, 5)
        report["workloads"][name] = res
        print(f"{name} ({time.perf_counter() - t0:.1f} s):", flush=True)
        print("  paired ratio " + json.dumps({k: round(v, 3) for k, v in res["ratio_paired_median"].items()}))
        print(
            "  us/run over blocked " + json.dumps({k: round(v, 1) for k, v in res["us_per_run_over_blocked"].items()})
        )
        print("  instrumented " + json.dumps(res["instrumented_default"]), flush=True)
        path.write_text(json.dumps(report, indent=1, default=str), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
