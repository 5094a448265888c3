"""Draw the plot figures of docs/api.md from sweeps measured here, on the CPU with the host backend (no GPU needed).

    python docs/plot_figures.py      # writes docs/img/plot_{sweep,bar_labels,violin}.png

* ``plot_sweep.png``: the default plot (no option but the file name) of NumPy copies and sums of 1 KiB to 64 MiB:
  the sizes span 16x and the times more than two decades, so both axes are logarithmic (issue 38).
* ``plot_bar_labels.png``: three NumPy sort kinds at eight sizes as bars, ``annotate_points=True``: neighbouring
  bars of about one height (``mergesort`` and ``stable`` are one algorithm) keep their labels apart.
* ``plot_violin.png``: ``plot_type="violin"``, every run of a NumPy matrix multiply at four sizes (40 runs each,
  one BLAS thread): outliers and runs that fall into two groups, which a mean and its CI hide.

The numbers are this machine's at the time it ran (the figures in docs/img/ come from a 2-core CPU shared with
other jobs); what the figures show is how nsightx draws them.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before NumPy loads, as nsightx demo does

import numpy as np

import nsightx

IMG = Path(__file__).resolve().parent / "img"
QUIET = {"backend": "host", "verbosity": nsightx.VerbosityLevel.SILENT}


def sweep() -> nsightx.ProfileResults:
    """Copy and sum ``size`` bytes of float64, 1 KiB to 64 MiB (arrays made once per size: no page faults)."""
    arrays: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    @nsightx.analyze.kernel(configs=[1024 * 2**i for i in range(17)], runs=20, **QUIET)
    def memory(size: int) -> None:
        a, b = arrays.setdefault(size, (np.ones(size // 8), np.ones(size // 8)))
        with nsightx.annotate("copy"):
            np.copyto(b, a)
        with nsightx.annotate("sum"):
            a.sum()

    return memory()


def sorts() -> nsightx.ProfileResults:
    """``np.sort`` of ``n`` random float64 with three algorithms (two of them, mergesort and stable, the same)."""
    rng = np.random.default_rng(0)

    @nsightx.analyze.kernel(configs=[2_000 * 2**i for i in range(8)], runs=20, **QUIET)
    def sort(n: int) -> None:
        data = rng.standard_normal(n)
        for kind in ("quicksort", "mergesort", "stable"):
            with nsightx.annotate(kind):
                np.sort(data, kind=kind)  # type: ignore[call-overload]

    return sort()


def matmul() -> nsightx.ProfileResults:
    """A float64 matrix multiply of ``n`` x ``n``, 40 runs per size."""
    rng = np.random.default_rng(0)

    @nsightx.analyze.kernel(configs=[64, 128, 256, 512], runs=40, **QUIET)
    def matmul(n: int) -> None:
        a, b = rng.standard_normal((n, n)), rng.standard_normal((n, n))
        with nsightx.annotate("matmul"):
            a @ b

    return matmul()


def main() -> None:
    IMG.mkdir(exist_ok=True)
    written = [
        sweep().plot(str(IMG / "plot_sweep.png")),
        sorts().plot(str(IMG / "plot_bar_labels.png"), plot_type="bar", annotate_points=True),
        matmul().plot(str(IMG / "plot_violin.png"), plot_type="violin"),
    ]
    for path in written:
        print(f"{path} ({path.stat().st_size // 1024} KiB)", file=sys.stderr)


if __name__ == "__main__":
    main()
