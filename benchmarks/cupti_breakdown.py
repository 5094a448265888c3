"""Where the CUPTI backend's overhead goes: raw CUPTI loops without nsightx, per-call micro costs, a profile.

    PYTHONPATH=.:backends:plugins python benchmarks/cupti_breakdown.py --out OUTDIR [--reps 7]

Same workload as benchmarks/cupti_overhead.py (fp32 matmul n = 512..4096, 10 runs + 1 warm-up, inputs drawn in
every run, a 2 x L2 overwrite before every run). Variants, interleaved ``--reps`` times, medians compared with the
bare CUDA-events loop (one event pair per run, synchronised every run):

- ``raw_*``: CUPTI driven directly (no nsightx), with a minimal buffer callback that keeps only kernel and
  external-correlation records. ``always``: launch-API kinds on for the whole loop; ``toggle``: switched on and
  off around each region; ``sync``: synchronise after every run; ``cfgflush``: flush CUPTI after every config
  (otherwise once at the end); ``fulldecode``: nsightx's own decoding callback; ``driveronly``/``runtimeonly``:
  only one API kind traced (the report says how many kernels still got an external id).
- ``nsx_*``: the nsightx CUPTI backend with a few backend_options.

Writes ``cupti_breakdown.json`` (ratios, micro costs in us, attribution counts) and ``cupti_profile.txt``
(cProfile of one profiled call).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import operator
import pstats
import statistics
import sys
import time
from pathlib import Path
from typing import Any

SIZES = (512, 1024, 2048, 4096)
RUNS = 10
WARMUP = 1


class Dispatch:
    """CUPTI allows one pair of buffer callbacks per process: these forward to whichever handler is current."""

    def __init__(self) -> None:
        self.requested: Any = lambda: (256 * 1024, 0)
        self.completed: Any = lambda acts: None

    def on_requested(self) -> tuple[int, int]:
        return self.requested()  # type: ignore[no-any-return]

    def on_completed(self, acts: Any) -> None:
        self.completed(acts)


class Minimal:
    """Keeps kernel (corr, start, end) and external (corr -> id) records; counts everything."""

    def __init__(self, cupti: Any) -> None:
        self.k_kernel = int(cupti.ActivityKind.CONCURRENT_KERNEL)
        self.k_ext = int(cupti.ActivityKind.EXTERNAL_CORRELATION)
        self.reset()

    def reset(self) -> None:
        self.kernels: list[tuple[int, int, int]] = []
        self.ext: dict[int, int] = {}
        self.records = 0
        self.decode_ns = 0

    def completed(self, acts: Any) -> None:
        t0 = time.perf_counter_ns()
        self.records += len(acts)
        kk, ke = self.k_kernel, self.k_ext
        for a in acts:
            k = a.kind
            if k == kk:
                self.kernels.append((a.correlation_id, a.start, a.end))
            elif k == ke:
                self.ext[a.correlation_id] = a.external_id
        self.decode_ns += time.perf_counter_ns() - t0


def timeline(call: Any, torch: Any, reps: int = 15) -> dict[str, float]:
    """Median per call of the time spent in the main steps of a profiled call, ms."""
    from nsightx_cupti import _session, _tracer

    import nsightx._api.kernel as core_kernel
    import nsightx._results.transform as transform
    import nsightx._run.backend as core_backend
    import nsightx._run.loop as runloop

    spent: dict[str, float] = {}
    patches: list[tuple[Any, str, Any]] = []

    def wrap(owner: Any, name: str, label: str) -> None:
        original = getattr(owner, name)

        def timed(*a: Any, **kw: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return original(*a, **kw)
            finally:
                spent[label] = spent.get(label, 0.0) + time.perf_counter() - t0

        patches.append((owner, name, original))
        setattr(owner, name, timed)

    wrap(core_kernel.ProfiledFunction, "_run", "call._run")
    wrap(core_backend.Backend, "execute", "execute")
    wrap(runloop, "run_loop", "run_loop")
    wrap(runloop._Runner, "run", "runs (sum of _Runner.run)")
    wrap(runloop, "_call_user", "user function (sum)")
    wrap(runloop, "_write_pending", "write_pending")
    wrap(runloop._Collectors, "materialize", "materialize collector rows")
    wrap(_session.CuptiSession, "collect_runs", "collect_runs")
    wrap(_session.CudaDevice, "synchronize", "sync")
    wrap(_tracer.ActivityTracer, "collect", "cupti flush+decode")
    wrap(_session.CudaDevice, "__init__", "device open")
    wrap(_session.CudaDevice, "close", "device close")
    wrap(_tracer.ActivityTracer, "start", "tracer start")
    wrap(_tracer.ActivityTracer, "stop", "tracer stop")
    wrap(_session.CuptiSession, "environment", "session environment")
    wrap(transform, "combine_records", "combine_records")
    wrap(core_kernel, "combine_records", "combine_records (kernel)")
    wrap(_session.CuptiSession, "region_enter", "region_enter (sum)")
    wrap(_session.CuptiSession, "region_exit", "region_exit (sum)")
    samples: dict[str, list[float]] = {}
    try:
        call()
        for _ in range(reps):
            spent.clear()
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            call()
            spent["total"] = time.perf_counter() - t0
            for k, v in spent.items():
                samples.setdefault(k, []).append(v * 1e3)
    finally:
        for owner, name, original in reversed(patches):
            setattr(owner, name, original)
    return {k: round(statistics.median(v), 3) for k, v in samples.items()}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=Path("nsightx-out/breakdown"))
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--timeline-only", action="store_true", help="only the step timeline of the default call")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)

    import torch
    from cupti import cupti
    from nsightx_cupti._tracer import ActivityTracer

    import nsightx
    from nsightx._host import plugins as _plugins
    from nsightx._host.plugins import LoaderSettings, PluginHost

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.zeros(1, device="cuda")
    report: dict[str, Any] = {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__}

    dispatch = Dispatch()
    cupti.activity_register_callbacks(dispatch.on_requested, dispatch.on_completed)
    tracer = ActivityTracer.get()
    tracer.reregister = False  # the dispatcher holds the callbacks and forwards to the tracer
    minimal = Minimal(cupti)
    K = cupti.ActivityKind
    k_rt, k_drv, k_ext, k_kernel = int(K.RUNTIME), int(K.DRIVER), int(K.EXTERNAL_CORRELATION), int(K.CONCURRENT_KERNEL)
    ext_kind = int(cupti.ExternalCorrelationKind.CUSTOM2)
    forced = int(cupti.ActivityFlag.FLUSH_FORCED)

    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    buf = torch.empty(2 * l2 // 4, dtype=torch.int32, device="cuda")

    def bare(flush: bool) -> Any:
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

        def run() -> None:
            for n in SIZES:
                for r in range(-WARMUP, RUNS):
                    a = torch.randn(n, n, device="cuda")
                    b = torch.randn(n, n, device="cuda")
                    if flush:
                        buf.fill_(r & 0x7F)
                    e0.record()
                    a @ b
                    e1.record()
                    e1.synchronize()
                    e0.elapsed_time(e1)

        return run

    def raw(
        apis: tuple[int, ...] = (k_rt, k_drv),
        toggle: bool = False,
        sync: bool = False,
        cfgflush: bool = False,
        full: bool = False,
        tag: str = "",
    ) -> Any:
        def run() -> None:
            minimal.reset()
            if full:
                tracer._pending = type(tracer._pending)()
                dispatch.completed = tracer._buffer_completed
            else:
                dispatch.completed = minimal.completed
            dispatch.requested = lambda: (256 * 1024, 0)
            for k in (k_kernel, k_ext, *apis):
                cupti.activity_enable(k)
            if toggle:
                for k in apis:
                    cupti.activity_disable(k)
            ext = 0
            for n in SIZES:
                for r in range(-WARMUP, RUNS):
                    a = torch.randn(n, n, device="cuda")
                    b = torch.randn(n, n, device="cuda")
                    buf.fill_(r & 0x7F)
                    if toggle:
                        for k in apis:
                            cupti.activity_enable(k)
                    ext += 1
                    cupti.activity_push_external_correlation_id(ext_kind, ext)
                    a @ b
                    cupti.activity_pop_external_correlation_id(ext_kind)
                    if toggle:
                        for k in apis:
                            cupti.activity_disable(k)
                    if sync:
                        torch.cuda.synchronize()
                if cfgflush:
                    torch.cuda.synchronize()
                    cupti.activity_flush_all(forced)
            torch.cuda.synchronize()
            cupti.activity_flush_all(forced)
            for k in (k_kernel, k_ext, *apis):
                if not toggle or k not in apis:
                    cupti.activity_disable(k)
            cupti.activity_flush_all(forced)
            if tag:
                kernels = minimal.kernels if not full else [(k.correlation_id, 0, 0) for k in tracer._pending.kernels]
                exts = minimal.ext if not full else tracer._pending.externals
                matched = sum(1 for c, _s, _e in kernels if c in exts)
                report.setdefault("attribution", {})[tag] = {
                    "kernels": len(kernels),
                    "kernels_with_ext_id": matched,
                    "records_per_run": round(minimal.records / (len(SIZES) * (RUNS + WARMUP)), 1),
                    "decode_us_per_run": round(minimal.decode_ns / 1e3 / (len(SIZES) * (RUNS + WARMUP)), 1),
                }

        return run

    class Fake5:
        """A RUN collector returning five constants: the framework's cost of collector values alone."""

        name = "fake5"
        scope = "run"

        def collect(self, ctx: Any) -> dict[str, Any]:
            return {"A": 1, "B": 2.0, "C": 3, "D": 4.5, "E": "x"}

    from nsightx_cupti._session import CudaDevice

    def nsx(cache: str = "all", reset: bool | None = None, **opts: Any) -> Any:
        options: dict[str, Any] = {"thermal_mode": "off"}
        host = PluginHost(LoaderSettings(blocked=("nvml",))).load() if opts.pop("no_nvml", False) else None
        options.update(opts)

        @nsightx.analyze.kernel(
            configs=[(n,) for n in SIZES],
            runs=RUNS,
            warmup=WARMUP,
            backend="cupti",
            cache_control=cache,
            combine_kernel_metrics=operator.add,
            verbosity=nsightx.VerbosityLevel.SILENT,
            **options,
        )
        def matmul(n: int) -> None:
            a = torch.randn(n, n, device="cuda")
            b = torch.randn(n, n, device="cuda")
            with nsightx.annotate("matmul"):
                a @ b

        def run() -> Any:
            dispatch.completed = tracer._buffer_completed
            dispatch.requested = tracer._buffer_requested
            if host is None:
                return matmul()
            previous = _plugins.default_host()  # loaded: restoring None would reload it every call
            _plugins.set_default_host(host)
            try:
                return matmul()
            finally:
                _plugins.set_default_host(previous)

        return run

    variants: dict[str, Any] = {
        "bare/none": bare(False),
        "bare/all": bare(True),
        "raw_always": raw(tag="always"),
        "raw_always_sync": raw(sync=True),
        "raw_toggle": raw(toggle=True),
        "raw_always_fulldecode": raw(full=True),
        "nsx_default": nsx(),
        "nsx_region": nsx(backend_options={"api_tracing": "region"}),
        "nsx_default_none": nsx("none"),
        "nsx_nocollectors": nsx(no_nvml=True),
        "nsx_noreset": nsx(reset=False),
        "nsx_buf64k": nsx(backend_options={"buffer_bytes": 65536}),
        "nsx_fake5_no_nvml": nsx(no_nvml=True, info_collectors=[Fake5()]),
    }
    if args.timeline_only:
        report["timeline_ms"] = timeline(variants["nsx_default"], torch)
        bare_walls = []
        for _ in range(15):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            variants["bare/all"]()
            bare_walls.append((time.perf_counter() - t0) * 1e3)
        report["timeline_ms"]["bare/all total"] = round(statistics.median(bare_walls), 3)
        (args.out / "cupti_breakdown.json").write_text(json.dumps(report, indent=1), encoding="utf-8")
        print(json.dumps(report["timeline_ms"], indent=1))
        return 0
    walls: dict[str, list[float]] = {k: [] for k in variants}
    for fn in variants.values():
        fn()
    for _ in range(args.reps):
        for name, fn in variants.items():
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            fn()
            walls[name].append(time.perf_counter() - t0)
    med = {k: statistics.median(v) * 1e3 for k, v in walls.items()}
    report["wall_ms_median"] = med
    report["ratio_to_bare_all"] = {k: round(v / med["bare/all"], 3) for k, v in med.items()}
    report["wall_ms_all"] = {k: [round(x * 1e3, 2) for x in v] for k, v in walls.items()}
    (args.out / "cupti_breakdown.json").write_text(json.dumps(report, indent=1), encoding="utf-8")

    # --- micro costs (us, median) ----------------------------------------------------------------------
    micro: dict[str, float] = {}
    dispatch.completed = minimal.completed

    def timed(label: str, fn: Any, reps: int = 30, before: Any = None) -> None:
        xs = []
        for _ in range(reps):
            if before is not None:
                before()
            t0 = time.perf_counter_ns()
            fn()
            xs.append(time.perf_counter_ns() - t0)
        torch.cuda.synchronize()
        micro[label] = round(statistics.median(xs) / 1e3, 2)

    a = torch.randn(4096, 4096, device="cuda")
    b = torch.randn(4096, 4096, device="cuda")

    def busy() -> None:
        torch.cuda.synchronize()
        a @ b  # ~2.7 ms in flight

    def toggle_on() -> None:
        cupti.activity_enable(k_rt)
        cupti.activity_enable(k_drv)

    def toggle_off() -> None:
        cupti.activity_disable(k_rt)
        cupti.activity_disable(k_drv)

    for k in (k_kernel, k_ext):
        cupti.activity_enable(k)
    timed("toggle_on_idle", toggle_on, before=lambda: (torch.cuda.synchronize(), toggle_off()))
    timed("toggle_off_idle", toggle_off, before=lambda: (torch.cuda.synchronize(), toggle_on()))
    timed("toggle_on_busy", toggle_on, before=lambda: (busy(), toggle_off()))
    timed("toggle_off_busy", toggle_off, before=lambda: (busy(), toggle_on()))
    toggle_on()
    timed(
        "push_pop",
        lambda: (
            cupti.activity_push_external_correlation_id(ext_kind, 7),
            cupti.activity_pop_external_correlation_id(ext_kind),
        ),
    )
    timed("get_timestamp", cupti.get_timestamp)
    timed("flush_forced_empty", lambda: cupti.activity_flush_all(forced), before=torch.cuda.synchronize)
    timed("flush_plain_empty", lambda: cupti.activity_flush_all(0), before=torch.cuda.synchronize)

    def many() -> None:
        for _ in range(40):
            x = torch.randn(64, 64, device="cuda")
            x @ x
        torch.cuda.synchronize()

    minimal.reset()
    timed("flush_forced_after_40_small_runs", lambda: cupti.activity_flush_all(forced), reps=10, before=many)
    micro["records_per_small_run"] = round(minimal.records / (10 * 40 + 1), 1)
    from nsightx_cupti import _driver

    timed("reset_persisting_l2_idle", _driver.reset_persisting_l2, before=torch.cuda.synchronize)
    timed("reset_persisting_l2_busy", _driver.reset_persisting_l2, before=busy)
    timed("persisting_l2_limit", _driver.persisting_l2_limit)
    micro["persisting_l2_limit_bytes"] = _driver.persisting_l2_limit()

    def small_then(fn: Any) -> Any:
        def go() -> None:
            x = torch.ones(1024, device="cuda")
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            e0.record()
            fn()
            x.add_(1)
            e1.record()
            e1.synchronize()
            gpu.append(e0.elapsed_time(e1) * 1e3)

        return go

    for label, fn in (
        ("gpu_us_small_kernel", lambda: None),
        ("gpu_us_reset_then_small_kernel", _driver.reset_persisting_l2),
    ):
        gpu: list[float] = []
        timed(label + "_host", small_then(fn))
        micro[label] = round(statistics.median(gpu), 2)
    dev = CudaDevice(0, flush=True)
    timed("flush_l2_launch_idle", dev.flush_l2, before=torch.cuda.synchronize)
    timed("flush_l2_launch_busy", dev.flush_l2, before=busy)
    timed("torch_fill_launch_busy", lambda: buf.fill_(3), before=busy)
    timed("cuda_device_open_close", lambda: CudaDevice(0, flush=True).close(), reps=10)
    dev.close()
    toggle_off()
    for k in (k_kernel, k_ext):
        cupti.activity_disable(k)
    cupti.activity_flush_all(forced)
    dispatch.completed = tracer._buffer_completed
    dispatch.requested = tracer._buffer_requested
    timed("tracer_start_stop_region", lambda: (tracer.start(), tracer.stop()), reps=10)
    timed("tracer_start_stop_always", lambda: (tracer.start(api_tracing="always"), tracer.stop()), reps=10)
    micro["quiet_apis"] = len(tracer.quiet.off)
    try:
        import pynvml  # noqa: F401

        from nsightx._host.plugins import default_host

        host = default_host()
        cols = host.default_collectors()
        from nsightx._enums import CollectionScope
        from nsightx._run.collectors import CollectContext

        ctx = CollectContext(
            scope=CollectionScope.RUN,
            function="f",
            args=(),
            params={},
            config=0,
            run=0,
            annotation=None,
            device=0,
            backend="cupti",
        )
        for c in cols:
            if c.scope == CollectionScope.RUN.value or str(c.scope) == "run":
                timed(f"collector_{c.name}", lambda c=c: c.collect(ctx))
                timed(f"collector_{c.name}_busy", lambda c=c: c.collect(ctx), before=busy)
        from nsightx_nvml._collectors import provider

        devices = provider().devices()
        if devices is not None:
            nv, h = devices.nvml, devices.resolve(0).sensors
            for field in ("sm_clock_mhz", "mem_clock_mhz", "temperature_c", "power_w", "event_reasons"):
                fn = getattr(nv, field)
                timed(f"nvml_{field}_idle", lambda fn=fn: fn(h), before=torch.cuda.synchronize)
                timed(f"nvml_{field}_busy", lambda fn=fn: fn(h), before=busy)
    except Exception as e:
        micro["collector_error"] = str(e)  # type: ignore[assignment]
    report["micro_us"] = micro
    (args.out / "cupti_breakdown.json").write_text(json.dumps(report, indent=1), encoding="utf-8")

    # --- where one nsightx call's wall time goes (perf_counter around the main steps, no profiler) -------
    report["timeline_ms"] = timeline(variants["nsx_default"], torch)
    (args.out / "cupti_breakdown.json").write_text(json.dumps(report, indent=1, default=str), encoding="utf-8")

    # --- profile of one nsightx call ---------------------------------------------------------------------
    prof = cProfile.Profile()
    fn = variants["nsx_default"]
    prof.enable()
    res = fn()
    prof.disable()
    s = io.StringIO()
    st = pstats.Stats(prof, stream=s)
    st.sort_stats("cumulative").print_stats(45)
    st.sort_stats("tottime").print_stats(30)
    (args.out / "cupti_profile.txt").write_text(s.getvalue(), encoding="utf-8")
    report["nsx_default_env"] = {k: v for k, v in res.environment.items() if str(k).startswith("Cupti")}
    (args.out / "cupti_breakdown.json").write_text(json.dumps(report, indent=1, default=str), encoding="utf-8")
    print(
        json.dumps({k: report[k] for k in ("ratio_to_bare_all", "micro_us", "nsx_default_env")}, indent=1, default=str)
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
