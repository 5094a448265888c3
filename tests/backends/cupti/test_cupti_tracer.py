"""The CUPTI client against a stand-in for the ``cupti.cupti`` module (CPU only).

The stand-in implements only the few calls the tracer makes and delivers activity records the way cupti-python
does (a list of objects with ``kind`` and fields, through the registered buffer-completed callback). It lets CI
check decoding, the dropped-records error, the learned per-API filter and API tracing limited to regions, which
cannot be provoked on demand on a real GPU.
"""

from __future__ import annotations

import ctypes
import enum
import time
import warnings
from types import SimpleNamespace
from typing import Any

import pytest
from nsightx_cupti._attribution import ActivityBatch, ApiActivity
from nsightx_cupti._tracer import CANARY_ID, ActivityTracer, check_clock

from nsightx._errors import MeasurementError


class Kind(enum.IntEnum):
    CONCURRENT_KERNEL = 10
    RUNTIME = 5
    DRIVER = 6
    EXTERNAL_CORRELATION = 40


class ExtKind(enum.IntEnum):
    CUSTOM0 = 2
    CUSTOM1 = 3
    CUSTOM2 = 4


class Flag(enum.IntEnum):
    FLUSH_FORCED = 1


class RuntimeCbid(enum.IntEnum):
    INVALID = 0
    cudaLaunchKernel_v7000 = 211
    cudaGetDevice_v3020 = 17


class DriverCbid(enum.IntEnum):
    INVALID = 0
    cuLaunchKernel = 307
    cuCtxGetCurrent = 9


class FakeCupti:
    ActivityKind = Kind
    ExternalCorrelationKind = ExtKind
    ActivityFlag = Flag
    RuntimeApiTraceCbid = RuntimeCbid
    DriverApiTraceCbid = DriverCbid

    def __init__(self, per_api: bool = False) -> None:
        self.per_api = per_api
        self.enabled: set[int] = set()
        self.api_switches: dict[tuple[str, int], int] = {}
        self.to_deliver: list[Any] = []
        self.dropped = 0
        self.stack: list[int] = []
        self.requested: Any = None
        self.completed: Any = None
        self.calls: list[str] = []
        self.next_corr = 1000
        self.held = False
        """Whether CUPTI holds a buffer of the client's (asked for when a record is made and none is held)."""
        self.forced_flushes = 0
        self.default_flushes = 0
        self.incomplete: list[Any] = []
        """Records whose GPU side is not written yet: a default flush leaves them (and their buffer) in CUPTI."""
        self.timestamps: Any = None
        """What :meth:`get_timestamp` reads (a callable); None: a constant."""

    def activity_register_callbacks(self, requested: Any, completed: Any) -> None:
        self.requested, self.completed = requested, completed

    def activity_enable(self, kind: int) -> None:
        self.enabled.add(int(kind))
        self.calls.append(f"enable {Kind(kind).name}")
        domain = {int(Kind.RUNTIME): "runtime", int(Kind.DRIVER): "driver"}.get(int(kind))
        if domain:  # as libcupti does: enabling the kind overrides every per-API setting made before
            self.api_switches = {k: v for k, v in self.api_switches.items() if k[0] != domain}

    def activity_disable(self, kind: int) -> None:
        self.enabled.discard(int(kind))
        self.calls.append(f"disable {Kind(kind).name}")

    def activity_enable_runtime_api(self, cbid: int, on: int) -> None:
        if not self.per_api:
            raise RuntimeError("cuptiActivityEnableRuntimeApi not found in libcupti")
        self.api_switches[("runtime", cbid)] = on

    def activity_enable_driver_api(self, cbid: int, on: int) -> None:
        if not self.per_api:
            raise RuntimeError("cuptiActivityEnableDriverApi not found in libcupti")
        self.api_switches[("driver", cbid)] = on

    def activity_flush_all(self, flag: int) -> None:
        forced = flag == Flag.FLUSH_FORCED
        self.forced_flushes += forced
        self.default_flushes += not forced
        if self.incomplete and not forced:  # the buffer holds a record not complete: CUPTI keeps all of it
            return
        records, self.to_deliver = self.to_deliver, []
        if forced:  # a forced flush hands over incomplete records too; a default flush keeps their buffer
            records, self.incomplete = records + self.incomplete, []
        if records:
            if not self.held:  # records a test put in directly: the buffer they were written to
                size, _ = self.requested()
                assert size > 0
            self.completed(records)
        self.held = bool(self.incomplete)

    def produce(self, *records: Any) -> None:
        """CUPTI writes records: into the buffer it holds, or one it asks the client for first."""
        if not self.held:
            size, _ = self.requested()
            assert size > 0
            self.held = True
        self.to_deliver.extend(records)

    def activity_get_num_dropped_records(self, ctx: int, stream: int, address: int) -> None:
        ctypes.c_size_t.from_address(address).value = self.dropped
        self.dropped = 0

    def activity_push_external_correlation_id(self, kind: int, ext: int) -> None:
        assert kind == ExtKind.CUSTOM2
        self.stack.append(ext)

    def activity_pop_external_correlation_id(self, kind: int) -> int:
        return self.stack.pop()

    def get_timestamp(self) -> int:
        return 1000 if self.timestamps is None else int(self.timestamps())

    # --- what the process does besides calling cupti-python ---------------------------------------------------
    def driver_call(self, cbid: int = DriverCbid.cuCtxGetCurrent) -> None:
        """A CUDA driver call of the process: recorded (with the pushed external id) while DRIVER is enabled."""
        if Kind.DRIVER not in self.enabled:
            return
        self.next_corr += 1
        self.produce(api(self.next_corr, 10 * self.next_corr, cbid=cbid, kind=Kind.DRIVER))
        if self.stack:
            self.produce(ext(self.next_corr, self.stack[-1]))

    def launch(self, name: str = "k") -> None:
        """A ``cudaLaunchKernel`` of the process: its launch record (with the pushed external id) while the RUNTIME
        kind and that API are on, and its kernel record in any case."""
        self.next_corr += 1
        corr, key = self.next_corr, ("runtime", int(RuntimeCbid.cudaLaunchKernel_v7000))
        if Kind.RUNTIME in self.enabled and self.api_switches.get(key, 1):
            self.produce(api(corr, 10 * corr))
            if self.stack:
                self.produce(ext(corr, self.stack[-1]))
        self.produce(kernel(name, corr, 10 * corr + 100, 10 * corr + 150))

    def other_client(self) -> list[Any]:
        """Another CUPTI client (torch.profiler's Kineto) registers its callbacks; returns what it receives."""
        received: list[Any] = []
        self.activity_register_callbacks(lambda: (1 << 20, 0), received.extend)
        return received


