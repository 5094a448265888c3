"""``nsightx demo``: a small sweep on the best backend available here, printed as a table."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import nsightx


def _has_cuda() -> bool:
    if importlib_find("torch") is None:
        return False
    import torch

    return bool(torch.cuda.is_available())


def importlib_find(name: str) -> object:
    """``importlib.util.find_spec`` that never raises."""
    import importlib.util

    try:
        return importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None


def _workload() -> tuple[list[int], Callable[[int], None]]:
    """The sizes and the annotated matrix multiply: ``torch.matmul`` on a CUDA GPU, else NumPy on the CPU."""
    return _gpu_workload() if _has_cuda() else _cpu_workload()


def _gpu_workload() -> tuple[list[int], Callable[[int], None]]:
    import torch

    def matmul(n: int) -> None:
        a = torch.randn(n, n, device="cuda")
        b = torch.randn(n, n, device="cuda")
        with nsightx.annotate("matmul"):
            torch.matmul(a, b)
        torch.cuda.synchronize()

    return [512, 1024, 2048, 4096], matmul


def _cpu_workload() -> tuple[list[int], Callable[[int], None]]:
    import numpy as np

    rng = np.random.default_rng(0)

    def matmul(n: int) -> None:
        a = rng.standard_normal((n, n))
        b = rng.standard_normal((n, n))
        with nsightx.annotate("matmul"):
            a @ b

    return [64, 128, 256, 512], matmul


def run(output: str = "nsightx-out/", runs: int = 10, backend: str = "auto") -> Any:
    """Profile a matrix multiply over a size sweep and print the aggregated table.

    On a CUDA machine with torch, it times ``torch.matmul`` on the GPU; elsewhere it times a NumPy matrix
    multiply on the CPU with the host backend.

    Args:
        output: The folder the files go to (created if missing), with or without a trailing separator.
        runs: Measured runs per size.
        backend: Backend name or ``"auto"``.
    """
    prefix = os.path.join(output, "")  # a folder, never a file-name prefix: "demo-out" -> "demo-out/"
    sizes, matmul = _workload()

    def flops(t_ns: float, n: int) -> tuple[float, str]:
        return 2.0 * n**3 / t_ns / 1e3, "TFLOP/s"

    profiled = nsightx.analyze.kernel(
        configs=sizes,
        runs=runs,
        backend=backend,
        output_prefix=prefix,
        output_csv=True,
        derive_metric=flops,
        combine_kernel_metrics=lambda a, b: a + b,
    )(matmul)
    results = profiled()
    _report(results, Path(output))
    return results


def _report(results: Any, folder: Path) -> None:
    """Print the aggregated table, the backend and GPU, and the files the call wrote."""
    import pandas as pd

    frame = results.to_dataframe()
    cols = [
        "Annotation",
        "n",
        "Metric",
        "AvgValue",
        "Unit",
        "CI95_Lower",
        "CI95_Upper",
        "RelativeStdDevPct",
        "NumRuns",
        "Tool",
    ]
    with pd.option_context("display.width", 200, "display.max_columns", 20, "display.float_format", "{:.4g}".format):
        print(frame[cols].to_string(index=False))
    print(f"\nbackend: {results.backend}; GPU: {results.environment.get('GPU')}")
    print(f"files written under {folder.resolve()}:")
    tag = Path(str(results.environment["raw_data"])).stem.removeprefix("raw_data-")
    for p in sorted(folder.iterdir()):
        if p.stem.endswith(f"-{tag}") or p.stem == tag:
            print(f"  {p.name}")
    sys.stdout.flush()
