"""Issue 40, step 1: can nsightx read hardware counters in process, through CUPTI's Range Profiler (CUDA 13.0)?

    python3 benchmarks/range_profiler_probe.py --json OUT.json [--metrics a,b,c] [--no-ncu]
    python3 benchmarks/range_profiler_probe.py --json OUT.json --host-only --chip GH100   # no GPU needed

Everything goes through ctypes at the struct layouts of the CUDA 13.0 headers (``cupti_range_profiler.h``,
``cupti_profiler_host.h``, ``cupti_profiler_target.h``, ``cupti_target.h`` of nvidia-cuda-cupti 13.0.85; each
``structSize`` is the header's ``*_STRUCT_SIZE``: offset of the last field plus its size, ``pPriv`` NULL).
cupti-python's ``profiler_host`` is tried only when the ctypes host calls fail (its structs are 13.4-sized).

Steps, in order; each is printed as one line ``[ok]``/``[FAIL]``/``[skip]`` with its time and values, and a failed
CUPTI call prints the function, the result code, its name (``cuptiGetResultString``) and CUPTI's message. A failed
step does not end the run: the steps that need its result are skipped and the others go on.

* ``ncu.run`` (first, while this process holds no CUDA context or profiler): this script's ``--child`` (same inputs,
  warm-up, L2 evicted, the two matmuls inside the NVTX range ``rp_probe``) under ``ncu --nvtx --nvtx-include
  rp_probe/ --clock-control none --metrics ...`` (clocks left as they are; ncu's default cache control flushes
  caches before each kernel), then ``ncu --import --csv --page raw --print-units base``; ``ncu_messages`` are its
  ``==ERROR==``/``==WARNING==`` lines. ``ncu.parse``: per kernel its name and the metrics (in base units).
* ``torch.init``: torch initialises CUDA (its primary context), inputs for fp32 matmuls of n=1024 and 2048 (TF32
  off), one warm-up of each; ``unprofiled_ms`` is the two matmuls without the profiler.
* ``cupti.load``: the libcupti torch loaded (read from /proc/self/maps; else found under site-packages/nvidia),
  its ``cuptiGetVersion``; ``cupti.profiler_initialize``; ``cupti.chip_name`` (``cuptiDeviceGetChipName``);
  ``cupti.device_supported`` (``cuptiProfilerDeviceSupported``: each support flag); ``cupti.counter_availability``
  (its image, handed to the host object).
* ``host.init`` (``cuptiProfilerHostInitialize`` for the chip), ``host.supported_chips``, ``host.metric_properties``
  (per metric: description, hardware unit, dimension unit, type), ``host.config_image`` (``ConfigAddMetrics``;
  if the list is refused, each metric alone to name the one refused, then the accepted ones; the image's bytes),
  ``host.passes`` (``cuptiProfilerHostGetNumOfPasses``).
* ``range.enable`` (``cuptiRangeProfilerEnable`` on the current context), ``range.counter_data`` (image sized for
  ``--max-ranges`` ranges), ``range.set_config`` (auto range, kernel replay, one nesting level), ``range.profile``
  (L2 evicted, then start, the two matmuls, stop; ``rounds``: start/stop rounds until all passes were submitted,
  ``launch_ms``), ``range.decode`` (``ranges_dropped``, ``num_ranges``), ``range.evaluate`` (per range its name and
  ``cuptiProfilerHostEvaluateToGpuValues`` of each metric), ``range.disable``. ``retry_without_sass``: when no range
  was evaluated and a ``__sass_`` metric was asked for, the config is rebuilt without those and the ``range.*``
  steps run once more. Then ``host.deinitialize`` and ``cupti.profiler_deinitialize``.
* ``compare`` (last): range i against ncu's kernel i, per metric ``rel_diff = (cupti - ncu) / ncu``. Deterministic
  counters (``smsp__inst_executed.sum``, the ffma count) should agree within 1%; ``dram__bytes.sum`` depends on
  what L2 holds and ``gpu__time_duration.sum`` on clocks and replay.

The summary printed at the end: the failed or skipped steps (with the CUPTI call and result name); per range
``range I name=... ncu kernel=...`` and per metric ``cupti=`` (in process), ``ncu=`` and ``diff=`` (relative, in
percent); ``timings (s)``: ``ncu_s`` (ncu run and import), ``torch_init_s``, ``host_config_s`` (host object to
passes), ``setup_s`` (enable to set config), ``launches_s`` (start to stop, replays included), ``decode_s``,
``evaluate_s``; and the total. Exit status 0 when no step failed.

The JSON (``--json``, rewritten after every step, so a hang still leaves what was done) holds ``steps`` (name, ok,
seconds, values, error: call, code, result, message), ``ranges`` (in-process values), ``ncu_kernels``,
``comparison`` and ``timings`` (setup, launches, decode, evaluate, ncu, in seconds). The whole run is bounded by
``--deadline`` seconds (default 230): ``faulthandler`` dumps every thread's stack and exits past it.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import ctypes
import faulthandler
import glob
import io
import json
import os
import re
import signal
import subprocess
import sys
import sysconfig
import tempfile
import time
import traceback
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, ClassVar

DEFAULT_METRICS = (
    "smsp__inst_executed.sum",
    "dram__bytes.sum",
    "sm__sass_thread_inst_executed_op_ffma_pred_on.sum",
    "gpu__time_duration.sum",
)
SIZES = (1024, 2048)
"""fp32 matmuls profiled, in launch order (one kernel each on H100 with TF32 off)."""
NVTX_RANGE = "rp_probe"
SCRATCH_BYTES = 256 * 1024 * 1024
"""Written before the profiled launches so that L2 (50 MiB on H100) holds none of their inputs."""
NCU = "/usr/local/cuda/bin/ncu"
IN_PROCESS_RESERVE_S = 90
"""Seconds of ``--deadline`` kept for the in-process steps after ncu (whose timeout shrinks to leave them)."""

PROFILER_TYPE_RANGE_PROFILER = 0
"""``CUpti_ProfilerType``."""
AUTO_RANGE = 1
"""``CUpti_ProfilerRange.CUPTI_AutoRange``."""
KERNEL_REPLAY = 2
"""``CUpti_ProfilerReplayMode.CUPTI_KernelReplay``."""
API_RANGE_PROFILING = 0
"""``CUpti_Profiler_API.CUPTI_PROFILER_RANGE_PROFILING``."""
SUPPORT_LEVELS = ("unknown", "unsupported", "disabled", "supported")
"""``CUpti_Profiler_Support_Level`` by value."""
METRIC_TYPES = ("counter", "ratio", "throughput")
"""``CUpti_MetricType`` by value."""
METRIC_NAME = re.compile(r"^[A-Za-z0-9_]+__[A-Za-z0-9_.]+$")

_size = ctypes.c_size_t
_ptr = ctypes.c_void_p
_int = ctypes.c_int
_str = ctypes.c_char_p
_strs = ctypes.POINTER(ctypes.c_char_p)


# --- parameter structs, field for field as in the 13.0 headers ---------------------------------------------------
class Params(ctypes.Structure):
    """The two leading fields of every CUPTI profiler parameter struct (``structSize``, ``pPriv`` = NULL)."""

    _fields_: ClassVar[Any] = (("structSize", _size), ("pPriv", _ptr))


class DeviceGetChipName(Params):
    """``CUpti_Device_GetChipName_Params`` (cupti_target.h)."""

    _fields_ = (("deviceIndex", _size), ("pChipName", _str))


class ProfilerInitialize(Params):
    """``CUpti_Profiler_Initialize_Params`` (cupti_profiler_target.h)."""

    _fields_ = ()


class ProfilerDeInitialize(Params):
    """``CUpti_Profiler_DeInitialize_Params``."""

    _fields_ = ()


class DeviceSupported(Params):
    """``CUpti_Profiler_DeviceSupported_Params``."""

    _fields_ = (
        ("cuDevice", _int),
        ("isSupported", _int),
        ("architecture", _int),
        ("sli", _int),
        ("vGpu", _int),
        ("confidentialCompute", _int),
        ("cmp", _int),
        ("wsl", _int),
        ("api", _int),
    )


class GetCounterAvailability(Params):
    """``CUpti_Profiler_GetCounterAvailability_Params``."""

    _fields_ = (("ctx", _ptr), ("counterAvailabilityImageSize", _size), ("pCounterAvailabilityImage", _ptr))


class HostInitialize(Params):
    """``CUpti_Profiler_Host_Initialize_Params`` (cupti_profiler_host.h)."""

    _fields_ = (
        ("profilerType", _int),
        ("pChipName", _str),
        ("pCounterAvailabilityImage", _ptr),
        ("pHostObject", _ptr),
    )


class HostDeinitialize(Params):
    """``CUpti_Profiler_Host_Deinitialize_Params``."""

    _fields_ = (("pHostObject", _ptr),)


class HostGetSupportedChips(Params):
    """``CUpti_Profiler_Host_GetSupportedChips_Params``."""

    _fields_ = (("numChips", _size), ("ppChipNames", _strs))


class HostGetMetricProperties(Params):
    """``CUpti_Profiler_Host_GetMetricProperties_Params``."""

    _fields_ = (
        ("pHostObject", _ptr),
        ("pMetricName", _str),
        ("pDescription", _str),
        ("pHwUnit", _str),
        ("pDimUnit", _str),
        ("metricType", _int),
    )


class HostConfigAddMetrics(Params):
    """``CUpti_Profiler_Host_ConfigAddMetrics_Params``."""

    _fields_ = (("pHostObject", _ptr), ("ppMetricNames", _strs), ("numMetrics", _size))


class HostGetConfigImageSize(Params):
    """``CUpti_Profiler_Host_GetConfigImageSize_Params``."""

    _fields_ = (("pHostObject", _ptr), ("configImageSize", _size))


class HostGetConfigImage(Params):
    """``CUpti_Profiler_Host_GetConfigImage_Params``."""

    _fields_ = (("pHostObject", _ptr), ("configImageSize", _size), ("pConfigImage", _ptr))


class HostGetNumOfPasses(Params):
    """``CUpti_Profiler_Host_GetNumOfPasses_Params``."""

    _fields_ = (("configImageSize", _size), ("pConfigImage", _ptr), ("numOfPasses", _size))


class HostEvaluateToGpuValues(Params):
    """``CUpti_Profiler_Host_EvaluateToGpuValues_Params``."""

    _fields_ = (
        ("pHostObject", _ptr),
        ("pCounterDataImage", _ptr),
        ("counterDataImageSize", _size),
        ("rangeIndex", _size),
        ("ppMetricNames", _strs),
        ("numMetrics", _size),
        ("pMetricValues", ctypes.POINTER(ctypes.c_double)),
    )


class RangeEnable(Params):
    """``CUpti_RangeProfiler_Enable_Params`` (cupti_range_profiler.h)."""

    _fields_ = (("ctx", _ptr), ("pRangeProfilerObject", _ptr))


class RangeDisable(Params):
    """``CUpti_RangeProfiler_Disable_Params``."""

    _fields_ = (("pRangeProfilerObject", _ptr),)


class RangeStart(Params):
    """``CUpti_RangeProfiler_Start_Params``."""

    _fields_ = (("pRangeProfilerObject", _ptr),)


class RangeStop(Params):
    """``CUpti_RangeProfiler_Stop_Params``."""

    _fields_ = (
        ("pRangeProfilerObject", _ptr),
        ("passIndex", _size),
        ("targetNestingLevel", _size),
        ("isAllPassSubmitted", ctypes.c_uint8),
    )


class RangeSetConfig(Params):
    """``CUpti_RangeProfiler_SetConfig_Params``."""

    _fields_ = (
        ("pRangeProfilerObject", _ptr),
        ("configSize", _size),
        ("pConfig", _ptr),
        ("counterDataImageSize", _size),
        ("pCounterDataImage", _ptr),
        ("range", _int),
        ("replayMode", _int),
        ("maxRangesPerPass", _size),
        ("numNestingLevels", ctypes.c_uint16),
        ("minNestingLevel", ctypes.c_uint16),
        ("passIndex", _size),
        ("targetNestingLevel", ctypes.c_uint16),
    )


class RangeDecodeData(Params):
    """``CUpti_RangeProfiler_DecodeData_Params``."""

    _fields_ = (("pRangeProfilerObject", _ptr), ("numOfRangeDropped", _size))


class RangeGetCounterDataSize(Params):
    """``CUpti_RangeProfiler_GetCounterDataSize_Params``."""

    _fields_ = (
        ("pRangeProfilerObject", _ptr),
        ("pMetricNames", _strs),
        ("numMetrics", _size),
        ("maxNumOfRanges", _size),
        ("maxNumRangeTreeNodes", ctypes.c_uint32),
        ("counterDataSize", _size),
    )


class RangeCounterDataImageInitialize(Params):
    """``CUpti_RangeProfiler_CounterDataImage_Initialize_Params``."""

    _fields_ = (("pRangeProfilerObject", _ptr), ("counterDataSize", _size), ("pCounterData", _ptr))


class RangeGetCounterDataInfo(Params):
    """``CUpti_RangeProfiler_GetCounterDataInfo_Params``."""

    _fields_ = (("pCounterDataImage", _ptr), ("counterDataImageSize", _size), ("numTotalRanges", _size))


class RangeGetRangeInfo(Params):
    """``CUpti_RangeProfiler_CounterData_GetRangeInfo_Params``."""

    _fields_ = (
        ("pCounterDataImage", _ptr),
        ("counterDataImageSize", _size),
        ("rangeIndex", _size),
        ("rangeDelimiter", _str),
        ("rangeName", _str),
    )


HEADER_NAMES: dict[type[Params], str] = {
    DeviceGetChipName: "CUpti_Device_GetChipName_Params",
    ProfilerInitialize: "CUpti_Profiler_Initialize_Params",
    ProfilerDeInitialize: "CUpti_Profiler_DeInitialize_Params",
    DeviceSupported: "CUpti_Profiler_DeviceSupported_Params",
    GetCounterAvailability: "CUpti_Profiler_GetCounterAvailability_Params",
    HostInitialize: "CUpti_Profiler_Host_Initialize_Params",
    HostDeinitialize: "CUpti_Profiler_Host_Deinitialize_Params",
    HostGetSupportedChips: "CUpti_Profiler_Host_GetSupportedChips_Params",
    HostGetMetricProperties: "CUpti_Profiler_Host_GetMetricProperties_Params",
    HostConfigAddMetrics: "CUpti_Profiler_Host_ConfigAddMetrics_Params",
    HostGetConfigImageSize: "CUpti_Profiler_Host_GetConfigImageSize_Params",
    HostGetConfigImage: "CUpti_Profiler_Host_GetConfigImage_Params",
    HostGetNumOfPasses: "CUpti_Profiler_Host_GetNumOfPasses_Params",
    HostEvaluateToGpuValues: "CUpti_Profiler_Host_EvaluateToGpuValues_Params",
    RangeEnable: "CUpti_RangeProfiler_Enable_Params",
    RangeDisable: "CUpti_RangeProfiler_Disable_Params",
    RangeStart: "CUpti_RangeProfiler_Start_Params",
    RangeStop: "CUpti_RangeProfiler_Stop_Params",
    RangeSetConfig: "CUpti_RangeProfiler_SetConfig_Params",
    RangeDecodeData: "CUpti_RangeProfiler_DecodeData_Params",
    RangeGetCounterDataSize: "CUpti_RangeProfiler_GetCounterDataSize_Params",
    RangeCounterDataImageInitialize: "CUpti_RangeProfiler_CounterDataImage_Initialize_Params",
    RangeGetCounterDataInfo: "CUpti_RangeProfiler_GetCounterDataInfo_Params",
    RangeGetRangeInfo: "CUpti_RangeProfiler_CounterData_GetRangeInfo_Params",
}
"""Each struct's name in the headers."""


