"""cupti and ncu attribute the same kernels to each region (``pytest -m gpu``; run on the H200, skipped elsewhere).

One function holds five regions whose kernels reach the GPU in different ways: a backward pass (PyTorch's
autograd threads launch its kernels), a ``threading.Thread`` started and joined inside the region, a side
stream, a CUDA graph replay, and a plain launch. The same function is measured with each backend; for every
region and run both must report the same kernel count. Until issue 20, ncu's per-thread push/pop ranges saw one
kernel of the backward pass and none of the thread's.

Every ncu call uses ``clock_control="none"``: clocks are never locked on the shared machine.
"""

from __future__ import annotations

import operator
import threading
from collections import Counter
from typing import Any

import pytest

pytestmark = pytest.mark.gpu

nsightx = pytest.importorskip("nsightx")

REGIONS = ("backward", "thread", "side_stream", "graph", "plain")
BATCH = 64
WIDTH = 512
OPTIONS: dict[str, Any] = {
    "runs": 2,
    "combine_kernel_metrics": operator.add,
    "verbosity": 0,
    "clock_control": "none",
    "thermal_mode": "off",
}


def _ready(backend: str) -> bool:
    from nsightx._pluginhost.plugins import default_host

    return default_host().backend(backend).availability().available


def _build(torch: Any, state: dict[str, Any]) -> None:
    """Model, tensors, side stream and captured graph: made once per process, outside every region."""
    model = torch.nn.Sequential(torch.nn.Linear(WIDTH, WIDTH), torch.nn.ReLU(), torch.nn.Linear(WIDTH, WIDTH))
    state["model"] = model.cuda()
    state["inp"] = torch.randn(BATCH, WIDTH, device="cuda")
    state["a"] = torch.randn(1 << 16, device="cuda")
    state["b"] = torch.randn(1 << 16, device="cuda")
    state["side"] = torch.cuda.Stream()
    gx = torch.randn(1 << 16, device="cuda")
    warm = torch.cuda.Stream()
    warm.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(warm):
        gx * 2
    torch.cuda.current_stream().wait_stream(warm)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        gy = gx * 2
        gy.add_(1)
        gy.mul_(3)
    state["graph"], state["graph_io"] = graph, (gx, gy)
    torch.cuda.synchronize()


def make_workload() -> Any:
    """A fresh profiled-function body; its state is built on the first (warm-up) call in whichever process runs it."""
    state: dict[str, Any] = {}

    def regions() -> None:
        import torch

        if not state:
            _build(torch, state)
        model, a, b = state["model"], state["a"], state["b"]
        model.zero_grad(set_to_none=True)
        loss = model(state["inp"]).sum()  # the forward pass is outside the regions
        with nsightx.annotate("backward"):
            loss.backward()
        with nsightx.annotate("thread"):
            worker = threading.Thread(target=lambda: a + b)
            worker.start()
            worker.join()
        with nsightx.annotate("side_stream"):
            side = state["side"]
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                a.add_(1)
            torch.cuda.current_stream().wait_stream(side)
        with nsightx.annotate("graph"):
            state["graph"].replay()
        with nsightx.annotate("plain"):
            b.mul_(2)
        torch.cuda.synchronize()

    return regions


def counts(result: Any) -> dict[tuple[str, int], int]:
    """Kernels per (region, run): the backends' ``kernel_count`` attribute, checked against the records."""
    by_attr = {
        (reg.annotation, reg.run): int(reg.attributes["kernel_count"])
        for run in result.data.runs
        if run.config >= 0
        for reg in run.regions
    }
    metric = result.data.plan.metrics[0]
    by_records = Counter((r.annotation, r.run) for r in result.records if r.metric == metric)
    assert {k: by_records.get(k, 0) for k in by_attr} == by_attr, "kernel_count disagrees with the records"
    return by_attr


def measure(backend: str, **extra: Any) -> dict[tuple[str, int], int]:
    profiled = nsightx.analyze.kernel(backend=backend, **OPTIONS, **extra)(make_workload())
    return counts(profiled())


@pytest.fixture(scope="module")
def cupti_counts() -> dict[tuple[str, int], int]:
    pytest.importorskip("torch")
    if not _ready("cupti"):
        pytest.skip("cupti backend not available here")
    return measure("cupti")


@pytest.mark.skipif("not _ready('ncu')", reason="ncu backend not available here")
def test_ncu_attributes_the_same_kernels_as_cupti_to_every_region(cupti_counts: dict[tuple[str, int], int]) -> None:
    ncu_counts = measure("ncu")
    assert sorted({a for a, _ in cupti_counts}) == sorted(REGIONS)
    assert ncu_counts == cupti_counts
    assert {cupti_counts[("thread", r)] for r in range(2)} == {1}
    assert {cupti_counts[("plain", r)] for r in range(2)} == {1}
    assert {cupti_counts[("side_stream", r)] for r in range(2)} == {1}
    assert {cupti_counts[("graph", r)] for r in range(2)} == {3}
    assert min(cupti_counts[("backward", r)] for r in range(2)) >= 4  # 11 with torch 2.11 on the H200
    print({region: [ncu_counts[(region, r)] for r in range(2)] for region in REGIONS})


def test_ncu_push_pop_counts_only_the_opening_threads_kernels() -> None:
    """The case ``ncu_nvtx_ranges="push_pop"`` is kept for: other threads' kernels stay out of the region."""
    torch = pytest.importorskip("torch")
    if not _ready("ncu"):
        pytest.skip("ncu backend not available here")
    x = torch.ones(1 << 16, device="cuda")

    def mixed() -> None:
        with nsightx.annotate("mixed"):
            x.mul_(2)  # this thread
            other = threading.Thread(target=lambda: x.add_(1))
            other.start()
            other.join()
        torch.cuda.synchronize()

    per_kind = {}
    for kind in ("start_end", "push_pop"):
        res = nsightx.analyze.kernel(backend="ncu", backend_options={"ncu_nvtx_ranges": kind}, **OPTIONS)(mixed)()
        per_kind[kind] = sorted(set(counts(res).values()))
    assert per_kind == {"start_end": [2], "push_pop": [1]}
