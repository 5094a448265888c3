"""``benchmarks/call_phases.py``'s ``--cycles`` and ``--per-run`` probes on CPU, over real host-backend calls.

The probes run on the GPU machine only through ``run_gpu.sh``; here their bookkeeping is checked where it can fail:
a planted reference cycle and a planted leak must be found, a clean call must read zero, and the per-run rows
(the frame alone included) must come out for every variant. No figure is compared with a time.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from _paths import ROOT
from _scripts import load_script

import nsightx

SCRIPT = ROOT / "benchmarks" / "call_phases.py"


cp = load_script(SCRIPT, "call_phases_probes")


def _host_call(runs: int = 20) -> Callable[[], nsightx.ProfileResults]:
    @nsightx.analyze.kernel(configs=[(1,)], runs=runs, backend="host", verbosity=nsightx.VerbosityLevel.SILENT)
    def call(n: int) -> None:
        with nsightx.annotate("work"):
            sum(range(n))

    return call


class _Cyclic:
    """A stand-in result whose frame leaves a cycle of two lists behind (what ``--cycles`` must count)."""

    def to_dataframe(self) -> None:
        a: list[Any] = []
        b: list[Any] = [a]
        a.append(b)


KEPT: list[object] = []


class _Leaky:
    """A stand-in result whose frame keeps one object alive for good (what ``--cycles``' "kept" must count)."""

    def to_dataframe(self) -> None:
        KEPT.append([])  # a list: the collector tracks it (a bare object() it does not)


@pytest.fixture
def collector_restored() -> Iterator[None]:
    was = gc.isenabled()
    try:
        yield
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        KEPT.clear()
        if was:
            gc.enable()


@pytest.mark.usefixtures("collector_restored")
def test_cycles_finds_a_planted_cycle_and_a_planted_leak_and_nothing_in_a_host_call() -> None:
    found = cp.cycles({"cyclic": _Cyclic, "leaky": _Leaky, "host": _host_call()}, calls=3)
    assert found["cyclic"]["per_call"] == 2 and found["cyclic"]["types"] == {"builtins.list": 6}
    assert found["leaky"]["kept"]["types"].get("builtins.list") == 3
    assert found["host"]["per_call"] == 0
    assert found["host"]["kept"]["types"].get("nsightx._results.profileresults.ProfileResults") is None
    assert found["host"]["kept"]["held"] > 0  # the result held while it is measured


class _FakeTorch:
    class cuda:
        @staticmethod
        def synchronize() -> None:
            return None


def test_per_run_gives_every_variant_and_the_frame_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """The GPU functions are replaced by host-backend calls of the workload's shape (the library boundary)."""
    bo = cp.bo

    def make_bare(torch: Any, w: Any) -> Callable[[], None]:
        def loop() -> None:
            for _ in range(w.runs * len(w.sizes)):
                sum(range(20))

        return loop

    def make_profiled(torch: Any, w: Any, backend: str, collectors: bool = True) -> Any:
        return _host_call(w.runs)

    monkeypatch.setattr(bo, "make_bare", make_bare)
    monkeypatch.setattr(bo, "make_profiled", make_profiled)
    w = bo.Workload("probe", (1,), 6, randn=False, tiny=True)
    out = cp.per_run(_FakeTorch, w, 2)
    assert out["runs"] == [6, 12] and out["configs"] == 1 and out["reps"] == 2
    for name in ("bare", "cupti", "events", "cupti_dataframe", "events_dataframe"):
        assert {"short_us", "long_us", "per_run_us", "per_run_ratio"} <= set(out[name])
    assert set(out["frame"]) == {"cupti", "events"}
    for row in out["frame"].values():
        assert row["short_us"] > 0 and row["long_us"] > 0 and row["gc_short_us"] >= 0
        assert len(row["full_long"]) == 2 and all(len(c) == 3 for c in row["counts_long"])
