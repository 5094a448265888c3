"""Host cost of one whole cupti-backend call on issue 13's sweep shape, without a GPU (CPU only).

    PYTHONPATH=.:backends:plugins python benchmarks/cupti_host_path.py [--calls 200] [--profile] [--json PATH]
        [--decoder ctypes|cupti-python] [--outside N] [--api-tracing always|region|learn] [--compare always,learn]

On the H200 the cupti backend's cost over a bare loop is host time: what the call does before the first run,
between runs (hidden behind the GPU once it is busy), and after the final wait (``call_timeline.py``). This runs
the real decorated call (``nsightx.analyze.kernel`` over ``nsightx.annotate``, the run loop, the cupti session,
the tracer and its decoder, attribution, record building, ``build_results``) with only the library boundaries
replaced:

* ``cupti.cupti`` by :class:`SynthCupti`, which answers the calls the tracer makes and writes the records CUPTI
  would write: for each ``cudaLaunchKernel`` in a region (when its external id is popped) an API record, an
  external-correlation record and a kernel record, two of each for n = 512, where cuBLAS splits K; for each of
  the ``--outside`` launches a run makes before its region (``torch.randn`` of the inputs: 2) an API record and a
  kernel record. A launch API switched off leaves only the kernel record. With ``--decoder ctypes`` (the default,
  as on a GPU machine) the records are CUPTI 13's packed structs, handed to the ctypes decoder
  (:mod:`nsightx_cupti._raw`) through its registered callbacks by :class:`SynthLib`, which stands in for
  libcupti; with ``cupti-python`` they are plain objects, as cupti-python hands them (cheaper to read here than
  cupti-python's own, so that path reads low);
* the CUDA device (L2 flush, synchronise, facts) by one that does nothing.

So it times exactly nsightx's own Python, per call: ``pre`` (from the call to the first user function),
``loop`` (first to last user function, over 44 runs), ``post`` (the last user function to the return), and
``post`` split where the session's final wait returns: ``tail`` before it (on a GPU, hidden behind the queued
runs) and ``after_wait`` (what adds to the call's wall time there), as medians of ``--calls`` calls.
``--profile`` adds a cProfile; ``--compare`` times several ``api_tracing`` modes with their calls interleaved
in one process (a process's own speed moves a call by several percent here). The nvml plugin runs as it would
on a machine without NVML (no columns). Ratios between two versions of the code on the same machine are what to
compare; the H200's host ran this code's Python ~3.5x slower than the 2-core CI machine in session 10 (decode:
~1.65 against ~0.47 us per record).
"""

from __future__ import annotations

import argparse
import cProfile
import ctypes
import io
import json
import pstats
import statistics
import struct
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any, ClassVar

ROOT = Path(__file__).resolve().parent.parent
for sub in ("plugins", "backends", ""):
    sys.path.insert(0, str(ROOT / sub) if sub else str(ROOT))

from cupti_attribution_cost import GEMM, LAUNCH_CBID, SPLITK, FakeCupti, Kind, _api, _kernel  # noqa: E402

SWEEP = (512, 1024, 2048, 4096)


KERNEL_BYTES, API_BYTES, EXTERNAL_BYTES = 216, 40, 24
"""Record sizes of ``CUpti_ActivityKernel10``, ``CUpti_ActivityAPI`` and ``CUpti_ActivityExternalCorrelation``
(CUPTI 13.0), as :mod:`nsightx_cupti._raw` reads them."""


