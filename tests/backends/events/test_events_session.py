"""The events session's work per run, without a GPU: torch and the CUDA driver are doubles (library boundaries).

What is checked: every event is recorded on the stream that is current when it is recorded (also after the user
switches streams between runs or inside a region), while a run on a stream seen before builds no new stream object
through ``torch.cuda.current_stream``; and the persisting-L2 question is settled once a session where it can be.
"""

from __future__ import annotations

import ctypes
from types import SimpleNamespace
from typing import Any

import pytest
from nsightx_events import _backend
from nsightx_events._backend import EventsSession

from nsightx._run.backend import RegionId


class FakeStream:
    """What ``torch.cuda.current_stream`` returns: a new object each time, for the stream ``sid``."""

    def __init__(self, sid: int, device: int) -> None:
        self.sid = sid
        self.device = device


class FakeEvent:
    """A CUDA event: remembers the stream it was last recorded on and when (a counter as the clock)."""

    clock = 0

    def __init__(self, enable_timing: bool = False) -> None:
        self.stream: int | None = None
        self.at = 0

    def record(self, stream: FakeStream) -> None:
        FakeEvent.clock += 1
        self.stream, self.at = stream.sid, FakeEvent.clock

    def synchronize(self) -> None:
        pass

    def elapsed_time(self, end: FakeEvent) -> float:
        return (end.at - self.at) / 1000.0  # ms


class FakeBuffer:
    def __init__(self, n: int) -> None:
        self.n = n
        self.fills: list[int] = []

    def fill_(self, value: int) -> None:
        self.fills.append(value)

    def numel(self) -> int:
        return self.n


class FakeTorch:
    """The part of torch the events session uses; ``current`` is this thread's current stream id per device."""

    int32 = "int32"

    def __init__(self) -> None:
        self.current = {0: 7, 1: 70}
        self.made_streams = 0
        self.cuda = SimpleNamespace(
            current_device=lambda: 0,
            get_device_properties=lambda device: SimpleNamespace(name="Fake GPU", L2_cache_size=1 << 20),
            Event=FakeEvent,
            current_stream=self._current_stream,
        )
        self._C = SimpleNamespace(_cuda_getCurrentStream=lambda index: (self.current[index], index, 1))

    def _current_stream(self, index: int) -> FakeStream:
        self.made_streams += 1
        return FakeStream(self.current[index], index)

    def device(self, kind: str, index: int) -> Any:
        return SimpleNamespace(type=kind, index=index)

    def empty(self, n: int, dtype: Any, device: Any) -> FakeBuffer:
        return FakeBuffer(n)


class FakeLibcuda:
    """The two driver entry points of the persisting-L2 reset; ``set_aside`` is the context's limit in bytes."""

    def __init__(self, set_aside: int = 0) -> None:
        self.set_aside = set_aside
        self.queries = 0
        self.resets = 0

    def cuCtxGetLimit(self, out: Any, limit: ctypes.c_int) -> int:  # the driver's name
        self.queries += 1
        out._obj.value = self.set_aside
        return 0

    def cuCtxResetPersistingL2Cache(self) -> int:  # the driver's name
        self.resets += 1
        return 0


@pytest.fixture
def torch(monkeypatch: pytest.MonkeyPatch) -> FakeTorch:
    fake = FakeTorch()
    monkeypatch.setitem(__import__("sys").modules, "torch", fake)
    return fake


def _driver(monkeypatch: pytest.MonkeyPatch, lib: FakeLibcuda, max_persisting: int | None) -> None:
    monkeypatch.setattr(_backend, "load_libcuda", lambda: lib)
    monkeypatch.setattr(_backend, "device_attribute", lambda attribute, index: max_persisting)


def _run(session: EventsSession, run: int, name: str = "r", switch_to: int | None = None, torch: Any = None) -> None:
    region = RegionId(name, 0, run)
    session.region_enter(region)
    if switch_to is not None:
        torch.current[0] = switch_to
    session.region_exit(region, failed=False)
    session.finish_run(0, run)