def kernel(name: str, corr: int, start: int, end: int) -> Any:
    return SimpleNamespace(
        kind=Kind.CONCURRENT_KERNEL,
        name=name,
        start=start,
        end=end,
        correlation_id=corr,
        stream_id=7,
        device_id=0,
        context_id=1,
        graph_id=0,
        graph_node_id=0,
    )


def api(corr: int, start: int, cbid: int = RuntimeCbid.cudaLaunchKernel_v7000, kind: int = Kind.RUNTIME) -> Any:
    return SimpleNamespace(kind=kind, correlation_id=corr, start=start, end=start + 5, thread_id=11, cbid=int(cbid))


def ext(corr: int, external_id: int, kind: int = ExtKind.CUSTOM2) -> Any:
    return SimpleNamespace(
        kind=Kind.EXTERNAL_CORRELATION, correlation_id=corr, external_id=external_id, external_kind=kind
    )


def test_decodes_kernels_apis_and_only_its_own_external_kind() -> None:
    fake = FakeCupti()
    tracer = ActivityTracer(fake, canary=None)
    tracer.start(api_tracing="always")
    fake.to_deliver = [kernel("k", 3, 100, 150), api(3, 50), ext(3, 9), ext(3, 77, kind=ExtKind.CUSTOM0)]
    batch = tracer.collect()
    assert [(k.name, k.duration) for k in batch.kernels] == [("k", 50)]
    assert batch.apis[3].start == 50 and batch.externals == {3: 9}
    tracer.stop()
    assert fake.enabled == set()


