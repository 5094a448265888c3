"""``nsightx demo``: a small sweep on the best backend available here, printed as a table."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import nsightx
from nsightx._results.summary import device_label, render_text, summarize, unstable_warning


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
    """Print the table in readable units, the device, a warning (stderr) for unstable rows, and the files."""
    summary = summarize(results.to_dataframe(), results.data.plan.params)
    print(render_text(summary))
    print(f"\ndevice: {device_label(results.backend, results.environment)}")
    warning = unstable_warning(summary)
    if warning:
        sys.stdout.flush()
        print(f"nsightx demo: warning: {warning}", file=sys.stderr)
    print(f"files written under {folder.resolve()}:")
    tag = Path(str(results.environment["raw_data"])).stem.removeprefix("raw_data-")
    for p in sorted(folder.iterdir()):
        if p.stem.endswith(f"-{tag}") or p.stem == tag:
            print(f"  {p.name}")
    sys.stdout.flush()
