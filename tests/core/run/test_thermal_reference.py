"""The thermal guard against a naive reference written from docs/plugins.md ("Thermal control").

A random band (``thermal_wait`` >= 0, ``thermal_cont`` > ``thermal_wait``, ``thermal_timeout`` >= 1, as the
options accept), a random sequence of runs (warm-up or measured, a random host time before each) and a random
walk of GPU temperatures, consumed one per read, drive the real :class:`~nsightx._run.thermal.ThermalGuard`
through the real nvml temperature source over the scripted NVML double, on a fake clock. The reference says,
from the docs alone, when the guard pauses, which reads a pause makes (one a second, the last one at the
timeout), how ``auto`` moves the band, when ``manual`` raises :class:`~nsightx.CoolingTimeoutError`, and what
``ThermalPauseS`` each measured run records; the two are compared exactly, pause by pause and run by run.

What the docs leave open, the reference takes from the module docstring of ``nsightx/_run/thermal.py`` and says
so where it does: runs within ``RECHECK_S`` of a read that left more than ``RECHECK_MARGIN_C`` above
``thermal_wait`` are not read; a read that fails stops the guard (and ends a pause in progress, its time
counted); the "headroom reached" of a timed-out pause is its last read; the lowered ``thermal_cont`` stays above
``thermal_wait``.

``NSIGHTX_REFERENCE_EXAMPLES`` sets how many examples run (default 400; 5000 while hunting, none differed).
"""

from __future__ import annotations

import math
import os
import warnings
from dataclasses import dataclass, field

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from nsightx_nvml._collectors import NvmlTemperatureSource
from nvml_double import GPU_A, FakeClock, FakeGpu, NVMLError, install

from nsightx import CoolingTimeoutError
from nsightx._run.thermal import PAUSE_COLUMN, ThermalGuard

EXAMPLES = int(os.environ.get("NSIGHTX_REFERENCE_EXAMPLES", "400"))
"""Examples per run (more while hunting: ``NSIGHTX_REFERENCE_EXAMPLES=5000``)."""

SLOWDOWN_C = 89
"""The double's slowdown temperature."""
GAPS = (0.0, 0.015625, 0.0625, 2.0)
"""Host time before a run (s): exact in binary, below and above the 0.05 s a wide-margin read is trusted for.

Exact on purpose: on a fake clock at an inexact time (0.01 s steps) a pause's ``clock() - start`` can end a hair
under ``thermal_timeout``, and the guard then asks for a sleep too short to move a float clock at that time, so
it loops for ever. A real ``time.sleep`` always takes some time, so this is a property of the fake clock only."""
DOC_STEP_C, DOC_CONT_MAX_C, DOC_CLOSE_RUNS, DOC_POLL_S = 3, 50, 5, 1.0
"""From docs/plugins.md: the step, the highest thermal_cont, 'fewer than 5 runs apart', reading once a second."""
DOC_RECHECK_S, DOC_RECHECK_MARGIN_C = 0.05, 5.0
"""From the module docstring of nsightx/_run/thermal.py (docs/plugins.md is silent)."""


@dataclass
class RefPause:
    """One pause as the reference expects it."""

    seconds: float
    start_headroom_c: float
    end_headroom_c: float
    timed_out: bool


@dataclass
class Reference:
    """The docs' guard, one run at a time, over the same script of reads and the same clock times."""

    mode: str
    wait: float
    cont: float
    timeout: float
    reads: list[float | None]
    """Headroom of each read in order (``None``: that read fails)."""
    cursor: int = 0
    pauses: list[RefPause] = field(default_factory=list)
    pause_runs: list[int] = field(default_factory=list)
    ceiling: float = DOC_CONT_MAX_C
    broken: bool = False
    trusted_until: float | None = None
    pending: float = 0.0
    raised: bool = False

    def read(self) -> float | None:
        """The next scripted read; a failure stops the guard for good."""
        if self.broken:
            return None
        value = self.reads[min(self.cursor, len(self.reads) - 1)]
        self.cursor += 1
        if value is None:
            self.broken = True
        return value

    def before(self, run: int, now: float) -> None:
        """What the guard does before run ``run`` (counting every run, warm-up included) starting at ``now``."""
        if self.trusted_until is not None and now < self.trusted_until:
            return
        headroom = self.read()
        if headroom is None or headroom > self.wait:
            wide = headroom is not None and headroom > self.wait + DOC_RECHECK_MARGIN_C
            self.trusted_until = now + DOC_RECHECK_S if wide else None
            return
        self.trusted_until = None
        if self.mode == "auto" and self.pause_runs and run - self.pause_runs[-1] < DOC_CLOSE_RUNS:
            self.cont = max(self.cont, min(self.cont + DOC_STEP_C, self.ceiling))
        self.pause_runs.append(run)
        self.pause(headroom)

    def offsets(self) -> list[float]:
        """When a pause reads (s after it began): once a second, and at the timeout."""
        steps = [float(k) for k in range(math.floor(self.timeout) + 1)]
        return steps if steps[-1] == self.timeout else [*steps, float(self.timeout)]

    def pause(self, first: float) -> None:
        last, seconds, timed_out = first, None, False
        for at in self.offsets():
            reading = first if at == 0 else self.read()
            if reading is None:
                seconds = at
                break
            last = reading
            if reading >= self.cont:
                seconds = at
                break
        if seconds is None:
            seconds, timed_out = float(self.timeout), True
        self.pauses.append(RefPause(seconds, first, last, timed_out))
        self.pending += seconds
        if not timed_out:
            return
        if self.mode == "manual":
            self.raised = True
            return
        self.ceiling = max(self.cont - DOC_STEP_C, self.wait + 1)  # "never raised that high again"
        self.cont = self.ceiling
        if last <= self.wait:  # "could not even get above thermal_wait"
            self.wait = math.floor(last) - DOC_STEP_C
            self.cont = max(self.cont, self.wait + 1)

    def take(self) -> float:
        pending, self.pending = self.pending, 0.0
        return round(pending, 3)


