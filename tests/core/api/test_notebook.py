"""A real notebook, executed by nbclient on an ipykernel kernel, that profiles a function on the host backend.

Its last cell's value is the ``ProfileResults``, so Jupyter shows it through ``_repr_html_``: the test reads the
``text/html`` output the notebook stored, as a notebook viewer would, and the progress line the kernel's stderr
carried into the same cell.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

CELLS = [
    "import time\nimport nsightx\nfrom nsightx._run import progress as _progress\n"
    "_progress.DELAY_S = 0.0  # show progress at once",
    """@nsightx.analyze.kernel(configs=[(1,), (2,)], runs=5, backend="host")
def nap(n):
    with nsightx.annotate("nap<&>"):
        time.sleep(0.002 * n)""",
    "results = nap()\nresults",
]


def _execute(tmp_path: Path) -> list[dict]:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(src) for src in CELLS]
    path = tmp_path / "profile_host.ipynb"
    nbformat.write(nb, path)
    client = nbclient.NotebookClient(
        nbformat.read(path, as_version=4),
        timeout=120,
        kernel_name="python3",
        resources={"metadata": {"path": str(tmp_path)}},
    )
    executed = client.execute()
    nbformat.write(executed, path)  # what a user would save and reopen
    return nbformat.read(path, as_version=4).cells[-1]["outputs"]


def test_notebook_shows_the_results_table_and_progress(tmp_path):
    outputs = _execute(tmp_path)
    [result] = [o for o in outputs if o["output_type"] == "execute_result"]
    table = result["data"]["text/html"]
    assert table.startswith('<table class="nsightx-results">')
    header = re.findall(r"<th[^>]*>([^<]*)</th>", table)
    assert header == ["Annotation", "n", "Metric", "Mean", "95% CI", "RSD", "Runs", "Stable", "Tool"]
    cells = re.findall(r"<td[^>]*>([^<]*)</td>", table)
    rows = [cells[i : i + len(header)] for i in range(0, len(cells), len(header))]
    assert [(r[0], r[1], r[-1]) for r in rows] == [("nap&lt;&amp;&gt;", "1", "host"), ("nap&lt;&amp;&gt;", "2", "host")]
    assert all(r[3].endswith(" ms") and r[4].endswith("] ms") for r in rows), rows  # 2 and 4 ms naps
    assert "CPU (host backend)" in table
    assert result["data"]["text/plain"].startswith("ProfileResults(")
    stderr = "".join(o["text"] for o in outputs if o["output_type"] == "stream" and o["name"] == "stderr")
    assert "\rnap: [" in stderr and "12/12 calls (2 warm-up), config 2/2" in stderr  # 2 configs x (5 runs + 1 warm-up)
