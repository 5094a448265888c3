"""benchmarks/range_profiler_probe.py on CPU: its CUPTI struct layouts against the CUDA 13.0 headers, the host API
through the real libcupti where one is installed, ncu's CSV, the comparison, the command line, and the GPU steps'
bookkeeping with libcupti and the torch workload doubled (the library boundary)."""

from __future__ import annotations

import ctypes
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from _paths import FIXTURES, ROOT
from _scripts import load_script

SCRIPT = ROOT / "benchmarks" / "range_profiler_probe.py"
CUDA_130 = Path("/usr/local/cuda-13.0")
LIBCUPTI_130 = CUDA_130 / "lib" / "libcupti.so.13"
TENSOR_CSV = FIXTURES / "ncu" / "tensor_peaks_h200.csv"


rp = load_script(SCRIPT, "range_profiler_probe")

# Each *_STRUCT_SIZE macro of nvidia-cuda-cupti 13.0.85's headers, as g++ computes it (offsetof(last) + sizeof(last)).
HEADER_STRUCT_SIZE = {
    "CUpti_Device_GetChipName_Params": 32,
    "CUpti_Profiler_Initialize_Params": 16,
    "CUpti_Profiler_DeInitialize_Params": 16,
    "CUpti_Profiler_DeviceSupported_Params": 52,
    "CUpti_Profiler_GetCounterAvailability_Params": 40,
    "CUpti_Profiler_Host_Initialize_Params": 48,
    "CUpti_Profiler_Host_Deinitialize_Params": 24,
    "CUpti_Profiler_Host_GetSupportedChips_Params": 32,
    "CUpti_Profiler_Host_GetMetricProperties_Params": 60,
    "CUpti_Profiler_Host_ConfigAddMetrics_Params": 40,
    "CUpti_Profiler_Host_GetConfigImageSize_Params": 32,
    "CUpti_Profiler_Host_GetConfigImage_Params": 40,
    "CUpti_Profiler_Host_GetNumOfPasses_Params": 40,
    "CUpti_Profiler_Host_EvaluateToGpuValues_Params": 72,
    "CUpti_RangeProfiler_Enable_Params": 32,
    "CUpti_RangeProfiler_Disable_Params": 24,
    "CUpti_RangeProfiler_Start_Params": 24,
    "CUpti_RangeProfiler_Stop_Params": 41,
    "CUpti_RangeProfiler_SetConfig_Params": 90,
    "CUpti_RangeProfiler_DecodeData_Params": 32,
    "CUpti_RangeProfiler_GetCounterDataSize_Params": 64,
    "CUpti_RangeProfiler_CounterDataImage_Initialize_Params": 40,
    "CUpti_RangeProfiler_GetCounterDataInfo_Params": 40,
    "CUpti_RangeProfiler_CounterData_GetRangeInfo_Params": 56,
}


# --- struct layouts ---------------------------------------------------------------------------------------------
def test_every_struct_size_is_the_13_0_headers_macro() -> None:
    sizes = {name: rp.struct_size(cls) for cls, name in rp.HEADER_NAMES.items()}
    assert sizes == HEADER_STRUCT_SIZE


def test_struct_size_leaves_out_tail_padding() -> None:
    """SetConfig ends in a uint16_t at 88: the macro says 90 where sizeof says 96."""
    assert ctypes.sizeof(rp.RangeSetConfig) == 96
    assert rp.struct_size(rp.RangeSetConfig) == 90
    assert rp.RangeSetConfig.targetNestingLevel.offset == 88


