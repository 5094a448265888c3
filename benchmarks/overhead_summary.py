"""Summarise several ``backend_overhead.py`` processes: each variant's paired ratio per process, and per group.

    python benchmarks/overhead_summary.py OUTDIR [--json SUMMARY.json]

Reads every ``OUTDIR/backend_overhead_*.json``. A file's group is its tag without the trailing process number
(``backend_overhead_after3.json`` is process 3 of ``after``), so before/after pairs of processes made by
``run_gpu.sh pairs`` are compared side by side. Prints, per workload and variant, the median over the group's
processes of each process's paired-median ratio to the bare loop, with the range. One process is one sample:
the spread between processes (where the inputs and the allocator land, the machine's drift) is larger than
within one, so the median over processes is the figure to quote.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from pathlib import Path
from typing import Any


def group_of(path: Path) -> tuple[str, str]:
    """(group, process) of one output file: ``backend_overhead_after3.json`` -> ("after", "3")."""
    tag = path.stem.removeprefix("backend_overhead").lstrip("_")
    m = re.fullmatch(r"(.*?)(\d*)", tag)
    assert m is not None  # the pattern matches any string
    return m.group(1) or "default", m.group(2) or "1"


def collect(outdir: Path) -> dict[str, dict[str, dict[str, list[float]]]]:
    """group -> workload -> variant -> one paired ratio per process, in process order."""
    table: dict[str, dict[str, dict[str, list[float]]]] = {}
    for path in sorted(outdir.glob("backend_overhead_*.json"), key=lambda p: group_of(p)[::-1]):
        group, _ = group_of(path)
        report = json.loads(path.read_text(encoding="utf-8"))
        for workload, res in report["workloads"].items():
            for variant, ratio in res["ratio_paired_median"].items():
                table.setdefault(group, {}).setdefault(workload, {}).setdefault(variant, []).append(ratio)
    return table


def summarise(table: dict[str, dict[str, dict[str, list[float]]]]) -> dict[str, Any]:
    """Median and range over processes of every (group, workload, variant)."""
    return {
        group: {
            workload: {
                variant: {
                    "median": round(statistics.median(r), 4),
                    "min": round(min(r), 4),
                    "max": round(max(r), 4),
                    "per_process": [round(x, 4) for x in r],
                }
                for variant, r in variants.items()
            }
            for workload, variants in workloads.items()
        }
        for group, workloads in table.items()
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("outdir", type=Path)
    ap.add_argument("--json", type=Path, help="also write the summary here")
    args = ap.parse_args()
    summary = summarise(collect(args.outdir))
    if not summary:
        print(f"no backend_overhead_*.json under {args.outdir}", file=sys.stderr)
        return 1
    for group, workloads in summary.items():
        for workload, variants in workloads.items():
            cells = ", ".join(
                f"{v} {s['median']:.3f} ({s['min']:.3f}-{s['max']:.3f})" for v, s in variants.items() if v != "bare"
            )
            n = len(next(iter(variants.values()))["per_process"])
            print(f"{group:>8} {workload:<12} [{n} processes] {cells}")
    if args.json:
        args.json.write_text(json.dumps(summary, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
