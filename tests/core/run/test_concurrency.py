"""Profiled calls from several threads, and profiled calls inside profiled calls (host backend, real code).

The rule (``nsightx/_run/exclusive.py``, docs/reliability.md "Threads and nested calls"): one profiled call at a
time per process; a call from another thread waits (and warns once per process); a call from inside a call of
the same thread raises ``NestedCallError`` before doing anything. Every wait here is on an event, a barrier or a
condition polled until a generous deadline, never on a sleep.
"""

from __future__ import annotations

import concurrent.futures as cf
import threading
import time
import warnings
from collections.abc import Callable
from typing import Any

import pytest

import nsightx

SILENT = nsightx.VerbosityLevel.SILENT
TIMEOUT = 120.0
"""Seconds any wait may take before the test fails (a loaded 2-core CI box is slow, never this slow)."""


def _profile(fn: Callable[..., Any], **options: Any) -> Any:
    options = {"runs": 5, "warmup": 0, "backend": "host", "verbosity": SILENT, **options}
    return nsightx.analyze.kernel(**options)(fn)


def _regions(result: Any) -> dict[str, int]:
    """``{annotation: NumRuns}`` of a result."""
    df = result.to_dataframe()
    return dict(zip(df["Annotation"], df["NumRuns"], strict=True))


def _until(condition: Callable[[], bool], what: str) -> None:
    """Wait until ``condition()`` holds (polled; the deadline is generous), else fail naming ``what``."""
    deadline = time.monotonic() + TIMEOUT
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting until {what}")
        time.sleep(0.005)


def _in_threads(targets: dict[str, Callable[[], Any]]) -> dict[str, Any]:
    """Run each target in its own named thread, started together; each one's result or exception, by name."""
    out: dict[str, Any] = {}
    barrier = threading.Barrier(len(targets))

    def go(name: str, target: Callable[[], Any]) -> None:
        barrier.wait(TIMEOUT)
        try:
            out[name] = target()
        except BaseException as e:
            out[name] = e

    threads = [threading.Thread(target=go, args=item, name=item[0]) for item in targets.items()]
    for t in threads:
        t.start()
    for t in threads:
        t.join(TIMEOUT)
        assert not t.is_alive(), f"thread {t.name} still runs after {TIMEOUT} s"
    return out


@pytest.fixture
def fresh_warnings(monkeypatch: pytest.MonkeyPatch) -> None:
    """Forget the once-per-process warnings already given, for this test."""
    from nsightx._run import exclusive

    monkeypatch.setattr(exclusive, "_warned", set())


def _worker(i: int) -> Callable[[], None]:
    def body() -> None:
        with nsightx.annotate(f"f{i}_a"):
            time.sleep(0.0005)  # workload that lets other threads run inside the region (not synchronisation)
        with nsightx.annotate(f"f{i}_b"):
            sum(range(200))

    body.__name__ = f"f{i}"
    return body


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # ConcurrentCallWarning (a RuntimeWarning) once
def test_eight_threads_profiling_eight_functions_each_get_exactly_their_own_regions():
    profiled = {f"f{i}": _profile(_worker(i)) for i in range(8)}
    for _ in range(20):
        out = _in_threads({name: fn for name, fn in profiled.items()})
        for name, result in out.items():
            assert not isinstance(result, BaseException), f"{name}: {result!r}"
            assert _regions(result) == {f"{name}_a": 5, f"{name}_b": 5}