class SynthCupti(FakeCupti):
    """:class:`FakeCupti` that makes the records CUPTI would: a region's when its external id is popped, and those
    of :meth:`launch_outside` (a launch outside every region, as ``torch.randn`` in the function makes).

    With ``raw`` the records are CUPTI 13's packed structs in one byte buffer, which a flush copies into a buffer
    the ctypes decoder (:mod:`nsightx_cupti._raw`, the default on a GPU machine) requested and hands back through
    its registered callbacks (:class:`SynthLib`); without, they are plain objects, as cupti-python delivers them.
    """

    def __init__(self, raw: bool = False) -> None:
        super().__init__()
        self.raw = raw
        self._stack: list[int] = []
        self._corr = 1000
        self._t = 10**18
        self.kernels_per_region = 1
        self.bytes = bytearray()
        self.off: set[int] = set()
        """Runtime API callback ids switched off (``cuptiActivityEnableRuntimeApi``): their calls leave no API
        record, and so no external-correlation record either."""
        self._names = {n: ctypes.create_string_buffer(n.encode()) for n in (GEMM, SPLITK)}
        self.lib = SynthLib(self)

    def get_timestamp(self) -> int:
        self._t += 5_000
        return self._t

    def activity_push_external_correlation_id(self, kind: int, ext: int) -> None:
        self._stack.append(ext)

    def activity_enable(self, kind: int) -> None:
        if kind == Kind.RUNTIME:
            self.off.clear()  # enabling the kind overrides every per-API setting, as in libcupti

    def activity_enable_runtime_api(self, cbid: int, enable: int) -> None:
        if enable:
            self.off.discard(cbid)
        else:
            self.off.add(cbid)

    def activity_pop_external_correlation_id(self, kind: int) -> int:
        ext = self._stack.pop()
        for i in range(self.kernels_per_region):
            self._launch(SPLITK if i else GEMM, self._t + 1_000 * (i + 1), ext)
        return ext

    def launch_outside(self, kernels: int) -> None:
        """Records of ``kernels`` launches made outside every region (an API and a kernel record each)."""
        for _ in range(kernels):
            self._t += 2_000
            self._launch(GEMM, self._t, None)

    def _launch(self, name: str, launch: int, ext: int | None) -> None:
        self._corr += 1
        corr, start, end = self._corr, launch + 50_000, launch + 90_000
        traced = LAUNCH_CBID not in self.off
        ext = ext if traced else None
        if not self.raw:
            if traced:
                self.to_deliver.append(_api(corr, launch, Kind.RUNTIME, LAUNCH_CBID))
            if ext is not None:
                record = {"correlation_id": corr, "external_id": ext, "external_kind": 4}
                self.to_deliver.append(SimpleNamespace(kind=Kind.EXTERNAL_CORRELATION, **record))
            self.to_deliver.append(_kernel(name, corr, start, end))
            return
        if not self.bytes:
            self.lib.take_buffer()  # CUPTI asks for a buffer when it makes the first record after a flush
        out = self.bytes
        if traced:
            out += struct.pack("<IIQQIII4x", Kind.RUNTIME, LAUNCH_CBID, launch, launch + 3_000, 99, 11, corr)
        if ext is not None:
            out += struct.pack("<IIQI4x", Kind.EXTERNAL_CORRELATION, 4, ext, corr)
        rec = bytearray(KERNEL_BYTES)
        struct.pack_into("<I", rec, 0, Kind.CONCURRENT_KERNEL)
        struct.pack_into("<QQQIII", rec, 16, start, end, end, 0, 1, 7)  # start, end, completed, device, context, stream
        struct.pack_into("<I", rec, 92, corr)
        struct.pack_into("<Q", rec, 104, ctypes.addressof(self._names[name]))
        out += rec

    def activity_flush_all(self, flag: int) -> None:
        if self.raw:
            self.lib.deliver()
        elif self.to_deliver and self.completed is not None:
            delivered, self.to_deliver = self.to_deliver, []
            self.completed(delivered)


