"""Draw the tutorial's figures from results recorded on the H200 (no GPU needed).

    python docs/tutorial_figures.py            # writes docs/img/tutorial_{cache,sweep,speedup}.png

Input: ``docs/data/tutorial-sweeps-h200.json`` (until 98c9cf0
``98c9cf0:benchmarks/results/2026-12-02-final-tutorial-sweeps.json``),
the output of ``python3 docs/tutorial_numbers.py OUT
--only=cache_and_clocks,size_sweep`` on one H200 on 2026-12-02 (run by ``benchmarks/run_gpu.sh``). It holds the
aggregated rows of the two sections: ``cache_and_clocks`` (``torch.add`` at 8 MiB to 1 GiB per tensor, 20 CUPTI
runs each, with ``cache_control="none"`` and ``"all"``) and ``size_sweep`` (fp32, TF32 and bf16 ``torch.matmul``
at n = 1024 to 8192, 10 CUPTI runs each, once plain and once with ``normalize_against="fp32"``). The figures are
the ones ``tutorial_numbers.py`` draws, with the same options, redrawn from those rows.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

from nsightx._plot.render import plot_frame

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "data" / "tutorial-sweeps-h200.json"


def frame(rows: list[dict[str, Any]], param: str, annotation: str | None = None) -> pd.DataFrame:
    """Recorded rows as an aggregated frame: ``Annotation, Metric, <param>, AvgValue, ...`` in that order."""
    data = pd.DataFrame(rows)
    if annotation is not None:
        data["Annotation"] = annotation
    first = ["Annotation", "Metric", param, "AvgValue"]
    return data[first + [c for c in data.columns if c not in first]]


def main() -> None:
    numbers = json.loads(RESULTS.read_text(encoding="utf-8"))
    img = HERE / "img"

    cache = pd.concat(
        [frame(numbers["cache_and_clocks"][mode], "mib", f"cache_control={mode!r}") for mode in ("none", "all")],
        ignore_index=True,
    )
    plot_frame(
        cache,
        img / "tutorial_cache.png",
        metric="gbps",
        plot_type="bar",
        annotate_points=True,
        title="torch.add(x, 1) on the H200: warm vs flushed L2 (CUPTI, 20 runs, 95% CI)",
        ylabel="effective bandwidth (GB/s, read + write)",
        plot_width=9,
        plot_height=4.5,
    )

    sweep = numbers["size_sweep"]
    plain = frame(sweep["plain"], "n")
    plot_frame(
        plain,
        img / "tutorial_sweep.png",
        metric="tflops",
        annotate_points=True,
        title="matmul on the H200 (CUPTI kernel time, 10 runs, 95% CI)",
        ylabel="TFLOP/s",
    )
    normalized = frame(sweep["normalized"], "n")
    plot_frame(
        normalized,
        img / "tutorial_speedup.png",
        metric="gpu__time_duration.sum",
        plot_type="bar",
        annotate_points=True,
        title="matmul time relative to fp32 (lower is faster)",
    )

    with pd.option_context("display.width", 200, "display.float_format", "{:.6g}".format):
        for name, data, param in (
            ("cache_and_clocks", cache, "mib"),
            ("size_sweep plain", plain, "n"),
            ("size_sweep normalized", normalized, "n"),
        ):
            cols = [
                c
                for c in (
                    "Annotation",
                    "Metric",
                    param,
                    "AvgValue",
                    "Unit",
                    "CI95_Lower",
                    "CI95_Upper",
                    "RelativeStdDevPct",
                    "MeasuredSMClockMHz_Min",
                    "MeasuredMemClockMHz_Avg",
                )
                if c in data.columns
            ]
            print(f"--- {name}\n{data[cols].to_string(index=False)}")


if __name__ == "__main__":
    main()