def all_fields(cls: type[Params]) -> list[tuple[str, Any]]:
    """Every field of ``cls`` in memory order, the inherited ``structSize`` and ``pPriv`` first."""
    chain = [c for c in reversed(cls.__mro__) if isinstance(c, type) and issubclass(c, Params)]
    return [f for c in chain for f in c.__dict__.get("_fields_", ())]


def struct_size(cls: type[Params]) -> int:
    """``CUPTI_PROFILER_STRUCT_SIZE(type, lastfield)``: offset of the last field plus its size (no tail padding)."""
    name, ctype = all_fields(cls)[-1]
    return int(getattr(cls, name).offset) + ctypes.sizeof(ctype)


def params(cls: type[Params], **values: Any) -> Any:
    """A zeroed ``cls`` with ``structSize`` set and ``values`` assigned (``pPriv`` stays NULL)."""
    p = cls()
    p.structSize = struct_size(cls)
    for key, value in values.items():
        if not hasattr(cls, key):
            raise AttributeError(f"{cls.__name__} has no field {key!r}")
        setattr(p, key, value)
    return p


def c_strings(names: Sequence[str]) -> Any:
    """A C array of ``const char*`` for ``names`` (keep it alive while CUPTI may read it)."""
    return (ctypes.c_char_p * len(names))(*(n.encode() for n in names))


