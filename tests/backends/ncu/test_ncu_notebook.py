"""A real notebook, executed with nbclient and ipykernel, that defines a function in a cell and profiles it.

The function lives in the kernel's ``__main__``, so under ncu it travels by value; its prints must appear in the
cell's output. CI runs it on the host backend and under the fake ncu; with ``NSIGHTX_TEST_REAL_NCU=1`` (or the
gpu-marked variant, on the H200) it runs under the real ncu with a torch kernel.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import ncu_fake
import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

REAL_NCU = os.environ.get("NSIGHTX_TEST_REAL_NCU", "") not in ("", "0")

CELLS = [
    "import json, os\nimport nsightx\nBACKEND = os.environ['NB_BACKEND']\nTORCH = os.environ.get('NB_TORCH') == '1'",
    # the profiled function, defined in a cell (the kernel's __main__)
    """@nsightx.analyze.kernel(configs=[(1,), (2,)], runs=2, backend=BACKEND, verbosity=0, clock_control="none",
                        output_prefix=os.environ["NB_OUT"] + "/nb_")
def scale(n):
    print(f"cell function sees n={n}")
    if TORCH:
        import torch
        x = torch.ones(1 << 16, device="cuda")
    with nsightx.annotate("scale"):
        if TORCH:
            x.mul_(n)
        else:
            sum(range(1000 * n))""",
    """res = scale()
df = res.to_dataframe()
print("RESULT " + json.dumps({"runs": df["NumRuns"].tolist(), "n": df["n"].tolist(),
                              "report": res.environment.get("ncu_report")}))""",
]


def _run_notebook(tmp_path: Path, backend: str, *, torch: bool = False) -> tuple[dict[str, object], str]:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(src) for src in CELLS]
    path = tmp_path / "profile.ipynb"
    nbformat.write(nb, path)
    os.environ.update({"NB_BACKEND": backend, "NB_OUT": str(tmp_path / "out"), "NB_TORCH": "1" if torch else "0"})
    try:
        client = nbclient.NotebookClient(
            nbformat.read(path, as_version=4),
            timeout=300,
            kernel_name="python3",
            resources={"metadata": {"path": str(tmp_path)}},
        )
        executed = client.execute()
    finally:
        for var in ("NB_BACKEND", "NB_OUT", "NB_TORCH"):
            os.environ.pop(var, None)
    text = "".join(
        out.get("text", "")
        for cell in executed.cells
        for out in cell.get("outputs", [])
        if out.get("output_type") == "stream"
    )
    [line] = [x for x in text.splitlines() if x.startswith("RESULT ")]
    return json.loads(line[len("RESULT ") :]), text


def test_notebook_function_on_the_host_backend(tmp_path):
    result, text = _run_notebook(tmp_path, "host")
    assert result["runs"] == [2, 2] and result["n"] == [1, 2]
    assert "cell function sees n=2" in text


@pytest.mark.skipif(REAL_NCU, reason="NSIGHTX_TEST_REAL_NCU=1: the real-ncu variant runs instead")
def test_notebook_function_under_the_fake_ncu(tmp_path, monkeypatch):
    ncu_fake.use_fake_ncu(monkeypatch, tmp_path)
    monkeypatch.setenv("FAKE_NCU_REPORT", str(ncu_fake.ONE_METRIC))
    result, text = _run_notebook(tmp_path, "ncu")
    assert result["runs"] == [2, 2] and result["n"] == [1, 2]
    assert Path(str(result["report"])).is_file()
    assert text.count("cell function sees n=1") == 3  # the worker's prints reach the cell (warm-up + 2 runs)
    assert "==PROF==" not in text


def _real_ncu(tmp_path: Path) -> None:
    from nsightx_ncu._backend import NcuBackend

    if not NcuBackend.availability().available:
        pytest.skip("ncu backend not available here")
    result, text = _run_notebook(tmp_path, "ncu", torch=True)
    assert result["runs"] == [2, 2] and Path(str(result["report"])).is_file()
    assert text.count("cell function sees n=1") == 3


@pytest.mark.skipif(not REAL_NCU, reason="set NSIGHTX_TEST_REAL_NCU=1 to use the real ncu")
def test_notebook_function_under_the_real_ncu(tmp_path):
    _real_ncu(tmp_path)


@pytest.mark.gpu
def test_notebook_function_under_the_real_ncu_gpu(tmp_path):
    _real_ncu(tmp_path)
