"""Draw the plot figures of docs/api.md (no GPU needed).

    python docs/plot_figures.py      # writes docs/img/plot_{sweep,bar_labels,violin}.png

* ``plot_sweep.png``: the default plot (no option but the file name) of a copy and a scaled copy of 1 KiB to
  64 MiB: the sizes span 16x and more, the times more than two decades, so both axes are logarithmic (issue 38).
  The values are synthetic (``tests/_synthetic.py``: a 3 us launch floor plus 20 and 14 GB/s, 2% noise), so that
  the figure shows the axes rather than a busy machine; the result goes through the same aggregation and drawing.
* ``plot_bar_labels.png``: three kernels of about one speed at six sizes as bars, ``annotate_points=True``: the
  labels of neighbouring bars, wider than the bars, are moved apart (synthetic values too).
* ``plot_violin.png``: ``plot_type="violin"``, every run of a NumPy matrix multiply at four sizes, measured here
  with the host backend (40 runs each, one BLAS thread): outliers and runs that fall into two groups, which a mean
  and its CI hide. The figure in docs/img/ was measured on a 2-core CPU shared with other jobs.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before NumPy loads, as nsightx demo does

import numpy as np

import nsightx

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from _synthetic import make_result, noisy

IMG = Path(__file__).resolve().parent / "img"
QUIET = {"backend": "host", "verbosity": nsightx.VerbosityLevel.SILENT}


def sweep() -> nsightx.ProfileResults:
    """A copy at 20 GB/s and a scaled copy at 14 GB/s of 1 KiB to 64 MiB, 3 us launch floor, 10 runs, 2% noise."""
    sizes = [1024 * 2**i for i in range(17)]
    values = {
        (name, c, "gpu__time_duration.sum"): noisy(3000.0 + size / rate * 1e9, 0.02, 10, seed=7 * c + j)
        for c, size in enumerate(sizes)
        for j, (name, rate) in enumerate((("copy", 20e9), ("scale", 14e9)))
    }
    return make_result(values, params=["size"], configs=[(s,) for s in sizes], function="memcpy", gpu="(synthetic)")


def bars() -> nsightx.ProfileResults:
    """Three kernels within 1% of each other at six sizes, 8 runs, 1% noise."""
    sizes = [256 * (i + 1) for i in range(6)]
    values = {
        (name, c, "gpu__time_duration.sum"): noisy(1234.5 * n * (1 + 0.004 * j), 0.01, 8, seed=9 * c + j)
        for c, n in enumerate(sizes)
        for j, name in enumerate(("cublas", "triton", "cutlass"))
    }
    return make_result(values, params=["n"], configs=[(n,) for n in sizes], function="gemm", gpu="(synthetic)")


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
        bars().plot(str(IMG / "plot_bar_labels.png"), plot_type="bar", annotate_points=True),
        matmul().plot(str(IMG / "plot_violin.png"), plot_type="violin"),
    ]
    for path in written:
        print(f"{path} ({path.stat().st_size // 1024} KiB)", file=sys.stderr)


if __name__ == "__main__":
    main()