def c_text(value: bytes | None) -> str | None:
    """A ``const char*`` field read back as text."""
    return None if value is None else value.decode(errors="replace")


# --- calling libcupti -------------------------------------------------------------------------------------------
class CuptiCallError(Exception):
    """A CUPTI call that did not return CUPTI_SUCCESS: the function, the code, its name and CUPTI's message."""

    def __init__(self, call: str, code: int, result: str, message: str) -> None:
        super().__init__(f"{call} returned {code} ({result}): {message}")
        self.call, self.code, self.result, self.message = call, code, result, message

    def as_dict(self) -> dict[str, Any]:
        """The error as the JSON records it."""
        return {"call": self.call, "code": self.code, "result": self.result, "message": self.message}


class Cupti:
    """libcupti through ctypes: every call by name with its params struct; a failure raises :class:`CuptiCallError`.

    Args:
        path: The library file (the one already mapped into the process, so that ``dlopen`` returns that copy).
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self.lib = ctypes.CDLL(path)

    def _text(self, fn: str, code: int) -> str:
        f = getattr(self.lib, fn, None)
        if f is None:
            return f"({fn} missing)"
        out = ctypes.c_char_p()
        f.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]
        f.restype = ctypes.c_int
        if f(code, ctypes.byref(out)) != 0 or out.value is None:
            return f"({fn} failed for {code})"
        return out.value.decode(errors="replace")

    def result_name(self, code: int) -> str:
        """``cuptiGetResultString``: the enum name of ``code``, e.g. CUPTI_ERROR_INVALID_PARAMETER."""
        return self._text("cuptiGetResultString", code)

    def result_message(self, code: int) -> str:
        """``cuptiGetErrorMessage``: CUPTI's sentence for ``code``."""
        return self._text("cuptiGetErrorMessage", code)

    def version(self) -> int:
        """``cuptiGetVersion``: the CUPTI API version (130001 for CUDA 13.0 update 1)."""
        v = ctypes.c_uint32(0)
        code = self.lib.cuptiGetVersion(ctypes.byref(v))
        if code != 0:
            raise CuptiCallError("cuptiGetVersion", code, self.result_name(code), self.result_message(code))
        return int(v.value)

    def call(self, fn: str, p: Any) -> Any:
        """Call ``fn(&p)``; returns ``p`` with its out fields filled.

        Raises:
            CuptiCallError: ``fn`` returned anything but CUPTI_SUCCESS, or this libcupti does not export it.
        """
        f = getattr(self.lib, fn, None)
        if f is None:
            raise CuptiCallError(fn, -1, "SYMBOL_MISSING", f"{self.path} does not export {fn}")
        f.restype = ctypes.c_int
        code = f(ctypes.byref(p))
        if code != 0:
            raise CuptiCallError(fn, code, self.result_name(code), self.result_message(code))
        return p


def mapped_path(maps: str, stem: str) -> str | None:
    """The first file in ``/proc/<pid>/maps`` text whose name starts with ``stem`` (e.g. ``libcupti.so``)."""
    for line in maps.splitlines():
        parts = line.split()
        if len(parts) >= 6 and parts[-1].startswith("/") and os.path.basename(parts[-1]).startswith(stem):
            return parts[-1]
    return None


def find_libcupti(explicit: str | None) -> tuple[str, str]:
    """The libcupti to use and how it was found: ``--libcupti``, the one mapped (torch's), or site-packages/nvidia.

    Raises:
        FileNotFoundError: none of the three.
    """
    if explicit:
        return explicit, "--libcupti"
    try:
        found = mapped_path(Path("/proc/self/maps").read_text(errors="replace"), "libcupti.so")
    except OSError:
        found = None
    if found:
        return found, "mapped in this process (/proc/self/maps)"
    roots = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"], *sys.path}
    for root in sorted(r for r in roots if r and os.path.isdir(os.path.join(r, "nvidia"))):
        hits = sorted(glob.glob(os.path.join(root, "nvidia", "**", "libcupti.so*"), recursive=True))
        if hits:
            return hits[0], f"searched {root}/nvidia"
    raise FileNotFoundError("no libcupti mapped in this process nor under site-packages/nvidia; pass --libcupti")


