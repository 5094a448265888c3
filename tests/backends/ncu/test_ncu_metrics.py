"""Metric names are checked against the installed ncu before anything runs (fake ncu; one GPU test).

The fake ncu answers ``--query-metrics`` from ``fixtures/ncu/query_metrics.txt`` (names from the committed H200
reports, in ncu's table shape); a fake ``nvidia-smi`` names the GPU, which keys the cache.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import _paths
import pytest
from nsightx_ncu import _backend, _metrics
from nsightx_ncu._backend import NcuBackend

import nsightx
from nsightx._run.plan import Plan

pytest.importorskip("cloudpickle")
pytest.importorskip("nvtx")

FIXTURES = _paths.FIXTURES / "ncu"
LISTING = (FIXTURES / "query_metrics.txt").read_text()
THEIR = "Invalid value {} for 'metrics' parameter for nsight.analyze.kernel()"


@pytest.fixture
def fake_tools(monkeypatch, tmp_path):
    """A fake ncu and nvidia-smi on PATH; returns the file each metric query is logged to."""
    bin_dir = tmp_path / "fake-bin"
    bin_dir.mkdir()
    ncu = bin_dir / "ncu"
    ncu.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{FIXTURES / "fake_ncu.py"}" "$@"\n')
    smi = bin_dir / "nvidia-smi"
    smi.write_text(
        f'#!/bin/sh\necho smi >> "{tmp_path / "smi.log"}"\n'
        'echo "0, GPU-5c9d1e2a-0000-0000-0000-000000000000, ${FAKE_GPU:-NVIDIA H200}"\n'
    )
    for tool in (ncu, smi):
        tool.chmod(0o755)
    monkeypatch.setenv("PATH", str(bin_dir))
    monkeypatch.delenv("NSIGHTX_NCU", raising=False)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setattr(_backend._locate, "STANDARD_GLOBS", ())
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    log = tmp_path / "queries.log"
    monkeypatch.setenv("FAKE_NCU_QUERY_LOG", str(log))
    for var in ("FAKE_NCU_EXIT", "FAKE_NCU_SAY", "FAKE_NCU_REPORT", "FAKE_GPU"):
        monkeypatch.delenv(var, raising=False)
    _metrics.forget()
    yield log
    _metrics.forget()


def queries(log: Path) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []


def plan_with(metrics, **kw) -> Plan:
    return Plan(
        function=lambda: None,
        function_name="f",
        params=(),
        configs=((),),
        runs=1,
        warmup=0,
        metrics=tuple(metrics),
        backend="ncu",
        **kw,
    )


def test_listing_is_parsed_and_suffix_rules_apply():
    known = _metrics.parse_listing(LISTING)
    assert "gpu__time_duration.sum" in known.names and "Metric" not in str(sorted(known.names)[:3])
    assert all("__" in n for n in known.names)
    assert known.knows("gpu__time_duration.sum")
    assert known.knows("dram__bytes_read.sum.per_second")  # listed base name, listed suffix parts
    assert not known.knows("gpu__time_duration.summ")
    assert not known.knows("gpu__time_duraton.sum")
    assert known.knows("launch__grid_size") and known.knows("device__attribute_display_name")  # not listed by ncu
    assert known.knows("breakdown:sm__throughput.avg.pct_of_peak_sustained_elapsed")
    assert known.near("gpu__time_duraton.sum")[0] == "gpu__time_duration.sum"


def test_unknown_metrics_are_named_with_near_matches_before_anything_runs(fake_tools, tmp_path):
    out = tmp_path / "out"
    bad = ["gpu__time_duraton.sum", "nsightx__no_such.sum"]

    @nsightx.analyze.kernel(
        backend="ncu",
        runs=1,
        metrics=["dram__bytes_read.sum", *bad],
        output_prefix=f"{out}/",
        clock_control="none",
        thermal_mode="off",
        info_collectors=[],
        verbosity=0,
    )
    def f():
        with nsightx.annotate("a"):
            Path(out / "ran").write_text("the function ran")

    with pytest.raises(nsightx.ConfigError, match=re.escape(THEIR.format(bad))) as info:
        f()
    error = info.value
    assert isinstance(error, nsightx.UnknownMetricError) and isinstance(error, ValueError)
    assert str(error).startswith(THEIR.format(bad))
    assert error.metrics == tuple(bad)
    assert error.suggestions["gpu__time_duraton.sum"][0] == "gpu__time_duration.sum"
    assert "did you mean 'gpu__time_duration.sum'" in str(error) and "NVIDIA H200" in str(error)
    assert "ncu_check_metrics" in str(error)
    assert error.error_type is nsightx.exceptions.MetricErrorType.INVALID
    assert [p.name for p in out.iterdir()] == []  # nothing measured, no report, no log
    assert queries(fake_tools) == ["--query-metrics --query-metrics-mode all --devices 0"]


def test_ncu_is_asked_once_per_version_and_gpu(fake_tools, tmp_path, monkeypatch):
    plan = plan_with(["dram__bytes_read.sum", "sm__throughput.avg.pct_of_peak_sustained_elapsed"])
    for _ in range(3):
        NcuBackend().validate(plan)
    assert len(queries(fake_tools)) == 1
    cached = tmp_path / "cache" / "nsightx" / "ncu-metrics" / "2025.3.1.0--NVIDIA_H200.txt"
    assert "gpu__time_duration.sum" in cached.read_text().splitlines()
    assert len((tmp_path / "smi.log").read_text().splitlines()) == 1  # the GPU's name asked once per process
    monkeypatch.setenv("FAKE_GPU", "NVIDIA H100 80GB HBM3")  # another GPU (in a new process): asked again
    _metrics.forget()
    NcuBackend().validate(plan)
    assert len(queries(fake_tools)) == 2
    assert (cached.parent / "2025.3.1.0--NVIDIA_H100_80GB_HBM3.txt").is_file()


def test_a_cached_listing_is_parsed_once_per_process_and_again_when_replaced(fake_tools, tmp_path):
    plan = plan_with(["dram__bytes_read.sum"])
    NcuBackend().validate(plan)
    cached = tmp_path / "cache" / "nsightx" / "ncu-metrics" / "2025.3.1.0--NVIDIA_H200.txt"
    first = _metrics.load_known("ncu", "2025.3.1.0", 0)[0]
    assert _metrics.load_known("ncu", "2025.3.1.0", 0)[0] is first  # the same parsed object: not read again
    cached.write_text(cached.read_text() + "nsightx__planted.sum\n")  # changed on disk: read again
    again = _metrics.load_known("ncu", "2025.3.1.0", 0)[0]
    assert again is not None and again is not first and "nsightx__planted.sum" in again.names


def test_no_query_for_the_default_metric_or_when_switched_off(fake_tools):
    NcuBackend().validate(plan_with(["gpu__time_duration.sum"]))
    NcuBackend().validate(plan_with(["nsightx__no_such.sum"], backend_options={"ncu_check_metrics": False}))
    assert queries(fake_tools) == []


def test_a_failing_query_refuses_nothing(fake_tools, monkeypatch):
    monkeypatch.setenv("FAKE_NCU_EXIT", "1")
    NcuBackend().validate(plan_with(["nsightx__no_such.sum"]))  # ncu's own checks apply later
    assert len(queries(fake_tools)) == 1


CACHED = ("cache", "nsightx", "ncu-metrics", "2025.3.1.0--NVIDIA_H200.txt")
"""The cache file of the fake ncu's version and the fake GPU, under ``tmp_path``."""


