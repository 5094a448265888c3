"""One process: a CUPTI call, an events call, then ncu calls with counters, default collectors on (GPU only).

Before issue 12 every ncu call after a CUPTI or events call failed with "could not pickle <f> (its configs or
collectors)": the default nvml collectors, used once, held ctypes NVML handles and travelled with the plan.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import ncu_fake
import pytest

pytestmark = pytest.mark.gpu

pytest.importorskip("torch")
pytest.importorskip("cloudpickle")
pytest.importorskip("nvtx")

SCRIPT = textwrap.dedent("""
    import json
    import torch
    import nsightx

    def matmul(n):
        a = torch.randn(n, n, device="cuda")
        b = torch.randn(n, n, device="cuda")
        with nsightx.annotate("matmul"):
            a @ b

    out = {}
    common = {"configs": [(1024,), (2048,)], "runs": 3, "verbosity": 0}
    for name, options in (
        ("cupti", {"backend": "cupti"}),
        ("events", {"backend": "events"}),
        ("ncu-time", {"backend": "ncu", "clock_control": "none"}),
        ("ncu-counters", {"backend": "ncu", "clock_control": "none",
                          "metrics": ["gpu__time_duration.sum", "sm__throughput.avg.pct_of_peak_sustained_elapsed",
                                      "dram__bytes_read.sum"]}),
        ("cupti-again", {"backend": "cupti"}),
    ):
        df = nsightx.analyze.kernel(**common, **options)(matmul)().to_dataframe()
        out[name] = {"runs": df["NumRuns"].tolist(), "metrics": sorted(set(df["Metric"])),
                     "nvml": [c for c in df.columns if c.startswith(("MeasuredSMClockMHz", "DriverVersion"))],
                     "positive": bool((df["AvgValue"] > 0).all())}
    print("RESULT " + json.dumps(out))
""")


def test_cupti_events_then_ncu_with_counters_in_one_process(tmp_path):
    from nsightx_ncu._backend import NcuBackend

    if not NcuBackend.availability().available:
        pytest.skip("ncu backend not available here")
    script = tmp_path / "mixed.py"
    script.write_text(SCRIPT)
    out = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
        env=ncu_fake.subprocess_env(),
    )
    assert out.returncode == 0, out.stderr[-4000:]
    [line] = [x for x in out.stdout.splitlines() if x.startswith("RESULT ")]
    result = json.loads(line[len("RESULT ") :])
    print(json.dumps(result, indent=1))
    for name, r in result.items():
        assert r["positive"], (name, r)
        assert set(r["runs"]) == {3}, (name, r)
        assert "MeasuredSMClockMHz_Avg" in r["nvml"] and "DriverVersion" in r["nvml"], (name, r)  # default collectors
    assert len(result["ncu-counters"]["metrics"]) == 3