class SynthLib:
    """The libcupti calls of the ctypes decoder: its callbacks' registration and ``cuptiActivityGetNextRecord``.

    :meth:`take_buffer` asks the registered request callback for a buffer, as CUPTI does when it makes its first
    record after a flush; :meth:`deliver` does what a forced flush does: copies the records made since into that
    buffer and hands it to the registered completion callback.
    """

    SIZES: ClassVar[dict[int, int]] = {
        Kind.CONCURRENT_KERNEL: KERNEL_BYTES,
        Kind.RUNTIME: API_BYTES,
        Kind.EXTERNAL_CORRELATION: EXTERNAL_BYTES,
    }

    def __init__(self, cupti: SynthCupti) -> None:
        self.cupti = cupti
        self.request: Any = None
        self.complete: Any = None
        self.buffer: tuple[int, int] | None = None
        """Address and size of the buffer taken and not delivered yet."""

    def cuptiActivityRegisterCallbacks(self, request: Any, complete: Any) -> int:
        self.request, self.complete = request, complete
        return 0

    def cuptiActivityGetNextRecord(self, buffer: int, valid: int, ref: Any) -> int:
        record: ctypes.c_void_p = ref._obj
        at = record.value
        nxt = buffer if at is None else at + self.SIZES[ctypes.c_uint32.from_address(at).value]
        if nxt - buffer >= valid:
            return 12  # CUPTI_ERROR_MAX_LIMIT_REACHED
        record.value = nxt
        return 0

    def take_buffer(self) -> None:
        if self.request is None or self.buffer is not None:
            return
        addr, size, limit = ctypes.c_void_p(), ctypes.c_size_t(), ctypes.c_size_t()
        self.request(ctypes.pointer(addr), ctypes.pointer(size), ctypes.pointer(limit))
        assert addr.value is not None
        self.buffer = (addr.value, size.value)

    def deliver(self) -> None:
        data, buffer = self.cupti.bytes, self.buffer
        if not data or buffer is None:
            return
        self.cupti.bytes, self.buffer = bytearray(), None
        addr, size = buffer
        assert size >= len(data), "a sweep's records fit one buffer"
        ctypes.memmove(addr, bytes(data), len(data))
        self.complete(None, 0, addr, size, len(data))


class NoDevice:
    """The CUDA side of a cupti session, doing nothing (stands in for ``CudaDevice``).

    :meth:`synchronize` stamps :data:`WAITS` when it returns: on a GPU that is the end of the final wait, so what
    follows it is the part of the call no GPU work hides.
    """

    def __init__(self, device: int | None, flush: bool, flush_bytes: int | None = None) -> None:
        self.device = device or 0

    def flush_l2(self) -> None:
        """Nothing to flush."""

    def synchronize(self) -> None:
        """Nothing to wait for; note when the wait would have ended."""
        WAITS.append(time.perf_counter_ns())

    def environment(self) -> dict[str, Any]:
        """The facts ``CudaDevice`` reports."""
        return {"GPU": "none", "Device": 0, "L2Bytes": 0, "ComputeClock": None, "MemoryClock": None, "FlushBytes": 0}

    def close(self) -> None:
        """Nothing to release."""


WAITS: list[int] = []
"""When each :meth:`NoDevice.synchronize` of the current call returned (perf_counter ns)."""


def install(cupti: SynthCupti) -> None:
    """Point the cupti backend at ``cupti`` and :class:`NoDevice` (the availability probe says yes)."""
    from nsightx_cupti import _backend, _session, _tracer

    from nsightx.ext import Availability

    _backend._probe.cache_clear()
    _backend._probe = lambda: Availability(available=True, reason="synthetic", version="13.0")  # type: ignore[assignment]
    _tracer._libcupti_path = "libcupti.so (synthetic)"  # on a GPU machine it is found once and kept
    tracer = _tracer.ActivityTracer(cupti, canary=None, raw_decode=cupti.raw)
    if cupti.raw:
        from nsightx_cupti._raw import RawBuffers

        kinds = (Kind.CONCURRENT_KERNEL, Kind.RUNTIME, Kind.DRIVER, Kind.EXTERNAL_CORRELATION)
        tracer._raw = RawBuffers(cupti.lib, kinds, 4, tracer._deliver, tracer._decode_error)
    _tracer.ActivityTracer._instance = tracer
    _session.CudaDevice = NoDevice  # type: ignore[assignment,misc]


def make_call(cupti: SynthCupti, stamps: list[int], outside: int = 0, options: dict[str, Any] | None = None) -> Any:
    """The decorated sweep function (the user's function stamps when it starts and ends).

    Each run launches ``outside`` kernels before its region (``torch.randn`` of both inputs launches two).
    """
    import operator

    import nsightx

    @nsightx.analyze.kernel(
        configs=[(n,) for n in SWEEP],
        runs=10,
        warmup=1,
        backend="cupti",
        verbosity=nsightx.VerbosityLevel.SILENT,
        combine_kernel_metrics=operator.add,
        backend_options=options or {},
    )
    def fn(n: int) -> None:
        stamps.append(time.perf_counter_ns())
        cupti.kernels_per_region = 2 if n == 512 else 1
        cupti.launch_outside(outside)
        with nsightx.annotate("work"):
            pass
        stamps.append(time.perf_counter_ns())

    return fn


