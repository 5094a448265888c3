"""Device selection: ordinals and UUIDs, CUDA_VISIBLE_DEVICES, clear errors."""

from __future__ import annotations

import pytest

import nsightx
from nsightx import ConfigError
from nsightx._run.device import resolve, visible

GPUS = [
    (0, "GPU-aaaa1111-0000", "NVIDIA H200"),
    (1, "GPU-bbbb2222-0000", "NVIDIA H200"),
    (2, "GPU-cccc3333-0000", "NVIDIA H200"),
]


@pytest.mark.parametrize(
    ("mask", "expected"),
    [
        (None, ["GPU-aaaa1111-0000", "GPU-bbbb2222-0000", "GPU-cccc3333-0000"]),
        ("2,0", ["GPU-cccc3333-0000", "GPU-aaaa1111-0000"]),
        ("GPU-bbbb", ["GPU-bbbb2222-0000"]),
        ("cccc3333", ["GPU-cccc3333-0000"]),
        ("1,7,2", ["GPU-bbbb2222-0000"]),  # CUDA stops at the first entry it cannot match
        ("", []),
    ],
)
def test_visible_honours_cuda_visible_devices(mask, expected, monkeypatch):
    if mask is None:
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
        got = visible(gpus=GPUS)
    else:
        got = visible(mask, gpus=GPUS)
    assert [g.uuid for g in got] == expected
    assert [g.ordinal for g in got] == list(range(len(expected)))


def test_resolve_by_ordinal_and_uuid():
    devices = visible("2,0", gpus=GPUS)
    assert resolve(0, devices).index == 2
    assert resolve("GPU-aaaa", devices).ordinal == 1
    assert resolve("aaaa1111", devices).label == "1:GPU-aaaa1111-0000"


@pytest.mark.parametrize(
    ("device", "message"),
    [
        (5, "device=5 does not exist; visible CUDA devices: 0 \\(GPU-cccc3333-0000"),
        ("GPU-ffff", "matches no visible device"),
        ("GPU-", "matches several devices"),
    ],
)
def test_resolve_errors_name_visible_devices(device, message):
    with pytest.raises(ConfigError, match=message):
        resolve(device, visible("2,0", gpus=GPUS))


def test_device_with_cpu_backend_is_error_before_run(plugin_host):
    ran = []
    profiled = nsightx.analyze.kernel(configs=[(1,)], backend="host", device=0)(lambda n: ran.append(n))
    with pytest.raises(ConfigError, match=r"backend 'host' cannot run per device.*backends that can"):
        profiled()
    assert ran == []


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ([], "parallel_devices is empty"),
        ([0, 0], "lists a device twice"),
        ([-1], "not a device ordinal"),
        ("gpu0", "parallel_devices must be"),
    ],
)
def test_parallel_devices_validated_at_decoration(value, message):
    with pytest.raises(nsightx.NsightxError, match=message):
        nsightx.analyze.kernel(configs=[(1,)], parallel_devices=value)(lambda n: None)


def test_device_and_parallel_devices_together_is_error():
    with pytest.raises(ConfigError, match="not both"):
        nsightx.analyze.kernel(configs=[(1,)], device=0, parallel_devices=[0, 1])(lambda n: None)
