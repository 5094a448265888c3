"""The nvml plugin against the real NVML of a real GPU (skipped where torch sees no CUDA device)."""

from __future__ import annotations

import pytest
from nsightx_nvml import _sampler

import nsightx

pytestmark = pytest.mark.gpu


@pytest.fixture
def cuda():
    torch = pytest.importorskip("torch")
    torch.zeros(1, device="cuda")  # bring CUDA up: the device map then matches by UUID
    return torch


def test_real_conditions_of_the_profiled_device(plugin_host, cuda):
    @nsightx.analyze.kernel(
        configs=[(2048,)], runs=5, backend="host", verbosity=nsightx.VerbosityLevel.SILENT, thermal_mode="off"
    )
    def mm(n):
        a = cuda.randn(n, n, device="cuda", dtype=cuda.float16)
        cuda.cuda.synchronize()
        with nsightx.annotate("mm"):
            a @ a
            cuda.cuda.synchronize()

    raw = mm().runs_dataframe()
    props = cuda.cuda.get_device_properties(cuda.cuda.current_device())
    assert raw["GPUUUID"].iloc[0] == "GPU-" + str(props.uuid).removeprefix("GPU-")
    assert raw["GPUName"].iloc[0] == props.name
    assert (raw["MeasuredSMClockMHz"] > 100).all() and (raw["MeasuredMemClockMHz"] > 100).all()
    assert raw["GPUTemperatureC"].between(5, 110).all() and (raw["GPUPowerW"] > 0).all()
    assert raw["ClockEventReasons"].map(lambda s: isinstance(s, str) and len(s) > 0).all()
    assert 50 <= raw["SlowdownTempC"].iloc[0] <= 120


def test_device_map_took_the_uuid_path(cuda):
    from nsightx_nvml._collectors import provider

    devices = provider().devices()
    assert devices is not None, provider().error
    assert devices.resolve(None).how == "uuid"


def test_thermal_source_reads_real_headroom(cuda):
    from nsightx_nvml._collectors import NvmlTemperatureSource

    reading = NvmlTemperatureSource(None).read()
    assert 0 < reading.headroom_c < 100 and reading.device == f"CUDA device {cuda.cuda.current_device()}"


def test_sampler_feeds_a_cupti_call_and_stops_with_it(plugin_host, cuda):
    import threading

    a = cuda.randn(2048, 2048, device="cuda")

    @nsightx.analyze.kernel(runs=20, backend="cupti", verbosity=nsightx.VerbosityLevel.SILENT)
    def mm():
        with nsightx.annotate("mm"):
            a @ a

    raw = mm().runs_dataframe().drop_duplicates(["Config", "Run"])
    assert not [t for t in threading.enumerate() if t.name == "nsightx-nvml-sampler"]  # no thread: a process
    parked = list(_sampler._parked.values())
    assert len(parked) == 1 and parked[0].running and parked[0].samples > 0, parked  # sampled, then parked
    assert parked[0].failed is None and parked[0].error is None
    assert (raw["MeasuredSMClockMHz"] > 100).all() and raw["GPUTemperatureC"].between(5, 110).all()
    ages = raw["NvmlSampleAgeMs"]
    assert (ages >= 0).all() and ages.max() < 100, ages.tolist()  # a few ms old, never from an earlier call
