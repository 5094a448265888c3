"""Module-level state used by a profiled function, under the real ncu (GPU only; run on the H200).

Eight kinds of state (``ncu_gpu_state.KINDS``), two ways of travelling:

* by reference: the functions of the importable module ``ncu_gpu_state``; the worker imports it and builds its
  own state, so every kind works;
* by value: the same file run as ``__main__`` in a subprocess; a value that cannot be pickled must fail before ncu
  starts, as an ``UnpicklableError`` naming the global and its type; a picklable one (a CUDA tensor, a module on
  the GPU: copied through host memory) works.
"""

from __future__ import annotations

import json
import subprocess
import sys

import ncu_fake
import pytest
from _paths import TESTS

pytestmark = pytest.mark.gpu

pytest.importorskip("torch")
pytest.importorskip("pynvml")
pytest.importorskip("cloudpickle")
pytest.importorskip("nvtx")

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
MUST_FAIL = {"nvml_handle": "NVML_HANDLE", "ctypes_pointer": "CTYPES_POINTER", "lock": "LOCK", "open_file": "OPEN_FILE"}
MUST_WORK = ("cuda_tensor", "gpu_module")
EITHER = {
    "cuda_core_kernel": {"CUDA_CORE_KERNEL", "CUDA_CORE_STREAM", "LaunchConfig", "launch"},
    "cuda_stream": {"CUDA_STREAM"},
}


def _ncu_ready() -> bool:
    from nsightx_ncu._backend import NcuBackend

    return NcuBackend.availability().available


needs_ncu = pytest.mark.skipif("not _ncu_ready()", reason="ncu backend not available here")


@needs_ncu
@pytest.mark.parametrize("kind", KINDS)
def test_state_of_an_importable_module_works_by_reference(kind):
    import ncu_gpu_state

    result = ncu_gpu_state.outcome(kind)
    if "skipped" in result:
        pytest.skip(f"cuda.core kernel could not be built here: {result['skipped']}")
    assert result.get("runs") == [2], result
    assert all(v > 0 for v in result["avg"])


@needs_ncu
def test_prints_in_the_worker_reach_the_users_stdout(capsys):
    import ncu_gpu_state

    assert ncu_gpu_state.outcome("cuda_tensor").get("runs") == [2]
    out = capsys.readouterr().out
    assert out.count("cuda_tensor sees cuda:0") == 3  # one warm-up and two measured runs, printed in the worker
    assert "==PROF==" not in out


@pytest.fixture(scope="module")
def by_value() -> dict[str, dict[str, object]]:
    script = TESTS / "ncu_gpu_state.py"
    out = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
        env=ncu_fake.subprocess_env(),
    )
    assert out.returncode == 0, out.stderr[-3000:]
    found = [json.loads(line[len("OUTCOME ") :]) for line in out.stdout.splitlines() if line.startswith("OUTCOME ")]
    return {r["kind"]: r for r in found}


@needs_ncu
@pytest.mark.parametrize("kind", KINDS)
def test_state_of_a_main_script_works_or_fails_named(kind, by_value):
    result = by_value[kind]
    print(json.dumps(result))  # the record: how each kind ended
    if "skipped" in result:
        pytest.skip(f"cuda.core kernel could not be built here: {result['skipped']}")
    if kind in MUST_WORK:
        assert result.get("runs") == [2], result
        return
    if kind in MUST_FAIL or "error" in result:
        names = {MUST_FAIL[kind]} if kind in MUST_FAIL else EITHER[kind]
        assert result.get("error") == "UnpicklableError", result
        what = str(result["what"])
        assert what.startswith("global `") and what.strip("`").split("`")[-1] in names, result
        assert "cannot be pickled" in str(result["message"]) and "Ways out" in str(result["message"])
        assert result["type_name"], result
        return
    assert result.get("runs") == [2], result  # an EITHER kind that pickled: it must then work