def measure(
    calls: int, profile: bool, decoder: str = "ctypes", outside: int = 0, api_tracing: str = "always"
) -> dict[str, Any]:
    """Median pre / loop / post (tail, after_wait) / total of ``calls`` calls, us; with ``profile``, a profile."""
    import warnings

    warnings.filterwarnings("ignore", message=".*Thermovision", category=RuntimeWarning)
    cupti = SynthCupti(raw=decoder == "ctypes")
    install(cupti)
    stamps: list[int] = []
    fn = make_call(cupti, stamps, outside, {"api_tracing": api_tracing})
    result = fn()  # warm-up (quiet-API learning, caches)
    assert len(result.to_dataframe()) == len(SWEEP)
    phases: dict[str, list[float]] = {}
    for _ in range(calls):
        time_call(fn, stamps, phases)
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


def time_call(fn: Any, stamps: list[int], phases: dict[str, list[float]]) -> None:
    """Call ``fn`` once and append its pre / loop / post / tail / after_wait / total to ``phases``, us."""
    stamps.clear()
    WAITS.clear()
    t0 = time.perf_counter_ns()
    fn()
    t1 = time.perf_counter_ns()
    for key, ns in (
        ("pre", stamps[0] - t0),
        ("loop", stamps[-1] - stamps[0]),
        ("post", t1 - stamps[-1]),
        ("tail", WAITS[-1] - stamps[-1]),
        ("after_wait", t1 - WAITS[-1]),
        ("total", t1 - t0),
    ):
        phases.setdefault(key, []).append(ns / 1e3)


def compare(calls: int, modes: list[str], decoder: str, outside: int) -> dict[str, dict[str, float]]:
    """Medians per ``api_tracing`` mode, the modes' calls interleaved in one process (their order alternating)."""
    import warnings

    warnings.filterwarnings("ignore", message=".*Thermovision", category=RuntimeWarning)
    cupti = SynthCupti(raw=decoder == "ctypes")
    install(cupti)
    fns = {}
    for mode in modes:
        stamps: list[int] = []
        fns[mode] = (make_call(cupti, stamps, outside, {"api_tracing": mode}), stamps)
        fns[mode][0]()  # warm-up: quiet APIs and gated launches learned
    phases: dict[str, dict[str, list[float]]] = {mode: {} for mode in modes}
    for i in range(calls):
        for mode in modes if i % 2 else modes[::-1]:
            fn, stamps = fns[mode]
            time_call(fn, stamps, phases[mode])
    return {m: {k: round(statistics.median(v), 1) for k, v in p.items()} for m, p in phases.items()}


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
    ap.add_argument(
        "--decoder",
        choices=("ctypes", "cupti-python"),
        default="ctypes",
        help="records as CUPTI 13 byte buffers through the ctypes decoder (the default on a GPU machine), or as "
        "cupti-python's objects",
    )
    ap.add_argument("--api-tracing", choices=("always", "region", "learn"), default="always")
    ap.add_argument(
        "--outside", type=int, default=0, help="kernels each run launches outside its region (2: torch.randn x 2)"
    )
    ap.add_argument(
        "--compare",
        help="comma-separated api_tracing modes to time interleaved in one process (e.g. always,learn) instead",
    )
    args = ap.parse_args()
    if args.compare:
        table = compare(args.calls, args.compare.split(","), args.decoder, args.outside)
        for mode, medians in table.items():
            print(f"{mode:>8}: " + "  ".join(f"{k} {v:.1f}" for k, v in medians.items()) + " (us per call)")
        if args.json:
            doc = {"argv": sys.argv, "us_median": table}
            args.json.write_text(json.dumps(doc, indent=1), encoding="utf-8")
        return 0
    out = measure(args.calls, args.profile, args.decoder, args.outside, args.api_tracing)
    for key, us in out["us_median"].items():
        print(f"{key:>10}: {us:9.1f} us per call")
    for key, us in out["spent_us"].items():
        print(f"  {key:>40}: {us:8.1f} us")
    if args.profile:
        print(out["profile"])
    if args.json:
        args.json.write_text(json.dumps({"argv": sys.argv, **out["us_median"]}, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