# --- the host side (metric configuration and evaluation) ----------------------------------------------------------
class CtypesHost:
    """A ``CUpti_Profiler_Host_Object`` for the range profiler, driven through ctypes.

    Args:
        cupti: The library.
        chip: Chip name (``cuptiDeviceGetChipName``), e.g. GH100.
        availability: Counter availability image of the device, or None.
    """

    kind = "ctypes"

    def __init__(self, cupti: Cupti, chip: str, availability: Any | None) -> None:
        self.cupti = cupti
        self._chip = chip.encode()
        image = ctypes.addressof(availability) if availability is not None else None
        p = params(HostInitialize, profilerType=PROFILER_TYPE_RANGE_PROFILER, pChipName=self._chip)
        p.pCounterAvailabilityImage = image
        self.obj = cupti.call("cuptiProfilerHostInitialize", p).pHostObject
        self._keep: list[Any] = []

    def properties(self, metric: str) -> dict[str, Any]:
        """``cuptiProfilerHostGetMetricProperties``: description, hardware unit, dimension unit, type."""
        p = params(HostGetMetricProperties, pHostObject=self.obj, pMetricName=metric.encode())
        self.cupti.call("cuptiProfilerHostGetMetricProperties", p)
        kind = METRIC_TYPES[p.metricType] if 0 <= p.metricType < len(METRIC_TYPES) else p.metricType
        return {
            "description": c_text(p.pDescription),
            "hw_unit": c_text(p.pHwUnit),
            "dim_unit": c_text(p.pDimUnit),
            "type": kind,
        }

    def config_image(self, metrics: Sequence[str]) -> Any:
        """Add ``metrics`` and return the config image (a ctypes byte array)."""
        names = c_strings(metrics)
        self._keep.append(names)
        p = params(HostConfigAddMetrics, pHostObject=self.obj, ppMetricNames=names, numMetrics=len(metrics))
        self.cupti.call("cuptiProfilerHostConfigAddMetrics", p)
        size = self.cupti.call(
            "cuptiProfilerHostGetConfigImageSize", params(HostGetConfigImageSize, pHostObject=self.obj)
        )
        image = (ctypes.c_uint8 * size.configImageSize)()
        p2 = params(HostGetConfigImage, pHostObject=self.obj, configImageSize=len(image))
        p2.pConfigImage = ctypes.addressof(image)
        self.cupti.call("cuptiProfilerHostGetConfigImage", p2)
        return image

    def passes(self, image: Any) -> int:
        """``cuptiProfilerHostGetNumOfPasses`` of a config image."""
        p = params(HostGetNumOfPasses, configImageSize=len(image))
        p.pConfigImage = ctypes.addressof(image)
        return int(self.cupti.call("cuptiProfilerHostGetNumOfPasses", p).numOfPasses)

    def evaluate(self, counter_data: Any, index: int, metrics: Sequence[str]) -> list[float]:
        """``cuptiProfilerHostEvaluateToGpuValues``: each metric's value in range ``index`` of the counter data."""
        names = c_strings(metrics)
        values = (ctypes.c_double * len(metrics))()
        p = params(HostEvaluateToGpuValues, pHostObject=self.obj, counterDataImageSize=len(counter_data))
        p.pCounterDataImage = ctypes.addressof(counter_data)
        p.rangeIndex, p.ppMetricNames, p.numMetrics = index, names, len(metrics)
        p.pMetricValues = values
        self.cupti.call("cuptiProfilerHostEvaluateToGpuValues", p)
        return [float(v) for v in values]

    def close(self) -> None:
        """``cuptiProfilerHostDeinitialize``."""
        if self.obj:
            obj, self.obj = self.obj, None
            self.cupti.call("cuptiProfilerHostDeinitialize", params(HostDeinitialize, pHostObject=obj))


class CuptiPythonHost:
    """The same host operations through cupti-python's ``profiler_host`` (the fallback; its structs are 13.4's)."""

    kind = "cupti-python"

    def __init__(self, chip: str) -> None:
        from cupti import profiler_host

        self._ph = profiler_host
        self._host = profiler_host.ProfilerHost(chip, profiler_host.ProfilerType.RANGE_PROFILER)
        self._host.initialize()
        self._np: Any = None

    def properties(self, metric: str) -> dict[str, Any]:
        """Description, units and type of ``metric``."""
        p = self._host.get_metric_properties(metric)
        return {"description": p.description, "hw_unit": p.hw_unit, "dim_unit": p.dim_unit, "type": str(p.metric_type)}

    def config_image(self, metrics: Sequence[str]) -> Any:
        """The config image for ``metrics``, copied into a ctypes byte array."""
        arr = self._host.create_config_image(list(metrics))
        data = bytes(arr.tobytes())
        return (ctypes.c_uint8 * len(data)).from_buffer_copy(data)

    def passes(self, image: Any) -> int:
        """Passes the config image needs."""
        import numpy as np

        return int(self._ph.get_num_of_passes(np.frombuffer(bytes(image), dtype=np.uint8).copy()))

    def evaluate(self, counter_data: Any, index: int, metrics: Sequence[str]) -> list[float]:
        """Each metric's value in range ``index``."""
        import numpy as np

        data = np.frombuffer(bytes(counter_data), dtype=np.uint8).copy()
        return [float(v) for v in self._host.evaluate_metric_values(data, list(metrics), index)]

    def close(self) -> None:
        """Deinitialise the host object."""
        self._host.deinitialize()


# --- ncu's CSV ------------------------------------------------------------------------------------------------------
UNIT_SCALE = {
    "": 1.0,
    "byte": 1.0,
    "Kbyte": 1e3,
    "Mbyte": 1e6,
    "Gbyte": 1e9,
    "ns": 1.0,
    "nsecond": 1.0,
    "us": 1e3,
    "usecond": 1e3,
    "ms": 1e6,
    "msecond": 1e6,
    "s": 1e9,
    "second": 1e9,
    "inst": 1.0,
    "Kinst": 1e3,
    "Minst": 1e6,
    "Ginst": 1e9,
}
"""Factor to ncu's base unit (byte, nanosecond, instruction) for the units ``--print-units auto`` may print."""


def parse_number(text: str) -> float | None:
    """An ncu CSV cell as a number (thousands separators dropped); None for n/a or text."""
    cleaned = text.strip().replace(",", "")
    try:
        return float(cleaned)
    except ValueError:
        return None


def parse_ncu_csv(text: str, metrics: Sequence[str]) -> list[dict[str, Any]]:
    """Kernels of ``ncu --import R --csv --page raw`` output, in order, with ``metrics`` in base units.

    The CSV starts at the line whose first cell is "ID" (ncu may print ``==PROF==``/``==WARNING==`` lines first);
    the row after the header holds the units (its ID cell is empty); one row per profiled kernel follows.

    Returns:
        Per kernel: ``id``, ``name``, ``metrics`` (metric -> value or None), ``units`` (as printed).

    Raises:
        ValueError: no CSV header in ``text``.
    """
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID"')), None)
    if start is None:
        raise ValueError(f'no ncu CSV header (a line starting with "ID") in {len(lines)} lines of output')
    rows = list(csv.reader(io.StringIO("\n".join(lines[start:]))))
    header = rows[0]
    units: dict[str, str] = {}
    body = rows[1:]
    if body and body[0] and body[0][0] == "":
        units = dict(zip(header, body[0], strict=False))
        body = body[1:]
    kernels = []
    for row in body:
        cells = dict(zip(header, row, strict=False))
        values: dict[str, float | None] = {}
        for m in metrics:
            value = parse_number(cells[m]) if m in cells else None
            scale = UNIT_SCALE.get(units.get(m, ""), 1.0)
            values[m] = None if value is None else value * scale
        kernels.append(
            {
                "id": cells.get("ID"),
                "name": cells.get("Kernel Name"),
                "metrics": values,
                "units": {m: units.get(m) for m in metrics},
            }
        )
    return kernels


