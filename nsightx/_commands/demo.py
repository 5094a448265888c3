"""``nsightx demo``: a small sweep on the best backend available here, printed as a table.

On a CPU the demo times a NumPy matrix multiply with the host backend. Multithreaded BLAS on a shared machine made
that number swing by 100x from one demo to the next (issue 38: n=128 measured 81 us, 565 us, 15.13 ms and 953 us
in four demos on 2 busy cores; 78.6 to 84.3 us with one BLAS thread), so the demo asks for one BLAS thread before
NumPy loads, unless the environment already chose a number (:data:`BLAS_THREAD_VARIABLES`).

Its options are the command line's (``--runs``, ``--output``), and so are its messages: a ``--runs`` that could not
finish in :data:`MAX_DEMO_S` is refused with an estimate made from one timed run of each size.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import nsightx
from nsightx._errors import ConfigError
from nsightx._results.summary import device_label, render_text, summarize, unstable_warning

BLAS_THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "BLIS_NUM_THREADS")
"""What OpenBLAS, OpenMP, MKL and BLIS read, once, when NumPy loads them."""

MAX_DEMO_S = 600.0
"""The longest sweep ``--runs`` may ask for: beyond it the demo refuses, with its estimate."""

SAY_ESTIMATE_S = 30.0
"""From this estimated duration on, the demo says on stderr how long it will take."""

ESTIMATE_ABOVE_RUNS = 100
"""``--runs`` up to this many are not timed first (the default 10 takes well under a second on a CPU)."""


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


def one_blas_thread() -> str:
    """Ask BLAS for one thread where NumPy is not loaded yet and the environment does not say otherwise.

    Returns:
        What the device line says about it: ``"1 BLAS thread"``, ``"BLAS threads: OPENBLAS_NUM_THREADS=4"`` when
        the environment chose, or ``""`` when NumPy was loaded before (its BLAS threads are set already).
    """
    chosen = {v: os.environ[v] for v in BLAS_THREAD_VARIABLES if v in os.environ}
    if "numpy" in sys.modules:
        return ""
    if chosen:
        return "BLAS threads: " + ", ".join(f"{k}={v}" for k, v in chosen.items())
    for variable in BLAS_THREAD_VARIABLES:
        os.environ[variable] = "1"
    return "1 BLAS thread"


def _workload() -> tuple[list[int], Callable[[int], None], bool]:
    """The sizes, the annotated matrix multiply and whether it runs on the GPU (torch with CUDA), else NumPy."""
    return (*_gpu_workload(), True) if _has_cuda() else (*_cpu_workload(), False)


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


def check_output(output: str) -> None:
    """Create the ``--output`` folder and check that a file can be written in it, before anything runs.

    Raises:
        ConfigError: the folder cannot be created or written, in the command line's words.
    """
    folder = Path(output)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder, prefix=".nsightx-write-test-"):
            pass
    except OSError as e:
        why = f"{type(e).__name__}: {e.strerror or e}"
        raise ConfigError(
            f"--output {output}: cannot create or write that folder ({why}); give a folder you can write to"
        ) from None


def duration(seconds: float) -> str:
    """``17 ms``, ``220 ms``, ``42 s``, ``3.5 min``, ``2.1 h``, ``250 days``: how long, for a person (never 2.5e+02)."""
    if seconds < 1:
        return f"{_figures(seconds * 1e3)} ms"
    for limit, factor, unit in ((120, 1, "s"), (7200, 60, "min"), (172800, 3600, "h")):
        if seconds < limit:
            return f"{_figures(seconds / factor)} {unit}"
    return f"{_figures(seconds / 86400)} days"


def _figures(value: float) -> str:
    """Two significant figures under 10 (``3.5``), whole numbers above (``42``, ``250``), never an exponent."""
    return f"{value:.2g}" if value < 10 else f"{value:.0f}"


def check_runs(runs: int | str, sizes: list[int], matmul: Callable[[int], None], warmup: int = 1) -> None:
    """Refuse a ``--runs`` that could not finish in :data:`MAX_DEMO_S`; say how long a long one will take.

    Each size is called twice outside a profiled call (where ``annotate`` does nothing): the second call's time,
    summed over the sizes, is one run of the sweep.

    Raises:
        ConfigError: the estimate is over :data:`MAX_DEMO_S`; the message gives it and the largest ``--runs`` that fits.
    """
    if not isinstance(runs, int) or runs <= ESTIMATE_ABOVE_RUNS:
        return
    per_run = 0.0
    for n in sizes:
        matmul(n)
        start = time.perf_counter()
        matmul(n)
        per_run += time.perf_counter() - start
    estimate = (runs + warmup) * per_run
    if estimate > MAX_DEMO_S:
        fits = max(int(MAX_DEMO_S / max(per_run, 1e-9)) - warmup, 1)
        raise ConfigError(
            f"--runs {runs} would take about {duration(estimate)} here (one run of the {len(sizes)} sizes takes "
            f"{duration(per_run)}); give --runs {fits} or fewer (at most {duration(MAX_DEMO_S)}), or --runs auto"
        )
    if estimate >= SAY_ESTIMATE_S:
        print(f"nsightx demo: --runs {runs} takes about {duration(estimate)} here", file=sys.stderr)


def run(output: str = "nsightx-out/", runs: int | str = 10, backend: str = "auto") -> Any:
    """Profile a matrix multiply over a size sweep and print the aggregated table.

    On a CUDA machine with torch, it times ``torch.matmul`` on the GPU; elsewhere it times a NumPy matrix
    multiply on the CPU with the host backend, on one BLAS thread (:func:`one_blas_thread`).

    Args:
        output: The folder the files go to (created if missing), with or without a trailing separator.
        runs: Measured runs per size, or ``"auto"`` (until each size's confidence interval is tight enough).
        backend: Backend name or ``"auto"``.

    Raises:
        ConfigError: ``output`` cannot be written, or ``runs`` could not finish in :data:`MAX_DEMO_S`.
    """
    blas = one_blas_thread()
    sizes, matmul, gpu = _workload()
    check_runs(runs, sizes, matmul)
    check_output(output)
    prefix = os.path.join(output, "")  # a folder, never a file-name prefix: "demo-out" -> "demo-out/"

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
    _report(results, Path(output), "" if gpu else blas)
    return results


def _report(results: Any, folder: Path, note: str = "") -> None:
    """Print the table in readable units, the device, a warning (stderr) for unstable rows, and the files."""
    summary = summarize(results.to_dataframe(), results.data.plan.params, text=True)
    print(render_text(summary))
    device = device_label(results.backend, results.environment)
    print(f"\ndevice: {device}" + (f", {note}" if note else ""))
    adaptive = results.data.plan.adaptive
    warning = unstable_warning(
        summary,
        "a quieter machine or a larger --runs tighten them"
        if adaptive
        else "more runs (--runs N), --runs auto or a quieter machine tighten them",
    )
    if warning:
        sys.stdout.flush()
        print(f"nsightx demo: warning: {warning}", file=sys.stderr)
    print(f"files written under {folder.resolve()}:")
    tag = Path(str(results.environment["raw_data"])).stem.removeprefix("raw_data-")
    for p in sorted(folder.iterdir()):
        if p.stem.endswith(f"-{tag}") or p.stem == tag:
            print(f"  {p.name}")
    sys.stdout.flush()
