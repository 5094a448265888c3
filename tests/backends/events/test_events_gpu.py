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

    # The two backends cannot time one call together, so they alternate three times: the GPU's clocks move
    # between calls (one pair, events then cupti, read 24.9 us against 26.8 us on the H200).
    spans, sums = [], []
    for _ in range(3):
        events = make("events")()
        cupti = make("cupti")()
        assert events.backend == "events"
        recs = events.records
        assert len(recs) == 10
        assert {(r.kernel, r.metric, r.unit) for r in recs} == {("region", "region__stream_span_duration", "ns")}
        spans.append(statistics.median(r.value for r in recs))
        sums.append(statistics.median(sum(r.value for r in cupti.records if r.run == i) for i in range(10)))
    # Both kernels are inside the span; 5% is left for the clock drift between calls that remains after
    # alternating.
    assert statistics.median(spans) >= 0.95 * statistics.median(sums), (spans, sums)
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


def test_batched_reads_give_every_run_its_own_span(plugin_host: Any, torch: Any) -> None:
    # deferred (default) and per-run reading measure the same spans: one record per (config, run), none lost
    # n = 2048 (~340 us a matmul): a span of one launch also holds the host's launch latency (up to ~50 us on the
    # H200 when the GPU is idle), which made four spans read only 2.0x one at n = 1024
    a = torch.randn(2048, 2048, device="cuda")
    results = {}
    for collect in ("batch", "run"):
        # no L2 flush: with one, the first matmul of a run reads cold inputs and four span ~2.3x one (H200)
        @nsightx.analyze.kernel(
            configs=[(1,), (4,)],
            runs=7,
            backend="events",
            verbosity=SILENT,
            cache_control="none",
            backend_options={"events_collect": collect},
        )
        def mm(k: int) -> None:
            with nsightx.annotate("mm"):
                for _ in range(k):
                    a @ a

        results[collect] = res = mm()
        assert res.environment["EventsCollect"] == collect
        assert sorted((r.config, r.run) for r in res.records) == [(c, r) for c in (0, 1) for r in range(7)]
    for cfg in (0, 1):
        batch = statistics.median(r.value for r in results["batch"].records if r.config == cfg)
        per_run = statistics.median(r.value for r in results["run"].records if r.config == cfg)
        assert 0.5 < batch / per_run < 1.5, (cfg, batch, per_run)
    four = statistics.median(r.value for r in results["batch"].records if r.config == 1)
    one = statistics.median(r.value for r in results["batch"].records if r.config == 0)
    assert 2.5 < four / one < 5.5  # four matmuls span about four times one


def test_a_failed_region_has_no_record_but_its_run_is_kept(plugin_host: Any, torch: Any) -> None:
    x = torch.randn(1 << 16, device="cuda")

    @nsightx.analyze.kernel(runs=4, backend="events", verbosity=SILENT)
    def flaky() -> None:
        with nsightx.annotate("ok"):
            x.mul_(1.0)
        with nsightx.annotate("bad", ignore_failures=True):
            x.mul_(1.0)
            raise RuntimeError("boom")

    with pytest.warns(RuntimeWarning, match="boom"):
        res = flaky()
    assert sorted({r.annotation for r in res.records}) == ["ok"] and len(res.records) == 4
    spans = [reg.attributes["span_ns"] for run in res.data.runs for reg in run.regions if reg.annotation == "bad"]
    assert len(spans) == 4 and all(s > 0 for s in spans)