def compare(
    ranges: Sequence[dict[str, Any]], kernels: Sequence[dict[str, Any]], metrics: Sequence[str]
) -> list[dict[str, Any]]:
    """In-process range i against ncu kernel i, per metric: both values and ``rel_diff = (cupti - ncu) / ncu``.

    ``rel_diff`` is None where either value is missing, and where ncu's is 0 while CUPTI's is not.
    """
    rows = []
    for i, (rng, kernel) in enumerate(zip(ranges, kernels, strict=False)):
        for m in metrics:
            a = rng.get("metrics", {}).get(m)
            b = kernel.get("metrics", {}).get(m)
            rel = None
            if a is not None and b is not None:
                rel = 0.0 if a == b else ((a - b) / b if b else None)
            row = {"index": i, "range": rng.get("name"), "kernel": kernel.get("name"), "metric": m}
            rows.append({**row, "cupti": a, "ncu": b, "rel_diff": rel})
    return rows


# --- the run's record ---------------------------------------------------------------------------------------------
class Step:
    """One step's outcome: ``values`` filled by the step, ``ok`` once it ran through, ``error`` if it raised."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.ok = False
        self.skipped: str | None = None
        self.values: dict[str, Any] = {}
        self.error: dict[str, Any] | None = None
        self.seconds = 0.0

    def as_dict(self) -> dict[str, Any]:
        """The step as the JSON records it."""
        out = {"name": self.name, "ok": self.ok, "seconds": round(self.seconds, 6), "values": self.values}
        if self.skipped:
            out["skipped"] = self.skipped
        if self.error:
            out["error"] = self.error
        return out


def error_dict(e: BaseException) -> dict[str, Any]:
    """An exception as the JSON records it: a CUPTI call's function, code, name and message, else type and text."""
    if isinstance(e, CuptiCallError):
        return e.as_dict()
    return {"type": type(e).__name__, "message": str(e), "traceback": traceback.format_exc()[-3000:]}


def _short(value: Any) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= 300 else text[:297] + "..."


class Report:
    """The JSON record, rewritten after every step; each step also printed as one line."""

    def __init__(self, path: Path | None, argv: Sequence[str]) -> None:
        self.path = path
        self.steps: dict[str, Step] = {}
        self.data: dict[str, Any] = {
            "probe": "range_profiler_probe",
            "argv": list(argv),
            "python": sys.version.split()[0],
            "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "steps": [],
            "ranges": [],
            "ncu_kernels": [],
            "comparison": [],
            "timings": {},
        }

    def ok(self, name: str) -> bool:
        """Whether step ``name`` ran and succeeded."""
        return name in self.steps and self.steps[name].ok

    @contextlib.contextmanager
    def step(self, name: str) -> Iterator[Step]:
        """Run a step: its exception is recorded (CUPTI call, code, result name, message) and not propagated."""
        s = Step(name)
        t = time.perf_counter()
        try:
            yield s
            s.ok = True
        except Exception as e:
            s.error = error_dict(e)
        finally:
            s.seconds = time.perf_counter() - t
            self._record(s)

    def skip(self, name: str, why: str) -> None:
        """Record step ``name`` as not run, because ``why``."""
        s = Step(name)
        s.skipped = why
        self._record(s)

    def _record(self, s: Step) -> None:
        self.steps[s.name] = s
        self.data["steps"].append(s.as_dict())
        if s.skipped:
            print(f"[skip] {s.name}: {s.skipped}", flush=True)
        elif s.ok:
            print(f"[ok]   {s.name} ({s.seconds:.3f} s) {_short(s.values)}", flush=True)
        else:
            err = s.error or {}
            if "call" in err:
                what = f"{err['call']} -> {err['code']} {err['result']}: {err['message']}"
            else:
                what = f"{err.get('type')}: {err.get('message')}"
            print(f"[FAIL] {s.name} ({s.seconds:.3f} s): {what}", flush=True)
            if s.values:
                print(f"       values so far: {_short(s.values)}", flush=True)
        self.save()

    def save(self) -> None:
        """Write the JSON (if a path was given)."""
        if self.path is not None:
            self.path.write_text(json.dumps(self.data, indent=2, default=str) + "\n")