def test_events_follow_the_current_stream_with_one_stream_object_per_stream(
    torch: FakeTorch, monkeypatch: pytest.MonkeyPatch
) -> None:
    _driver(monkeypatch, FakeLibcuda(), max_persisting=0)
    session = EventsSession(device=0, flush=True)
    for r in range(50):
        _run(session, r)
    torch.current[0] = 8  # the user switches streams between runs
    for r in range(50, 60):
        _run(session, r)
    _run(session, 60, switch_to=9, torch=torch)  # ... and inside a region: the end event is on the new stream
    torch.current[1] = 71  # another device's stream is not the session's
    _run(session, 61)
    recorded = [(e[0].run, e[2].stream, e[3].stream) for e in session._done]
    assert recorded[:50] == [(r, 7, 7) for r in range(50)]
    assert recorded[50:60] == [(r, 8, 8) for r in range(50, 60)]
    assert recorded[60:] == [(60, 8, 9), (61, 9, 9)]
    assert torch.made_streams == 3  # one object per stream seen, not two per run
    outputs = session.collect_runs()
    assert sorted(outputs) == [(0, r) for r in range(62)]
    assert all(len(o.records) == 1 and o.records[0].value > 0 for o in outputs.values())


def test_a_new_stream_every_run_keeps_the_cache_bounded(torch: FakeTorch, monkeypatch: pytest.MonkeyPatch) -> None:
    _driver(monkeypatch, FakeLibcuda(), max_persisting=0)
    session = EventsSession(device=0, flush=False)
    for r in range(3 * _backend.STREAMS_KEPT):
        torch.current[0] = 1000 + r
        _run(session, r)
        assert session._done[-1][2].stream == 1000 + r
    assert len(session._streams) <= _backend.STREAMS_KEPT


def test_a_torch_without_the_stream_identity_asks_current_stream(
    torch: FakeTorch, monkeypatch: pytest.MonkeyPatch
) -> None:
    _driver(monkeypatch, FakeLibcuda(), max_persisting=0)
    del torch._C._cuda_getCurrentStream
    session = EventsSession(device=0, flush=False)
    _run(session, 0)
    torch.current[0] = 8
    _run(session, 1)
    assert [(e[2].stream, e[3].stream) for e in session._done] == [(7, 7), (8, 8)]
    assert torch.made_streams == 4


def test_a_device_without_persisting_l2_is_never_asked_again(torch: FakeTorch, monkeypatch: pytest.MonkeyPatch) -> None:
    lib = FakeLibcuda(set_aside=0)
    _driver(monkeypatch, lib, max_persisting=0)
    session = EventsSession(device=0, flush=True)
    for r in range(20):
        _run(session, r)
    assert lib.queries == 0 and lib.resets == 0 and session.resets == 0
    assert session.buffer.fills == [r & 0x7F for r in range(20)]


def test_the_set_aside_is_asked_each_run_until_raised_then_reset_every_run(
    torch: FakeTorch, monkeypatch: pytest.MonkeyPatch
) -> None:
    lib = FakeLibcuda(set_aside=0)
    _driver(monkeypatch, lib, max_persisting=1 << 20)
    monkeypatch.setattr(_backend, "_libcuda", lambda: lib)
    session = EventsSession(device=0, flush=True)
    for r in range(5):
        _run(session, r)
    assert (lib.queries, lib.resets) == (5, 0)
    lib.set_aside = 1 << 16  # the user's function raised the set-aside in run 4
    for r in range(5, 10):
        _run(session, r)
    assert (lib.queries, lib.resets) == (6, 5)  # asked once more, then reset before every run
    assert session._persisting_ok


def test_no_driver_no_reset(torch: FakeTorch, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_backend, "load_libcuda", lambda: None)
    session = EventsSession(device=0, flush=True)
    _run(session, 0)
    assert session.resets == 0 and session.buffer.fills == [0]


