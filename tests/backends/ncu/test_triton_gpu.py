"""The most common Triton script under ncu (issue 36): a module-level ``@triton.jit`` kernel in ``__main__``.

``tests/fixtures/scripts/triton_ncu_script.py`` is run as ``python3 script.py``, as a user runs it; before issue 36 it
stopped with ``UnpicklableError: global 'axpb', a triton.runtime.jit.JITFunction, cannot be pickled``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from _paths import FIXTURES

pytestmark = pytest.mark.gpu

pytest.importorskip("triton")
pytest.importorskip("torch")
pytest.importorskip("cloudpickle")
pytest.importorskip("nvtx")

from ncu_fake import subprocess_env  # noqa: E402

SCRIPT = FIXTURES / "scripts" / "triton_ncu_script.py"


def _ncu_ready() -> bool:
    from nsightx_ncu._backend import NcuBackend

    return NcuBackend.availability().available


@pytest.mark.skipif("not _ncu_ready()", reason="ncu backend not available here")
def test_module_level_triton_kernel_runs_under_ncu(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, str(SCRIPT), "ncu", f"{tmp_path}/out/triton_"],
        capture_output=True,
        text=True,
        timeout=140,  # run_gpu.sh gives each test 150 s
        check=False,
        env=subprocess_env(),
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr[-4000:]
    data = json.loads(out.stdout.strip().splitlines()[-1])
    rows = data["rows"]
    assert [r["n"] for r in rows] == [1 << 16, 1 << 20] and [r["NumRuns"] for r in rows] == [3, 3]
    assert all(r["Annotation"] == "axpb" and "axpb" in r["Kernel"] for r in rows)
    assert all(r["AvgValue"] > 0 for r in rows) and rows[1]["AvgValue"] > rows[0]["AvgValue"]
    assert Path(data["ncu_report"]).name == "triton_ncu-output-run_axpb-0.ncu-rep"
