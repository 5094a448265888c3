"""Issue 13's benchmark: what the in-process backends (cupti, events) cost over a bare CUDA-events loop.

    PYTHONPATH=.:backends:plugins python benchmarks/backend_overhead.py --out OUTDIR [--reps 9] [--tree PATH]

``--tree PATH`` measures the nsightx found in another source tree (``PATH``, ``PATH/backends`` and
``PATH/plugins`` go first on ``sys.path``), so the same script can measure "before" code next to this branch: run
it once with ``--tree`` pointing at a copy of the old tree and once without, in one call on the GPU machine, and
compare the ratios (each process measures its own bare loop).

Workloads, each with default options (``cache_control="all"``: persisting-L2 reset and a 2 x L2 overwrite before
every region; thermal guard on; warm-up 1):

* ``sweep_once``: fp32 matmul n = 512, 1024, 2048, 4096, 10 runs each, inputs allocated once outside the function
  (the shape kernel authors write most);
* ``sweep_randn``: the same with both inputs drawn by ``torch.randn`` in every run, outside the region;
* ``small_once``: n = 512 x 40 runs, inputs allocated once (host-bound: ~13 us of kernels per run);
* ``tiny``: a 16 KiB elementwise op (4096 fp32 ``mul_``) x 200 runs, where the per-run cost of the harness and
  the flush dominate.

Variants: ``bare`` (per run: persisting-L2 reset, the same flush, one pair of CUDA events around the work, a
synchronise, as a careful hand-written loop does), ``cupti`` and ``events`` with the default collectors (the
nvml plugin: clocks, temperature, power, and the thermal guard's temperatures), and both with the nvml plugin
blocked (``*_nocollectors``); and the cupti backend with other ``backend_options`` (:data:`CUPTI_VARIANTS`,
``--cupti-variants``: each ``cupti_drain`` mode and buffer size, default collectors), whose CUPTI cost
breakdown (``Cupti*`` environment keys) is kept per variant; with ``--cupti-floor``, the bare loop timed by raw
CUPTI kernel records instead of events (``bare_cupti``, and ``bare_cupti_api`` with the API and
external-correlation records a client needs to tie kernels to regions): what CUPTI Activity itself costs.
All variants of a workload are timed in turn,
``--reps`` times after a warm-up (the order rotates every repetition); the wall time of one whole call is
compared; with ``--whole-call``, also each backend's call followed by ``.to_dataframe()`` of its result
(``<backend>_dataframe``: the whole call a user writes, issue 35). Reported per workload:
median wall time, ratio of medians to ``bare``, the median of the per-repetition ratios (paired: slow drifts of
the shared machine cancel), the host cost per run over ``bare``, and per-size medians of the measured values (so
a cheaper harness that measured something else would show).

Writes OUTDIR/backend_overhead.json and OUTDIR/backend_overhead_profiles.txt (a cProfile of
``--profile-calls`` calls of ``--profile-workload``, default one ``tiny`` call, per backend, each followed by
``.to_dataframe()`` of its result: what bounds it).
"""

from __future__ import annotations

import argparse
import cProfile
import ctypes
import io
import json
import operator
import os
import pstats
import statistics
import subprocess
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

SWEEP = (512, 1024, 2048, 4096)
TINY_FLOATS = 4096  # 16 KiB of fp32


