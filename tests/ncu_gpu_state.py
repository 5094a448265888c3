"""Module-level state of eight kinds, each used by one profiled function (GPU only; imported by GPU tests).

Imported as a module, the functions travel to the ncu worker by reference: the worker imports this module and
builds its own handle, pointer, lock, file, tensor, model, compiled kernel and stream. The same source, run as
``__main__`` (``python ncu_gpu_state.py``), sends them by value instead and prints one JSON line per kind: how
each call ended (see test_ncu_state_gpu.py).
"""

from __future__ import annotations

import ctypes
import json
import operator
import os
import sys
import threading

import pynvml
import torch

import nsightx

KINDS = (
    "nvml_handle",
    "ctypes_pointer",
    "lock",
    "open_file",
    "cuda_tensor",
    "gpu_module",
    "cuda_core_kernel",
    "cuda_stream",
)

pynvml.nvmlInit()
NVML_HANDLE = pynvml.nvmlDeviceGetHandleByIndex(0)
CTYPES_POINTER = ctypes.pointer(ctypes.c_float(1.5))
LOCK = threading.Lock()
OPEN_FILE = open(os.devnull, "w")
CUDA_TENSOR = torch.ones(1 << 16, device="cuda")
GPU_MODULE = torch.nn.Linear(256, 256).cuda()
CUDA_STREAM = torch.cuda.Stream()

CUDA_CORE_ERROR = ""
try:  # cuda.core moved out of .experimental in newer releases
    try:
        from cuda.core import Device, LaunchConfig, Program, ProgramOptions, launch
    except ImportError:
        from cuda.core.experimental import Device, LaunchConfig, Program, ProgramOptions, launch
    _dev = Device()
    _dev.set_current()
    CUDA_CORE_PROGRAM = Program(
        'extern "C" __global__ void bump(float* x) { x[threadIdx.x] += 1.0f; }',
        "c++",
        options=ProgramOptions(arch=f"sm_{_dev.arch}"),
    )
    CUDA_CORE_KERNEL = CUDA_CORE_PROGRAM.compile("cubin").get_kernel("bump")
    CUDA_CORE_STREAM = _dev.create_stream()
except Exception as e:  # reported by the test instead of failing the import
    CUDA_CORE_ERROR = f"{type(e).__name__}: {e}"
    CUDA_CORE_KERNEL = None

OPTIONS = {
    "configs": [(1 << 16,)],
    "runs": 2,
    "backend": "ncu",
    "verbosity": 0,
    "clock_control": "none",
    "thermal_mode": "off",
}


@nsightx.analyze.kernel(**OPTIONS)
def nvml_handle(n):
    x = torch.ones(n, device="cuda")
    with nsightx.annotate("work"):
        x.mul_(float(pynvml.nvmlDeviceGetTemperature(NVML_HANDLE, pynvml.NVML_TEMPERATURE_GPU)))


@nsightx.analyze.kernel(**OPTIONS)
def ctypes_pointer(n):
    x = torch.ones(n, device="cuda")
    with nsightx.annotate("work"):
        x.mul_(CTYPES_POINTER.contents.value)


@nsightx.analyze.kernel(**OPTIONS)
def lock(n):
    x = torch.ones(n, device="cuda")
    with LOCK, nsightx.annotate("work"):
        x.mul_(2)


@nsightx.analyze.kernel(**OPTIONS)
def open_file(n):
    x = torch.ones(n, device="cuda")
    with nsightx.annotate("work"):
        x.mul_(2)
    OPEN_FILE.write(f"{n}\n")


@nsightx.analyze.kernel(**OPTIONS)
def cuda_tensor(n):
    print(f"cuda_tensor sees {CUDA_TENSOR.device}")  # also: the worker's print reaches the user's stdout
    with nsightx.annotate("work"):
        CUDA_TENSOR.mul_(1.0001)


@nsightx.analyze.kernel(**OPTIONS, combine_kernel_metrics=operator.add)  # the H200 splits this GEMM (split-K)
def gpu_module(n):
    x = torch.randn(64, 256, device="cuda")
    with nsightx.annotate("work"):
        GPU_MODULE(x)


@nsightx.analyze.kernel(**OPTIONS)
def cuda_core_kernel(n):
    x = torch.zeros(256, device="cuda")
    torch.cuda.synchronize()
    with nsightx.annotate("work"):
        launch(CUDA_CORE_STREAM, LaunchConfig(grid=1, block=256), CUDA_CORE_KERNEL, x.data_ptr())
        CUDA_CORE_STREAM.sync()


@nsightx.analyze.kernel(**OPTIONS)
def cuda_stream(n):
    x = torch.ones(n, device="cuda")
    torch.cuda.synchronize()
    with torch.cuda.stream(CUDA_STREAM), nsightx.annotate("work"):
        x.mul_(2)
    CUDA_STREAM.synchronize()


def outcome(kind: str) -> dict[str, object]:
    """Profile the function of ``kind``; say how it ended (rows, or the error's type, subject and message)."""
    if kind == "cuda_core_kernel" and CUDA_CORE_KERNEL is None:
        return {"kind": kind, "skipped": CUDA_CORE_ERROR}
    try:
        df = globals()[kind]().to_dataframe()
    except nsightx.NsightxError as e:
        return {
            "kind": kind,
            "error": type(e).__name__,
            "what": getattr(e, "what", ""),
            "type_name": getattr(e, "type_name", ""),
            "message": str(e)[:3000],
        }
    return {"kind": kind, "runs": df["NumRuns"].tolist(), "avg": df["AvgValue"].tolist()}


if __name__ == "__main__":
    for name in sys.argv[1:] or KINDS:
        print("OUTCOME " + json.dumps(outcome(name)), flush=True)
