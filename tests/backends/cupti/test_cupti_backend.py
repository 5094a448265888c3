"""The cupti backend without a GPU: registration, capabilities, availability, options, and the session driven by
the shared run loop over activity captured on the H200 (a tracer double that replays a fixture)."""

from __future__ import annotations

import dataclasses
import importlib.util
import operator
from typing import Any

import _paths
import pytest
from nsightx_cupti import _backend
from nsightx_cupti._attribution import ActivityBatch, RegionWindow, batch_from_json
from nsightx_cupti._backend import CuptiBackend
from nsightx_cupti._session import CuptiSession

import nsightx
from nsightx._errors import ConfigError, MeasurementError
from nsightx._results.sink import RunSink
from nsightx._run.loop import run_loop
from nsightx._run.plan import Plan, ThermalSettings

FIXTURES = _paths.FIXTURES / "cupti" / "api_always"


def test_registered_with_its_capabilities(plugin_host: Any) -> None:
    cls = plugin_host.backend("cupti")
    assert cls is CuptiBackend
    caps = cls.capabilities
    assert caps.default_metrics == ("gpu__time_duration.sum",)
    assert caps.cache_control == {"all", "none"} and caps.clock_control == {"none"}
    assert caps.replay_modes == {"kernel"} and caps.cost == 10


def test_availability_without_cupti_python_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "cupti" else real(name, *a))
    _backend._probe.cache_clear()
    try:
        avail = CuptiBackend.availability()
    finally:
        _backend._probe.cache_clear()
    assert not avail.available
    assert "cupti-python" in avail.reason and "nsightx[cupti]" in avail.remedy


def test_availability_never_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom() -> None:
        raise RuntimeError("broken probe")

    monkeypatch.setattr(_backend, "_probe", boom)
    avail = CuptiBackend.availability()
    assert not avail.available and "broken probe" in avail.reason


def test_clock_control_base_is_a_config_error_naming_the_option(plugin_host: Any) -> None:
    @nsightx.analyze.kernel(runs=1, backend="cupti", clock_control="base")
    def f() -> None:
        pass

    with pytest.raises(ConfigError, match="clock_control='base'"):
        f()


def test_replay_mode_range_is_a_config_error(plugin_host: Any) -> None:
    @nsightx.analyze.kernel(runs=1, backend="cupti", replay_mode="range")
    def f() -> None:
        pass

    with pytest.raises(ConfigError, match="replay_mode='range'"):
        f()