@st.composite
def scenarios(draw: st.DrawFn) -> dict[str, object]:
    """A band, runs and a temperature walk (headroom per read; occasionally a failed read)."""
    wait = draw(st.integers(0, 14))
    cont = draw(st.integers(wait + 1, wait + 14) | st.integers(max(wait + 1, 44), 55))  # near CONT_MAX too
    timeout = draw(st.integers(1, 9))
    reads: list[float | None] = []
    if draw(st.booleans()):  # a walk: a degree or few per read
        headroom = draw(st.integers(-3, 30))
        for step in draw(st.lists(st.integers(-4, 4), min_size=1, max_size=80)):
            reads.append(headroom)
            headroom += step
    else:  # jumps around the band: pauses close together, timeouts, reads at exactly wait and cont
        reads.extend(draw(st.lists(st.integers(wait - 4, cont + 4), min_size=1, max_size=80)))
    fail_at = draw(st.none() | st.integers(0, len(reads)))
    if fail_at is not None:
        reads.insert(fail_at, None)
    runs = draw(st.lists(st.tuples(st.sampled_from(GAPS), st.booleans()), min_size=1, max_size=40))
    mode = draw(st.sampled_from(("auto", "manual")))
    return {"wait": wait, "cont": cont, "timeout": timeout, "reads": reads, "runs": runs, "mode": mode}


def scripted_guard(mp: pytest.MonkeyPatch, case: dict[str, object]) -> tuple[ThermalGuard, FakeClock]:
    """The real guard over the real nvml source, reading the scripted walk through the NVML double."""
    clock = FakeClock()
    reads = list(case["reads"])  # type: ignore[call-overload]
    cursor = [0]

    def temperature(now: float) -> int:
        value = reads[min(cursor[0], len(reads) - 1)]
        cursor[0] += 1
        if value is None:
            raise NVMLError(15)  # NVML_ERROR_UNKNOWN
        return SLOWDOWN_C - int(value)

    install(mp, [FakeGpu(GPU_A, temp_c=temperature, slowdown_c=SLOWDOWN_C)], clock=clock)
    guard = ThermalGuard(
        NvmlTemperatureSource(None),
        mode=str(case["mode"]),
        wait=case["wait"],  # type: ignore[arg-type]
        cont=case["cont"],  # type: ignore[arg-type]
        timeout=case["timeout"],  # type: ignore[arg-type]
        clock=clock.monotonic,
        sleep=clock.sleep,
    )
    return guard, clock


def check(case: dict[str, object]) -> None:
    """Drive the guard and the reference over ``case``; compare pauses, band and ThermalPauseS run by run."""
    ref = Reference(str(case["mode"]), case["wait"], case["cont"], case["timeout"], list(case["reads"]))  # type: ignore[arg-type, call-overload]
    with pytest.MonkeyPatch.context() as mp, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        guard, clock = scripted_guard(mp, case)
        measured = 0
        for run, (gap, is_measured) in enumerate(case["runs"]):  # type: ignore[attr-defined]
            clock.advance(gap)
            ref.before(run, clock.now)
            if ref.raised:
                with pytest.raises(CoolingTimeoutError):
                    guard.before_run()
            else:
                guard.before_run()
            got = [(round(p.seconds, 9), p.start_headroom_c, p.end_headroom_c, p.timed_out) for p in guard.pauses]
            want = [(p.seconds, p.start_headroom_c, p.end_headroom_c, p.timed_out) for p in ref.pauses]
            assert got == want, f"pauses after run {run}"
            assert (guard.wait, guard.cont) == (ref.wait, ref.cont), f"band after run {run}"
            if ref.raised:
                return
            if is_measured:
                assert guard.take_values(0, measured) == [(PAUSE_COLUMN, "run", 0, measured, None, ref.take())]
                measured += 1


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(scenarios())
def test_guard_matches_the_reference(case: dict[str, object]) -> None:
    check(case)
