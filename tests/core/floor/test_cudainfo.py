"""The shared CUDA helpers (``nsightx.ext``): libcuda loading, attributes, the flush-size rule, nvidia-smi."""

from __future__ import annotations

import ctypes
import ctypes.util
from pathlib import Path

import pytest

from nsightx import _cudainfo
from nsightx._commands import doctor as _doctor
from nsightx._run import device as _device
from nsightx.ext import (
    DeviceAttribute,
    NvidiaSmiError,
    cuda_driver_version,
    device_attribute,
    l2_flush_bytes,
    load_libcuda,
    loaded_libcuda,
    query_gpus,
)


@pytest.fixture
def no_libcuda(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """A machine without the NVIDIA driver: every dlopen of libcuda fails. Returns the names tried."""
    tried: list[str] = []

    def refuse(name: str, *args: object, **kwargs: object) -> ctypes.CDLL:
        tried.append(name)
        raise OSError(f"{name}: cannot open shared object file: No such file or directory")

    monkeypatch.setattr(_cudainfo, "_loaded", [])
    monkeypatch.setattr(ctypes, "CDLL", refuse)
    monkeypatch.setattr(ctypes.util, "find_library", lambda name: None)
    return tried


def test_missing_libcuda_gives_none_everywhere(no_libcuda: list[str]) -> None:
    assert load_libcuda() is None
    assert loaded_libcuda() is None
    assert device_attribute(DeviceAttribute.L2_CACHE_SIZE, 0) is None
    assert cuda_driver_version() is None
    assert no_libcuda[0] == "libcuda.so.1"
    tries = len(no_libcuda)
    load_libcuda()
    assert len(no_libcuda) == tries  # the answer is kept: a machine gains no driver mid-process


def test_missing_libcuda_is_handled_by_its_users(no_libcuda: list[str]) -> None:
    from nsightx_cupti import _driver
    from nsightx_env import _probe
    from nsightx_nvml._device import LibCuda

    with pytest.raises(OSError, match=r"libcuda\.so\.1"):
        _driver.device_count()
    assert _probe.cuda_driver_version() is None
    cuda = LibCuda()
    assert cuda.current_device() is None and cuda.uuid(0) is None


class FakeLib:
    """Answers the two calls the helpers make, like a driver with one H200."""

    def __init__(self) -> None:
        self.calls: list[tuple[int, int]] = []

    def cuDeviceGetAttribute(self, out: object, attr: ctypes.c_int, device: ctypes.c_int) -> int:
        self.calls.append((attr.value, device.value))
        if attr.value != DeviceAttribute.L2_CACHE_SIZE:
            return 1  # CUDA_ERROR_INVALID_VALUE
        ctypes.cast(out, ctypes.POINTER(ctypes.c_int)).contents.value = 60 << 20
        return 0

    def cuDriverGetVersion(self, out: object) -> int:
        ctypes.cast(out, ctypes.POINTER(ctypes.c_int)).contents.value = 13000
        return 0


def test_libcuda_is_loaded_once_and_shared(monkeypatch: pytest.MonkeyPatch) -> None:
    lib = FakeLib()
    opened: list[str] = []

    def dlopen(name: str, *args: object, **kwargs: object) -> FakeLib:
        opened.append(name)
        return lib

    monkeypatch.setattr(_cudainfo, "_loaded", [])
    monkeypatch.setattr(ctypes, "CDLL", dlopen)
    assert load_libcuda() is lib and load_libcuda() is lib and loaded_libcuda() is lib
    assert opened == ["libcuda.so.1"]
    assert device_attribute(DeviceAttribute.L2_CACHE_SIZE, 3) == 60 << 20
    assert device_attribute(DeviceAttribute.CLOCK_RATE, 3) is None  # the driver refused
    assert lib.calls == [(38, 3), (13, 3)]
    assert cuda_driver_version() == "13.0"


def test_a_libcuda_found_loaded_is_kept_and_one_not_found_is_asked_again(monkeypatch: pytest.MonkeyPatch) -> None:
    lib = FakeLib()
    opened: list[str] = []
    loaded = False

    def dlopen(name: str, *args: object, **kwargs: object) -> FakeLib:
        opened.append(name)
        if not loaded:
            raise OSError(f"{name}: not loaded (RTLD_NOLOAD)")
        return lib

    monkeypatch.setattr(_cudainfo, "_loaded", [])
    monkeypatch.setattr(ctypes, "CDLL", dlopen)
    assert loaded_libcuda() is None and loaded_libcuda() is None
    assert len(opened) == 2  # not loaded yet: the user's framework may load it later, so it is asked each time
    loaded = True  # the framework loaded the driver library
    assert loaded_libcuda() is lib and loaded_libcuda() is lib and load_libcuda() is lib
    assert len(opened) == 3  # found once, then kept


def test_attribute_numbers_are_cudas() -> None:
    assert [int(a) for a in DeviceAttribute] == [13, 36, 38, 108]
    from nsightx_cupti import _driver

    assert _driver.ATTR_L2_CACHE_SIZE == 38 and _driver.ATTR_MAX_PERSISTING_L2_CACHE_SIZE == 108


@pytest.mark.parametrize(
    ("l2", "requested", "expected"),
    [
        (60 << 20, None, 120 << 20),  # twice the L2
        (60 << 20, 64 << 20, 120 << 20),  # a smaller request does not shrink it
        (60 << 20, 200 << 20, 200 << 20),  # a larger request wins
        (0, None, 1 << 20),  # unknown L2: the 1 MiB floor
        (256 << 10, 0, 1 << 20),
    ],
)
def test_flush_size_rule(l2: int, requested: int | None, expected: int) -> None:
    assert l2_flush_bytes(l2, requested) == expected


def _fake_smi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: str) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    smi = bin_dir / "nvidia-smi"
    smi.write_text(f"#!/bin/sh\n{body}\n")
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", str(bin_dir))


