"""Flags, the time/counter join and reconcile on a real GPU (``pytest -m gpu``; skipped without one).

The clocks are never changed (``clock_control="none"`` everywhere).
"""

from __future__ import annotations

import operator
from typing import Any

import pytest

import nsightx
from nsightx._results.flags import parse_cell

pytestmark = pytest.mark.gpu

SILENT = nsightx.VerbosityLevel.SILENT


@pytest.fixture(scope="module")
def torch() -> Any:
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.zeros(1, device="cuda")
    return torch


def test_16kib_vector_add_is_short_and_launch_bound_and_warm_without_flush(plugin_host: Any, torch: Any) -> None:
    def add(n: int) -> None:
        x = torch.randn(n, device="cuda")
        y = torch.randn(n, device="cuda")
        with nsightx.annotate("add"):
            x + y

    for cache, expected in (("all", {"short", "launch_bound"}), ("none", {"short", "launch_bound", "warm"})):
        res = nsightx.analyze.kernel(
            configs=[(4096,)], runs=20, backend="cupti", cache_control=cache, verbosity=SILENT
        )(add)()
        (flags,) = [parse_cell(c) for c in res.to_dataframe()["Flags"]]
        assert expected <= flags, (cache, flags)


def test_fp32_matmul_4096_has_no_flag(plugin_host: Any, torch: Any) -> None:
    def mm(n: int) -> None:
        a = torch.randn(n, n, device="cuda")
        b = torch.randn(n, n, device="cuda")
        with nsightx.annotate("mm"):
            a @ b

    res = nsightx.analyze.kernel(
        configs=[(4096,)], runs=20, backend="cupti", combine_kernel_metrics=operator.add, verbosity=SILENT
    )(mm)()
    assert res.to_dataframe()["Flags"].tolist() == [""]


def test_counters_join_cupti_times_to_ncu_counters_and_reconcile(plugin_host: Any, torch: Any) -> None:
    def mm(n: int) -> None:
        a = torch.randn(n, n, device="cuda")
        b = torch.randn(n, n, device="cuda")
        with nsightx.annotate("mm"):
            a @ b

    res = nsightx.analyze.kernel(
        configs=[(512,), (2048,)],
        runs=10,
        backend="cupti",
        counters=list(nsightx.ROOFLINE_METRICS),
        counter_runs=2,
        clock_control="none",
        combine_kernel_metrics=operator.add,
        verbosity=SILENT,
    )(mm)()
    df = res.to_dataframe()
    tools = dict(zip(df["Metric"], df["Tool"], strict=False))
    assert tools["gpu__time_duration.sum"] == "cupti" and tools["dram__bytes.sum"] == "ncu"
    roof = res.roofline()
    big = roof[roof["n"] == 2048]
    assert 0.8 < big["FLOP"].sum() / (2 * 2048**3) < 1.2  # fp32 FFMA counted: 2 n^3
    assert (big["RoofFraction"] > 0).all() and (big["RoofFraction"] <= 1.05).all()
    under_ncu = nsightx.analyze.kernel(
        configs=[(512,)],
        runs=2,
        backend="ncu",
        clock_control="none",
        combine_kernel_metrics=operator.add,
        verbosity=SILENT,
    )(mm)()
    times = nsightx.analyze.kernel(
        configs=[(512,)], runs=10, backend="cupti", combine_kernel_metrics=operator.add, verbosity=SILENT
    )(mm)()
    (row,) = nsightx.reconcile(times, under_ncu, threshold_pct=0.0).to_dict("records")
    assert row["KernelsA"] == row["KernelsB"]
    if row["KernelsA"] > 1:  # split-K at n=512 on the H200
        assert "serialized" in row["Causes"]
