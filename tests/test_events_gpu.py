"""The events backend on a real GPU (``pytest -m gpu``; skipped without a GPU)."""

from __future__ import annotations

import operator
import statistics
from typing import Any

import pytest

import nsightx

pytestmark = pytest.mark.gpu

SILENT = nsightx.VerbosityLevel.SILENT


@pytest.fixture(scope="module")
def torch() -> Any:
    import torch

    torch.zeros(1, device="cuda")
    return torch


def test_span_covers_every_kernel_of_the_region(plugin_host: Any, torch: Any) -> None:
    a = torch.randn(512, 512, device="cuda")

    def make(backend: str) -> Any:
        @nsightx.analyze.kernel(runs=10, backend=backend, combine_kernel_metrics=operator.add, verbosity=SILENT)
        def mm() -> None:
            with nsightx.annotate("mm"):
                a @ a  # split-K: two kernels

        return mm

    events = make("events")()
    cupti = make("cupti")()
    assert events.backend == "events"
    recs = events.records
    assert len(recs) == 10
    assert {(r.kernel, r.metric, r.unit) for r in recs} == {("region", "region__stream_span_duration", "ns")}
    kernel_sum = statistics.median(
        sum(r.value for r in cupti.records if r.run == i) for i in range(10))
    assert statistics.median(r.value for r in recs) >= kernel_sum
    assert events.environment["GPU"]


def test_events_cache_none_and_all(plugin_host: Any, torch: Any) -> None:
    x = torch.randn(1 << 20, device="cuda")
    for cache in ("none", "all"):
        @nsightx.analyze.kernel(runs=3, backend="events", cache_control=cache, verbosity=SILENT)
        def scale() -> None:
            with nsightx.annotate("scale"):
                x.mul_(1.0)

        res = scale()
        assert all(r.value > 0 for r in res.records)
        assert (res.environment["FlushBytes"] > 0) == (cache == "all")
