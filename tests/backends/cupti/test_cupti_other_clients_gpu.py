"""The CUPTI backend next to another CUPTI client in the same process: torch.profiler (``pytest -m gpu``).

CUPTI serves one set of activity callbacks per process. Before issue 13, a CUPTI call after a torch.profiler
session returned an empty result with no error. Now it either measures correctly or raises a
:class:`~nsightx.MeasurementError` that names the cause; it never returns an empty result.

torch.profiler (Kineto) also leaves CUPTI stamping every record with CPU cycle counts for the rest of the
process; nsightx maps them back to nanoseconds (``nsightx_cupti._clock``). Each test here still runs in a pytest
process of its own, so the CUPTI tests after it in the suite measure on CUPTI's own clock.
"""

from __future__ import annotations

import operator
import os
import subprocess
import sys
from typing import Any

import pytest

import nsightx
from nsightx._errors import MeasurementError

pytestmark = pytest.mark.gpu

SILENT = nsightx.VerbosityLevel.SILENT
CHILD = os.environ.get("NSIGHTX_TEST_CHILD") == "1"


def _isolated(request: pytest.FixtureRequest) -> bool:
    """Run the calling test again in a fresh pytest process (and pass if it passes there); False in that child."""
    if CHILD:
        return False
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-m",
            "gpu",
            f"{__file__}::{request.node.name}",
        ],
        env={**os.environ, "NSIGHTX_TEST_CHILD": "1"},
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
    return True


@pytest.fixture(scope="module")
def torch() -> Any:
    import torch

    torch.zeros(1, device="cuda")
    return torch


def _kernel_counts(result: Any) -> list[int]:
    return [reg.attributes["kernel_count"] for run in result.data.runs for reg in run.regions]


def _profiled(torch: Any) -> Any:
    x = torch.ones(1 << 12, device="cuda")

    @nsightx.analyze.kernel(
        runs=3, backend="cupti", thermal_mode="off", verbosity=SILENT, combine_kernel_metrics=operator.add
    )
    def add() -> None:
        with nsightx.annotate("add"):
            x.add_(1)
            x.mul_(1)

    return add


def _profiler_kernel_us(torch: Any) -> float:
    """Median CUDA time of the ``mul_`` kernels one torch.profiler session saw, us (its own clock's reading)."""
    y = torch.ones(1 << 20, device="cuda")
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(20):
            y.mul_(1)
        torch.cuda.synchronize()
    kernels = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    times = sorted(float(e.device_time_total) for e in kernels if e.device_time_total > 0)
    assert times, "torch.profiler saw no kernel"
    return times[len(times) // 2]


def test_cupti_after_torch_profiler_measures_the_same_and_leaves_it_working(
    plugin_host: Any, torch: Any, request: pytest.FixtureRequest
) -> None:
    """torch.profiler, then nsightx, then torch.profiler again: nsightx maps Kineto's cycle clock back to ns, so
    its kernel times match those of the first call; the later profiler session still reads its own clock."""
    if _isolated(request):
        return
    add = _profiled(torch)
    first = add()
    assert len(first.records) == 6 and _kernel_counts(first) == [2, 2, 2]
    assert first.environment["CuptiClock"] == "cupti"
    profiler_before = _profiler_kernel_us(torch)
    for _ in range(2):  # twice: the first call after it may differ from later ones
        again = add()
        assert len(again.records) == len(first.records), "an incomplete result after torch.profiler"
        assert _kernel_counts(again) == _kernel_counts(first)
        assert str(again.environment["CuptiClock"]).startswith("mapped"), again.environment["CuptiClock"]
        before, after = sum(r.value for r in first.records), sum(r.value for r in again.records)
        assert 0.8 < after / before < 1.25, f"kernel times after torch.profiler: {after:.0f} ns against {before:.0f}"
    profiler_after = _profiler_kernel_us(torch)
    assert 0.8 < profiler_after / profiler_before < 1.25, (profiler_before, profiler_after)


def test_cupti_while_torch_profiler_records_is_a_clear_error(
    plugin_host: Any, torch: Any, request: pytest.FixtureRequest
) -> None:
    if _isolated(request):
        return
    add = _profiled(torch)
    with (
        torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]),
        pytest.raises(MeasurementError, match=r"torch\.profiler is recording"),
    ):
        add()
    try:  # and afterwards: measures, or names the cause
        res = add()
    except MeasurementError as e:
        assert "torch.profiler" in str(e)
    else:
        assert len(res.records) == 6 and _kernel_counts(res) == [2, 2, 2]