@pytest.mark.skipif(
    shutil.which("g++") is None or not (CUDA_130 / "include" / "cupti_range_profiler.h").exists(),
    reason="needs g++ and the CUDA 13.0 CUPTI headers",
)
def test_every_field_offset_matches_the_headers(tmp_path: Path) -> None:
    """Compile offsetof() of every field the probe declares against the installed headers and compare."""
    lines = []
    expected = []
    for cls, name in rp.HEADER_NAMES.items():
        for field, _ in rp.all_fields(cls):
            lines.append(f'printf("{name}.{field} %zu\\n", offsetof({name}, {field}));')
            expected.append(f"{name}.{field} {getattr(cls, field).offset}")
        lines.append(f'printf("{name}.SIZE %zu\\n", (size_t){name}_STRUCT_SIZE);')
        expected.append(f"{name}.SIZE {HEADER_STRUCT_SIZE[name]}")
    includes = "".join(
        f"#include <{h}>\n" for h in ("cupti_target.h", "cupti_profiler_target.h", "cupti_profiler_host.h")
    )
    source = f"#include <cstdio>\n#include <cstddef>\n{includes}#include <cupti_range_profiler.h>\n"
    source += "int main() {\n" + "\n".join(lines) + "\nreturn 0;\n}\n"
    (tmp_path / "offsets.cpp").write_text(source)
    exe = tmp_path / "offsets"
    build = subprocess.run(
        ["g++", f"-I{CUDA_130 / 'include'}", str(tmp_path / "offsets.cpp"), "-o", str(exe)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert build.returncode == 0, build.stderr[-3000:]
    out = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.split("\n")
    assert [line for line in out if line] == expected


def test_params_sets_struct_size_and_refuses_unknown_fields() -> None:
    p = rp.params(rp.RangeStop, pRangeProfilerObject=7)
    assert (p.structSize, p.pPriv, p.pRangeProfilerObject) == (41, None, 7)
    with pytest.raises(AttributeError, match="RangeStop has no field 'bogus'"):
        rp.params(rp.RangeStop, bogus=1)


# --- finding libcupti ----------------------------------------------------------------------------------------------
def test_mapped_path_finds_libcupti_in_proc_maps_text() -> None:
    maps = (
        "7f00-7f01 r--p 00000000 08:01 1 /usr/lib/x86_64-linux-gnu/libc.so.6\n"
        "7f02-7f03 r-xp 00000000 08:01 2 /venv/lib/python3.12/site-packages/cupti/cupti.cpython-312.so\n"
        "7f04-7f05 r-xp 00000000 08:01 3 /venv/site-packages/nvidia/cu13/lib/libcupti.so.13\n"
        "7f06-7f07 rw-p 00000000 00:00 0 \n"
    )
    assert rp.mapped_path(maps, "libcupti.so") == "/venv/site-packages/nvidia/cu13/lib/libcupti.so.13"
    assert rp.mapped_path(maps, "libnvperf_host.so") is None


def test_an_explicit_libcupti_wins() -> None:
    assert rp.find_libcupti("/x/libcupti.so.13") == ("/x/libcupti.so.13", "--libcupti")


# --- ncu's CSV and the comparison ----------------------------------------------------------------------------------
def test_parse_ncu_csv_reads_a_real_raw_page() -> None:
    """The raw page ncu 2025.3 wrote on the H100 (units row, thousands separators, NVTX columns)."""
    kernels = rp.parse_ncu_csv(TENSOR_CSV.read_text(), ["gpu__time_duration.sum", "no__such_metric.sum"])
    assert len(kernels) == 1
    k = kernels[0]
    assert k["id"] == "0"
    assert k["name"] == "nvjet_sm90_hsh_256x128_64x4_1x2_h_bz_coopA_NNT"
    assert k["metrics"] == {"gpu__time_duration.sum": 181248.0, "no__such_metric.sum": None}
    assert k["units"]["gpu__time_duration.sum"] == "ns"


def test_parse_ncu_csv_skips_preamble_scales_units_and_reads_na() -> None:
    text = (
        "==PROF== Connected to process 12 (python3)\n"
        "==WARNING== something ncu says\n"
        '"ID","Kernel Name","dram__bytes.sum","gpu__time_duration.sum","smsp__inst_executed.sum"\n'
        '"","","Kbyte","usecond","inst"\n'
        '"0","sgemm_a","1,234.5","61.5","8,388,608"\n'
        '"1","sgemm_b","n/a","340","67,108,864"\n'
    )
    metrics = ["dram__bytes.sum", "gpu__time_duration.sum", "smsp__inst_executed.sum"]
    kernels = rp.parse_ncu_csv(text, metrics)
    assert [k["name"] for k in kernels] == ["sgemm_a", "sgemm_b"]
    assert kernels[0]["metrics"] == pytest.approx(
        {"dram__bytes.sum": 1234500.0, "gpu__time_duration.sum": 61500.0, "smsp__inst_executed.sum": 8388608.0}
    )
    assert kernels[1]["metrics"]["dram__bytes.sum"] is None
    assert kernels[1]["metrics"]["gpu__time_duration.sum"] == pytest.approx(340000.0)


def test_parse_ncu_csv_without_a_header_says_so() -> None:
    with pytest.raises(ValueError, match='no ncu CSV header \\(a line starting with "ID"\\) in 2 lines'):
        rp.parse_ncu_csv("==ERROR== failed\nnothing\n", ["a__b.sum"])


def test_compare_pairs_by_order_and_gives_relative_differences() -> None:
    ranges = [
        {"index": 0, "name": "0", "metrics": {"a__x.sum": 101.0, "b__y.sum": 0.0, "c__z.sum": None}},
        {"index": 1, "name": "1", "metrics": {"a__x.sum": 50.0, "b__y.sum": 3.0, "c__z.sum": 1.0}},
        {"index": 2, "name": "2", "metrics": {"a__x.sum": 1.0}},
    ]
    kernels = [
        {"name": "k0", "metrics": {"a__x.sum": 100.0, "b__y.sum": 0.0, "c__z.sum": 5.0}},
        {"name": "k1", "metrics": {"a__x.sum": 100.0, "b__y.sum": 0.0, "c__z.sum": None}},
    ]
    rows = rp.compare(ranges, kernels, ["a__x.sum", "b__y.sum", "c__z.sum"])
    got = {(r["index"], r["metric"]): r["rel_diff"] for r in rows}
    assert got == {
        (0, "a__x.sum"): pytest.approx(0.01),
        (0, "b__y.sum"): 0.0,
        (0, "c__z.sum"): None,
        (1, "a__x.sum"): pytest.approx(-0.5),
        (1, "b__y.sum"): None,
        (1, "c__z.sum"): None,
    }
    assert rows[0]["kernel"] == "k0" and rows[0]["range"] == "0"


# --- the command line ----------------------------------------------------------------------------------------------
def test_arguments_default_to_the_four_metrics(tmp_path: Path) -> None:
    args = rp.parse_args(["--json", str(tmp_path / "o.json")])
    assert args.metrics == list(rp.DEFAULT_METRICS)
    assert (args.max_ranges, args.ncu_timeout, args.deadline, args.host_only) == (16, 120, 230, False)


def test_metrics_are_split_and_stripped(tmp_path: Path) -> None:
    args = rp.parse_args(["--json", str(tmp_path / "o.json"), "--metrics", " dram__bytes.sum , sm__cycles.max "])
    assert args.metrics == ["dram__bytes.sum", "sm__cycles.max"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([], "--json OUT.json is required"),
        (["--json", "X", "--metrics", ","], "names no metric"),
        (["--json", "X", "--metrics", "dram_bytes"], "dram_bytes is not a metric name"),
        (["--json", "X", "--metrics", "a__b.sum,a__b.sum"], "repeats a metric"),
        (["--json", "X", "--max-ranges", "0"], "0 is below 1"),
        (["--json", "X", "--host-only"], "--host-only needs --chip NAME"),
        (["--json", "/no/such/folder/o.json"], "folder /no/such/folder does not exist"),
    ],
)
def test_bad_arguments_fail_before_any_work(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exc:
        rp.parse_args(argv)
    assert exc.value.code == 2
    assert message in capsys.readouterr().err


# --- the host API through the real libcupti 13.0 -------------------------------------------------------------------
@pytest.mark.skipif(not LIBCUPTI_130.exists(), reason="needs nvidia-cuda-cupti 13.0's libcupti (no GPU needed)")
def test_host_only_builds_the_config_image_for_gh100(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "host.json"
    rc = rp.main(["--json", str(out), "--host-only", "--chip", "GH100", "--libcupti", str(LIBCUPTI_130)])
    data = json.loads(out.read_text())
    steps = {s["name"]: s for s in data["steps"]}
    assert rc == 0, capsys.readouterr().out
    assert steps["cupti.load"]["values"]["version"] >= 130000
    assert steps["host.supported_chips"]["values"]["chip_listed"] is True
    props = steps["host.metric_properties"]["values"]
    assert props["dram__bytes.sum"]["dim_unit"] == "byte"
    assert props["gpu__time_duration.sum"]["dim_unit"] == "nanosecond"
    assert steps["host.config_image"]["values"]["bytes"] > 0
    assert steps["host.passes"]["values"]["passes"] >= 1
    assert steps["host.deinitialize"]["ok"]


@pytest.mark.skipif(not LIBCUPTI_130.exists(), reason="needs nvidia-cuda-cupti 13.0's libcupti (no GPU needed)")
def test_host_only_names_the_metric_cupti_refuses(tmp_path: Path) -> None:
    out = tmp_path / "host.json"
    argv = ["--json", str(out), "--host-only", "--chip", "GH100", "--libcupti", str(LIBCUPTI_130)]
    rp.main([*argv, "--metrics", "smsp__inst_executed.sum,nosuch__metric.sum"])
    steps = {s["name"]: s for s in json.loads(out.read_text())["steps"]}
    config = steps["host.config_image"]["values"]
    assert config["metrics"] == ["smsp__inst_executed.sum"]
    assert config["all_metrics_error"]["call"] == "cuptiProfilerHostConfigAddMetrics"
    refused = config["refused"]["nosuch__metric.sum"]
    assert refused["call"] == "cuptiProfilerHostConfigAddMetrics"
    assert refused["result"].startswith("CUPTI_ERROR_")
    assert steps["host.passes"]["values"]["passes"] == 1


@pytest.mark.skipif(not LIBCUPTI_130.exists(), reason="needs nvidia-cuda-cupti 13.0's libcupti (no GPU needed)")
def test_a_failed_call_is_named_with_its_code_and_result_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "host.json"
    rc = rp.main(["--json", str(out), "--host-only", "--chip", "NOCHIP", "--libcupti", str(LIBCUPTI_130)])
    steps = {s["name"]: s for s in json.loads(out.read_text())["steps"]}
    assert rc == 1
    err = steps["host.init"]["error"]
    assert err["call"] == "cuptiProfilerHostInitialize"
    assert err["code"] == 46 and err["result"] == "CUPTI_ERROR_INVALID_CHIP_NAME"
    assert "[FAIL] host.init" in capsys.readouterr().out


# --- the GPU steps with libcupti and torch doubled -----------------------------------------------------------------
class _Fn:
    """One fake CUPTI entry point: takes ``byref(params)``, checks the struct and its size, returns a code."""

    def __init__(self, lib: FakeLib, name: str, cls: Any, body: Any) -> None:
        self.lib, self.name, self.cls, self.body = lib, name, cls, body
        self.restype: Any = None
        self.argtypes: Any = None

    def __call__(self, ref: Any, *rest: Any) -> int:
        p = ref._obj
        assert type(p) is self.cls, f"{self.name} got {type(p).__name__}"
        assert p.structSize == rp.struct_size(self.cls), f"{self.name}: structSize {p.structSize}"
        assert p.pPriv is None
        self.lib.calls.append(self.name)
        return int(self.body(p) or 0)


class _Plain:
    """A fake entry point that is not a params call (``argtypes``/``restype`` may be set on it, as on ctypes')."""

    def __init__(self, body: Any) -> None:
        self.body = body
        self.restype: Any = None
        self.argtypes: Any = None

    def __call__(self, *args: Any) -> int:
        return int(self.body(*args))


class FakeLib:
    """libcupti's profiler entry points as the probe calls them: two ranges, values from :attr:`values`."""

    def __init__(self, refuse_sass_at_set_config: bool = False) -> None:
        self.calls: list[str] = []
        self.refuse_sass = refuse_sass_at_set_config
        self.added: list[str] = []
        self._chips = (ctypes.c_char_p * 1)(b"GH100")
        table = {
            "cuptiProfilerInitialize": (rp.ProfilerInitialize, None),
            "cuptiProfilerDeInitialize": (rp.ProfilerDeInitialize, None),
            "cuptiDeviceGetChipName": (rp.DeviceGetChipName, self._chip),
            "cuptiProfilerDeviceSupported": (rp.DeviceSupported, self._supported),
            "cuptiProfilerGetCounterAvailability": (rp.GetCounterAvailability, self._availability),
            "cuptiProfilerHostInitialize": (rp.HostInitialize, self._host_init),
            "cuptiProfilerHostDeinitialize": (rp.HostDeinitialize, None),
            "cuptiProfilerHostGetSupportedChips": (rp.HostGetSupportedChips, self._supported_chips),
            "cuptiProfilerHostGetMetricProperties": (rp.HostGetMetricProperties, self._properties),
            "cuptiProfilerHostConfigAddMetrics": (rp.HostConfigAddMetrics, self._add),
            "cuptiProfilerHostGetConfigImageSize": (rp.HostGetConfigImageSize, self._config_size),
            "cuptiProfilerHostGetConfigImage": (rp.HostGetConfigImage, self._config),
            "cuptiProfilerHostGetNumOfPasses": (rp.HostGetNumOfPasses, self._passes),
            "cuptiProfilerHostEvaluateToGpuValues": (rp.HostEvaluateToGpuValues, self._evaluate),
            "cuptiRangeProfilerEnable": (rp.RangeEnable, self._enable),
            "cuptiRangeProfilerDisable": (rp.RangeDisable, None),
            "cuptiRangeProfilerGetCounterDataSize": (rp.RangeGetCounterDataSize, self._data_size),
            "cuptiRangeProfilerCounterDataImageInitialize": (rp.RangeCounterDataImageInitialize, None),
            "cuptiRangeProfilerSetConfig": (rp.RangeSetConfig, self._set_config),
            "cuptiRangeProfilerStart": (rp.RangeStart, None),
            "cuptiRangeProfilerStop": (rp.RangeStop, self._stop),
            "cuptiRangeProfilerDecodeData": (rp.RangeDecodeData, None),
            "cuptiRangeProfilerGetCounterDataInfo": (rp.RangeGetCounterDataInfo, self._info),
            "cuptiRangeProfilerCounterDataGetRangeInfo": (rp.RangeGetRangeInfo, self._range_info),
        }
        for name, (cls, body) in table.items():
            setattr(self, name, _Fn(self, name, cls, body or (lambda p: 0)))

        self.cuptiGetVersion = _Plain(self._version)
        self.cuptiGetResultString = _Plain(self._result_string)
        self.cuptiGetErrorMessage = _Plain(self._result_string)

    def _version(self, ref: Any) -> int:
        ref._obj.value = 130001
        return 0

    def _result_string(self, code: int, ref: Any) -> int:
        ref._obj.value = {1: b"CUPTI_ERROR_INVALID_PARAMETER", 6: b"CUPTI_ERROR_NOT_SUPPORTED"}.get(code, b"?")
        return 0

    def _chip(self, p: Any) -> None:
        p.pChipName = b"GH100"

    def _supported(self, p: Any) -> None:
        p.isSupported = p.architecture = 3

    def _availability(self, p: Any) -> None:
        p.counterAvailabilityImageSize = 8

    def _host_init(self, p: Any) -> None:
        assert p.profilerType == rp.PROFILER_TYPE_RANGE_PROFILER and p.pChipName == b"GH100"
        assert p.pCounterAvailabilityImage
        p.pHostObject = 0x100

    def _supported_chips(self, p: Any) -> None:
        p.numChips = 1
        p.ppChipNames = ctypes.cast(self._chips, ctypes.POINTER(ctypes.c_char_p))

    def _properties(self, p: Any) -> None:
        p.pDescription, p.pHwUnit, p.pDimUnit, p.metricType = b"d", b"sm", b"instruction", 0

    def _add(self, p: Any) -> int:
        self.added = [p.ppMetricNames[i].decode() for i in range(p.numMetrics)]
        return 1 if any(m.startswith("bad__") for m in self.added) else 0

    def _config_size(self, p: Any) -> None:
        p.configImageSize = 16

    def _config(self, p: Any) -> None:
        ctypes.memset(p.pConfigImage, 1 if any("__sass_" in m for m in self.added) else 0, p.configImageSize)

    def _passes(self, p: Any) -> None:
        p.numOfPasses = 2

    def _evaluate(self, p: Any) -> None:
        for i in range(p.numMetrics):
            p.pMetricValues[i] = 1000.0 * (p.rangeIndex + 1) + i

    def _enable(self, p: Any) -> None:
        assert p.ctx == 0xC0
        p.pRangeProfilerObject = 0x200

    def _data_size(self, p: Any) -> None:
        assert p.maxNumOfRanges == p.maxNumRangeTreeNodes == 16
        p.counterDataSize = 64

    def _set_config(self, p: Any) -> int:
        assert (p.range, p.replayMode, p.numNestingLevels, p.minNestingLevel) == (1, 2, 1, 1)
        assert (p.passIndex, p.targetNestingLevel, p.maxRangesPerPass) == (0, 1, 16)
        assert p.configSize == 16 and p.counterDataImageSize == 64
        sass = ctypes.c_uint8.from_address(p.pConfig).value == 1
        return 6 if self.refuse_sass and sass else 0

    def _stop(self, p: Any) -> None:
        p.isAllPassSubmitted = 1

    def _info(self, p: Any) -> None:
        p.numTotalRanges = 2

    def _range_info(self, p: Any) -> None:
        assert p.rangeDelimiter == b"/"
        p.rangeName = str(p.rangeIndex).encode()


class FakeWork:
    """The torch workload's interface, counting its calls."""

    def __init__(self) -> None:
        self.runs = 0
        self.evictions = 0

    def run(self) -> None:
        self.runs += 1

    def evict_l2(self) -> None:
        self.evictions += 1


def _probe_with(lib: FakeLib, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, dict[str, Any]]:
    real = rp.Cupti

    def fake_cupti(path: str) -> Any:
        c = real.__new__(real)
        c.path, c.lib = path, lib
        return c

    monkeypatch.setattr(rp, "Cupti", fake_cupti)
    args = rp.parse_args(["--json", str(tmp_path / "o.json"), "--libcupti", "/fake/libcupti.so.13", "--no-ncu"])
    report = rp.Report(args.json, ["probe"])
    probe = rp.Probe(args, report)
    probe.work, probe.ctx, probe.device = FakeWork(), 0xC0, 0
    probe.phase_library()
    probe.phase_host()
    probe.phase_range()
    probe.retry_without_sass()
    probe.phase_teardown()
    return probe, json.loads((tmp_path / "o.json").read_text())


def test_the_gpu_steps_call_cupti_in_order_and_keep_each_ranges_values(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lib = FakeLib()
    probe, data = _probe_with(lib, tmp_path, monkeypatch)
    assert [s["name"] for s in data["steps"] if not s["ok"]] == []
    range_calls = [c for c in lib.calls if c.startswith("cuptiRangeProfiler")]
    assert range_calls == [
        "cuptiRangeProfilerEnable",
        "cuptiRangeProfilerGetCounterDataSize",
        "cuptiRangeProfilerCounterDataImageInitialize",
        "cuptiRangeProfilerSetConfig",
        "cuptiRangeProfilerStart",
        "cuptiRangeProfilerStop",
        "cuptiRangeProfilerDecodeData",
        "cuptiRangeProfilerGetCounterDataInfo",
        "cuptiRangeProfilerCounterDataGetRangeInfo",
        "cuptiRangeProfilerCounterDataGetRangeInfo",
        "cuptiRangeProfilerDisable",
    ]
    assert lib.calls[-2:] == ["cuptiProfilerHostDeinitialize", "cuptiProfilerDeInitialize"]
    assert (probe.work.runs, probe.work.evictions) == (1, 1)
    metrics = list(rp.DEFAULT_METRICS)
    assert data["ranges"] == [
        {"index": 0, "name": "0", "metrics": {m: 1000.0 + i for i, m in enumerate(metrics)}},
        {"index": 1, "name": "1", "metrics": {m: 2000.0 + i for i, m in enumerate(metrics)}},
    ]
    assert {"setup_s", "launches_s", "decode_s", "evaluate_s"} <= set(data["timings"])


def test_a_refused_sass_metric_is_dropped_and_the_range_profiler_tried_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    lib = FakeLib(refuse_sass_at_set_config=True)
    _, data = _probe_with(lib, tmp_path, monkeypatch)
    names = [s["name"] for s in data["steps"]]
    failed = next(s for s in data["steps"] if s["name"] == "range.set_config")
    assert failed["error"] == {
        "call": "cuptiRangeProfilerSetConfig",
        "code": 6,
        "result": "CUPTI_ERROR_NOT_SUPPORTED",
        "message": "CUPTI_ERROR_NOT_SUPPORTED",
    }
    assert "[FAIL] range.set_config" in capsys.readouterr().out
    assert names.count("range.enable") == 2 and names.count("range.disable") == 2
    retry = next(s for s in data["steps"] if s["name"] == "retry_without_sass")
    assert retry["values"]["dropped"] == ["sm__sass_thread_inst_executed_op_ffma_pred_on.sum"]
    assert [s["ok"] for s in data["steps"] if s["name"] == "range.evaluate"] == [True]
    assert list(data["ranges"][0]["metrics"]) == [m for m in rp.DEFAULT_METRICS if "__sass_" not in m]


def test_the_summary_shows_each_metric_beside_ncu(tmp_path: Path) -> None:
    report = rp.Report(None, ["probe"])
    report.data["ranges"] = [{"index": 0, "name": "0", "metrics": {"a__x.sum": 101.0}}]
    report.data["comparison"] = rp.compare(
        report.data["ranges"], [{"name": "sgemm", "metrics": {"a__x.sum": 100.0}}], ["a__x.sum"]
    )
    report.skip("ncu.run", "no ncu")
    text = rp.summary(report)
    assert "range 0 name='0' ncu kernel='sgemm'" in text
    assert "cupti=             101 ncu=             100 diff=+1.000%" in text
    assert "ncu.run: no ncu" in text


# --- ncu, with the ncu binary doubled ------------------------------------------------------------------------------
FAKE_NCU = """#!{python}
import pathlib, sys
argv = sys.argv[1:]
if "--import" in argv:
    assert argv[argv.index("--print-units") + 1] == "base" and "--csv" in argv
    print('"ID","Kernel Name","smsp__inst_executed.sum","gpu__time_duration.sum"')
    print('"","","inst","ns"')
    print('"0","sgemm_1024","1,000","5,000"')
    print('"1","sgemm_2048","8,000","40,000"')
    sys.exit(0)
assert argv[argv.index("--clock-control") + 1] == "none", argv
assert argv[argv.index("--nvtx-include") + 1] == "rp_probe/", argv
assert argv[argv.index("--metrics") + 1] == "smsp__inst_executed.sum,gpu__time_duration.sum", argv
assert argv[-1] == "--child" and argv[-2].endswith("range_profiler_probe.py"), argv
pathlib.Path(argv[argv.index("-o") + 1] + ".ncu-rep").write_text("report")
print("==PROF== Disconnected")
print("==WARNING== a warning ncu printed")
"""


def test_ncu_runs_the_child_then_its_kernels_are_compared_with_the_ranges(tmp_path: Path) -> None:
    ncu = tmp_path / "ncu"
    ncu.write_text(FAKE_NCU.format(python=sys.executable))
    ncu.chmod(0o755)
    metrics = "smsp__inst_executed.sum,gpu__time_duration.sum"
    args = rp.parse_args(["--json", str(tmp_path / "o.json"), "--ncu", str(ncu), "--metrics", metrics])
    probe = rp.Probe(args, rp.Report(args.json, ["probe"]))
    probe.phase_ncu()
    data = probe.report.data
    run = next(s for s in data["steps"] if s["name"] == "ncu.run")
    assert run["ok"], run
    assert run["values"]["ncu_messages"] == ["==WARNING== a warning ncu printed"]
    assert [k["name"] for k in data["ncu_kernels"]] == ["sgemm_1024", "sgemm_2048"]
    data["ranges"] = [
        {"index": 0, "name": "0", "metrics": {"smsp__inst_executed.sum": 1000.0, "gpu__time_duration.sum": 5100.0}},
        {"index": 1, "name": "1", "metrics": {"smsp__inst_executed.sum": 8000.0, "gpu__time_duration.sum": 39000.0}},
    ]
    probe.phase_compare()
    rel = {(r["kernel"], r["metric"]): r["rel_diff"] for r in data["comparison"]}
    assert rel == {
        ("sgemm_1024", "smsp__inst_executed.sum"): 0.0,
        ("sgemm_1024", "gpu__time_duration.sum"): pytest.approx(0.02),
        ("sgemm_2048", "smsp__inst_executed.sum"): 0.0,
        ("sgemm_2048", "gpu__time_duration.sum"): pytest.approx(-0.025),
    }
    assert "ncu_s" in data["timings"]


def test_a_failing_ncu_is_recorded_with_its_output(tmp_path: Path) -> None:
    ncu = tmp_path / "ncu"
    ncu.write_text(f"#!{sys.executable}\nimport sys\nprint('==ERROR== profiling failed')\nsys.exit(3)\n")
    ncu.chmod(0o755)
    args = rp.parse_args(["--json", str(tmp_path / "o.json"), "--ncu", str(ncu)])
    probe = rp.Probe(args, rp.Report(args.json, ["probe"]))
    probe.phase_ncu()
    run = probe.report.data["steps"][-1]
    assert run["name"] == "ncu.run" and not run["ok"]
    assert run["error"]["message"] == "ncu exited 3 (timed out: False); see log_tail"
    assert run["values"]["ncu_messages"] == ["==ERROR== profiling failed"]


def test_run_bounded_kills_what_outlives_its_timeout() -> None:
    out = rp.run_bounded([sys.executable, "-c", "import time; print('up', flush=True); time.sleep(600)"], 1)
    assert out["timed_out"] is True and out["rc"] == -9