def _plan(**kw: Any) -> Plan:
    base: dict[str, Any] = dict(
        function=lambda: None,
        function_name="f",
        params=(),
        configs=((),),
        runs=1,
        warmup=0,
        metrics=("gpu__time_duration.sum",),
        backend="cupti",
        thermal=ThermalSettings(mode="off"),
    )
    base.update(kw)
    return Plan(**base)


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"bogus": 1}, "not understood"),
        ({"buffer_bytes": 10}, "at least 4096"),
        ({"flush_bytes": True}, "at least 65536"),
    ],
)
def test_validate_rejects_bad_backend_options(options: dict[str, Any], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        CuptiBackend().validate(_plan(backend_options=options))


def test_validate_rejects_other_metrics() -> None:
    with pytest.raises(ConfigError, match=r"only 'gpu__time_duration\.sum'"):
        CuptiBackend().validate(_plan(metrics=("sm__cycles_elapsed.avg",)))


# --- the session over replayed H200 activity -------------------------------------------------------------------


class ReplayTracer:
    """Stands in for CUPTI: hands out the captured windows' timestamps and delivers the captured activity, with
    the captured external ids renamed to the ones the session pushed."""

    def __init__(self, runs: list[tuple[ActivityBatch, list[RegionWindow]]]) -> None:
        self.runs = runs
        self.clock: list[int] = [t for _, ws in runs for w in ws for t in (w.enter_ns, w.exit_ns)]
        self.pushed: list[int] = []
        self.stack: list[int] = []
        self.collected = 0

    api_tracing = "always"  # the api_always fixtures were captured so

    def region_open(self) -> None:
        pass

    def region_close(self) -> None:
        pass

    def push(self, external_id: int) -> None:
        self.pushed.append(external_id)
        self.stack.append(external_id)

    def pop(self) -> int:
        return self.stack.pop()

    def timestamp(self) -> int:
        return self.clock.pop(0)

    def collect(self) -> ActivityBatch:
        """Deliver the captured activity of every run opened since the last call (ids renamed to ours)."""
        out = ActivityBatch()
        while self.collected < len(self.runs):
            batch, windows = self.runs[self.collected]
            first = sum(len(ws) for _, ws in self.runs[: self.collected])
            ours = self.pushed[first : first + len(windows)]
            if len(ours) < len(windows):
                break
            rename = {w.external_id: mine for w, mine in zip(windows, ours, strict=True)}
            out.extend(dataclasses.replace(batch, externals={c: rename.get(e, -e) for c, e in batch.externals.items()}))
            self.collected += 1
        return out


class NoDevice:
    def __init__(self) -> None:
        self.flushes = 0

    def flush_l2(self) -> None:
        self.flushes += 1

    def synchronize(self) -> None:
        pass

    def environment(self) -> dict[str, Any]:
        return {"GPU": "replayed"}


class NamingReplayTracer(ReplayTracer):
    """The replay tracer plus the launch-call names cupti-python's enums give the fixtures' API ids."""

    LAUNCHES = frozenset({("runtime", 211), ("runtime", 430)})  # cudaLaunchKernel_v7000, cudaLaunchKernelExC_v11060

    def launches_kernels(self, api: Any) -> bool:
        return (api.domain, api.cbid) in self.LAUNCHES


def _replay(
    names: list[str], deferred: bool = False, tracer: type[ReplayTracer] = ReplayTracer, drop_kernels: bool = False
) -> tuple[RunSink, NoDevice]:
    runs = [batch_from_json((FIXTURES / f"{n}.json").read_text(encoding="utf-8"))[:2] for n in names]
    runs = [(batch, windows) for batch, windows, *_ in runs]
    if drop_kernels:  # what another CUPTI client switching kernel records off leaves us
        runs = [(dataclasses.replace(batch, kernels=[]), windows) for batch, windows in runs]

    def user(i: int) -> None:
        for w in runs[i][1]:
            with nsightx.annotate(w.annotation):
                pass

    plan = _plan(function=user, configs=tuple((i,) for i in range(len(names))), params=("i",))
    device = NoDevice()
    sink = RunSink()
    run_loop(plan, CuptiSession(tracer(runs), device, deferred=deferred), sink)
    return sink, device


@pytest.mark.parametrize("deferred", [False, True])
def test_session_over_captured_activity_yields_exact_records(deferred: bool) -> None:
    sink, device = _replay(["splitk_512", "graph_replay", "two_regions"], deferred)
    assert device.flushes == 3
    by_config = {run.config: run for run in sink.runs}
    assert [r.seq for r in by_config[0].records] == [0, 1]
    assert by_config[0].regions[0].attributes["kernel_count"] == 2
    assert len(by_config[1].records) == 3
    assert {r.annotation for r in by_config[2].records} == {"first", "second"}
    assert all(r.unit == "ns" and r.value > 0 for run in sink.runs for r in run.records)


def test_deferred_session_collects_once_per_config_not_per_run() -> None:
    batch, windows, *_ = batch_from_json((FIXTURES / "splitk_512.json").read_text(encoding="utf-8"))
    tracer = ReplayTracer([(batch, windows)])

    def user() -> None:
        with nsightx.annotate(windows[0].annotation):
            pass

    session = CuptiSession(tracer, NoDevice(), deferred=True)
    sink = RunSink()
    run_loop(_plan(function=user, runs=1, warmup=0), session, sink)
    assert tracer.collected == 1 and [r.seq for r in sink.runs[0].records] == [0, 1]
    assert session.collect_runs() == {}  # nothing left over


def test_combined_value_of_split_k_is_the_kernel_sum() -> None:
    from nsightx._results.transform import combine_records

    sink, _ = _replay(["splitk_512"])
    (value,) = combine_records(sink.runs, ("gpu__time_duration.sum",), combine=operator.add)
    assert value.value == sum(r.value for r in sink.runs[0].records)
    assert "|" in value.kernel


def test_release_flush_buffers_is_a_no_op_without_sessions() -> None:
    import sys

    import nsightx_cupti

    loaded = "nsightx_cupti._session" in sys.modules
    nsightx_cupti.release_flush_buffers()
    assert ("nsightx_cupti._session" in sys.modules) == loaded  # it loads nothing


ALL_FIXTURES = ["splitk_512", "graph_replay", "two_regions", "side_stream", "other_thread"]


@pytest.mark.parametrize("deferred", [False, True])
def test_every_captured_scenario_passes_the_launch_check(deferred: bool) -> None:
    sink, _ = _replay(ALL_FIXTURES, deferred, tracer=NamingReplayTracer)
    assert all(run.records for run in sink.runs)


@pytest.mark.parametrize("deferred", [False, True])
def test_launch_calls_without_kernel_records_are_an_error_not_an_empty_result(deferred: bool) -> None:
    with pytest.raises(MeasurementError, match=r"region 'matmul' .* made 2 kernel launch call\(s\).*torch\.profiler"):
        _replay(["splitk_512"], deferred, tracer=NamingReplayTracer, drop_kernels=True)


class FakeLibcuda:
    """The CUDA driver at the ctypes boundary: answers the calls the flush makes, and counts them."""

    def __init__(self, limits: list[int]) -> None:
        self.limits = limits
        self.calls: list[str] = []

    def __getattr__(self, name: str) -> Any:
        import ctypes

        def call(*args: Any) -> int:
            self.calls.append(name)
            out = {
                "cuCtxGetCurrent": (ctypes.c_void_p, 7),
                "cuDevicePrimaryCtxRetain": (ctypes.c_void_p, 7),
                "cuDeviceGetAttribute": (ctypes.c_int, 1 << 20),
                "cuMemAlloc_v2": (ctypes.c_uint64, 4096),
            }
            if name == "cuCtxGetLimit":
                out[name] = (ctypes.c_size_t, self.limits.pop(0) if len(self.limits) > 1 else self.limits[0])
            if name in out:
                kind, value = out[name]
                ctypes.cast(args[0], ctypes.POINTER(kind)).contents.value = value
            return 0

        return call


def test_the_persisting_limit_is_asked_until_a_set_aside_is_seen(monkeypatch: pytest.MonkeyPatch) -> None:
    from nsightx_cupti import _driver, _session

    lib = FakeLibcuda(limits=[0, 0, 1 << 20])  # the function raises the set-aside during the third run
    monkeypatch.setattr(_driver, "_lib", lambda: lib)
    monkeypatch.setattr(_session, "_buffers", {})
    monkeypatch.setattr(_session, "_facts", {})
    device = _session.CudaDevice(0, flush=True)
    lib.calls.clear()
    for _ in range(5):
        device.flush_l2()
    assert lib.calls.count("cuMemsetD32Async") == 5
    assert lib.calls.count("cuCtxGetLimit") == 3  # 0, 0, then seen: not asked again
    assert lib.calls.count("cuCtxResetPersistingL2Cache") == 3  # runs 3, 4 and 5
    assert "cuCtxPushCurrent_v2" not in lib.calls  # its context was current: nothing pushed
