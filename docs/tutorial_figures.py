"""Draw the tutorial's figures from results recorded on the H200 (no GPU needed).

    python docs/tutorial_figures.py            # writes docs/img/tutorial_*.png

Inputs: ``docs/data/h200-gemm-tf32.json`` and ``docs/data/h200-gemm-fp32.json``, the two CUPTI results saved by
``docs/tutorial_numbers.py`` (section ``ci_example``) on 2026-12-02: an fp32 ``torch.matmul`` at n = 1024, 2048,
4096, 20 runs each, once with ``torch.set_float32_matmul_precision("high")`` (TF32 tensor cores) and once with
``"highest"`` (plain fp32).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

import nsightx
from nsightx._plot import plot_frame

HERE = Path(__file__).resolve().parent


def gemm_frame() -> pd.DataFrame:
    """Both results in one aggregated frame, plus TFLOP/s rows derived from each mean and its CI."""
    frames = []
    for name, label in (("h200-gemm-fp32.json", "fp32 ('highest')"), ("h200-gemm-tf32.json", "tf32 ('high')")):
        frame = nsightx.load(HERE / "data" / name).to_dataframe()
        frame["Annotation"] = label
        frames.append(frame)
    time = pd.concat(frames, ignore_index=True)
    flops = 2.0 * time["n"].astype("float64") ** 3
    rate = time.copy()
    rate["Metric"] = "TFLOP/s"
    rate["Unit"] = "TFLOP/s"
    rate["AvgValue"] = flops / (time["AvgValue"] * 1e-9) / 1e12
    rate["CI95_Lower"] = flops / (time["CI95_Upper"] * 1e-9) / 1e12  # a slower time bound is a lower rate
    rate["CI95_Upper"] = flops / (time["CI95_Lower"] * 1e-9) / 1e12
    return pd.concat([time, rate], ignore_index=True)


def main() -> None:
    frame = gemm_frame()
    img = HERE / "img"
    plot_frame(frame, img / "tutorial_gemm_tflops.png", metric="TFLOP/s", annotate_points=True,
               title="torch.matmul fp32 inputs on the H200 (CUPTI, 20 runs, 95% CI)", ylabel="TFLOP/s",
               plot_width=6.5, plot_height=4)
    plot_frame(frame, img / "tutorial_gemm_time.png", metric="gpu__time_duration.sum", plot_type="bar",
               annotate_points=True, title="torch.matmul kernel time on the H200 (CUPTI, 20 runs, 95% CI)",
               plot_width=6.5, plot_height=4)
    cols = ["Annotation", "n", "Metric", "AvgValue", "CI95_Lower", "CI95_Upper", "RelativeStdDevPct", "NumRuns"]
    with pd.option_context("display.width", 200, "display.float_format", "{:.6g}".format):
        print(frame[cols].to_string(index=False))


if __name__ == "__main__":
    main()