def test_stop_flushes_only_when_cupti_holds_a_buffer_of_ours() -> None:
    """After the final collection's forced flush nothing was traced: stop makes no second flush (~170 us on the
    H200). A record made since means CUPTI holds a buffer of ours: stop flushes it, so it is not handed to the
    next client that registers callbacks."""
    fake = FakeCupti()
    tracer = ActivityTracer(fake, canary=None)
    tracer.start()
    fake.produce(kernel("k", 3, 100, 150), api(3, 50))
    tracer.collect()
    flushes = fake.forced_flushes
    tracer.stop()
    assert fake.forced_flushes == flushes and fake.enabled == set()

    tracer.start()
    tracer.collect()
    fake.driver_call()  # a driver call traced after the last collection, before stop switched DRIVER off
    flushes = fake.forced_flushes
    tracer.stop()
    assert fake.forced_flushes == flushes + 1 and tracer.stats["forced_at_stop"] == 1
    kineto = fake.other_client()
    fake.activity_flush_all(Flag.FLUSH_FORCED)
    assert kineto == []  # nothing of ours was left in CUPTI for the other client


def test_collect_makes_no_forced_flush_when_the_default_flush_delivered_every_buffer() -> None:
    """After the wait every record is complete: CUPTI's default flush hands back every buffer, and no forced flush
    follows (on the H100 a forced flush made the next call's first kernel launch ~0.15-0.35 ms slower)."""
    fake = FakeCupti()
    tracer = ActivityTracer(fake, canary=None)
    tracer.start()
    fake.produce(kernel("k", 3, 100, 150), api(3, 50))
    batch = tracer.collect()
    assert [k.name for k in batch.kernels] == ["k"] and list(batch.apis) == [3]
    assert (fake.default_flushes, fake.forced_flushes) == (1, 0)
    tracer.stop()
    assert fake.forced_flushes == 0  # nothing held: stop does not force either


def test_collect_forces_the_flush_while_cupti_still_holds_a_buffer_so_no_record_is_lost() -> None:
    fake = FakeCupti()
    tracer = ActivityTracer(fake, canary=None)
    tracer.start()
    fake.produce(kernel("done", 3, 100, 150), api(3, 50))
    fake.incomplete.append(kernel("late", 4, 160, 170))  # in the same buffer, its GPU side not written yet
    batch = tracer.collect()
    assert sorted(k.name for k in batch.kernels) == ["done", "late"]
    assert (fake.default_flushes, fake.forced_flushes) == (1, 1)
    assert tracer.stats["forced_after_default"] == 1


@pytest.mark.parametrize(("flag", "defaults", "forced"), [("forced", 0, 1), ("plain", 1, 0)])
def test_the_forced_and_plain_flush_flags_flush_as_named(flag: str, defaults: int, forced: int) -> None:
    fake = FakeCupti()
    tracer = ActivityTracer(fake, canary=None)
    tracer.start(flush_flag=flag)
    fake.produce(kernel("k", 3, 100, 150))
    fake.incomplete.append(kernel("late", 4, 160, 170))
    names = sorted(k.name for k in tracer.collect().kernels)
    assert (fake.default_flushes, fake.forced_flushes) == (defaults, forced)
    assert names == (["k", "late"] if flag == "forced" else [])  # plain leaves the incomplete buffer behind


def test_dropped_records_are_a_measurement_error() -> None:
    fake = FakeCupti()
    tracer = ActivityTracer(fake, canary=None)
    tracer.start()
    fake.to_deliver = [kernel("k", 3, 100, 150)]
    fake.dropped = 12
    with pytest.raises(MeasurementError, match="dropped 12 activity records"):
        tracer.collect()
    assert tracer.collect().kernels == []  # the count was consumed; later runs are judged on their own
    tracer.stop()


def test_a_bad_record_is_reported_at_collect_not_raised_into_cupti() -> None:
    fake = FakeCupti()
    tracer = ActivityTracer(fake, canary=None)
    tracer.start()
    fake.to_deliver = [SimpleNamespace(kind=Kind.CONCURRENT_KERNEL, name="broken")]
    with pytest.raises(MeasurementError, match="could not be decoded"):
        tracer.collect()
    tracer.stop()


