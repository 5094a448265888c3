"""The events backend under the run loop when a region crosses threads or outlives its run (CPU only).

torch and the CUDA driver are doubles (library boundaries, as in ``test_events_session.py``); the session and the
run loop are the real ones. A region closed on another thread, or still open (on a thread the function left
running) when the function returns, fails the call with an ``AnnotationError``, whether the session reads each run
as it ends or in batches later (before, the late region was in its run's output only when the batch was read after
it closed). Ordering is by events and joins, never by sleeps.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

import pytest
from nsightx_events import _backend
from nsightx_events._backend import METRIC, EventsBackend
from test_events_session import FakeLibcuda, FakeTorch

import nsightx
from nsightx._errors import AnnotationError
from nsightx._results.sink import RunSink
from nsightx._run.loop import run_loop
from nsightx._run.plan import Plan
from nsightx.ext import Availability

TIMEOUT = 120.0
"""Seconds any wait may take before the test fails (a loaded 2-core CI box is slow, never this slow)."""
COLLECT = ["batch", "run"]


@pytest.fixture
def gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(__import__("sys").modules, "torch", FakeTorch())
    monkeypatch.setattr(_backend, "_probe", lambda: Availability(available=True))
    monkeypatch.setattr(_backend, "load_libcuda", lambda: FakeLibcuda())
    monkeypatch.setattr(_backend, "_libcuda", lambda: FakeLibcuda())
    monkeypatch.setattr(_backend, "device_attribute", lambda attribute, index: 0)


@pytest.fixture
def release() -> Iterator[threading.Event]:
    """Set at the end of the test (also when it fails), so no helper thread outlives it."""
    event = threading.Event()
    yield event
    event.set()


def _call(function: Callable[[], None], collect: str) -> RunSink:
    plan = Plan(
        function=function,
        function_name="f",
        params=(),
        configs=((),),
        runs=3,
        warmup=0,
        metrics=(METRIC,),
        backend="events",
        cache_control="none",
        backend_options={"events_collect": collect},
        needs_gpu=False,
    )
    sink = RunSink()
    with EventsBackend().session(plan) as session:
        run_loop(plan, session, sink)
    return sink


@pytest.mark.usefixtures("gpu")
@pytest.mark.parametrize("collect", COLLECT)
def test_a_region_still_open_on_a_thread_when_the_run_ends_fails_the_call(
    collect: str, release: threading.Event
) -> None:
    helpers: list[threading.Thread] = []

    def helper(opened: threading.Event) -> None:
        with nsightx.annotate("left_open"):
            opened.set()
            release.wait(TIMEOUT)

    def function() -> None:
        opened = threading.Event()
        helpers.append(threading.Thread(target=helper, args=(opened,), name="left-running", daemon=True))
        helpers[-1].start()
        assert opened.wait(TIMEOUT)

    with pytest.raises(AnnotationError, match=r"region 'left_open' was still open when run 0 .* 'left-running'"):
        _call(function, collect)
    release.set()
    for thread in helpers:
        thread.join(TIMEOUT)
        assert not thread.is_alive()


@pytest.mark.usefixtures("gpu")
@pytest.mark.parametrize("collect", COLLECT)
def test_a_region_closed_on_another_thread_fails_the_call(collect: str) -> None:
    in_closer: list[BaseException] = []

    def close(region: nsightx.annotate) -> None:
        try:
            region.__exit__(None, None, None)
        except AnnotationError as e:  # the closing thread is told too
            in_closer.append(e)

    def function() -> None:
        region = nsightx.annotate("crossing")
        region.__enter__()
        closer = threading.Thread(target=close, args=(region,), name="closer", daemon=True)
        closer.start()
        closer.join(TIMEOUT)
        assert not closer.is_alive()

    with pytest.raises(AnnotationError, match=r"region 'crossing' was opened on thread .* closed on thread 'closer'"):
        _call(function, collect)
    assert len(in_closer) == 1
