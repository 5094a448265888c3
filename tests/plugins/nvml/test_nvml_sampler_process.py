"""The nvml sampler *process*: shared-file protocol, parking, lifetime, and what happens when NVML fails there.

NVML in the child is a tiny scripted module written for each test (the library boundary); the sampler, the
child's loop, the field reader and the shared file are the real code, in a real second process.

The process counts as in demand for :data:`IDLE_PERIODS_IN_TESTS` periods after a run starts (100 ms), not two
(4 ms): on a loaded 2-core machine it may not be scheduled within a few milliseconds of a demand.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from nsightx_nvml import _sampler
from nsightx_nvml._sampler import ChildSpec, ProcessSampler
from nsightx_nvml._shm import SharedSample

FAKE = """
import itertools
NVML_CLOCK_SM, NVML_CLOCK_MEM, NVML_TEMPERATURE_GPU = 1, 2, 0
NVML_ERROR_NOT_SUPPORTED, NVML_ERROR_NOT_FOUND = 3, 6
class NVMLError(Exception):
    def __init__(self, value): super().__init__("NVML error %d" % value); self.value = value
_sm = itertools.count(1)
def nvmlInit():
    if FAIL: raise NVMLError(9)
def nvmlDeviceGetHandleByUUID(uuid): return uuid
def nvmlDeviceGetClockInfo(h, kind): return next(_sm) if kind == NVML_CLOCK_SM else 2619
def nvmlDeviceGetCurrentClocksEventReasons(h): return 0x4
def nvmlDeviceGetTemperature(h, kind): return 41
def nvmlDeviceGetPowerUsage(h): raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
"""


IDLE_PERIODS_IN_TESTS = 50


def _fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fail: bool = False) -> ChildSpec:
    name = f"fake_pynvml_{'fail' if fail else 'ok'}"
    (tmp_path / f"{name}.py").write_text(f"FAIL = {fail!r}\n{FAKE}")
    monkeypatch.syspath_prepend(str(tmp_path))
    return ChildSpec("GPU-00000000-test", loader=name)


def _wait_for(predicate: Any, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.005)
    return predicate()


@pytest.fixture(autouse=True)
def _fast(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setattr(_sampler, "SAMPLE_PERIOD_S", 0.002)
    monkeypatch.setattr(_sampler, "IDLE_PERIODS", IDLE_PERIODS_IN_TESTS)
    yield
    for key in list(_sampler._leases):
        _sampler._leases.pop(key).sampler.stop()
    for key in list(_sampler._parked):
        _sampler._parked.pop(key).stop()


def test_shared_file_round_trip_keeps_types_and_empty_fields() -> None:
    shared = SharedSample.create()
    try:
        assert shared.snapshot() is None
        values = {"MeasuredSMClockMHz": 1980, "MeasuredMemClockMHz": 2619, "GPUTemperatureC": 35}
        shared.publish(123, {**values, "GPUPowerW": None, "ClockEventReasons": 0x4 | 0x40})
        seq, taken, got = shared.snapshot() or (0, 0, {})
        assert seq == 2 and taken == 123
        assert got == {**values, "GPUPowerW": None, "ClockEventReasons": "sw_power_cap|hw_thermal_slowdown"}
        assert all(type(got[k]) is int for k in values)
        shared.publish(456, {"MeasuredSMClockMHz": 1755, "ClockEventReasons": None})
        assert (shared.snapshot() or (0, 0, {}))[2]["ClockEventReasons"] is None
    finally:
        shared.unlink()
        shared.close()
    assert not Path(shared.path).exists()


def test_the_process_samples_while_runs_start_parks_without_them_and_stop_removes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    s = ProcessSampler(lambda: {"MeasuredSMClockMHz": -1}, _fake(tmp_path, monkeypatch), period_s=0.002)
    s.start()
    first = s.latest()
    assert first is not None and first.values == {"MeasuredSMClockMHz": -1}  # read inline before start() returns
    assert _wait_for(lambda: (s.demand(), s.samples >= 5)[1])
    latest = s.latest()
    assert latest is not None and latest.taken_ns > first.taken_ns
    assert latest.values["MeasuredSMClockMHz"] >= 5 and latest.values["ClockEventReasons"] == "sw_power_cap"
    assert latest.values["GPUPowerW"] is None and latest.values["GPUTemperatureC"] == 41
    parks, sampled = s.parks, s.samples  # (it may have parked already: while it started up, or just now)
    assert _wait_for(lambda: (s.demand(), s.samples > sampled)[1])  # a sample after the count: not parked then
    assert _wait_for(lambda: s.parks > parks)  # no run starts: it parks
    parked_at = s.samples
    time.sleep(0.05)
    assert s.samples == parked_at  # parked: no reads
    assert _wait_for(lambda: (s.demand(), s.samples > parked_at)[1])  # the next run wakes it
    path = s._shared.path if s._shared is not None else ""
    pid = s._proc.pid if s._proc is not None else 0
    s.stop()
    assert not s.running and not Path(path).exists()
    assert _wait_for(lambda: not _alive(pid))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie of ours counts as gone
        done, _ = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return True
    return done == 0


def test_a_lease_released_parks_the_process_and_the_next_call_gets_it_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = _fake(tmp_path, monkeypatch)
    a = _sampler.acquire("dev", lambda: {"x": 1}, child=spec)
    assert isinstance(a, ProcessSampler) and _sampler.running("dev") is a
    _sampler.release("dev")
    assert _sampler.running("dev") is None and a.running  # no sweep uses it: parked, not ended
    b = _sampler.acquire("dev", lambda: {"x": 2}, child=spec)
    assert b is a
    _sampler.release("dev")


def test_nvml_failing_in_the_process_ends_it_once_and_it_is_not_started_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    s = ProcessSampler(lambda: {"x": 1}, _fake(tmp_path, monkeypatch, fail=True), period_s=0.002)
    s.start()
    assert _wait_for(lambda: not s.running)
    assert s.failed is not None and "NVML error 9" in s.failed
    proc = s._proc
    s.start()
    assert not s.running and s._proc is proc  # not spawned again
    assert s._shared is None  # its shared file is gone
    latest = s.latest()
    assert latest is not None and latest.values == {"x": 1}  # the inline reads still work


def test_the_process_ends_when_its_parent_dies(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = _fake(tmp_path, monkeypatch)
    script = textwrap.dedent(
        f"""
        import os, sys, time
        sys.path[:0] = {[str(tmp_path), *sys.path]!r}
        from nsightx_nvml import _sampler
        from nsightx_nvml._sampler import ChildSpec, ProcessSampler
        _sampler.IDLE_PERIODS = {IDLE_PERIODS_IN_TESTS}
        s = ProcessSampler(lambda: {{}}, ChildSpec({spec.uuid!r}, loader={spec.loader!r}), period_s=0.002)
        s.start()
        while s.samples == 0:
            s.demand()
            time.sleep(0.005)
        print(s._proc.pid, flush=True)
        os._exit(0)  # no atexit: the child must notice by itself
        """
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True)
    pid = int(out.stdout.split()[0])
    assert _wait_for(lambda: not _alive(pid)), f"sampler process {pid} outlived its parent"


def test_runs_that_share_a_sample_get_it_back_after_one_read_of_the_shared_file(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The shared file is published here, as the sampler process would (no process: the protocol is the subject).
    reads = iter([{"MeasuredSMClockMHz": 1}, {"MeasuredSMClockMHz": 2}])
    s = ProcessSampler(lambda: next(reads), ChildSpec("GPU-00000000-test"))
    s._shared = shared = SharedSample.create()
    decoded: list[int] = []
    newest = s._newest
    monkeypatch.setattr(s, "_newest", lambda seq: decoded.append(seq) or newest(seq))
    try:
        shared.publish(100, {"MeasuredSMClockMHz": 1980})
        first = s.demand_latest(1_000)
        assert first is not None and first.taken_ns == 100 and first.values["MeasuredSMClockMHz"] == 1980
        assert all(s.demand_latest(1_000 + i) is first for i in range(50))
        assert decoded == [2]  # 51 runs, one look at the sample: the same answer for the same sequence number
        assert shared.demand_ns() == 1_000  # written once: the later runs start within half a period of it
        inline = s.sample()  # a run read for itself (a stale sample): newer than the shared one
        assert inline is not None and s.demand_latest(2_000) is inline
        shared.publish(time.perf_counter_ns(), {"MeasuredSMClockMHz": 1755})
        newer = s.demand_latest(3_000)
        assert newer is not None and newer.values["MeasuredSMClockMHz"] == 1755 and s.demand_latest(3_001) is newer
        assert decoded == [2, 2, 4]
    finally:
        s._close()
    s._shared = shared = SharedSample.create()  # a new file numbers its samples from 0 again
    try:
        shared.publish(time.perf_counter_ns(), {"MeasuredSMClockMHz": 1500})
        again = s.demand_latest(4_000)
        assert again is not None and again.values["MeasuredSMClockMHz"] == 1500
    finally:
        s._close()


def test_a_run_writes_its_demand_only_once_the_last_written_one_is_half_a_period_old() -> None:
    # Why: the process parks only after IDLE_PERIODS (2) periods without a run start, so a demand at most half a
    # period behind the latest run keeps it sampling; the 8-byte write before every run was part of issue 35's
    # per-run cost on the GPU backends' path. No process: the shared file's protocol is the subject.
    from nsightx_nvml._sampler import DEMAND_REFRESH_PERIODS, IDLE_PERIODS  # here: the test fails alone without

    s = ProcessSampler(lambda: {"MeasuredSMClockMHz": 1}, ChildSpec("GPU-00000000-test"), period_s=0.004)
    s._shared = shared = SharedSample.create()
    try:
        shared.publish(100, {"MeasuredSMClockMHz": 1980})
        half = int(0.004 * 1e9 * DEMAND_REFRESH_PERIODS)
        assert 0 < DEMAND_REFRESH_PERIODS < IDLE_PERIODS
        s.demand_latest(10_000)
        assert shared.demand_ns() == 10_000
        s.demand_latest(10_000 + half - 1)  # within half a period of the written one: not written
        assert shared.demand_ns() == 10_000
        s.demand_latest(10_000 + half)  # half a period old: written again
        assert shared.demand_ns() == 10_000 + half
        s.demand_latest(5_000)  # a time before the written one (another clock's caller): written
        assert shared.demand_ns() == 5_000
        sample = s.demand_latest(5_001)
        assert sample is not None and sample.values["MeasuredSMClockMHz"] == 1980  # the answer is unchanged
    finally:
        s._close()
    s._shared = shared = SharedSample.create()  # a new file holds no demand of ours: the first run writes one
    try:
        s.demand_latest(5_002)
        assert shared.demand_ns() == 5_002
    finally:
        s._close()