def test_a_call_from_another_thread_waits_for_the_one_in_progress_and_warns_once(fresh_warnings):
    from nsightx._run import exclusive

    inside, release = threading.Event(), threading.Event()
    quick_ran = threading.Event()

    def slow() -> None:
        with nsightx.annotate("slow_a"):
            inside.set()
            assert release.wait(TIMEOUT)
        with nsightx.annotate("slow_b"):
            pass

    def quick() -> None:
        quick_ran.set()
        with nsightx.annotate("quick"):
            pass

    slow_p, quick_p = _profile(slow, runs=1), _profile(quick, runs=3)

    def contend() -> tuple[dict[str, Any], list[warnings.WarningMessage]]:
        for event in (inside, release, quick_ran):
            event.clear()
        out: dict[str, Any] = {}
        holder = threading.Thread(target=lambda: out.__setitem__("slow", slow_p()), name="holder-thread")
        waiter = threading.Thread(target=lambda: out.__setitem__("quick", quick_p()), name="waiter-thread")
        with warnings.catch_warnings(record=True) as caught:  # every thread's warnings (process-wide)
            warnings.simplefilter("always")
            holder.start()
            assert inside.wait(TIMEOUT)
            waiter.start()
            _until(lambda: exclusive.waiting() == 1, "quick waits for slow")
            assert not quick_ran.is_set()  # it waits: nothing of it ran
            release.set()
            for t in (holder, waiter):
                t.join(TIMEOUT)
                assert not t.is_alive()
        assert _regions(out["slow"]) == {"slow_a": 1, "slow_b": 1}
        assert _regions(out["quick"]) == {"quick": 3}
        return out, [w for w in caught if issubclass(w.category, nsightx.ConcurrentCallWarning)]

    _, first = contend()
    assert len(first) == 1
    text = str(first[0].message)
    assert "quick (thread 'waiter-thread') waits for the profiled call of slow (thread 'holder-thread')" in text
    assert "once per process" in text
    _, second = contend()
    assert second == []  # said once per process
    assert exclusive.current_owner() is None and exclusive.waiting() == 0


def test_a_profiled_call_inside_a_profiled_call_is_refused_before_the_inner_body_runs():
    ran: list[str] = []

    def inner() -> None:
        ran.append("inner")
        with nsightx.annotate("in"):
            pass

    inner_p = _profile(inner)

    def outer() -> None:
        ran.append("outer")
        with nsightx.annotate("before"):
            pass
        inner_p()
        with nsightx.annotate("after"):
            pass

    with pytest.raises(nsightx.NestedCallError) as info:
        _profile(outer)()
    error = info.value
    assert (error.outer, error.inner) == ("outer", "inner")
    assert isinstance(error, nsightx.NsightxError) and isinstance(error, RuntimeError)
    assert "inner is decorated with @nsightx.analyze.kernel and was called inside the profiled call of outer" in str(
        error
    )
    assert "inner.__wrapped__(...)" in str(error)
    assert ran == ["outer"]  # the first run of outer failed at the inner call; inner's body never ran

    # the advice works: the undecorated function's regions are measured as part of outer's runs
    assert inner_p.__wrapped__ is inner

    def outer_fixed() -> None:
        with nsightx.annotate("before"):
            pass
        inner_p.__wrapped__()
        with nsightx.annotate("after"):
            pass

    assert _regions(_profile(outer_fixed)()) == {"before": 5, "in": 5, "after": 5}


def test_a_recursive_profiled_function_fails_at_depth_two():
    depths: list[int] = []

    def rec(n: int) -> None:
        depths.append(n)
        with nsightx.annotate(f"level{n}"):
            pass
        if n > 1:
            rec_p(n - 1)

    rec_p = _profile(rec, runs=2, warmup=1)
    with pytest.raises(nsightx.NestedCallError, match=r"a recursive profiled function") as info:
        rec_p(configs=[3])
    assert (info.value.outer, info.value.inner) == ("rec", "rec")
    assert depths == [3]  # the body ran once, at depth 1; the call at depth 2 did nothing
    assert _regions(rec_p(configs=[1])) == {"level1": 2}  # nothing is left held


def _regions_from_a_started_thread(i: int) -> Callable[[], None]:
    def body() -> None:
        def work() -> None:
            with nsightx.annotate(f"t{i}_helper"):
                time.sleep(0.0005)  # lets other threads run inside the region (workload, not synchronisation)

        helper = threading.Thread(target=work)
        helper.start()
        helper.join()
        with nsightx.annotate(f"t{i}_main"):
            pass

    body.__name__ = f"t{i}"
    return body


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # ConcurrentCallWarning (a RuntimeWarning) once
def test_regions_of_threads_the_function_starts_stay_its_own_while_other_threads_profile():
    profiled = {f"t{i}": _profile(_regions_from_a_started_thread(i)) for i in range(4)}
    for _ in range(10):
        out = _in_threads(dict(profiled))
        for name, result in out.items():
            assert not isinstance(result, BaseException), f"{name}: {result!r}"
            assert _regions(result) == {f"{name}_helper": 5, f"{name}_main": 5}


