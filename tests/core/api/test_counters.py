"""``@analyze.kernel(counters=[...])``: a time call and a counter call joined into one result (CPU only).

The counter call is the real ncu backend with the fake ncu binary (``tests/ncu_fake.py``), which runs the real
worker and hands back a report captured on the H200 (``multi_pass.ncu-rep``: one CuPy kernel per region, configs 0
and 1, runs 0 and 1). The time side is a small in-process timer registered like a third-party backend: it stands in
for CUPTI (which needs a GPU) and names the region's kernel as CUPTI would. The choice of backends, both calls,
the join and the DataFrame are the real code.
"""

from __future__ import annotations

import contextlib
import time

import ncu_fake
import pytest

import nsightx
from nsightx import ConfigError
from nsightx._results.join import JoinError
from nsightx._results.records import Record
from nsightx._run.backend import Availability, Backend, Capabilities, RunOutput, Session

pytest.importorskip("cloudpickle")
pytest.importorskip("nvtx")
pytest.importorskip("ncu_report", reason="needs the ncu-report package (test dependency group)")

TIME = "gpu__time_duration.sum"
COUNTERS = ["dram__bytes_read.sum", "l1tex__t_bytes.sum"]
KERNEL = "cupy_multiply__float32_float_float32"


class KernelTimerSession(Session):
    kernel = KERNEL

    def __init__(self) -> None:
        self.records: list[Record] = []
        self.start = 0

    def region_enter(self, region):
        self.start = time.perf_counter_ns()

    def region_exit(self, region, failed):
        value = float(time.perf_counter_ns() - self.start)
        self.records.append(
            Record(
                annotation=region.annotation,
                config=region.config,
                run=region.run,
                kernel=self.kernel,
                metric=TIME,
                value=value,
                unit="ns",
            )
        )

    def finish_run(self, config, run):
        out, self.records = self.records, []
        return RunOutput(records=out)


class KernelTimer(Backend):
    name = "kerneltimer"
    capabilities = Capabilities(metrics=frozenset({TIME}), default_metrics=(TIME,), cost=5, auto=True)
    session_type: type[KernelTimerSession] = KernelTimerSession

    @classmethod
    def availability(cls):
        return Availability(available=True, reason="test stand-in for CUPTI")

    @contextlib.contextmanager
    def session(self, plan):
        yield self.session_type()


class OtherKernelSession(KernelTimerSession):
    kernel = "some_other_kernel"


class OtherTimer(KernelTimer):
    name = "othertimer"
    session_type = OtherKernelSession


class TimerPlugin:
    @nsightx.hookimpl
    def nsightx_register_backends(self, register):
        register(KernelTimer)
        register(OtherTimer)


@pytest.fixture
def backends(plugin_host, monkeypatch, tmp_path):
    ncu_fake.use_fake_ncu(monkeypatch, tmp_path)
    monkeypatch.setenv("FAKE_NCU_REPORT", str(ncu_fake.FIXTURES / "multi_pass.ncu-rep"))
    plugin_host.register(TimerPlugin(), name="timers")
    return plugin_host


def scale(n):
    with nsightx.annotate("scale"):
        pass


def profiled(backend="kerneltimer", **options):
    options = {
        "configs": [(1,), (2,)],
        "runs": 4,
        "counters": COUNTERS,
        "verbosity": 0,
        "thermal_mode": "off",
        "info_collectors": [],
        "clock_control": "none",
        **options,
    }
    return nsightx.analyze.kernel(backend=backend, **options)(scale)


def test_counters_option_joins_times_and_ncu_counters_in_one_frame(backends):
    res = profiled()()
    assert res.backend == "kerneltimer+ncu"
    df = res.to_dataframe()
    tools = dict(zip(df["Metric"], df["Tool"], strict=False))
    assert tools == {TIME: "kerneltimer", COUNTERS[0]: "ncu", COUNTERS[1]: "ncu"}
    runs = df.groupby("Metric")["NumRuns"].first().to_dict()
    assert runs == {TIME: 4, COUNTERS[0]: 2, COUNTERS[1]: 2}  # times over runs, counters over counter_runs
    l1 = df[df["Metric"] == COUNTERS[1]].set_index("n")["AvgValue"].to_dict()
    assert l1 == {1: 8192.0, 2: 32768.0}  # what ncu measured on the H200, on the kernel of each config
    assert set(df["Kernel"]) == {KERNEL}
    assert "ncu_report" in res.environment and "SerializesKernels" not in res.environment


def test_counter_runs_are_capped_by_runs(backends):
    df = profiled(runs=1, counter_runs=2)().to_dataframe()
    assert df.groupby("Metric")["NumRuns"].first().to_dict() == {TIME: 1, COUNTERS[0]: 1, COUNTERS[1]: 1}


def test_other_kernels_on_the_two_sides_is_a_join_error(backends):
    with pytest.raises(
        JoinError,
        match=r"'scale' of config 0: the kernel names differ.*some_other_kernel.*"
        r"cupy_multiply",
    ):
        profiled(backend="othertimer")()


def test_counters_option_is_checked_at_decoration():
    with pytest.raises(nsightx.ConfigTypeError, match=r"counters=\['dram__bytes.sum'\]"):
        nsightx.analyze.kernel(counters="dram__bytes.sum")
    with pytest.raises(ConfigError, match="counter_runs"):
        nsightx.analyze.kernel(counters=COUNTERS, counter_runs=0)
    with pytest.raises(ConfigError, match="counters= cannot be combined with derive_metric"):
        nsightx.analyze.kernel(counters=COUNTERS, derive_metric=lambda t, n: t)


def test_counters_option_builds_one_result_from_two_sets_of_runs(backends, tmp_path):
    """Issue 39: no result is built for either side; the one result says which backend measured each metric."""
    out = tmp_path / "out"
    res = profiled(output_prefix=f"{out}/")()
    assert res.data.plan.metric_backends == {TIME: "kerneltimer", COUNTERS[0]: "ncu", COUNTERS[1]: "ncu"}
    assert "MetricSources" not in res.environment
    files = sorted(p.name for p in out.iterdir() if p.name.startswith(("raw_data-", "result-")))
    # each side's raw file, written as it measured; one result file: the joined one, with the time side's tag
    assert files == ["raw_data-scale-0.jsonl", "raw_data-scale-1.jsonl", "result-scale-0.parquet"]
    loaded = nsightx.load(out / "result-scale-0.parquet")
    assert loaded.to_dataframe()["Tool"].tolist() == res.to_dataframe()["Tool"].tolist()
    assert loaded.data.plan.metric_backends == res.data.plan.metric_backends