def test_apis_that_launched_nothing_are_switched_off_and_left_to_the_kinds_at_stop() -> None:
    """Stop switches the RUNTIME and DRIVER kinds off and leaves the per-API settings: libcupti lets the next
    enabling of a kind (another client's, or our next start) override them, so nothing is switched back on."""
    fake = FakeCupti(per_api=True)
    tracer = ActivityTracer(fake, canary=None)
    tracer.start()
    assert fake.api_switches == {}  # nothing learned yet: every API is traced
    fake.to_deliver = [
        api(1, 10, cbid=RuntimeCbid.cudaGetDevice_v3020),
        api(2, 20, cbid=DriverCbid.cuCtxGetCurrent, kind=Kind.DRIVER),
        api(3, 30),
        kernel("k", 3, 100, 150),
    ]
    tracer.collect()
    assert fake.api_switches == {("runtime", 17): 0, ("driver", 9): 0}
    tracer.stop()
    assert fake.api_switches == {("runtime", 17): 0, ("driver", 9): 0}  # no call per API at stop
    assert int(Kind.RUNTIME) not in fake.enabled and int(Kind.DRIVER) not in fake.enabled
    fake.activity_enable(Kind.RUNTIME)  # another client (torch.profiler) traces every runtime API again
    assert fake.api_switches == {("driver", 9): 0}
    tracer.start()  # the next session of the process starts quiet
    assert fake.api_switches == {("runtime", 17): 0, ("driver", 9): 0}
    tracer.stop()


def test_an_api_that_launched_a_kernel_or_is_unknown_stays_on() -> None:
    fake = FakeCupti(per_api=True)
    tracer = ActivityTracer(fake, canary=None)
    tracer.start()
    # cudaGetDevice "launching" a kernel stands for any API not named Launch that does; 999 is an unknown id
    fake.to_deliver = [api(1, 10, cbid=RuntimeCbid.cudaGetDevice_v3020), kernel("k", 1, 100, 150), api(2, 20, cbid=999)]
    tracer.collect()
    fake.to_deliver = [api(4, 40, cbid=RuntimeCbid.cudaGetDevice_v3020)]  # later without a kernel: still on
    tracer.collect()
    assert fake.api_switches == {}
    tracer.stop()


def test_per_api_switches_refused_by_libcupti_are_not_asked_again() -> None:
    fake = FakeCupti(per_api=False)
    tracer = ActivityTracer(fake, canary=None)
    tracer.start()
    fake.to_deliver = [api(1, 10, cbid=RuntimeCbid.cudaGetDevice_v3020)]
    tracer.collect()
    assert tracer.quiet.off == set() and tracer.quiet.refused == {("runtime", 17)}
    fake.to_deliver = [api(2, 10, cbid=RuntimeCbid.cudaGetDevice_v3020)]
    fake.per_api = True
    tracer.collect()
    assert fake.api_switches == {}
    tracer.stop()


def test_region_mode_traces_apis_only_inside_regions() -> None:
    fake = FakeCupti()
    tracer = ActivityTracer(fake, canary=None)
    tracer.start(api_tracing="region")
    assert Kind.RUNTIME not in fake.enabled and Kind.CONCURRENT_KERNEL in fake.enabled
    tracer.region_open()
    assert {Kind.RUNTIME, Kind.DRIVER} <= fake.enabled
    tracer.region_close()
    assert Kind.RUNTIME not in fake.enabled and Kind.DRIVER not in fake.enabled
    tracer.stop()
    assert fake.enabled == set()


def test_sessions_cannot_nest() -> None:
    tracer = ActivityTracer(FakeCupti(), canary=None)
    tracer.start()
    with pytest.raises(MeasurementError, match="cannot nest"):
        tracer.start()
    tracer.stop()
    tracer.start()  # and a later one works
    tracer.stop()


def test_api_filter_off_never_switches_apis() -> None:
    fake = FakeCupti(per_api=True)
    tracer = ActivityTracer(fake, canary=None)
    tracer.start(api_filter="off")
    fake.to_deliver = [api(1, 10, cbid=RuntimeCbid.cudaGetDevice_v3020)]
    tracer.collect()
    assert fake.api_switches == {} and tracer.quiet.off == set()
    tracer.stop()


class _Device:
    def flush_l2(self) -> None:
        pass

    def synchronize(self) -> None:
        pass

    def environment(self) -> dict[str, Any]:
        return {}