# --- the workload (shared by the in-process run and ncu's child) -------------------------------------------------
class Workload:
    """fp32 matmuls of :data:`SIZES` on torch's current device, inputs made and warmed up once."""

    def __init__(self) -> None:
        import torch

        self.torch = torch
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.zeros(1, device="cuda")
        gen = torch.Generator(device="cuda")
        gen.manual_seed(0)
        self.inputs = {}
        for n in SIZES:
            a = torch.randn(n, n, device="cuda", generator=gen)
            b = torch.randn(n, n, device="cuda", generator=gen)
            self.inputs[n] = (a, b, torch.empty(n, n, device="cuda"))
        self.scratch = torch.empty(SCRATCH_BYTES // 4, device="cuda")
        self.run()

    def evict_l2(self) -> None:
        """Write :data:`SCRATCH_BYTES` so that L2 holds none of the matmuls' data; waits for it."""
        self.scratch.zero_()
        self.torch.cuda.synchronize()

    def run(self) -> None:
        """One matmul of each size in order, each waited for."""
        for n in SIZES:
            a, b, c = self.inputs[n]
            self.torch.matmul(a, b, out=c)
            self.torch.cuda.synchronize()


def child() -> None:
    """What ncu profiles: the same workload, the profiled launches inside the NVTX range :data:`NVTX_RANGE`."""
    work = Workload()
    work.evict_l2()
    work.torch.cuda.nvtx.range_push(NVTX_RANGE)
    work.run()
    work.torch.cuda.nvtx.range_pop()
    print("child: done", flush=True)


# --- the probe ------------------------------------------------------------------------------------------------------
class Probe:
    """The probe's state across steps; each ``phase_*`` runs its steps and skips those whose inputs are missing."""

    def __init__(self, args: argparse.Namespace, report: Report) -> None:
        self.args = args
        self.report = report
        self.metrics: list[str] = list(args.metrics)
        self.work: Workload | None = None
        self.cuda: Any = None
        self.ctx: int | None = None
        self.device: int | None = None
        self.cupti: Cupti | None = None
        self.chip: str | None = args.chip
        self.availability: Any | None = None
        self.host: Any = None
        self.host_kind = "ctypes"
        self.config: Any = None
        self.obj: int | None = None
        self.counter_data: Any = None
        self.num_ranges = 0
        self._names: Any = None
        self.t0 = time.perf_counter()

    def timing(self, key: str, seconds: float) -> None:
        """Record one phase time."""
        self.report.data["timings"][key] = round(seconds, 6)

    # -- torch and the context
    def phase_torch(self) -> None:
        """Initialise CUDA through torch, make and warm the inputs, time the matmuls unprofiled, read the context."""
        with self.report.step("torch.init") as s:
            import torch

            s.values["torch"] = torch.__version__
            s.values["cuda"] = torch.version.cuda
            self.work = Workload()
            s.values["device_name"] = torch.cuda.get_device_name()
            self.work.evict_l2()
            t = time.perf_counter()
            self.work.run()
            s.values["unprofiled_ms"] = round((time.perf_counter() - t) * 1e3, 3)
            self.cuda = ctypes.CDLL("libcuda.so.1")
            ctx = ctypes.c_void_p()
            dev = ctypes.c_int()
            if self.cuda.cuCtxGetCurrent(ctypes.byref(ctx)) != 0 or not ctx.value:
                raise RuntimeError("cuCtxGetCurrent gave no current context after torch initialised CUDA")
            if self.cuda.cuCtxGetDevice(ctypes.byref(dev)) != 0:
                raise RuntimeError("cuCtxGetDevice failed for torch's current context")
            self.ctx, self.device = int(ctx.value), int(dev.value)
            s.values["context"] = hex(self.ctx)
            s.values["cu_device"] = self.device

    # -- the library, the chip, support
    def phase_library(self) -> None:
        """Load libcupti, its version; profiler initialise; chip name, device support, counter availability."""
        with self.report.step("cupti.load") as s:
            path, how = find_libcupti(self.args.libcupti)
            s.values["path"], s.values["found"] = path, how
            self.cupti = Cupti(path)
            s.values["version"] = self.cupti.version()
        if not self.report.ok("cupti.load"):
            return
        cupti = self.cupti
        assert cupti is not None
        if self.args.host_only:
            self.report.skip("cupti.profiler_initialize", "--host-only: no device (it fails without a driver)")
        else:
            with self.report.step("cupti.profiler_initialize"):
                cupti.call("cuptiProfilerInitialize", params(ProfilerInitialize))
        if self.chip is None:
            with self.report.step("cupti.chip_name") as s:
                p = cupti.call("cuptiDeviceGetChipName", params(DeviceGetChipName, deviceIndex=self.device or 0))
                self.chip = c_text(p.pChipName)
                s.values["chip"] = self.chip
        if self.device is not None:
            with self.report.step("cupti.device_supported") as s:
                p = params(DeviceSupported, cuDevice=self.device, api=API_RANGE_PROFILING)
                cupti.call("cuptiProfilerDeviceSupported", p)
                for key in ("isSupported", "architecture", "sli", "vGpu", "confidentialCompute", "cmp", "wsl"):
                    level = getattr(p, key)
                    s.values[key] = SUPPORT_LEVELS[level] if 0 <= level < len(SUPPORT_LEVELS) else level
        if self.ctx is not None:
            with self.report.step("cupti.counter_availability") as s:
                p = cupti.call("cuptiProfilerGetCounterAvailability", params(GetCounterAvailability, ctx=self.ctx))
                size = int(p.counterAvailabilityImageSize)
                image = (ctypes.c_uint8 * size)()
                p2 = params(GetCounterAvailability, ctx=self.ctx, counterAvailabilityImageSize=size)
                p2.pCounterAvailabilityImage = ctypes.addressof(image)
                cupti.call("cuptiProfilerGetCounterAvailability", p2)
                self.availability = image
                s.values["bytes"] = size

    # -- the host object and the config image
    def _new_host(self) -> Any:
        assert self.cupti is not None and self.chip is not None
        if self.host_kind == "cupti-python":
            return CuptiPythonHost(self.chip)
        return CtypesHost(self.cupti, self.chip, self.availability)

    def phase_host(self) -> None:
        """Host object for the chip, metric properties, config image (naming refused metrics), passes."""
        if self.cupti is None or self.chip is None:
            self.report.skip("host.init", "no libcupti or no chip name")
            return
        with self.report.step("host.init") as s:
            self.host = self._new_host()
            s.values["via"] = "ctypes"
        if self.host is None:
            self._host_fallback()
        if self.host is None:
            return
        with self.report.step("host.supported_chips") as s:
            p = self.cupti.call("cuptiProfilerHostGetSupportedChips", params(HostGetSupportedChips))
            chips = [c_text(p.ppChipNames[i]) for i in range(int(p.numChips))]
            s.values["chips"] = chips
            s.values["chip_listed"] = self.chip in chips
        with self.report.step("host.metric_properties") as s:
            for m in self.metrics:
                try:
                    s.values[m] = self.host.properties(m)
                except Exception as e:
                    s.values[m] = {"error": error_dict(e)}
        self._config_image()
        if self.config is not None:
            with self.report.step("host.passes") as s:
                s.values["passes"] = self.host.passes(self.config)

    def _host_fallback(self) -> None:
        with self.report.step("host.init_cupti_python") as s:
            assert self.chip is not None
            self.host = CuptiPythonHost(self.chip)
            self.host_kind = "cupti-python"
            s.values["via"] = "cupti-python"

    def _config_image(self) -> None:
        with self.report.step("host.config_image") as s:
            s.values["metrics"] = list(self.metrics)
            try:
                self.config = self.host.config_image(self.metrics)
            except Exception as e:
                s.values["all_metrics_error"] = error_dict(e)
                refused = self._refused_metrics()
                s.values["refused"] = refused
                self.metrics = [m for m in self.metrics if m not in refused]
                if not self.metrics:
                    raise
                self._close_host()
                self.host = self._new_host()
                self.config = self.host.config_image(self.metrics)
                s.values["metrics"] = list(self.metrics)
            s.values["bytes"] = len(self.config)

    def _refused_metrics(self) -> dict[str, Any]:
        """Each metric alone on a fresh host object: those CUPTI refuses, with the error."""
        refused: dict[str, Any] = {}
        for m in self.metrics:
            host = None
            try:
                host = self._new_host()
                host.config_image([m])
            except Exception as e:
                refused[m] = error_dict(e)
            finally:
                if host is not None:
                    with contextlib.suppress(Exception):
                        host.close()
        return refused

    def _close_host(self) -> None:
        if self.host is not None:
            host, self.host = self.host, None
            with contextlib.suppress(Exception):
                host.close()

    # -- the range profiler
    def phase_range(self) -> None:
        """Enable on torch's context, counter data image, config, profile the matmuls, decode, evaluate, disable."""
        if self.config is None or self.ctx is None or self.cupti is None or self.work is None:
            self.report.skip("range.enable", "no config image, context, libcupti or workload")
            return
        for name in [k for k in self.report.steps if k.startswith("range.")]:
            del self.report.steps[name]  # a retry must not read the first attempt's outcome (the JSON keeps both)
        self.counter_data, self.num_ranges = None, 0
        t = time.perf_counter()
        with self.report.step("range.enable") as s:
            p = self.cupti.call("cuptiRangeProfilerEnable", params(RangeEnable, ctx=self.ctx))
            self.obj = p.pRangeProfilerObject
            s.values["object"] = hex(self.obj or 0)
        if not self.obj:
            return
        try:
            self._range_setup()
            self.timing("setup_s", time.perf_counter() - t)
            if self.report.ok("range.set_config"):
                self._range_profile()
            if self.report.ok("range.profile"):
                self._range_decode()
            if self.report.ok("range.decode"):
                self._range_evaluate()
        finally:
            with self.report.step("range.disable"):
                obj, self.obj = self.obj, None
                self.cupti.call("cuptiRangeProfilerDisable", params(RangeDisable, pRangeProfilerObject=obj))

    def _range_setup(self) -> None:
        assert self.cupti is not None
        cupti, n = self.cupti, self.args.max_ranges
        with self.report.step("range.counter_data") as s:
            self._names = c_strings(self.metrics)
            p = params(RangeGetCounterDataSize, pRangeProfilerObject=self.obj, pMetricNames=self._names)
            p.numMetrics, p.maxNumOfRanges, p.maxNumRangeTreeNodes = len(self.metrics), n, n
            size = int(cupti.call("cuptiRangeProfilerGetCounterDataSize", p).counterDataSize)
            s.values["bytes"], s.values["max_ranges"] = size, n
            image = (ctypes.c_uint8 * size)()
            p2 = params(RangeCounterDataImageInitialize, pRangeProfilerObject=self.obj, counterDataSize=size)
            p2.pCounterData = ctypes.addressof(image)
            cupti.call("cuptiRangeProfilerCounterDataImageInitialize", p2)
            self.counter_data = image
        if self.counter_data is None:
            return
        with self.report.step("range.set_config") as s:
            p = params(RangeSetConfig, pRangeProfilerObject=self.obj, configSize=len(self.config))
            p.pConfig = ctypes.addressof(self.config)
            p.counterDataImageSize = len(self.counter_data)
            p.pCounterDataImage = ctypes.addressof(self.counter_data)
            p.range, p.replayMode, p.maxRangesPerPass = AUTO_RANGE, KERNEL_REPLAY, n
            p.numNestingLevels, p.minNestingLevel, p.passIndex, p.targetNestingLevel = 1, 1, 0, 1
            cupti.call("cuptiRangeProfilerSetConfig", p)
            s.values.update(range="auto", replay="kernel", max_ranges_per_pass=n, nesting_levels=1)

    def _range_profile(self) -> None:
        assert self.cupti is not None and self.work is not None
        with self.report.step("range.profile") as s:
            self.work.evict_l2()
            known = self.report.steps.get("host.passes")
            passes = known.values.get("passes", 1) if known is not None else 1
            t = time.perf_counter()
            rounds = []
            for _ in range(max(1, int(passes)) + 1):
                self.cupti.call("cuptiRangeProfilerStart", params(RangeStart, pRangeProfilerObject=self.obj))
                self.work.run()
                stop = self.cupti.call("cuptiRangeProfilerStop", params(RangeStop, pRangeProfilerObject=self.obj))
                rounds.append(
                    {
                        "pass_index": int(stop.passIndex),
                        "target_nesting_level": int(stop.targetNestingLevel),
                        "all_passes_submitted": int(stop.isAllPassSubmitted),
                    }
                )
                s.values["rounds"] = rounds
                if stop.isAllPassSubmitted:
                    break
            seconds = time.perf_counter() - t
            s.values["launch_ms"] = round(seconds * 1e3, 3)
            self.timing("launches_s", seconds)
            if not rounds[-1]["all_passes_submitted"]:
                raise RuntimeError(f"not all passes submitted after {len(rounds)} start/stop rounds")

    def _range_decode(self) -> None:
        assert self.cupti is not None
        t = time.perf_counter()
        with self.report.step("range.decode") as s:
            p = self.cupti.call("cuptiRangeProfilerDecodeData", params(RangeDecodeData, pRangeProfilerObject=self.obj))
            s.values["ranges_dropped"] = int(p.numOfRangeDropped)
            info = params(RangeGetCounterDataInfo, counterDataImageSize=len(self.counter_data))
            info.pCounterDataImage = ctypes.addressof(self.counter_data)
            self.num_ranges = int(self.cupti.call("cuptiRangeProfilerGetCounterDataInfo", info).numTotalRanges)
            s.values["num_ranges"] = self.num_ranges
        self.timing("decode_s", time.perf_counter() - t)

    def _range_evaluate(self) -> None:
        assert self.cupti is not None
        t = time.perf_counter()
        with self.report.step("range.evaluate") as s:
            ranges: list[dict[str, Any]] = self.report.data["ranges"]
            for i in range(self.num_ranges):
                info = params(RangeGetRangeInfo, counterDataImageSize=len(self.counter_data), rangeIndex=i)
                info.pCounterDataImage = ctypes.addressof(self.counter_data)
                info.rangeDelimiter = b"/"
                name = c_text(self.cupti.call("cuptiRangeProfilerCounterDataGetRangeInfo", info).rangeName)
                ranges.append({"index": i, "name": name, **self._evaluate(i)})
                s.values[f"range_{i}"] = ranges[-1]
        self.timing("evaluate_s", time.perf_counter() - t)

    def _evaluate(self, index: int) -> dict[str, Any]:
        """Every metric of range ``index`` at once; if CUPTI refuses that, each alone (errors kept per metric)."""
        try:
            values = self.host.evaluate(self.counter_data, index, self.metrics)
            return {"metrics": dict(zip(self.metrics, values, strict=True))}
        except Exception as e:
            out: dict[str, Any] = {"metrics": {}, "errors": {"all": error_dict(e)}}
        for m in self.metrics:
            try:
                out["metrics"][m] = self.host.evaluate(self.counter_data, index, [m])[0]
            except Exception as e:
                out["metrics"][m] = None
                out["errors"][m] = error_dict(e)
        return out

    def retry_without_sass(self) -> None:
        """When the range profiler got no values and a ``__sass_`` metric was asked for, once more without those."""
        sass = [m for m in self.metrics if "__sass_" in m]
        if not self.report.ok("range.enable") or self.report.ok("range.evaluate") or self.host is None:
            return
        if not sass or len(sass) == len(self.metrics):
            return
        with self.report.step("retry_without_sass") as s:
            s.values["dropped"] = sass
            self.metrics = [m for m in self.metrics if m not in sass]
            self.report.data["ranges"] = []
            self.config = None
            self._close_host()
            self.host = self._new_host()
            self.config = self.host.config_image(self.metrics)
            s.values["passes"] = self.host.passes(self.config)
        if self.config is not None:
            self.phase_range()

    def phase_teardown(self) -> None:
        """Deinitialise the host object and the profiler."""
        if self.host is not None:
            with self.report.step("host.deinitialize"):
                host, self.host = self.host, None
                host.close()
        if self.cupti is not None and self.report.ok("cupti.profiler_initialize"):
            with self.report.step("cupti.profiler_deinitialize"):
                self.cupti.call("cuptiProfilerDeInitialize", params(ProfilerDeInitialize))

    # -- ncu
    def phase_ncu(self) -> None:
        """The same kernels under ncu; per kernel the metrics; the comparison with the in-process ranges."""
        ncu = self.args.ncu
        if not os.path.exists(ncu):
            self.report.skip("ncu.run", f"{ncu} does not exist (pass --ncu PATH)")
            return
        left = self.args.deadline - (time.perf_counter() - self.t0) - IN_PROCESS_RESERVE_S
        timeout = min(self.args.ncu_timeout, left)
        if timeout < 20:
            self.report.skip("ncu.run", f"only {left:.0f} s left before the deadline")
            return
        t = time.perf_counter()
        csv_text = ""
        with tempfile.TemporaryDirectory(prefix="rp_probe_") as tmp, self.report.step("ncu.run") as s:
            rep = os.path.join(tmp, "probe")
            cmd = [ncu, "--nvtx", "--nvtx-include", f"{NVTX_RANGE}/", "--clock-control", "none"]
            cmd += [
                "--metrics",
                ",".join(self.args.metrics),
                "-f",
                "-o",
                rep,
                sys.executable,
                os.path.abspath(__file__),
                "--child",
            ]
            s.values["command"] = " ".join(cmd)
            out = run_bounded(cmd, timeout)
            s.values.update(rc=out["rc"], seconds=out["seconds"], log_tail=out["output"][-4000:])
            notes = [line for line in out["output"].splitlines() if line.startswith(("==ERROR==", "==WARNING=="))]
            s.values["ncu_messages"] = notes[:20]
            if out["rc"] != 0:
                raise RuntimeError(f"ncu exited {out['rc']} (timed out: {out['timed_out']}); see log_tail")
            imp = [ncu, "--import", rep + ".ncu-rep", "--csv", "--page", "raw", "--print-units", "base"]
            imp += ["--print-nvtx-rename", "none"]
            out2 = run_bounded(imp, 60)
            if out2["rc"] != 0:
                raise RuntimeError(f"ncu --import exited {out2['rc']}: {out2['output'][-2000:]}")
            csv_text = out2["output"]
        self.timing("ncu_s", time.perf_counter() - t)
        if not csv_text:
            return
        with self.report.step("ncu.parse") as s:
            kernels = parse_ncu_csv(csv_text, self.args.metrics)
            self.report.data["ncu_kernels"] = kernels
            s.values["kernels"] = [k["name"] for k in kernels]

    def phase_compare(self) -> None:
        """In-process range i against ncu's kernel i, per metric."""
        ranges, kernels = self.report.data["ranges"], self.report.data["ncu_kernels"]
        if not ranges or not kernels:
            self.report.skip("compare", f"{len(ranges)} in-process ranges, {len(kernels)} ncu kernels")
            return
        with self.report.step("compare") as s:
            rows = compare(ranges, kernels, self.args.metrics)
            self.report.data["comparison"] = rows
            s.values.update(pairs=min(len(ranges), len(kernels)), ranges=len(ranges), kernels=len(kernels))
            if len(ranges) != len(kernels):
                s.values["warning"] = "range and kernel counts differ: pairs are by order only"

    def run(self) -> None:
        """Every phase in order; what fails is recorded and the rest goes on where it can.

        ncu goes first, while this process has no CUDA context and no profiler of its own.
        """
        gpu = not self.args.host_only
        if gpu and not self.args.no_ncu:
            self.phase_ncu()
        if gpu:
            t = time.perf_counter()
            self.phase_torch()
            self.timing("torch_init_s", time.perf_counter() - t)
        self.phase_library()
        t = time.perf_counter()
        self.phase_host()
        self.timing("host_config_s", time.perf_counter() - t)
        if gpu:
            self.phase_range()
            self.retry_without_sass()
        self.phase_teardown()
        if gpu and not self.args.no_ncu:
            self.phase_compare()
        self.report.data["total_s"] = round(time.perf_counter() - self.t0, 3)
        self.report.save()


def run_bounded(cmd: list[str], timeout: float) -> dict[str, Any]:
    """Run ``cmd`` in its own session, stdout and stderr together; past ``timeout`` s kill the whole group."""
    t = time.perf_counter()
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace", start_new_session=True
    )
    timed_out = False
    try:
        output, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        output, _ = proc.communicate()
    rc = proc.returncode if not timed_out else -9
    return {"rc": rc, "timed_out": timed_out, "seconds": round(time.perf_counter() - t, 3), "output": output or ""}


