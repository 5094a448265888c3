"""GPU demo of the nsightx pytest plugin: torch matmuls timed with CUPTI, saved, compared (run.sh beside it).

Each test is one result file: ``test_matmul[float32]`` and ``test_matmul[bfloat16]``, three sizes each. The
planted slowdown is ``NSX_DEMO_SCALE``: every matrix dimension is multiplied by it while the config (``n``) stays
the same, so 1.07 does about 1.07**3 = 1.23x the work under the same row of the comparison. Skipped where torch
or a CUDA GPU is missing.
"""

from __future__ import annotations

import operator
import os

import pytest

import nsightx

torch = pytest.importorskip("torch")

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU with torch.cuda available"),
]

SCALE = float(os.environ.get("NSX_DEMO_SCALE", "1.0"))
"""Planted slowdown: each dimension times SCALE (1.0: the real code)."""

SIZES = (1024, 2048, 4096)


def matmul(n: int, dtype: str) -> None:
    m = round(n * SCALE)
    a = torch.randn(m, m, device="cuda", dtype=getattr(torch, dtype))
    b = torch.randn(m, m, device="cuda", dtype=getattr(torch, dtype))
    with nsightx.annotate("matmul"):
        torch.matmul(a, b)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_matmul(nsightx_bench, dtype):
    res = nsightx_bench(
        matmul,
        configs=[(n, dtype) for n in SIZES],
        runs=20,
        combine_kernel_metrics=operator.add,  # a region that launches 2 kernels (split-K) reports their sum
    )
    frame = res.to_dataframe()
    assert frame["n"].tolist() == list(SIZES)
    assert (frame["NumRuns"] == 20).all() and (frame["AvgValue"] > 0).all()
