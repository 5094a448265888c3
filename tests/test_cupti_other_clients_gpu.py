"""The CUPTI backend next to another CUPTI client in the same process: torch.profiler (``pytest -m gpu``).

CUPTI serves one set of activity callbacks per process. Before issue 13, a CUPTI call after a torch.profiler
session returned an empty result with no error. Now it either measures correctly or raises a
:class:`~nsightx.MeasurementError` that names the cause; it never returns an empty result.

torch.profiler (Kineto) also leaves CUPTI stamping every record with CPU cycle counts for the rest of the
process, so nsightx refuses CUPTI timing after it; each test here therefore runs in a pytest process of its own,
and the CUPTI tests after it in the suite measure on CUPTI's own clock.
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


def _profiler_session(torch: Any) -> int:
    y = torch.ones(1 << 12, device="cuda")
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(3):
            y.mul_(2)
        torch.cuda.synchronize()
    return len(prof.events())


def test_cupti_after_torch_profiler_measures_or_says_why(
    plugin_host: Any, torch: Any, request: pytest.FixtureRequest
) -> None:
    if _isolated(request):
        return
    add = _profiled(torch)
    first = add()
    assert len(first.records) == 6 and _kernel_counts(first) == [2, 2, 2]
    assert _profiler_session(torch) > 0  # the other client really ran and saw kernels
    for _ in range(2):  # twice: the first call after it may differ from later ones
        try:
            again = add()
        except MeasurementError as e:
            assert "torch.profiler" in str(e) and "backend='events'" in str(e), str(e)
            continue
        assert len(again.records) == len(first.records), "an incomplete result after torch.profiler"
        assert _kernel_counts(again) == _kernel_counts(first)
        assert all(r.value > 0 for r in again.records)
        before, after = sum(r.value for r in first.records), sum(r.value for r in again.records)
        assert 0.7 < after / before < 1.4, f"kernel times after torch.profiler: {after:.0f} ns against {before:.0f}"


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