def test_an_untraced_kernel_switches_the_learned_apis_back_on_and_warns() -> None:
    from nsightx_cupti._session import CuptiSession

    from nsightx._results.records import RegionId

    fake = FakeCupti(per_api=True)
    tracer = ActivityTracer(fake, canary=None)
    tracer.start()
    fake.to_deliver = [api(1, 10, cbid=RuntimeCbid.cudaGetDevice_v3020)]
    tracer.collect()
    assert fake.api_switches == {("runtime", 17): 0}
    session = CuptiSession(tracer, _Device())
    region = RegionId("a", 0, 0)
    session.region_enter(region)
    session.region_exit(region, False)
    fake.to_deliver = [kernel("k", 99, 100, 150)]  # neither a launch record nor an external id
    with pytest.warns(RuntimeWarning, match="switched back on.*api_filter"):
        session.finish_run(0, 0)
    assert fake.api_switches == {("runtime", 17): 1} and tracer.quiet.off == set()
    tracer.stop()


def test_a_region_stamps_then_pushes_its_id_and_pops_it_then_stamps_through_the_tracers_region_calls() -> None:
    """The session's per-region calls (the tracer's ``region_calls``: cupti-python's own push and pop) keep the order:
    the enter time is read before the id is pushed, the exit time after it is popped; a launch inside has the id."""
    from nsightx_cupti._session import CuptiSession

    from nsightx._results.records import RegionId

    fake = FakeCupti()
    tracer = ActivityTracer(fake, canary=None)
    tracer.start()
    stamps: list[tuple[int, ...]] = []
    fake.timestamps = lambda: stamps.append(tuple(fake.stack)) or 1000 * len(stamps)
    session = CuptiSession(tracer, _Device(), deferred=True)
    region = RegionId("a", 0, 0)
    session.region_enter(region)
    fake.launch()
    session.region_exit(region, False)
    (window,) = session._windows
    assert stamps == [(), ()] and fake.stack == []
    assert (window.enter_ns, window.exit_ns, window.annotation, window.config, window.run) == (1000, 2000, "a", 0, 0)
    batch = tracer.collect()
    assert batch.externals == {fake.next_corr: window.external_id}
    tracer.stop()


# --- other CUPTI clients ---------------------------------------------------------------------------------------


def test_callbacks_taken_by_another_client_are_taken_back_at_the_next_start() -> None:
    fake = FakeCupti()
    tracer = ActivityTracer(fake, canary=fake.driver_call)
    tracer.start()
    tracer.stop()
    kineto = fake.other_client()  # e.g. a torch.profiler session between two profiled calls
    tracer.start()
    fake.to_deliver.append(kernel("k", 3, 100, 150))
    batch = tracer.collect()
    assert [k.name for k in batch.kernels] == ["k"] and kineto == []
    assert CANARY_ID not in batch.externals.values()  # the canary's own records are not handed on
    tracer.stop()


def test_activity_that_never_arrives_is_a_clear_error_not_an_empty_result() -> None:
    fake = FakeCupti()
    tracer = ActivityTracer(fake, canary=fake.driver_call)
    tracer.start()
    kineto = fake.other_client()  # takes the callbacks while our session runs
    fake.to_deliver.append(kernel("k", 3, 100, 150))
    with pytest.raises(MeasurementError, match=r"no activity records.*torch\.profiler.*backend='events'"):
        tracer.collect()
    assert len(kineto) == 3  # the canary's API and external records, and the kernel, went to the other client
    tracer.stop()


def test_a_canary_that_is_not_traced_is_no_error_when_other_records_arrive() -> None:
    fake = FakeCupti()
    tracer = ActivityTracer(fake, canary=lambda: None)  # a call CUPTI does not record
    tracer.start()
    fake.to_deliver = [kernel("k", 3, 100, 150), api(3, 50)]
    assert len(tracer.collect().kernels) == 1
    tracer.stop()


def test_the_injected_tool_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_INJECTION64_PATH", "/opt/nsys/libToolsInjection64.so")
    fake = FakeCupti()
    tracer = ActivityTracer(fake, canary=fake.driver_call)
    tracer.start()
    fake.other_client()
    with pytest.raises(MeasurementError, match="libToolsInjection64"):
        tracer.collect()
    tracer.stop()


