"""device= and parallel_devices on a real GPU (the H200 machine has one: ordinal 0)."""

from __future__ import annotations

import pytest

import nsightx

pytestmark = pytest.mark.gpu
SILENT = nsightx.VerbosityLevel.SILENT


def matmul(n: int) -> None:
    import torch

    a = torch.randn(n, n, device="cuda")
    with nsightx.annotate("mm"):
        a @ a


@pytest.mark.parametrize("backend", ["cupti", "events"])
def test_device_zero_by_ordinal_and_uuid(backend):
    from nsightx._run.device import visible

    gpu = visible()[0]
    for device in (0, gpu.uuid):
        res = nsightx.analyze.kernel(
            configs=[1024],
            runs=3,
            backend=backend,
            device=device,
            verbosity=SILENT,
            combine_kernel_metrics=lambda a, b: a + b,
        )(matmul)()
        df = res.to_dataframe()
        assert df["Device"].tolist() == [gpu.label]
        assert df["NumRuns"].tolist() == [3]


def test_missing_device_is_clear_error_before_any_run():
    ran = []
    profiled = nsightx.analyze.kernel(configs=[1024], runs=1, backend="cupti", device=64, verbosity=SILENT)(
        lambda n: ran.append(n)
    )
    with pytest.raises(nsightx.ConfigError, match="device=64 does not exist; visible CUDA devices: 0"):
        profiled()
    assert ran == []


def test_parallel_devices_on_the_one_gpu():
    res = nsightx.analyze.kernel(
        configs=[512, 1024, 2048],
        runs=3,
        backend="cupti",
        parallel_devices="all",
        verbosity=SILENT,
        combine_kernel_metrics=lambda a, b: a + b,
    )(matmul)()
    df = res.to_dataframe()
    assert df["n"].tolist() == [512, 1024, 2048]
    assert len(set(df["Device"])) == 1 and df["AvgValue"].is_monotonic_increasing