# --- summary and command line ---------------------------------------------------------------------------------------
def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:,.6g}"


def summary(report: Report) -> str:
    """The human-readable end of the run: failed steps, per range and metric CUPTI vs ncu, the phase times."""
    data = report.data
    lines = ["", "=== range profiler probe: summary ==="]
    failed = [s for s in data["steps"] if not s["ok"]]
    lines.append(f"steps: {len(data['steps']) - len(failed)} ok, {len(failed)} failed or skipped")
    for s in failed:
        err = s.get("error") or {}
        what = s.get("skipped") or (
            f"{err['call']} -> {err['code']} {err['result']}"
            if "call" in err
            else f"{err.get('type')}: {err.get('message')}"
        )
        lines.append(f"  {s['name']}: {what}")
    ncu_by_index = {row["index"]: row for row in data["comparison"]}
    for rng in data["ranges"]:
        kernel = ncu_by_index.get(rng["index"], {}).get("kernel")
        lines.append(f"range {rng['index']} name={rng['name']!r} ncu kernel={kernel!r}")
        for m, v in rng["metrics"].items():
            row = next((r for r in data["comparison"] if r["index"] == rng["index"] and r["metric"] == m), None)
            ncu_v = row["ncu"] if row else None
            rel = row["rel_diff"] if row else None
            rel_text = "-" if rel is None else f"{rel * 100:+.3f}%"
            lines.append(f"  {m:<52} cupti={_fmt(v):>16} ncu={_fmt(ncu_v):>16} diff={rel_text}")
    if not data["ranges"] and data["ncu_kernels"]:
        for k in data["ncu_kernels"]:
            lines.append(f"ncu kernel {k['name']}: {k['metrics']}")
    lines.append("timings (s): " + ", ".join(f"{k}={v}" for k, v in data["timings"].items()))
    lines.append(f"total: {data.get('total_s')} s; json: {report.path}")
    return "\n".join(lines)


