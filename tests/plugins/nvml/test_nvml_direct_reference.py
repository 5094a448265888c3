"""The nvml RUN collector's direct reads against a naive reference from docs/plugins.md ("When").

Without a started sampler (``SAMPLE_PERIOD_S = 0`` or a caller asking one value at a time) the collector reads
NVML itself: a run that starts less than 10 ms (``RUN_READ_MAX_AGE_S``) after the previous direct read gets that
read again, with ``NvmlSampleAgeMs`` the time since; the SM clock and the clock-event reasons are read in every
read, the memory clock, temperature and power at most every 100 ms (``SLOW_FIELDS_MAX_AGE_S``). Random run
starts and random scripted NVML values (the double of ``nvml_double``, one value per query) drive the real
collector on a scripted nanosecond clock; the reference says which values each run must get. The reasons text
is compared as a set of names: docs/plugins.md does not say in which order they are joined. The reason bits are
NVML's own (``nvmlClocksEventReason*``).
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from nsightx_nvml import _collectors, _fields
from nsightx_nvml._collectors import RunConditions
from nvml_double import GPU_A, FakeCuda, FakeGpu, install

import nsightx
from nsightx._run.collectors import CollectContext

EXAMPLES = int(os.environ.get("NSIGHTX_REFERENCE_EXAMPLES", "150"))
"""Examples per run (150 by default; 1000 while hunting, none differed)."""

NVML_REASONS = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}
GAPS_NS = (0, 1, 499, 500, 1_500, 9_999_999, 10_000_000, 10_000_001, 60_000_000, 99_999_999, 100_000_000, 250_000_000)


class NsClock:
    """``time.perf_counter_ns`` for the field reader: the run's start the test hands the collector."""

    def __init__(self) -> None:
        self.now = 10**12

    def perf_counter_ns(self) -> int:
        return self.now


def reasons_text(mask: int) -> set[str]:
    return {"none"} if mask == 0 else {name for bit, name in NVML_REASONS.items() if mask & bit}


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    gaps=st.lists(st.sampled_from(GAPS_NS), min_size=1, max_size=30),
    values=st.lists(
        st.tuples(st.integers(300, 2000), st.sampled_from([0, 1, 4, 5, 0x20, 0x41, 0x1FF])), min_size=30, max_size=30
    ),
    slow=st.lists(
        st.tuples(st.integers(800, 3200), st.integers(30, 90), st.integers(50_000, 700_000)), min_size=30, max_size=30
    ),
)
def test_direct_reads_match_the_reference(
    gaps: list[int], values: list[tuple[int, int]], slow: list[tuple[int, int, int]]
) -> None:
    clock = NsClock()
    gpu = FakeGpu(
        GPU_A,
        sm_mhz=[v[0] for v in values],
        reasons=[v[1] for v in values],
        mem_mhz=[s[0] for s in slow],
        temp_c=[s[1] for s in slow],
        power_mw=[s[2] for s in slow],
    )
    with pytest.MonkeyPatch.context() as mp:
        install(mp, [gpu], cuda=FakeCuda({0: GPU_A[4:]}))
        mp.setattr(_collectors, "RUN_READ_MAX_AGE_S", 0.010)
        mp.setattr(_fields, "SLOW_FIELDS_MAX_AGE_S", 0.1)
        mp.setattr(_fields, "time", clock)
        run = RunConditions()
        fast_i = slow_i = 0
        last_read = slow_read = None
        want: dict[str, object] = {}
        for gap in gaps:
            clock.now += gap
            t = clock.now
            if last_read is None or t - last_read >= 10_000_000:
                last_read = t
                sm, mask = values[min(fast_i, 29)]
                fast_i += 1
                if slow_read is None or t - slow_read >= 100_000_000:
                    slow_read = t
                    mem, temp, power = slow[min(slow_i, 29)]
                    slow_i += 1
                    want.update(MeasuredMemClockMHz=mem, GPUTemperatureC=temp, GPUPowerW=power / 1000.0)
                want.update(MeasuredSMClockMHz=sm, ClockEventReasons=mask)
            ctx = CollectContext(scope=nsightx.CollectionScope.RUN, function="f", device=0)
            ctx.__dict__["run_start_ns"] = t
            got = dict(run.collect(ctx))
            expected = {**want, "NvmlSampleAgeMs": round((t - last_read) / 1e6, 3)}
            expected["ClockEventReasons"] = reasons_text(int(want["ClockEventReasons"]))  # type: ignore[call-overload]
            got["ClockEventReasons"] = set(str(got["ClockEventReasons"]).split("|"))
            assert got == expected