def planted_listing(ncu_version: str = "2025.3.1.0") -> str:
    """A cache file in this format that also lists a name ncu does not know."""
    names = sorted(_metrics.parse_listing(LISTING).names | {"nsightx__planted.sum"})
    return "\n".join([f"# nsightx ncu metric list v1; ncu {ncu_version}; gpu NVIDIA H200", *names]) + "\n"


def test_a_cached_listing_reached_through_a_symlink_is_not_trusted(fake_tools, tmp_path):
    """A link at the cache file's name (to a list someone else wrote) is never followed: ncu is asked again."""
    cached = tmp_path.joinpath(*CACHED)
    cached.parent.mkdir(parents=True)
    planted = tmp_path / "planted.txt"
    planted.write_text(planted_listing())
    cached.symlink_to(planted)
    with pytest.raises(nsightx.UnknownMetricError, match=re.escape("nsightx__planted.sum")):
        NcuBackend().validate(plan_with(["nsightx__planted.sum"]))
    assert len(queries(fake_tools)) == 1
    assert not cached.is_symlink() and "nsightx__planted.sum" not in cached.read_text()  # replaced, not written through
    assert planted.read_text() == planted_listing()


def test_a_cached_listing_of_another_ncu_version_is_asked_again(fake_tools, tmp_path):
    cached = tmp_path.joinpath(*CACHED)
    cached.parent.mkdir(parents=True)
    cached.write_text(planted_listing(ncu_version="2024.1.0.0"))
    with pytest.raises(nsightx.UnknownMetricError, match=re.escape("nsightx__planted.sum")):
        NcuBackend().validate(plan_with(["nsightx__planted.sum"]))
    assert len(queries(fake_tools)) == 1
    assert cached.read_text().splitlines()[0] == "# nsightx ncu metric list v1; ncu 2025.3.1.0; gpu NVIDIA H200"
    NcuBackend().validate(plan_with(["dram__bytes_read.sum"]))  # the rewritten file is trusted: not asked again
    assert len(queries(fake_tools)) == 1


@pytest.mark.gpu
def test_real_ncu_knows_the_metrics_the_gpu_tests_use_and_refuses_a_typo():
    """On the H200: the real listing accepts every metric the other ncu GPU tests collect."""
    if not NcuBackend.availability().available:
        pytest.skip("ncu backend not available here")
    good = [
        "gpu__time_duration.sum",
        "sm__throughput.avg.pct_of_peak_sustained_elapsed",
        "dram__bytes_read.sum",
        "gpc__cycles_elapsed.avg.per_second",
        "l1tex__t_bytes.sum",
        "launch__grid_size",
        "dram__bytes_read.sum.per_second",
    ]
    NcuBackend().validate(plan_with(good))
    with pytest.raises(nsightx.UnknownMetricError, match=re.escape(THEIR.format(["gpu__time_duraton.sum"]))):
        NcuBackend().validate(plan_with(["gpu__time_duraton.sum"]))