class Workload:
    """One benchmark shape: its configs, runs, and how a run's work is made."""

    def __init__(self, name: str, sizes: tuple[int, ...], runs: int, randn: bool, tiny: bool = False) -> None:
        self.name = name
        self.sizes = sizes
        self.runs = runs
        self.randn = randn
        self.tiny = tiny

    def inputs(self, torch: Any) -> dict[int, tuple[Any, Any]]:
        """Inputs allocated once (also the tiny op's tensor), the same tensors for every variant of the workload.

        Each variant used to allocate its own: where a matrix lands in memory moved a variant's kernel time by
        up to ~3%, differently in every process, so the ratios of one workload ranged 1.00-1.06 over six processes
        of the same code (2026-12-04, session 9). Sharing them leaves only the harness between the variants.
        """
        cached = getattr(self, "_inputs", None)
        if cached is None:
            if self.tiny:
                cached = {n: (torch.ones(n, device="cuda"), None) for n in self.sizes}
            else:
                cached = {n: (torch.randn(n, n, device="cuda"), torch.randn(n, n, device="cuda")) for n in self.sizes}
            self._inputs = cached
        return cached

    def prepare(self, torch: Any, inputs: dict[int, tuple[Any, Any]], n: int) -> tuple[Any, Any]:
        """Per run, outside the region: the inputs (drawn again for ``randn`` workloads)."""
        if self.randn:
            return torch.randn(n, n, device="cuda"), torch.randn(n, n, device="cuda")
        return inputs[n]

    def work(self, a: Any, b: Any) -> None:
        """The measured work."""
        if self.tiny:
            a.mul_(1.0)
        else:
            a @ b


WORKLOADS = {
    "sweep_once": Workload("sweep_once", SWEEP, 10, randn=False),
    "sweep_randn": Workload("sweep_randn", SWEEP, 10, randn=True),
    "small_once": Workload("small_once", (512,), 40, randn=False),
    "tiny": Workload("tiny", (TINY_FLOATS,), 200, randn=False, tiny=True),
}


def use_tree(tree: str | None) -> dict[str, Any]:
    """Put ``tree`` (a source checkout of nsightx) first on ``sys.path``; say what nsightx is then imported."""
    if tree:
        root = Path(tree).resolve()
        for sub in ("plugins", "backends", ""):
            sys.path.insert(0, str(root / sub) if sub else str(root))
    import nsightx

    info: dict[str, Any] = {
        "tree": tree,
        "nsightx_file": nsightx.__file__,
        "nsightx_version": getattr(nsightx, "__version__", None),
    }
    head = Path(tree or ".") / "TREE_COMMIT"
    if head.exists():
        info["tree_commit"] = head.read_text(encoding="utf-8").strip()
    else:
        try:
            info["tree_commit"] = (
                subprocess.run(
                    ["git", "-C", tree or ".", "rev-parse", "HEAD"], capture_output=True, text=True, check=False
                ).stdout.strip()
                or None
            )
        except OSError:
            info["tree_commit"] = None
    try:
        from nsightx_nvml import _sampler  # this branch and later: the background sampler

        info["nvml_sample_period_s"] = _sampler.SAMPLE_PERIOD_S
    except ImportError:
        info["nvml_sample_period_s"] = None
    return info