def metric_list(text: str) -> list[str]:
    """``--metrics``: comma-separated metric names (``unit__counter.rollup``), at least one, no repeats."""
    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise argparse.ArgumentTypeError(f"--metrics {text!r} names no metric; give e.g. smsp__inst_executed.sum")
    bad = [n for n in names if not METRIC_NAME.match(n)]
    if bad:
        raise argparse.ArgumentTypeError(
            f"--metrics: {', '.join(bad)} is not a metric name (unit__counter.rollup, e.g. dram__bytes.sum)"
        )
    if len(set(names)) != len(names):
        raise argparse.ArgumentTypeError(f"--metrics {text!r} repeats a metric; name each once")
    return names


def positive(text: str) -> int:
    """A whole number of at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number; give one of at least 1") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is below 1; give a whole number of at least 1")
    return value


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    """The command line; bad input fails here, before any work (argparse exits with status 2 and the reason)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    ap.add_argument("--json", type=Path, help="where to write the JSON record (required unless --child)")
    ap.add_argument("--metrics", type=metric_list, default=list(DEFAULT_METRICS), help="comma-separated metrics")
    ap.add_argument("--max-ranges", type=positive, default=16, help="ranges the counter data image holds (16)")
    ap.add_argument("--libcupti", help="libcupti to load (default: the one torch mapped)")
    ap.add_argument("--chip", help="chip name instead of cuptiDeviceGetChipName (needed with --host-only)")
    ap.add_argument("--host-only", action="store_true", help="only the host API steps (no torch, no GPU)")
    ap.add_argument("--no-ncu", action="store_true", help="skip the ncu comparison")
    ap.add_argument("--ncu", default=NCU, help=f"ncu binary ({NCU})")
    ap.add_argument("--ncu-timeout", type=positive, default=120, help="seconds for the ncu run (120)")
    ap.add_argument("--deadline", type=positive, default=230, help="seconds before the whole run is stopped (230)")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(list(argv))
    if not args.child and args.json is None:
        ap.error("--json OUT.json is required (where the probe writes its record)")
    if args.host_only and not args.chip:
        ap.error("--host-only needs --chip NAME (no device to ask), e.g. --chip GH100")
    if args.json is not None and not args.json.parent.is_dir():
        ap.error(f"--json {args.json}: folder {args.json.parent} does not exist; create it or pick another path")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Run the probe; 0 when every step that ran succeeded (skipped ones aside), 1 otherwise (the JSON says which)."""
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.child:
        child()
        return 0
    faulthandler.dump_traceback_later(args.deadline, exit=True, file=2)  # fd 2: stderr even if replaced
    try:
        report = Report(args.json, sys.argv if argv is None else ["range_profiler_probe.py", *argv])
        probe = Probe(args, report)
        probe.run()
        print(summary(report), flush=True)
    finally:
        faulthandler.cancel_dump_traceback_later()
    return 0 if all(s["ok"] or s.get("skipped") for s in report.data["steps"]) else 1


if __name__ == "__main__":
    sys.exit(main())
