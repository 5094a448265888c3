"""Host cost of one whole cupti-backend call on issue 13's sweep shape, without a GPU (CPU only).

    PYTHONPATH=.:backends:plugins python benchmarks/cupti_host_path.py [--calls 200] [--profile] [--json PATH]

On the H200 the cupti backend's cost over a bare loop is host time: what the call does before the first run,
between runs (hidden behind the GPU once it is busy), and after the final wait (``call_timeline.py``). This runs
the real decorated call (``nsightx.analyze.kernel`` over ``nsightx.annotate``, the run loop, the cupti session,
the tracer and its ctypes-free decoder, attribution, record building, ``build_results``) with only the two
library boundaries replaced:

* ``cupti.cupti`` by :class:`SynthCupti`, which answers the calls the tracer makes and, when a region's external
  id is popped, writes the records CUPTI would have written for one ``cudaLaunchKernel`` in that region (an API
  record, an external-correlation record, a kernel record; two of each for n = 512, where cuBLAS splits K);
  they are delivered by the next flush, as plain objects with a ``kind`` and fields, as cupti-python hands them;
* the CUDA device (L2 flush, synchronise, facts) by one that does nothing.

So it times exactly nsightx's own Python, per call: ``pre`` (from the call to the first user function),
``loop`` (first to last user function, over 44 runs), ``post`` (the last user function to the return), as
medians of ``--calls`` calls; ``--profile`` adds a cProfile of the post phase's heaviest functions. The nvml
plugin runs as it would on a machine without NVML (no columns). Ratios between two versions of the code on the
same machine are what to compare; the H200's host is slower than a laptop by 1.5-2x.
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
from types import SimpleNamespace
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
for sub in ("plugins", "backends", ""):
    sys.path.insert(0, str(ROOT / sub) if sub else str(ROOT))

from cupti_attribution_cost import GEMM, LAUNCH_CBID, SPLITK, FakeCupti, Kind, _api, _kernel  # noqa: E402

SWEEP = (512, 1024, 2048, 4096)


class SynthCupti(FakeCupti):
    """:class:`FakeCupti` that writes a region's launch records when its external id is popped."""

    def __init__(self) -> None:
        super().__init__()
        self._stack: list[int] = []
        self._corr = 1000
        self._t = 10**18
        self.kernels_per_region = 1

    def get_timestamp(self) -> int:
        self._t += 5_000
        return self._t

    def activity_push_external_correlation_id(self, kind: int, ext: int) -> None:
        self._stack.append(ext)

    def activity_pop_external_correlation_id(self, kind: int) -> int:
        ext = self._stack.pop()
        for i in range(self.kernels_per_region):
            self._corr += 1
            corr, launch = self._corr, self._t + 1_000 * (i + 1)
            self.to_deliver.append(_api(corr, launch, Kind.RUNTIME, LAUNCH_CBID))
            self.to_deliver.append(
                SimpleNamespace(kind=Kind.EXTERNAL_CORRELATION, correlation_id=corr, external_id=ext, external_kind=4)
            )
            self.to_deliver.append(_kernel(SPLITK if i else GEMM, corr, launch + 50_000, launch + 90_000))
        return ext

    def activity_flush_all(self, flag: int) -> None:
        if self.to_deliver and self.completed is not None:
            delivered, self.to_deliver = self.to_deliver, []
            self.completed(delivered)


class NoDevice:
    """The CUDA side of a cupti session, doing nothing (stands in for ``CudaDevice``)."""

    def __init__(self, device: int | None, flush: bool, flush_bytes: int | None = None) -> None:
        self.device = device or 0

    def flush_l2(self) -> None:
        """Nothing to flush."""

    def synchronize(self) -> None:
        """Nothing to wait for."""

    def environment(self) -> dict[str, Any]:
        """The facts ``CudaDevice`` reports."""
        return {"GPU": "none", "Device": 0, "L2Bytes": 0, "ComputeClock": None, "MemoryClock": None, "FlushBytes": 0}

    def close(self) -> None:
        """Nothing to release."""