def test_start_refuses_while_torch_profiler_records(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    flag = SimpleNamespace(_is_profiler_enabled=True)
    monkeypatch.setitem(sys.modules, "torch", SimpleNamespace(autograd=SimpleNamespace(profiler=flag)))
    tracer = ActivityTracer(FakeCupti(), canary=None)
    with pytest.raises(MeasurementError, match=r"torch\.profiler is recording"):
        tracer.start()
    assert not tracer.active
    flag._is_profiler_enabled = False
    tracer.start()
    tracer.stop()


def test_kernel_launch_calls_are_named_by_cbid() -> None:
    tracer = ActivityTracer(FakeCupti(), canary=None)
    launch = ApiActivity(1, 0, 1, cbid=int(RuntimeCbid.cudaLaunchKernel_v7000), domain="runtime")
    other = ApiActivity(2, 0, 1, cbid=int(RuntimeCbid.cudaGetDevice_v3020), domain="runtime")
    unknown = ApiActivity(3, 0, 1, cbid=999, domain="runtime")
    assert [tracer.launches_kernels(a) for a in (launch, other, unknown)] == [True, False, False]


def test_records_in_cpu_cycles_are_mapped_back_to_nanoseconds() -> None:
    """torch.profiler's Kineto leaves CUPTI stamping records with rdtsc cycles: the session notices at its start,
    measures the ticks per ns, and every timestamp it reads (records and its own windows) comes back in ns."""
    fake = FakeCupti()
    rate = 2.1047  # the H100 machine's cycle counter, ticks per ns
    fake.timestamps = lambda: time.perf_counter_ns() * rate
    tracer = ActivityTracer(fake, canary=None, clock_check=True)
    tracer.start()
    assert tracer.clock is not None and tracer.clock.rate == pytest.approx(rate, rel=1e-3)
    t = fake.get_timestamp()
    fake.to_deliver = [kernel("k", 3, t, t + round(rate * 1_000_000)), api(3, t - 100)]
    (k,) = tracer.collect().kernels
    assert k.duration == pytest.approx(1_000_000, rel=1e-3)  # 1 ms, not 2.1 ms
    assert abs(k.start - time.time_ns()) < 10**9  # on the wall clock, as CUPTI's own timestamps are
    assert abs(tracer.timestamp() - time.time_ns()) < 10**9
    tracer.stop()
    fake.timestamps = time.time_ns  # CUPTI's own clock again: no map, nothing to pay
    tracer.start()
    assert tracer.clock is None
    tracer.stop()


def test_a_region_reads_cuptis_own_timestamp_only_when_it_is_int_nanoseconds() -> None:
    """``region_calls``' timestamp is cupti-python's ``get_timestamp`` itself only where the clock check saw it answer
    an ``int`` and mapped no other clock; else the tracer's :meth:`timestamp` (which maps and makes an ``int``)."""

    class RawStamps(FakeCupti):
        def get_timestamp(self) -> Any:  # what the clock reads, of its own type
            return self.timestamps()

    fake = RawStamps()
    for clock_check, ticks, own in (
        (True, time.time_ns, True),
        (False, time.time_ns, False),  # never checked: the method
        (True, lambda: float(time.time_ns()), False),  # not an int
        (True, lambda: time.perf_counter_ns() * 2.1047, False),  # another client's cycles: mapped
    ):
        fake.timestamps = ticks
        tracer = ActivityTracer(fake, canary=None, clock_check=clock_check)
        tracer.start()
        stamp = tracer.region_calls()[2]
        assert (stamp == fake.get_timestamp) is own
        assert type(stamp()) is int and abs(stamp() - time.time_ns()) < 10**9
        tracer.stop()


def test_a_clock_that_changes_during_the_session_is_refused_with_the_cause() -> None:
    """A client that registers its clock while the call runs (torch.profiler started inside it) is not mapped."""
    fake = FakeCupti()
    fake.timestamps = time.time_ns
    tracer = ActivityTracer(fake, canary=None, clock_check=True)
    tracer.start()
    now = time.time_ns()
    fake.to_deliver = [kernel("k", 3, now - 50_000, now - 40_000), api(3, now - 60_000)]
    assert [k.duration for k in tracer.collect().kernels] == [10_000]  # wall-clock ns: measured
    cycles = 180_000_000_000_000  # two days of uptime at 1 GHz
    fake.to_deliver = [kernel("k", 4, cycles, cycles + 21_000), api(4, cycles - 100)]
    with pytest.raises(MeasurementError, match=r"changed unit.*torch\.profiler.*backend='events'"):
        tracer.collect()
    tracer.stop()


def test_a_foreign_clock_that_stands_still_is_a_clear_error() -> None:
    fake = FakeCupti()  # reads 1000 for ever
    tracer = ActivityTracer(fake, canary=None, clock_check=True)
    with pytest.raises(MeasurementError, match=r"did not advance.*backend='events'"):
        tracer.start()


def test_the_clock_check_looks_at_apis_when_no_kernel_arrived() -> None:
    now = time.time_ns()
    check_clock(ActivityBatch(), now)  # nothing to judge
    batch = ActivityBatch(apis={1: ApiActivity(1, 10**14, 10**14 + 5, 11, 0, "runtime")})
    with pytest.raises(MeasurementError, match="changed unit"):
        check_clock(batch, now)
    check_clock(ActivityBatch(apis={1: ApiActivity(1, now - 10**9, now, 11, 0, "runtime")}), now)


def test_quiet_candidates_skip_the_kernels_once_every_api_is_known() -> None:
    """The fast path gives the same answer as the full rule: nothing new once every API was classified; a new
    API that launched a kernel joins ``launching`` and is never a candidate; a new one that launched none is."""
    from nsightx_cupti._attribution import KernelActivity
    from nsightx_cupti._quiet import QuietApis

    quiet = QuietApis(lambda domain, cbid: f"{domain}{cbid}")
    launch = ApiActivity(1, 10, 20, 7, 211, "runtime")
    other = ApiActivity(2, 30, 40, 7, 17, "runtime")
    k = KernelActivity("k", 100, 200, 1)
    assert quiet.candidates(ActivityBatch([k], {1: launch, 2: other}, {})) == [("runtime", 17)]
    assert quiet.launching == {("runtime", 211)}
    quiet.off.add(("runtime", 17))

    class NoKernels(list[KernelActivity]):
        def __iter__(self) -> Any:
            raise AssertionError("the kernels were looked at")

    assert quiet.candidates(ActivityBatch(NoKernels([k]), {1: launch, 2: other}, {})) == []
    fresh = ApiActivity(3, 50, 60, 7, 300, "driver")
    new_launch = ApiActivity(4, 70, 80, 7, 301, "driver")
    k2 = KernelActivity("k2", 300, 400, 4)
    assert quiet.candidates(ActivityBatch([k2], {3: fresh, 4: new_launch}, {})) == [("driver", 300)]
    assert ("driver", 301) in quiet.launching


# --- api_tracing="learn": launch APIs recorded only inside regions once they launch outside them -------------


def _learn_session(tracer: ActivityTracer, outside: int, inside: int = 1) -> list[Any]:
    """One session of one run: ``outside`` launches before the region, ``inside`` in it; the run's records."""
    from nsightx_cupti._session import CuptiSession

    from nsightx._results.records import RegionId

    tracer.start(api_tracing="learn")
    fake: FakeCupti = tracer._cupti
    session = CuptiSession(tracer, _Device())
    for _ in range(outside):
        fake.launch("outside")
    region = RegionId("a", 0, 0)
    session.region_enter(region)
    for _ in range(inside):
        fake.launch("inside")
    session.region_exit(region, False)
    records = session.finish_run(0, 0).records
    tracer.stop()
    return records


LAUNCH = ("runtime", int(RuntimeCbid.cudaLaunchKernel_v7000))


def test_learn_mode_records_a_launch_api_that_launches_outside_regions_only_inside_them() -> None:
    fake = FakeCupti(per_api=True)
    tracer = ActivityTracer(fake, canary=None)
    records = _learn_session(tracer, outside=2)  # first session: nothing learned, every launch recorded
    assert [r.kernel for r in records] == ["inside"] and tracer.gate.keys == {LAUNCH}

    tracer.start(api_tracing="learn")
    assert tracer.gated == (LAUNCH,) and fake.api_switches[LAUNCH] == 0  # off outside regions
    tracer.region_open()
    assert fake.api_switches[LAUNCH] == 1
    tracer.region_close()
    assert fake.api_switches[LAUNCH] == 0
    tracer.stop()

    fake.calls.clear()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the outside kernels, left without a launch record, are no warning
        records = _learn_session(tracer, outside=2)
    assert [(r.kernel, r.value) for r in records] == [("inside", 50.0)]
    assert tracer.gate.keys == {LAUNCH}  # still two kernels per region without a record: stays gated

    _learn_session(tracer, outside=0)  # the function stopped launching outside its region
    assert tracer.gate.keys == set()
    tracer.start(api_tracing="learn")
    assert tracer.gated == () and LAUNCH not in fake.api_switches
    tracer.stop()


def test_learn_mode_without_outside_launches_keeps_the_untraced_kernel_warning() -> None:
    from nsightx_cupti._session import CuptiSession

    from nsightx._results.records import RegionId

    fake = FakeCupti(per_api=True)
    tracer = ActivityTracer(fake, canary=None)
    _learn_session(tracer, outside=0)
    tracer.start(api_tracing="learn")
    session = CuptiSession(tracer, _Device())
    assert tracer.gated == () and not session._region_apis  # no per-region switching at all
    region = RegionId("a", 0, 0)
    session.region_enter(region)
    session.region_exit(region, False)
    fake.produce(kernel("k", 99, 100, 150))  # neither a launch record nor an external id
    with pytest.warns(RuntimeWarning, match="no traced launch API record"):
        session.finish_run(0, 0)
    tracer.stop()


def test_a_gated_api_that_cannot_be_switched_on_ends_the_gating_and_records_every_api() -> None:
    fake = FakeCupti(per_api=True)
    tracer = ActivityTracer(fake, canary=None)
    _learn_session(tracer, outside=1)
    switch = fake.activity_enable_runtime_api

    def refuse_on(cbid: int, on: int) -> None:  # switches off, then refuses to switch on again
        if on:
            raise RuntimeError("CUPTI_ERROR_UNKNOWN")
        switch(cbid, on)

    fake.activity_enable_runtime_api = refuse_on  # type: ignore[method-assign]
    tracer.start(api_tracing="learn")
    assert tracer.gated == (LAUNCH,)
    fake.calls.clear()
    tracer.region_open()
    assert fake.calls == ["enable RUNTIME", "enable DRIVER"] and tracer.gated == ()
    fake.stack.append(5)
    fake.launch("inside")  # recorded: enabling the kinds again switched every API back on
    fake.stack.pop()
    batch = tracer.collect()
    assert batch.externals == {fake.next_corr: 5}
    tracer.region_close()
    tracer.stop()


def test_the_gate_learns_from_launches_per_region_and_keeps_what_still_leaves_unplaced_kernels() -> None:
    from nsightx_cupti._quiet import LaunchGate

    gate = LaunchGate()
    other = ("driver", 307)
    gate.learn({LAUNCH: 20, other: 9}, unplaced=0, regions=10, gated=())
    assert gate.keys == {LAUNCH}  # one launch per region or more; the other launched less
    gate.learn({other: 10}, unplaced=20, regions=10, gated=(LAUNCH,))
    assert gate.keys == {LAUNCH, other}
    gate.learn({}, unplaced=5, regions=10, gated=(LAUNCH, other))
    assert gate.keys == set()
    gate.learn({LAUNCH: 3}, unplaced=0, regions=0, gated=())  # a collection without regions teaches nothing
    assert gate.keys == set()


def test_a_window_closed_while_a_collection_takes_the_windows_stays_for_the_next_one() -> None:
    """``region_exit`` appends without a lock: a window appended right after the collection copied the list is
    neither taken nor lost (the list is cut from the front, never replaced)."""
    from nsightx_cupti._attribution import RegionWindow
    from nsightx_cupti._session import CuptiSession

    early, late = RegionWindow(1, "a", 0, 0, 10, 20), RegionWindow(2, "a", 0, 1, 30, 40)

    class ClosingMeanwhile(list[RegionWindow]):
        def __getitem__(self, i: Any) -> Any:
            got = super().__getitem__(i)
            if isinstance(i, slice) and late not in self:
                self.append(late)  # another thread's region_exit, between the copy and the cut
            return got

    session = CuptiSession(ActivityTracer(FakeCupti(), canary=None), _Device(), deferred=True)
    session._windows = ClosingMeanwhile([early])
    assert session._take_windows() == [early]
    assert session._windows == [late]
