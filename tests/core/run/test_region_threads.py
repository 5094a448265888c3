"""Regions that cross threads or outlive their run (host backend, the real run loop).

The rule (docs/reliability.md "Threads and nested calls"): a region belongs to the thread that opened it and to
the run it opened in. Closed on another thread, it is refused with an ``AnnotationError`` naming it and both
threads, and the call fails; still open when the profiled function returns, the call fails the same way. The
outcome is fixed when the function returns: before, the first was recorded as if nothing happened and the second
was kept or dropped depending on when the run was read. Ordering is by events and joins, never by sleeps.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest

import nsightx
from nsightx import AnnotationError

SILENT = nsightx.VerbosityLevel.SILENT
TIMEOUT = 120.0
"""Seconds any wait may take before the test fails (a loaded 2-core CI box is slow, never this slow)."""

PATHS = [
    pytest.param({"runs": 3, "warmup": 0}, id="plain"),
    pytest.param({"runs": 200, "warmup": 0}, id="block"),
    pytest.param({"runs": 3, "warmup": 1}, id="warmup"),
    pytest.param({"runs": "auto", "warmup": 0}, id="adaptive"),
]
"""Calls that take each of the run loop's paths on the host backend (plain runs, a run block, a warm-up run
through the general loop, an adaptive run count)."""


def _profile(fn: Callable[..., Any], **options: Any) -> Any:
    options = {"backend": "host", "verbosity": SILENT, **options}
    return nsightx.analyze.kernel(**options)(fn)


def _started(target: Callable[[], None], name: str) -> threading.Thread:
    thread = threading.Thread(target=target, name=name, daemon=True)
    thread.start()
    return thread


@pytest.mark.parametrize("options", PATHS)
def test_a_region_closed_on_another_thread_fails_the_call_naming_the_region_and_both_threads(
    options: dict[str, Any],
) -> None:
    in_closer: list[BaseException] = []

    def close(region: nsightx.annotate) -> None:
        try:
            region.__exit__(None, None, None)
        except BaseException as e:
            in_closer.append(e)

    def crossing() -> None:
        region = nsightx.annotate("crossing")
        region.__enter__()
        closer = _started(lambda: close(region), "closer")
        closer.join(TIMEOUT)
        assert not closer.is_alive()

    with pytest.raises(AnnotationError, match=r"region 'crossing' was opened on thread .* closed on thread 'closer'"):
        _profile(crossing, **options)()
    assert len(in_closer) == 1 and isinstance(in_closer[0], AnnotationError)  # the closing thread is told too


@pytest.mark.parametrize("options", PATHS)
def test_a_region_still_open_when_the_function_returns_fails_the_call_and_its_late_close_is_dropped(
    options: dict[str, Any],
) -> None:
    opened, release = threading.Event(), threading.Event()
    helpers: list[threading.Thread] = []
    in_helper: list[BaseException] = []

    def helper() -> None:
        try:
            with nsightx.annotate("left_open"):
                opened.set()
                assert release.wait(TIMEOUT)
        except BaseException as e:
            in_helper.append(e)

    def leaves_a_region_open() -> None:
        helpers.append(_started(helper, "left-running"))
        assert opened.wait(TIMEOUT)

    with pytest.raises(AnnotationError, match=r"region 'left_open' was still open when run .* 'left-running'"):
        _profile(leaves_a_region_open, **options)()
    release.set()
    for thread in helpers:
        thread.join(TIMEOUT)
        assert not thread.is_alive()
    assert in_helper == []  # the call already failed naming it: the late close says nothing more


def test_a_region_a_started_thread_closes_before_the_function_returns_is_measured_every_run() -> None:
    """The rule's other side: a joined thread's region is the run's, on every path (here the block one)."""

    def region() -> None:
        with nsightx.annotate("helper"):
            pass

    def joined() -> None:
        thread = _started(region, "joined")
        thread.join(TIMEOUT)
        assert not thread.is_alive()

    df = _profile(joined, runs=200, warmup=0)().to_dataframe()
    assert list(df["Annotation"]) == ["helper"] and list(df["NumRuns"]) == [200]


def test_a_region_opened_on_an_ended_run_is_refused() -> None:
    """A thread that read the run just before it ended opens its region after: refused, not added to the run."""
    from nsightx._run import context

    state = context.RunState(None, 0, 0)  # type: ignore[arg-type]  # refused before the session is asked
    state.end()
    with pytest.raises(AnnotationError, match=r"'late' was opened after run 0 of config 0 ended"):
        state.enter("late")
    assert state.regions == []
