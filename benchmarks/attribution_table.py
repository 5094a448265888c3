"""Kernels attributed to each region, per run: cupti against ncu (issue 20, part 1's table).

The regions: ``loss.backward()`` of a 2-layer MLP (Linear 512, ReLU, Linear 512; batch 64), ``a + b`` in a
``threading.Thread`` started and joined inside the region, an add on a side stream, a CUDA graph replay of three
kernels, and a plain launch. ``combine_kernel_metrics=operator.add``. Each column runs in its own process:

* ``cupti``
* ``ncu`` (the default: process-wide start/end NVTX ranges)
* ``ncu push_pop`` (``backend_options={"ncu_nvtx_ranges": "push_pop"}``, the default before issue 20), for reference

Usage (GPU machine, repository root; never locks clocks)::

    PYTHONPATH=.:backends:plugins python3 benchmarks/attribution_table.py --json attribution.json

Prints a markdown table (kernels per run: the distinct counts over the runs) and writes the JSON (command,
machine, counts per run).
"""

from __future__ import annotations

import argparse
import json
import operator
import platform
import subprocess
import sys
import threading
import time
from typing import Any

REGIONS = ("backward", "thread", "side_stream", "graph", "plain")
LABELS = {
    "backward": "`loss.backward()` of a 2-layer MLP (Linear 512, ReLU, Linear 512; batch 64)",
    "thread": "`a + b` in a `threading.Thread` started and joined inside the region",
    "side_stream": "`a.add_(1)` on a side stream",
    "graph": "CUDA graph replay (3 kernels captured)",
    "plain": "`b.mul_(2)`, a plain launch",
}
COLUMNS = (("cupti", "cupti", None), ("ncu", "ncu", None), ("ncu push_pop", "ncu", "push_pop"))
RUNS = 3
STATE: dict[str, Any] = {}


def _build(torch: Any) -> None:
    model = torch.nn.Sequential(torch.nn.Linear(512, 512), torch.nn.ReLU(), torch.nn.Linear(512, 512)).cuda()
    STATE.update(
        model=model,
        inp=torch.randn(64, 512, device="cuda"),
        a=torch.randn(1 << 16, device="cuda"),
        b=torch.randn(1 << 16, device="cuda"),
        side=torch.cuda.Stream(),
    )
    gx = torch.randn(1 << 16, device="cuda")
    warm = torch.cuda.Stream()
    warm.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(warm):
        gx * 2
    torch.cuda.current_stream().wait_stream(warm)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        gy = gx * 2
        gy.add_(1)
        gy.mul_(3)
    STATE.update(graph=graph, graph_io=(gx, gy))
    torch.cuda.synchronize()


def regions() -> None:
    """The profiled function (defined in ``__main__``: it reaches the ncu worker by value, through cloudpickle)."""
    import torch

    import nsightx

    if not STATE:
        _build(torch)
    model, a, b = STATE["model"], STATE["a"], STATE["b"]
    model.zero_grad(set_to_none=True)
    loss = model(STATE["inp"]).sum()
    with nsightx.annotate("backward"):
        loss.backward()
    with nsightx.annotate("thread"):
        worker = threading.Thread(target=lambda: a + b)
        worker.start()
        worker.join()
    with nsightx.annotate("side_stream"):
        side = STATE["side"]
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            a.add_(1)
        torch.cuda.current_stream().wait_stream(side)
    with nsightx.annotate("graph"):
        STATE["graph"].replay()
    with nsightx.annotate("plain"):
        b.mul_(2)
    torch.cuda.synchronize()


def one(backend: str, ranges: str | None) -> dict[str, Any]:
    """Measure in this process; the counts per region and run, or the error."""
    import nsightx

    options: dict[str, Any] = {
        "runs": RUNS,
        "combine_kernel_metrics": operator.add,
        "verbosity": 0,
        "thermal_mode": "off",
        "backend": backend,
    }
    if backend == "ncu":
        options["clock_control"] = "none"
    if ranges is not None:
        options["backend_options"] = {"ncu_nvtx_ranges": ranges}
    start = time.perf_counter()
    try:
        res = nsightx.analyze.kernel(**options)(regions)()
    except Exception as e:
        return {"error": f"{type(e).__name__}: {str(e).splitlines()[0]}", "seconds": time.perf_counter() - start}
    per_region: dict[str, list[int]] = {name: [] for name in REGIONS}
    for run in res.data.runs:
        if run.config < 0:
            continue
        for reg in run.regions:
            per_region.setdefault(reg.annotation, []).append(int(reg.attributes.get("kernel_count", 0)))
    return {
        "counts": per_region,
        "seconds": round(time.perf_counter() - start, 2),
        "environment": {k: v for k, v in res.environment.items() if k in ("GPU", "ncu_version")},
    }


def cell(data: dict[str, Any], region: str) -> str:
    if "error" in data:
        return f"**{data['error'][:60]}**"
    counts = data["counts"].get(region, [])
    values = sorted(set(counts))
    if not values:
        return "-"
    return (
        f"{values[0]} kernel{'s' if values[0] != 1 else ''} per run"
        if len(values) == 1
        else f"{'/'.join(map(str, values))} (varies)"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", help="write the results here")
    parser.add_argument("--one", nargs=2, metavar=("BACKEND", "RANGES"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        backend, ranges = args.one
        print(json.dumps(one(backend, None if ranges == "-" else ranges)))
        return 0
    columns: dict[str, dict[str, Any]] = {}
    for label, backend, ranges in COLUMNS:
        out = subprocess.run(
            [sys.executable, __file__, "--one", backend, ranges or "-"], capture_output=True, text=True, check=False
        )
        lines = out.stdout.strip().splitlines()
        try:
            columns[label] = json.loads(lines[-1])
        except (IndexError, json.JSONDecodeError):
            columns[label] = {"error": f"exit {out.returncode}: {out.stderr.strip().splitlines()[-1:]}"}
    header = "| region | " + " | ".join(label for label, _, _ in COLUMNS) + " |"
    print(header)
    print("|" + "---|" * (len(COLUMNS) + 1))
    for region in REGIONS:
        print(f"| {LABELS[region]} | " + " | ".join(cell(columns[label], region) for label, _, _ in COLUMNS) + " |")
    cupti, ncu = columns["cupti"], columns["ncu"]
    same = "counts" in cupti and "counts" in ncu and cupti["counts"] == ncu["counts"]
    print(f"\nncu (default) equals cupti in every region and run: {same}")
    if args.json:
        smi = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip()
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(
                {
                    "command": " ".join([sys.executable, *sys.argv]),
                    "date": time.strftime("%Y-%m-%d %H:%M:%S"),
                    "machine": {"host": platform.node(), "gpu": smi, "python": platform.python_version()},
                    "runs": RUNS,
                    "columns": columns,
                    "ncu_equals_cupti": same,
                },
                fh,
                indent=1,
            )
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
