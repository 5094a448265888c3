"""The nvml plugin on the real host backend, with NVML and the CUDA driver replaced by scripted doubles."""

from __future__ import annotations

import warnings

import pytest
from nsightx_nvml._collectors import DEVICE_COLUMNS, RUN_COLUMNS
from nsightx_nvml._lib import reason_names
from nvml_double import GPU_A, GPU_B, FakeCuda, FakeGpu, install

import nsightx
from nsightx._pluginhost.listing import describe

SILENT = nsightx.VerbosityLevel.SILENT


def profile(configs=((1,), (2,)), runs=3, **options):
    @nsightx.analyze.kernel(configs=list(configs), runs=runs, warmup=0, backend="host", verbosity=SILENT, **options)
    def f(n):
        with nsightx.annotate("a"):
            sum(range(n * 100))

    return f()


def test_device_and_run_columns_with_values(plugin_host, monkeypatch):
    install(
        monkeypatch,
        [
            FakeGpu(
                GPU_A,
                sm_mhz=[1980, 1975, 1980, 1970, 1980, 1980],
                temp_c=[41, 42, 43, 44, 45, 46],
                power_mw=[150_000, 160_000],
                reasons=[0, 1, 0, 0, 0, 0],
            )
        ],
    )
    res = profile()
    raw = res.runs_dataframe()
    for col in (*DEVICE_COLUMNS, *RUN_COLUMNS):
        assert col in raw.columns, col
    assert raw["GPUUUID"].unique().tolist() == [GPU_A]
    assert raw["GPUName"].iloc[0] == "NVIDIA H200" and raw["DriverVersion"].iloc[0] == "580.159.04"
    assert raw["PowerLimitW"].iloc[0] == 700.0 and bool(raw["ECCEnabled"].iloc[0]) is True
    assert raw["SlowdownTempC"].iloc[0] == 89
    assert raw["MeasuredSMClockMHz"].tolist() == [1980, 1975, 1980, 1970, 1980, 1980]
    assert raw["GPUTemperatureC"].tolist() == [41, 42, 43, 44, 45, 46]
    assert raw["GPUPowerW"].tolist()[:2] == [150.0, 160.0]
    assert raw["ClockEventReasons"].tolist()[:2] == ["none", "gpu_idle"]
    assert raw.columns[-1] == "n"  # parameters stay last (nsight-python's raw layout)
    assert not raw["Throttled"].any()

    df = res.to_dataframe()
    assert df["MeasuredSMClockMHz_Avg"].tolist() == pytest.approx([(1980 + 1975 + 1980) / 3, (1970 + 1980 * 2) / 3])
    assert df["GPUTemperatureC_Max"].tolist() == [43, 46]
    assert df["ClockEventReasons"].tolist() == ["gpu_idle", "none"]
    assert df["ThrottledRuns"].tolist() == [0, 0]
    # measured clocks sit right after the rated ones and the unit, before the other collector columns
    cols = list(df.columns)
    assert cols.index("MeasuredSMClockMHz_Avg") == cols.index("Unit") + 1
    assert "ComputeClock" in cols and "MemoryClock" in cols


def test_throttled_by_reason_and_by_clock_drop_unstable(plugin_host, monkeypatch):
    # config 0: run 1 reports sw_power_cap; config 1: run 2's SM clock is far under the median
    install(monkeypatch, [FakeGpu(GPU_A, sm_mhz=[1980, 1980, 1980, 1980, 1980, 1500], reasons=[0, 0x4, 0, 0, 0, 0])])
    res = profile()
    raw = res.runs_dataframe()
    per_run = raw.drop_duplicates(["Config", "Run"])["Throttled"].tolist()
    assert per_run == [False, True, False, False, False, True]
    df = res.to_dataframe()
    assert df["ThrottledRuns"].tolist() == [1, 1]
    assert df["StableMeasurement"].tolist() == [False, False]
    assert df["ClockEventReasons"].tolist() == ["sw_power_cap", "none"]