def make_bare(torch: Any, w: Workload) -> Callable[[], list[float]]:
    """The reference loop: reset, flush, events around the work, synchronise, every run."""
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    buf = torch.empty(2 * l2 // 4, dtype=torch.int32, device="cuda")
    reset = ctypes.CDLL("libcuda.so.1").cuCtxResetPersistingL2Cache
    inputs = w.inputs(torch)
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

    def loop() -> list[float]:
        out = []
        for n in w.sizes:
            for r in range(-1, w.runs):
                a, b = w.prepare(torch, inputs, n)
                reset()
                buf.fill_(r & 0x7F)
                e0.record()
                w.work(a, b)
                e1.record()
                e1.synchronize()
                if r >= 0:
                    out.append(e0.elapsed_time(e1) * 1e6)
        return out

    return loop


def make_bare_cupti(torch: Any, w: Workload, apis: bool) -> Callable[[], list[float]]:
    """The floor of any CUPTI Activity client: the bare loop's reset, flush and work, timed by CUPTI kernel records.

    No framework: cupti-python's own buffer callbacks, the kinds enabled at the start of each call and disabled at
    its end, one synchronise and one forced flush after the last run (no per-run synchronise: the work is queued
    as a deferred profiled call queues it), each kernel record's name, start and end read once. ``apis``: also
    the runtime, driver and external-correlation records with an external id pushed around each run's work,
    which is what tying kernels to regions on any thread needs. Returns the work's kernel time per run, ns (a
    run's kernels follow its flush kernel, the one ``fill`` kernel of the run).
    """
    from cupti import cupti

    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    buf = torch.empty(2 * l2 // 4, dtype=torch.int32, device="cuda")
    reset = ctypes.CDLL("libcuda.so.1").cuCtxResetPersistingL2Cache
    inputs = w.inputs(torch)
    kinds = cupti.ActivityKind
    on = [kinds.CONCURRENT_KERNEL] + ([kinds.RUNTIME, kinds.DRIVER, kinds.EXTERNAL_CORRELATION] if apis else [])
    k_kernel = int(kinds.CONCURRENT_KERNEL)
    ext = cupti.ExternalCorrelationKind.CUSTOM2
    got: list[tuple[str, int, int]] = []

    def requested() -> tuple[int, int]:
        return 8 << 20, 0

    def completed(activities: Any) -> None:
        got.extend((a.name, a.start, a.end) for a in activities if a.kind == k_kernel)

    def loop() -> list[float]:
        got.clear()
        cupti.activity_register_callbacks(requested, completed)
        for kind in on:
            cupti.activity_enable(kind)
        for n in w.sizes:
            for r in range(-1, w.runs):
                a, b = w.prepare(torch, inputs, n)
                reset()
                buf.fill_(r & 0x7F)
                if apis:
                    cupti.activity_push_external_correlation_id(ext, r + 2)
                w.work(a, b)
                if apis:
                    cupti.activity_pop_external_correlation_id(ext)
        torch.cuda.synchronize()
        cupti.activity_flush_all(int(cupti.ActivityFlag.FLUSH_FORCED))
        for kind in on:
            cupti.activity_disable(kind)
        runs: list[float] = []
        for name, start, end in sorted(got, key=operator.itemgetter(1)):
            if "fill" in name.lower():
                runs.append(0.0)
            elif runs:
                runs[-1] += end - start
        per = w.runs + 1  # the warm-up run of each size is dropped, as the bare loop drops it
        return [v for i, v in enumerate(runs) if i % per]

    return loop


CUPTI_VARIANTS: dict[str, dict[str, Any]] = {
    "cupti_drain_off": {"cupti_drain": "off"},
    "cupti_drain_off_8k": {"cupti_drain": "off", "buffer_bytes": 8192},
    "cupti_drain_end": {"cupti_drain": "end"},
    "cupti_drain_config": {"cupti_drain": "config"},
    "cupti_drain_wait": {"cupti_drain": "wait"},
    "cupti_drain_end_32k": {"cupti_drain": "end", "buffer_bytes": 32768},
    "cupti_drain_wait_32k": {"cupti_drain": "wait", "buffer_bytes": 32768},
    "cupti_drain_period": {"cupti_drain": "period"},
    "cupti_drain_period_32k": {"cupti_drain": "period", "buffer_bytes": 32768},
    "cupti_drain_wait_pydecode": {"cupti_decode": "cupti-python", "cupti_drain": "wait"},
    "cupti_drain_off_pydecode": {"cupti_decode": "cupti-python", "cupti_drain": "off"},
    "cupti_api_learn": {"api_tracing": "learn"},
}
"""Extra cupti variants (``--cupti-variants``), each with the default collectors: the ``cupti_drain`` modes
(``off`` is the behaviour before draining: everything decoded after the wait, 256 KiB buffers; the others with
the draining default of 8 KiB buffers unless given), two buffer sizes, and buffers read by cupti-python's record
objects instead of the ctypes decoder (``*_pydecode``: how every buffer was read before session 8), and
``api_tracing="learn"`` (``cupti_api_learn``: launch APIs learned to launch outside regions recorded only inside
them)."""


def make_profiled(
    torch: Any,
    w: Workload,
    backend: str,
    collectors: bool,
    options: dict[str, Any] | None = None,
    decorator: dict[str, Any] | None = None,
) -> Callable[[], Any]:
    """The same loop as a decorated function measured by ``backend`` (default options, plus ``options`` for the
    backend and ``decorator`` for the decorator)."""
    import nsightx

    inputs = w.inputs(torch)
    combine = {} if w.tiny else {"combine_kernel_metrics": operator.add}

    @nsightx.analyze.kernel(
        configs=[(n,) for n in w.sizes],
        runs=w.runs,
        warmup=1,
        backend=backend,
        verbosity=nsightx.VerbosityLevel.SILENT,
        **({"backend_options": options} if options else {}),
        **combine,
        **(decorator or {}),
    )
    def fn(n: int) -> None:
        a, b = w.prepare(torch, inputs, n)
        with nsightx.annotate("work"):
            w.work(a, b)

    return fn if collectors else without_nvml(fn)


def without_nvml(fn: Callable[[], Any]) -> Callable[[], Any]:
    """``fn`` called with a plugin host of its own that blocks the nvml plugin (no collectors, no thermal source)."""
    try:
        from nsightx._pluginhost import plugins as _plugins
    except ImportError:  # a --tree from before the rename of issue 39 (nsightx._host), or before that package
        try:
            from nsightx._host import plugins as _plugins  # type: ignore[no-redef]
        except ImportError:  # (e.g. the tree issue 13 was filed on)
            from nsightx import _plugins  # type: ignore[no-redef]

    host = _plugins.PluginHost(_plugins.LoaderSettings(blocked=("nvml",))).load()

    def call() -> Any:
        previous = _plugins.default_host()  # loaded: restoring None would reload it every call
        _plugins.set_default_host(host)
        try:
            return fn()
        finally:
            _plugins.set_default_host(previous)

    return call


def with_frame(fn: Callable[[], Any]) -> Callable[[], Any]:
    """``fn`` followed by ``.to_dataframe()`` of its result: the whole call a user writes (issue 35)."""

    def call() -> Any:
        result = fn()
        result.to_dataframe()
        return result

    return call


def variants(
    torch: Any,
    w: Workload,
    backends: tuple[str, ...],
    cupti_variants: tuple[str, ...] = (),
    whole_call: bool = False,
    split_nvml: bool = False,
    cupti_floor: bool = False,
) -> dict[str, Callable[[], Any]]:
    """Every variant of one workload (the extra cupti ones only when the cupti backend is measured)."""
    out: dict[str, Callable[[], Any]] = {"bare": make_bare(torch, w)}
    for backend in backends:
        out[backend] = make_profiled(torch, w, backend, True)
        out[f"{backend}_nocollectors"] = make_profiled(torch, w, backend, False)
        if whole_call:
            out[f"{backend}_dataframe"] = with_frame(make_profiled(torch, w, backend, True))
        if split_nvml:  # the nvml collectors without the thermal guard that reads the same plugin's temperature
            out[f"{backend}_noguard"] = make_profiled(torch, w, backend, True, decorator={"thermal_mode": "off"})
    if cupti_floor:
        out["bare_cupti"] = make_bare_cupti(torch, w, apis=False)
        out["bare_cupti_api"] = make_bare_cupti(torch, w, apis=True)
    if "cupti" in backends:
        for name in cupti_variants:
            out[name] = make_profiled(torch, w, "cupti", True, CUPTI_VARIANTS[name])
    return out


def per_size(w: Workload, result: Any) -> dict[int, float]:
    """Median measured value per size, ns (a profiled result's records summed per run; a bare list as is)."""
    if isinstance(result, list):
        if not result or len(result) % len(w.sizes):  # a raw CUPTI floor whose runs could not be told apart
            return {n: float("nan") for n in w.sizes}
        per = len(result) // len(w.sizes)
        return {n: statistics.median(result[i * per : (i + 1) * per]) for i, n in enumerate(w.sizes)}
    by_run: dict[tuple[int, int], float] = {}
    for rec in result.records:
        key = (rec.config, rec.run)
        by_run[key] = by_run.get(key, 0.0) + rec.value
    return {n: statistics.median(v for (c, _), v in by_run.items() if c == i) for i, n in enumerate(w.sizes)}


def region_attrs(result: Any) -> dict[str, Any]:
    """Median region attributes of a CUPTI result (host launch time vs. kernel time: what bounds a run)."""
    regs = [reg for run in result.data.runs for reg in run.regions]
    out: dict[str, Any] = {}
    for key in ("launch_ns", "device_ns", "kernel_count"):
        vals = [reg.attributes[key] for reg in regs if key in reg.attributes]
        if vals:
            out[key] = statistics.median(vals)
    out["launch_bound_regions"] = sum(1 for reg in regs if reg.attributes.get("launch_bound"))
    out["regions"] = len(regs)
    ages = [cv.value for run in result.data.runs for cv in run.collectors if cv.name == "NvmlSampleAgeMs"]
    if ages:
        out["nvml_sample_age_ms"] = {"median": statistics.median(ages), "max": max(ages)}
    return out


def measure(
    torch: Any,
    w: Workload,
    reps: int,
    backends: tuple[str, ...],
    cupti_variants: tuple[str, ...] = (),
    whole_call: bool = False,
    split_nvml: bool = False,
    only_variants: tuple[str, ...] = (),
    cupti_floor: bool = False,
) -> dict[str, Any]:
    """Time every variant of ``w`` (or only ``only_variants`` and the bare loop) ``reps`` times, interleaved, and
    summarise."""
    fns = variants(torch, w, backends, cupti_variants, whole_call, split_nvml, cupti_floor)
    if only_variants:  # the others are not made part of the rotation (bare always is: the ratios' reference)
        fns = {k: fn for k, fn in fns.items() if k == "bare" or k in only_variants}
    names = list(fns)
    last = {k: fn() for k, fn in fns.items()}  # warm-up: cuBLAS, CUPTI, allocator, plugin hosts
    walls: dict[str, list[float]] = {k: [] for k in names}
    for rep in range(reps):
        order = names[rep % len(names) :] + names[: rep % len(names)]
        for k in order:
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            last[k] = fns[k]()
            walls[k].append((time.perf_counter() - t0) * 1e3)
    med = {k: statistics.median(v) for k, v in walls.items()}
    runs = len(w.sizes) * (w.runs + 1)
    out: dict[str, Any] = {
        "runs_per_call": runs,
        "median_ms": med,
        "ratio_of_medians": {k: med[k] / med["bare"] for k in names},
        "ratio_paired_median": {
            k: statistics.median(x / y for x, y in zip(walls[k], walls["bare"], strict=True)) for k in names
        },
        "host_us_per_run_over_bare": {k: (med[k] - med["bare"]) * 1e3 / runs for k in names},
        "all_ms": walls,
        "per_size_median_ns": {k: per_size(w, v) for k, v in last.items()},
    }
    if "cupti" in last:
        out["cupti_regions"] = region_attrs(last["cupti"])
        out["cupti_environment"] = {k: v for k, v in last["cupti"].environment.items() if k.startswith("Cupti")}
        out["cupti_variant_environments"] = {
            k: {key: v for key, v in last[k].environment.items() if key.startswith("Cupti")}
            for k in names
            if k in CUPTI_VARIANTS
        }
    if "events" in last:
        out["events_environment"] = dict(last["events"].environment)
    return out


def profile_calls(torch: Any, backends: tuple[str, ...], workload: str = "tiny", calls: int = 1) -> str:
    """A cProfile of ``calls`` calls of ``workload`` per backend, each followed by ``.to_dataframe()`` of its
    result (the whole call a user writes), by total and cumulative time."""
    w = WORKLOADS[workload]
    text = []
    for backend in backends:
        fn = make_profiled(torch, w, backend, True)
        fn().to_dataframe()  # warm: pandas and everything a frame imports are loaded outside the profile
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(calls):
            fn().to_dataframe()
        prof.disable()
        s = io.StringIO()
        st = pstats.Stats(prof, stream=s)
        st.sort_stats("tottime").print_stats(40)
        st.sort_stats("cumulative").print_stats(70)
        text.append(f"##### {backend} ({workload} x {calls}, default options)\n{s.getvalue()}")
    return "\n\n".join(text)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=Path("nsightx-out/backend-overhead"))
    ap.add_argument("--reps", type=int, default=9)
    ap.add_argument("--tree", help="source tree of the nsightx to measure (default: the importable one)")
    ap.add_argument("--only", help="comma-separated workloads (default: all)")
    ap.add_argument("--tag", default="", help="suffix of the output file names (e.g. 'before')")
    ap.add_argument("--no-profile", action="store_true", help="skip the cProfile (of --profile-workload)")
    ap.add_argument("--profile-workload", default="tiny", choices=sorted(WORKLOADS), help="workload to cProfile")
    ap.add_argument("--profile-calls", type=int, default=1, help="calls in the cProfile (more: steadier totals)")
    ap.add_argument("--backends", default="cupti,events", help="comma-separated backends (default: cupti,events)")
    ap.add_argument(
        "--cupti-variants",
        help=f"comma-separated extra cupti variants, or 'none' (default: all of {', '.join(CUPTI_VARIANTS)}; "
        "none with --tree, whose older cupti backend may not know their options)",
    )
    ap.add_argument("--nvml-period", type=float, help="nvml sampler period in seconds (default: the plugin's)")
    ap.add_argument(
        "--split-nvml",
        action="store_true",
        help="also time each backend with thermal_mode='off' (<backend>_noguard: collectors without the guard)",
    )
    ap.add_argument(
        "--variants",
        help="comma-separated variants to time beside the bare loop, alone in the rotation (default: all); e.g. "
        "'cupti_dataframe,events_dataframe': the user's whole call against the bare loop, nothing else in between",
    )
    ap.add_argument(
        "--whole-call",
        action="store_true",
        help="also time each backend's call followed by .to_dataframe() (<backend>_dataframe: what the user pays)",
    )
    ap.add_argument(
        "--cupti-floor",
        action="store_true",
        help="also time the bare loop timed by raw CUPTI kernel records (bare_cupti) and with the API and external-"
        "correlation records too (bare_cupti_api): what any CUPTI Activity client costs, no framework",
    )
    args = ap.parse_args()
    chosen_variants = args.cupti_variants or ("none" if args.tree else ",".join(CUPTI_VARIANTS))
    cupti_variants = () if chosen_variants == "none" else tuple(chosen_variants.split(","))
    unknown = [v for v in cupti_variants if v not in CUPTI_VARIANTS]
    if unknown:
        ap.error(f"unknown --cupti-variants {unknown}; known: {', '.join(CUPTI_VARIANTS)} or 'none'")
    info = use_tree(args.tree)
    if args.nvml_period is not None:  # an experiment: how much of the collectors' cost the sampler thread is
        from nsightx_nvml import _sampler

        _sampler.SAMPLE_PERIOD_S = args.nvml_period
        info["nvml_sample_period_s"] = args.nvml_period
    warnings.simplefilter("ignore")  # e.g. "no temperature source" when the nvml plugin is blocked
    args.out.mkdir(parents=True, exist_ok=True)
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.zeros(1, device="cuda")
    report: dict[str, Any] = {
        "argv": sys.argv,
        "cwd": os.getcwd(),
        "gpu": torch.cuda.get_device_name(0),
        "torch": torch.__version__,
        "python": sys.version.split()[0],
        "reps": args.reps,
        **info,
        "workloads": {},
    }
    print(json.dumps(info), flush=True)
    tag = f"_{args.tag}" if args.tag else ""
    path = args.out / f"backend_overhead{tag}.json"
    chosen = args.only.split(",") if args.only else list(WORKLOADS)
    backends = tuple(args.backends.split(","))
    report["cupti_variants"] = {v: CUPTI_VARIANTS[v] for v in cupti_variants}
    for name in chosen:
        t0 = time.perf_counter()
        res = report["workloads"][name] = measure(
            torch,
            WORKLOADS[name],
            args.reps,
            backends,
            cupti_variants,
            args.whole_call,
            args.split_nvml,
            tuple(args.variants.split(",")) if args.variants else (),
            args.cupti_floor,
        )
        print(
            f"{name} ({time.perf_counter() - t0:.1f} s): paired ratios "
            + json.dumps({k: round(v, 3) for k, v in res["ratio_paired_median"].items()}),
            flush=True,
        )
        path.write_text(json.dumps(report, indent=1, default=str), encoding="utf-8")
    if not args.no_profile:
        profiles = profile_calls(torch, backends, args.profile_workload, args.profile_calls)
        (args.out / f"backend_overhead{tag}_profiles.txt").write_text(profiles, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
