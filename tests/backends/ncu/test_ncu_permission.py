"""ncu without the right to read performance counters (ERR_NVGPUCTRPERM), printed by the fake ncu (CPU only).

On the H200 we run as root, so the condition is produced at the ncu-binary boundary: the fake prints the line the
real ncu prints. The "auto" fallback is checked with a small in-process GPU-timing backend registered like a
third-party plugin (it stands in for CUPTI, which needs a GPU); the choice and the retry are the real code.
"""

from __future__ import annotations

import contextlib
import time

import ncu_fake
import pytest
from ncu_fake import make_plan
from nsightx_ncu._backend import NcuBackend

import nsightx
from nsightx._results.records import Record
from nsightx._results.sink import RunSink
from nsightx._run.backend import Availability, Backend, Capabilities, RunOutput, Session

pytest.importorskip("cloudpickle")
pytest.importorskip("nvtx")

PERM = (
    "==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU Performance Counters "
    "on the target device 0. For instructions on enabling permissions and to get more information see "
    "https://developer.nvidia.com/ERR_NVGPUCTRPERM"
)


@pytest.fixture(autouse=True)
def fake_ncu(monkeypatch, tmp_path):
    ncu_fake.use_fake_ncu(monkeypatch, tmp_path)
    monkeypatch.setenv("FAKE_NCU_SAY", PERM)


def test_permission_error_says_so_plainly_with_the_fix_and_stops_ncu_at_once():
    def slow(n):
        time.sleep(20)

    sink = RunSink()
    start = time.monotonic()
    with pytest.raises(nsightx.CounterPermissionError) as info:
        NcuBackend().execute(make_plan(slow), sink)
    assert time.monotonic() - start < 15  # killed when ncu said so, not after the sweep
    text = str(info.value)
    assert "ERR_NVGPUCTRPERM" in text and "only administrators" in text
    assert "NVreg_RestrictProfilingToAdminUsers=0" in text and "backend='cupti'" in text
    assert isinstance(info.value, nsightx.MeasurementError) and info.value.backend == "ncu"
    assert sink.runs == []


class GpuTimerSession(Session):
    def __init__(self) -> None:
        self.records: list[Record] = []
        self.start = 0

    def region_enter(self, region):
        self.start = time.perf_counter_ns()

    def region_exit(self, region, failed):
        self.records.append(
            Record(
                annotation=region.annotation,
                config=region.config,
                run=region.run,
                kernel="k",
                metric="gpu__time_duration.sum",
                value=float(time.perf_counter_ns() - self.start),
                unit="ns",
            )
        )

    def finish_run(self, config, run):
        out, self.records = self.records, []
        return RunOutput(records=out)


class GpuTimer(Backend):
    name = "gputimer"
    capabilities = Capabilities(
        metrics=frozenset({"gpu__time_duration.sum"}),
        default_metrics=("gpu__time_duration.sum",),
        cost=5,
        auto=True,  # stands in for cupti/events, which take part in "auto"
    )

    @classmethod
    def availability(cls):
        return Availability(available=True, reason="test stand-in for an in-process GPU timer")

    @contextlib.contextmanager
    def session(self, plan):
        yield GpuTimerSession()


class TimerPlugin:
    @nsightx.hookimpl
    def nsightx_register_backends(self, register):
        register(GpuTimer)


def test_auto_with_only_a_time_metric_falls_back_with_a_warning(plugin_host):
    plugin_host.register(TimerPlugin(), name="gputimer")

    # clock_control="base" is what only ncu accepts, so "auto" picks ncu first
    @nsightx.analyze.kernel(
        configs=[(1,)], runs=2, clock_control="base", verbosity=0, thermal_mode="off", info_collectors=[]
    )
    def scale(n):
        with nsightx.annotate("scale"):
            pass

    with pytest.warns(
        RuntimeWarning,
        match=r"ncu may not read .* measured with gputimer instead "
        r"\(clock_control='base' not honoured there\)",
    ):
        res = scale()
    assert res.environment.get("ncu_report") is None
    df = res.to_dataframe()
    assert df["NumRuns"].tolist() == [2] and df["Metric"].tolist() == ["gpu__time_duration.sum"]


def test_no_fallback_for_a_named_backend_or_a_counter_metric(plugin_host):
    plugin_host.register(TimerPlugin(), name="gputimer")

    def scale(n):
        with nsightx.annotate("scale"):
            pass

    for options in ({"backend": "ncu"}, {"metrics": ["sm__throughput.avg.pct_of_peak_sustained_elapsed"]}):
        profiled = nsightx.analyze.kernel(
            configs=[(1,)], runs=1, clock_control="base", verbosity=0, thermal_mode="off", info_collectors=[], **options
        )(scale)
        with pytest.raises(nsightx.CounterPermissionError):
            profiled()