def test_runs_starting_close_together_share_one_read(plugin_host, monkeypatch):
    from nsightx_nvml import _collectors

    fake = install(monkeypatch, [FakeGpu(GPU_A, sm_mhz=[1980, 1500, 1400])])
    monkeypatch.setattr(_collectors, "RUN_READ_MAX_AGE_S", 3600.0)
    raw = profile(runs=3).runs_dataframe().drop_duplicates(["Config", "Run"])
    assert raw["MeasuredSMClockMHz"].tolist() == [1980] * 6
    assert fake.calls["nvmlDeviceGetClockInfo"] == 2  # SM and memory clock, once for all six runs


def test_idle_reads_do_not_count_as_clock_drops(plugin_host, monkeypatch):
    # a read while the GPU reports gpu_idle at a parked clock is not a throttled run
    install(monkeypatch, [FakeGpu(GPU_A, sm_mhz=[345, 1980, 1980, 1980, 1980, 1980], reasons=[1, 0, 0, 0, 0, 0])])
    assert profile().to_dataframe()["ThrottledRuns"].tolist() == [0, 0]


def test_cuda_ordinal_maps_to_nvml_by_uuid(plugin_host, monkeypatch):
    # CUDA_VISIBLE_DEVICES=1: CUDA's device 0 is NVML's device 1; the CUDA driver gives its UUID
    fake = install(
        monkeypatch,
        [FakeGpu(GPU_A, sm_mhz=1000), FakeGpu(GPU_B, sm_mhz=1755)],
        cuda=FakeCuda({0: GPU_B[4:]}, current=0),
    )
    raw = profile(runs=2).runs_dataframe()
    assert raw["GPUUUID"].unique().tolist() == [GPU_B]
    assert raw["MeasuredSMClockMHz"].unique().tolist() == [1755]
    assert fake.calls["nvmlDeviceGetHandleByUUID"] == 1  # resolved once, then cached


def test_explicit_device_in_the_context_is_read(monkeypatch):
    # the host backend refuses device=, so the GPU backends' context is built by hand here
    from nsightx_nvml._collectors import DeviceInfo, RunConditions

    from nsightx._run.collectors import CollectContext

    install(
        monkeypatch,
        [FakeGpu(GPU_A, sm_mhz=1000), FakeGpu(GPU_B, sm_mhz=1755)],
        cuda=FakeCuda({0: GPU_A[4:], 1: GPU_B[4:]}, current=0),
    )
    run = RunConditions()
    for device, uuid, clock in ((1, GPU_B, 1755), (None, GPU_A, 1000), (GPU_B, GPU_B, 1755)):
        ctx = CollectContext(scope=nsightx.CollectionScope.RUN, function="f", run=0, device=device)
        assert run.collect(ctx)["MeasuredSMClockMHz"] == clock
        assert DeviceInfo().collect(ctx)["GPUUUID"] == uuid


@pytest.mark.parametrize(
    ("visible", "expected"),
    [
        (None, GPU_A),  # no mask: ordinal 0 is NVML index 0
        ("1", GPU_B),  # index list
        ("1,0", GPU_B),
        ("GPU-bbbbbbbb", GPU_B),  # UUID prefix, as CUDA accepts
    ],
)
def test_before_cuda_is_up_visible_devices_decide(plugin_host, monkeypatch, visible, expected):
    if visible is None:
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    else:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    install(monkeypatch, [FakeGpu(GPU_A), FakeGpu(GPU_B)], cuda=FakeCuda(None))
    assert profile(runs=1).runs_dataframe()["GPUUUID"].unique().tolist() == [expected]


def test_unsupported_field_is_empty_and_not_asked_again(plugin_host, monkeypatch):
    fake = install(monkeypatch, [FakeGpu(GPU_A, unsupported={"power_mw"})])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        raw = profile(runs=3).runs_dataframe()
    assert raw["GPUPowerW"].isna().all()
    assert fake.calls["nvmlDeviceGetPowerUsage"] == 1
    assert raw["MeasuredSMClockMHz"].notna().all()