def test_query_gpus_without_nvidia_smi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(NvidiaSmiError, match="not on PATH") as err:
        query_gpus(("index", "name"))
    assert err.value.missing
    assert _doctor._gpu_lines() == [
        "GPU: none found (no nvidia-smi on PATH); GPU backends need an NVIDIA GPU and driver"
    ]
    with pytest.raises(_device.BackendUnavailableError, match=r"nvidia-smi is not on PATH\); device= needs a GPU"):
        _device.visible()


def test_query_gpus_parses_rows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_smi(tmp_path, monkeypatch, 'echo "0, GPU-aaa, NVIDIA H200"; echo ""; echo "1, GPU-bbb, Odd, Name"')
    assert query_gpus(("index", "uuid", "name")) == [["0", "GPU-aaa", "NVIDIA H200"], ["1", "GPU-bbb", "Odd, Name"]]
    monkeypatch.setenv("CUDA_DEVICE_ORDER", "PCI_BUS_ID")  # these GPUs differ: only then is index 1 nvidia-smi's
    assert [g.name for g in _device.visible(cuda_visible="1")] == ["Odd, Name"]
    assert _doctor._gpu_lines() == ["GPU 0, GPU-aaa, NVIDIA H200", "GPU 1, GPU-bbb, Odd, Name"]


def test_query_gpus_failing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_smi(tmp_path, monkeypatch, 'echo "NVIDIA-SMI has failed because it could not communicate" >&2; exit 9')
    with pytest.raises(NvidiaSmiError, match="nvidia-smi failed: NVIDIA-SMI has failed") as err:
        query_gpus(("index",))
    assert not err.value.missing and "communicate" in err.value.detail
    assert _doctor._gpu_lines() == ["GPU: nvidia-smi failed: NVIDIA-SMI has failed because it could not communicate"]


@pytest.mark.gpu
def test_libcuda_answers_on_a_gpu() -> None:
    lib = load_libcuda()
    if lib is None:
        pytest.skip("no NVIDIA driver")
    assert lib.cuInit(0) == 0
    l2 = device_attribute(DeviceAttribute.L2_CACHE_SIZE, 0)
    assert l2 is not None and l2 > 0
    assert l2_flush_bytes(l2) == 2 * l2
    assert (device_attribute(DeviceAttribute.CLOCK_RATE, 0) or 0) > 0
    version = cuda_driver_version()
    assert version is not None and int(version.split(".")[0]) >= 11
    assert loaded_libcuda() is lib
    assert query_gpus(("index", "name"))[0][0] == "0"