def test_the_lock_is_released_when_the_function_raises_or_is_interrupted():
    from nsightx._run import exclusive

    def raises() -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        _profile(raises)()
    assert exclusive.current_owner() is None
    quiet = _profile(_worker(0))
    out = _in_threads({"other-thread": quiet})  # would wait forever if the lock had leaked
    assert _regions(out["other-thread"]) == {"f0_a": 5, "f0_b": 5}


_ACTIVE = {"now": 0, "most": 0}
_ACTIVE_LOCK = threading.Lock()


def pooled(n: int) -> None:
    """Counts how many of its calls run at once (importable by reference: the thread pool shares this module)."""
    with _ACTIVE_LOCK:
        _ACTIVE["now"] += 1
        _ACTIVE["most"] = max(_ACTIVE["most"], _ACTIVE["now"])
    try:
        with nsightx.annotate("pooled"):
            sum(range(100 * n))
    finally:
        with _ACTIVE_LOCK:
            _ACTIVE["now"] -= 1


def test_a_thread_pool_executor_measures_its_configs_one_at_a_time_and_says_so(fresh_warnings):
    from nsightx._run import exclusive

    _ACTIVE.update(now=0, most=0)
    profiled = _profile(pooled, runs=3, warmup=1)
    inside, release = threading.Event(), threading.Event()

    def holder() -> None:
        with nsightx.annotate("held"):
            inside.set()
            assert release.wait(TIMEOUT)

    held = _profile(holder, runs=1)
    out: dict[str, Any] = {}
    with cf.ThreadPoolExecutor(4) as pool, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        first = threading.Thread(target=lambda: out.__setitem__("held", held()), name="holder-thread")
        first.start()
        assert inside.wait(TIMEOUT)
        sweep = threading.Thread(
            target=lambda: out.__setitem__("pooled", profiled(configs=[1, 2, 3, 4], executor=pool)), name="sweep"
        )
        sweep.start()
        _until(lambda: exclusive.waiting() == 1, "a task of the pool waits for the call in progress")
        assert _ACTIVE["most"] == 0  # no task measured while another call was in progress
        release.set()
        for t in (first, sweep):
            t.join(TIMEOUT)
            assert not t.is_alive()
        profiled(configs=[5], executor=pool)  # a second sweep: not said again
    said = [str(w.message) for w in caught if issubclass(w.category, nsightx.ConcurrentCallWarning)]
    assert [s for s in said if s.startswith("nsightx: executor=")] == [
        "nsightx: executor= is a ThreadPoolExecutor: its tasks measure in this process, where one profiled call "
        "runs at a time, so the configs of pooled are measured one after the other, as without executor=. To "
        "measure configs at once, give executor=ProcessPoolExecutor() (one GPU per worker), parallel_devices=[...] "
        "or a Dask client. (nsightx says this once per process.)"
    ]
    assert any("the profiled call of pooled (thread 'ThreadPoolExecutor-" in s for s in said)  # its task waited
    assert _ACTIVE["most"] == 1  # the pool's 4 threads measured its configs one at a time
    df = out["pooled"].to_dataframe()
    assert df["n"].tolist() == [1, 2, 3, 4] and set(df["Annotation"]) == {"pooled"} and set(df["NumRuns"]) == {3}
    assert out["pooled"].environment["executor"] == "concurrent.futures.thread.ThreadPoolExecutor"
    assert _regions(out["held"]) == {"held": 1}


def test_a_run_loop_started_without_a_profiled_call_refuses_nested_calls_too():
    """The ncu worker's child drives ``run_loop`` itself, with no profiled call around it: it takes the lock."""
    from nsightx_host import HostSession

    from nsightx._results.sink import RunSink
    from nsightx._run import exclusive
    from nsightx._run.loop import run_loop
    from nsightx._run.plan import Plan

    inner_ran: list[int] = []
    inner_p = _profile(lambda: inner_ran.append(1))

    def child_function() -> None:
        with nsightx.annotate("a"):
            pass
        inner_p()

    plan = Plan(
        function=child_function,
        function_name="child_function",
        params=(),
        configs=((),),
        runs=1,
        warmup=0,
        metrics=("host__time_duration.sum",),
        backend="host",
        needs_gpu=False,
    )
    with pytest.raises(nsightx.NestedCallError) as info:
        run_loop(plan, HostSession(), RunSink())
    assert (info.value.outer, info.value.inner) == ("child_function", "<lambda>")
    assert inner_ran == [] and exclusive.current_owner() is None