def test_no_nvml_means_no_columns_and_no_warning(plugin_host, monkeypatch):
    from nsightx_nvml import _collectors

    def missing():
        raise ImportError("No module named 'pynvml'")

    monkeypatch.setattr(_collectors, "_provider", _collectors.Provider(load=missing))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        res = profile(runs=2)
    assert not set(RUN_COLUMNS) & set(res.runs_dataframe().columns)
    df = res.to_dataframe()
    assert "ThrottledRuns" not in df.columns and "Throttled" not in res.runs_dataframe().columns
    assert "nvidia-ml-py is not installed" in describe(plugin_host)


def test_without_nvml_the_run_collector_is_not_asked_before_each_run(plugin_host, monkeypatch):
    # issue 35: on a machine without NVML the run collector cost every run ~3 us to answer "no columns"
    from nsightx_nvml import _collectors

    def missing():
        raise ImportError("No module named 'pynvml'")

    monkeypatch.setattr(_collectors, "_provider", _collectors.Provider(load=missing))
    asked = []
    collect = _collectors.RunConditions.collect
    monkeypatch.setattr(_collectors.RunConditions, "collect", lambda self, ctx: asked.append(ctx) or collect(self, ctx))
    res = profile(runs=3)
    assert asked == []
    assert not set(RUN_COLUMNS) & set(res.runs_dataframe().columns)
    assert _collectors.RunConditions().start(once_context()) is False


def test_with_nvml_the_run_collector_says_it_has_something_to_say(monkeypatch):
    from nsightx_nvml._collectors import RunConditions

    install(monkeypatch, [FakeGpu(GPU_A)])
    run = RunConditions()
    try:
        assert run.start(once_context()) is True
    finally:
        run.stop()


def once_context():
    from nsightx.ext import CollectContext

    return CollectContext(scope=nsightx.CollectionScope.ONCE, function="f")


def test_driver_not_loaded_is_reported_by_plugins_listing(plugin_host, monkeypatch):
    install(monkeypatch, [FakeGpu(GPU_A)], driver_loaded=False)
    text = describe(plugin_host)
    assert "nvml" in text and "NVML could not start" in text
    assert "MeasuredSMClockMHz" in text  # the listing says which columns the set adds


def test_blocking_the_plugin_removes_its_columns(monkeypatch):
    from nsightx._pluginhost import plugins as _plugins

    install(monkeypatch, [FakeGpu(GPU_A)])
    host = _plugins.PluginHost(_plugins.LoaderSettings(blocked=("nvml",))).load()
    monkeypatch.setattr(_plugins, "_default", host)
    assert "MeasuredSMClockMHz" not in profile(runs=1).runs_dataframe().columns


def test_reason_names():
    assert reason_names(0) == "none"
    assert reason_names(0x1) == "gpu_idle"
    assert reason_names(0x4 | 0x40) == "sw_power_cap|hw_thermal_slowdown"
    assert reason_names(0x1000) == "bit_0x1000"


def test_round_trip_keeps_measured_conditions(plugin_host, monkeypatch, tmp_path):
    install(monkeypatch, [FakeGpu(GPU_A, reasons=[0, 0x8, 0, 0])])
    res = profile(runs=2)
    path = res.save(tmp_path / "r.json")
    again = nsightx.load(path).to_dataframe()
    assert again["ThrottledRuns"].tolist() == res.to_dataframe()["ThrottledRuns"].tolist() == [1, 0]


def test_unmatched_device_gives_empty_columns_and_one_warning(plugin_host, monkeypatch):
    from nsightx_nvml import _collectors

    monkeypatch.setattr(_collectors, "_warned", set())
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")  # NVML sees one GPU; CUDA would see NVML's index 3
    install(monkeypatch, [FakeGpu(GPU_A)], cuda=FakeCuda(None))
    with pytest.warns(RuntimeWarning, match="cannot tell which GPU") as caught:
        raw = profile(runs=2).runs_dataframe()
    assert len([w for w in caught if "cannot tell" in str(w.message)]) == 1
    assert raw["MeasuredSMClockMHz"].isna().all() and raw["GPUUUID"].isna().all()
