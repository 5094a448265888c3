"""``nsightx.measure(fn, runs=...)``: one call that measures a callable (issue 38), on the host backend and a GPU."""

from __future__ import annotations

import time

import pytest

import nsightx
from nsightx import ConfigError, ConfigTypeError
from nsightx._spec.options import ProfileSpec
from nsightx._spec.select import choose


def test_the_whole_call_is_the_region_and_a_profile_result_comes_back(plugin_host):
    calls = []

    def work():
        calls.append(1)
        time.sleep(0.002)

    result = nsightx.measure(work, runs=5, backend="host")
    assert isinstance(result, nsightx.ProfileResults)
    assert result.backend == "host" and len(calls) == 5 + 1, "5 measured runs after one warm-up"
    frame = result.to_dataframe()
    assert frame[["Annotation", "Metric", "NumRuns"]].values.tolist() == [["work", "host__time_duration.sum", 5]]
    assert frame["MinValue"].iloc[0] >= 2e6, "the region spans the whole call (a 2 ms sleep), in ns"
    assert result.data.plan.function == "work" and result.data.plan.configs == ((),)
    assert result.data.plan.combine_kernel_metrics == "add", "the kernels of one call are added up"


def test_the_backend_is_the_one_analyze_kernel_would_choose(plugin_host):
    auto = choose(ProfileSpec(), plugin_host, None).backend.name
    if auto != "host":
        pytest.skip(f"'auto' picks {auto} here; a CPU-only callable is measured on the host backend only")
    assert nsightx.measure(lambda: sum(range(100)), runs=2).backend == auto
    nsightx.activate(nsightx.Tool.HOST)
    try:
        assert nsightx.measure(lambda: sum(range(100)), runs=2).backend == "host"  # the active tool, as a decorator
    finally:
        nsightx.deactivate()


def test_runs_auto_options_and_a_name(plugin_host, tmp_path):
    result = nsightx.measure(
        lambda: sum(range(1000)), runs="auto", max_runs=8, backend="host", name="summing", output_prefix=f"{tmp_path}/"
    )
    frame = result.to_dataframe()
    assert frame["Annotation"].tolist() == ["summing"] and 5 <= frame["NumRuns"].iloc[0] <= 8
    assert (tmp_path / "result-summing-0.parquet").exists()
    assert nsightx.load(tmp_path / "result-summing-0.parquet").to_dataframe()["Annotation"].tolist() == ["summing"]


def test_a_lambda_is_named_lambda_and_nothing_is_printed(plugin_host, capsys):
    result = nsightx.measure(lambda: None, runs=2, backend="host")
    assert result.to_dataframe()["Annotation"].tolist() == ["lambda"]
    assert capsys.readouterr() == ("", "")


@pytest.mark.parametrize(
    ("fn", "options", "error", "match"),
    [
        (42, {}, ConfigTypeError, r"^measure takes a callable with no arguments, e\.g\. .*got int 42"),
        (lambda n: n, {}, ConfigError, r"measure calls lambda with no arguments, and its signature is \(n\)"),
        (lambda: None, {"configs": [1]}, ConfigError, r"takes no configs; for a sweep, decorate"),
        (lambda: None, {"parallel_devices": [0]}, ConfigError, r"takes no parallel_devices"),
        (lambda: None, {"runs": 0}, ConfigError, r"runs must be >= 1 or 'auto', got 0"),
        (lambda: None, {"name": ""}, ConfigTypeError, r"name must be a non-empty str"),
    ],
)
def test_refused_before_any_work(plugin_host, fn, options, error, match):
    with pytest.raises(error, match=match):
        nsightx.measure(fn, backend="host", **options)


@pytest.mark.gpu
def test_measure_a_matmul_on_the_gpu(plugin_host):
    """Recorded on the GPU (benchmarks/run_gpu.sh tests): the best backend there times the kernels of the call."""
    import torch

    a = torch.randn(2048, 2048, device="cuda")
    b = torch.randn(2048, 2048, device="cuda")
    result = nsightx.measure(lambda: a @ b, runs=20)
    frame = result.to_dataframe()
    assert result.backend in ("cupti", "events") and frame["NumRuns"].tolist() == [20]
    assert frame["Metric"].iloc[0] in ("gpu__time_duration.sum", "region__stream_span_duration")
    assert 1e3 < frame["AvgValue"].iloc[0] < 1e9, "a 2048 matmul takes microseconds to milliseconds (ns)"
    print(result.to_dataframe()[["Metric", "AvgValue", "CI95_Lower", "CI95_Upper", "NumRuns", "Tool"]])