def install(cupti: SynthCupti) -> None:
    """Point the cupti backend at ``cupti`` and :class:`NoDevice` (the availability probe says yes)."""
    from nsightx_cupti import _backend, _session, _tracer

    from nsightx.ext import Availability

    _backend._probe.cache_clear()
    _backend._probe = lambda: Availability(available=True, reason="synthetic", version="13.0")  # type: ignore[assignment]
    _tracer._libcupti_path = "libcupti.so (synthetic)"  # on a GPU machine it is found once and kept
    tracer = _tracer.ActivityTracer(cupti, canary=None)
    _tracer.ActivityTracer._instance = tracer
    _session.CudaDevice = NoDevice  # type: ignore[assignment,misc]


def make_call(cupti: SynthCupti, stamps: list[int]) -> Any:
    """The decorated sweep function (the user's function stamps when it starts and ends)."""
    import operator

    import nsightx

    @nsightx.analyze.kernel(
        configs=[(n,) for n in SWEEP],
        runs=10,
        warmup=1,
        backend="cupti",
        verbosity=nsightx.VerbosityLevel.SILENT,
        combine_kernel_metrics=operator.add,
    )
    def fn(n: int) -> None:
        stamps.append(time.perf_counter_ns())
        cupti.kernels_per_region = 2 if n == 512 else 1
        with nsightx.annotate("work"):
            pass
        stamps.append(time.perf_counter_ns())

    return fn


def measure(calls: int, profile: bool) -> dict[str, Any]:
    """Median pre / loop / post / total of ``calls`` calls, us; with ``profile``, the post phase's profile."""
    import warnings

    warnings.filterwarnings("ignore", message=".*Thermovision", category=RuntimeWarning)
    cupti = SynthCupti()
    install(cupti)
    stamps: list[int] = []
    fn = make_call(cupti, stamps)
    result = fn()  # warm-up (quiet-API learning, caches)
    assert len(result.to_dataframe()) == len(SWEEP)
    phases: dict[str, list[float]] = {"pre": [], "loop": [], "post": [], "total": []}
    for _ in range(calls):
        stamps.clear()
        t0 = time.perf_counter_ns()
        fn()
        t1 = time.perf_counter_ns()
        phases["pre"].append((stamps[0] - t0) / 1e3)
        phases["loop"].append((stamps[-1] - stamps[0]) / 1e3)
        phases["post"].append((t1 - stamps[-1]) / 1e3)
        phases["total"].append((t1 - t0) / 1e3)
    out: dict[str, Any] = {"us_median": {k: round(statistics.median(v), 1) for k, v in phases.items()}}
    out["spent_us"] = spent(fn, calls)
    if profile:
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(50):
            fn()
        prof.disable()
        text = io.StringIO()
        pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(40)
        out["profile"] = text.getvalue()
    return out


def spent(fn: Any, calls: int) -> dict[str, float]:
    """Median time inside each of ``call_timeline.TARGETS`` called at most 16 times per call, us per call."""
    from call_timeline import TARGETS, Clock

    clock = Clock()
    undo = [u for t in TARGETS if (u := clock.wrap(t)) is not None]
    per: dict[str, list[float]] = {}
    try:
        for _ in range(calls):
            clock.reset()
            fn()
            for name, times in clock.spent.items():
                if len(times) <= 16:
                    per.setdefault(name, []).append(sum(times) / 1e3)
    finally:
        for u in reversed(undo):
            u()
    medians = {k: round(statistics.median(v), 1) for k, v in per.items()}
    return dict(sorted(medians.items(), key=lambda kv: -kv[1]))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--profile", action="store_true", help="print a cProfile of 50 calls")
    ap.add_argument("--json", type=Path, help="also write the medians here")
    args = ap.parse_args()
    out = measure(args.calls, args.profile)
    for key, us in out["us_median"].items():
        print(f"{key:>6}: {us:9.1f} us per call")
    for key, us in out["spent_us"].items():
        print(f"  {key:>40}: {us:8.1f} us")
    if args.profile:
        print(out["profile"])
    if args.json:
        args.json.write_text(json.dumps({"argv": sys.argv, **out["us_median"]}, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
