"""benchmarks/overhead_summary.py on the processes recorded on the GPU machine (the H100, 2026-12-05: the pairs
behind benchmarks/results/overhead/latest.json, kept in tests/fixtures/overhead under run_gpu.sh's names)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from _paths import FIXTURES, ROOT

PAIRS = FIXTURES / "overhead"
SCRIPT = ROOT / "benchmarks" / "overhead_summary.py"


def test_groups_processes_by_tag_and_gives_the_documented_medians() -> None:
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        import overhead_summary
    finally:
        sys.path.pop(0)
    summary = overhead_summary.summarise(overhead_summary.collect(PAIRS))
    assert set(summary) == {"after", "before"}
    after, before = summary["after"], summary["before"]
    assert set(after) == {"sweep_once", "sweep_randn", "tiny"}
    for group in (after, before):
        cupti = group["sweep_once"]["cupti"]
        assert len(cupti["per_process"]) == 4 and cupti["min"] <= cupti["median"] <= cupti["max"]

    # the figures docs/backends.md quotes from this call
    def quoted(group: dict, workload: str, variant: str) -> float:
        return round(group[workload][variant]["median"], 3)

    assert quoted(after, "sweep_once", "cupti") == 1.026 and quoted(before, "sweep_once", "cupti") == 1.079
    assert quoted(after, "sweep_randn", "cupti") == 1.043 and quoted(after, "tiny", "events") == 1.655


def test_a_folder_without_processes_is_an_error(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, str(SCRIPT), str(tmp_path)], capture_output=True, text=True, timeout=60, check=False
    )
    assert out.returncode == 1 and "no backend_overhead_*.json" in out.stderr