def test_runs_come_back_one_at_a_time_each_read_only_when_reached(
    torch: FakeTorch, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``completed_runs`` waits on a run's end events only when the caller asks for that run (the loop writes
    the runs before it meanwhile), in the order the runs finished; ``collect_runs`` gives the same outputs."""
    _driver(monkeypatch, FakeLibcuda(), max_persisting=0)
    waited: list[int] = []
    monkeypatch.setattr(FakeEvent, "synchronize", lambda self: waited.append(self.at))
    session = EventsSession(device=0, flush=False)
    for r in range(4):
        _run(session, r, name="a")
    ends = [e[3].at for e in session._done]
    arriving = session.completed_runs()
    assert session._finished == [] and session._done == []  # taken: a later call reads only later runs
    assert waited == []
    first = next(arriving)
    assert first[0] == (0, 0) and waited == ends[:1]
    rest = list(arriving)
    assert [key for key, _ in rest] == [(0, 1), (0, 2), (0, 3)] and waited == ends
    assert len(session._pool) == 4  # every pair back in the pool once read
    mapped = EventsSession(device=0, flush=False)
    for r in range(4):
        _run(mapped, r, name="a")
    outputs = mapped.collect_runs()
    assert list(outputs) == [key for key, _ in [first, *rest]]
    assert [o.records[0].metric for o in outputs.values()] == [o.records[0].metric for _, o in [first, *rest]]


def test_a_run_that_cannot_be_read_stops_the_runs_and_returns_every_pair(
    torch: FakeTorch, monkeypatch: pytest.MonkeyPatch
) -> None:
    _driver(monkeypatch, FakeLibcuda(), max_persisting=0)
    session = EventsSession(device=0, flush=False)
    for r in range(3):
        _run(session, r)
    bad = session._done[1][3]

    def synchronize(self: FakeEvent) -> None:
        if self is bad:
            raise RuntimeError("an illegal memory access was encountered")

    monkeypatch.setattr(FakeEvent, "synchronize", synchronize)
    arriving = session.completed_runs()
    assert next(arriving)[0] == (0, 0)
    with pytest.raises(_backend.MeasurementError, match="region 'r' could not be read"):
        next(arriving)
    assert list(arriving) == [] and len(session._pool) == 3
    assert session.collect_runs() == {}  # nothing left to read: the runs are written without their events


def _counting(torch: FakeTorch) -> list[Any]:
    """Make ``torch.cuda.Event`` count the events made; returns the list they are appended to."""
    made: list[Any] = []

    class Counted(FakeEvent):
        def __init__(self, enable_timing: bool = False) -> None:
            super().__init__(enable_timing)
            made.append(self)

    torch.cuda.Event = Counted
    return made


def test_a_later_session_reuses_the_pairs_an_earlier_one_read(
    torch: FakeTorch, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Read pairs go to the next session on the device: its regions make no event (one less cost per region)."""
    _driver(monkeypatch, FakeLibcuda(), max_persisting=0)
    made = _counting(torch)
    first = EventsSession(device=0, flush=False)
    for run in range(3):
        _run(first, run)
    assert set(first.collect_runs()) == {(0, 0), (0, 1), (0, 2)}
    first.release()
    assert len(made) == 6
    second = EventsSession(device=0, flush=False)
    for run in range(3):
        _run(second, run)
    outputs = second.collect_runs()
    assert len(made) == 6  # the same six events, recorded again
    assert set(outputs) == {(0, 0), (0, 1), (0, 2)} and all(o.records for o in outputs.values())
    second.release()
    other = EventsSession(device=1, flush=False)  # another device keeps its own
    _run(other, 0)
    assert len(made) == 8


def test_pairs_not_read_are_not_handed_on(torch: FakeTorch, monkeypatch: pytest.MonkeyPatch) -> None:
    """A run the call stopped before reading may still be pending on the GPU: its events are not reused."""
    _driver(monkeypatch, FakeLibcuda(), max_persisting=0)
    made = _counting(torch)
    first = EventsSession(device=0, flush=False)
    _run(first, 0)
    first.release()  # never collected
    second = EventsSession(device=0, flush=False)
    _run(second, 0)
    assert len(made) == 4
    second.release()
