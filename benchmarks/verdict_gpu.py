"""Issue 16 on the H200: times joined to counters, the roofline, and the quality flags on real cases.

    PYTHONPATH=.:backends:plugins python3 benchmarks/verdict_gpu.py --out OUT

Never changes the GPU's clocks: every ncu call passes ``clock_control="none"`` (ncu's default in nsightx too).

1. The joined call on the tutorial's kernels (fp32 and fp16 matmul, an elementwise add, a softmax):
   ``@analyze.kernel(backend="cupti", runs=--runs, counters=nsightx.ROOFLINE_METRICS, counter_runs=--ncu-runs)``;
   one DataFrame per kernel with times, counters, flags (``OUT/<kernel>-joined.csv``) and its roofline table
   (``OUT/<kernel>-roofline.csv``). The matmul rows also print FLOP counted / 2 n^3 (checks ncu's tensor factor).
2. ``OUT/roofline.png``: every kernel and config on one roofline.
3. Flags on real cases: a 16 KiB vector add (expect ``short`` and ``launch_bound``), the same with
   ``cache_control="none"`` (expect ``warm``), the fp32 matmul at n=4096 (expect no flag).
4. ``nsightx.reconcile`` of cupti against ncu on the fp32 matmul sweep n=512..4096 (``OUT/reconcile-*.csv``):
   each difference above 5% explained from the data (the split-K region at n=512).
5. Cost (fp32 matmul sweep): wall time of the CUPTI call, the ncu call with ``--ncu-runs`` runs, the joined call,
   and an ncu call with ``--runs`` runs of the same counters. Target: joined <= CUPTI + one short ncu call, and
   much less than ncu with ``--runs`` runs.

Everything measured goes to ``OUT/verdict-<parts>.json`` (with the command, the machine and the versions);
``--parts joined flags reconcile cost`` picks the parts (default: all), to split the work over several commands.
"""

from __future__ import annotations

import argparse
import json
import operator
import platform
import sys
import time
from pathlib import Path

import pandas as pd
import torch

import nsightx
from nsightx._api.reconcile import render_text
from nsightx._plot.roofline import draw_roofline

torch.backends.cuda.matmul.allow_tf32 = False  # fp32 matmuls stay FFMA (their FLOP counted as fp32)

SILENT = nsightx.VerbosityLevel.SILENT
MATMUL_SIZES = [(512,), (1024,), (2048,), (4096,)]


def fp32_matmul(n):
    a = torch.randn(n, n, device="cuda")
    b = torch.randn(n, n, device="cuda")
    with nsightx.annotate("fp32_matmul"):
        a @ b


def fp16_matmul(n):
    a = torch.randn(n, n, device="cuda", dtype=torch.float16)
    b = torch.randn(n, n, device="cuda", dtype=torch.float16)
    with nsightx.annotate("fp16_matmul"):
        a @ b


def vector_add(n):
    x = torch.randn(n, device="cuda")
    y = torch.randn(n, device="cuda")
    with nsightx.annotate("vector_add"):
        x + y


def softmax(rows, cols):
    x = torch.randn(rows, cols, device="cuda")
    with nsightx.annotate("softmax"):
        torch.softmax(x, dim=-1)


KERNELS = {
    "fp32_matmul": (fp32_matmul, MATMUL_SIZES, 2.0),
    "fp16_matmul": (fp16_matmul, MATMUL_SIZES, 2.0),
    "vector_add": (vector_add, [(1 << 12,), (1 << 24,)], None),  # 16 KiB and 64 MiB of float32
    "softmax": (softmax, [(4096, 4096), (16384, 1024)], None),
}


def roofline_metrics():
    """``nsightx.ROOFLINE_METRICS`` less any name the installed ncu does not know for GPU 0 (printed)."""
    from nsightx_ncu._locate import require_ncu
    from nsightx_ncu._metrics import load_known

    install = require_ncu()
    known, gpu = load_known(install.path, install.version_string, 0)
    if known is None:
        return list(nsightx.ROOFLINE_METRICS)
    unknown = [m for m in nsightx.ROOFLINE_METRICS if not known.knows(m)]
    if unknown:
        print(f"ncu {install.version_string} does not know {unknown} for {gpu}: measured without them")
    return [m for m in nsightx.ROOFLINE_METRICS if m not in unknown]


METRICS: list[str] = []
"""The roofline metrics this ncu knows (filled by :func:`main`)."""


def measure(fn, configs, **options):
    """One decorated call; returns (results, wall seconds)."""
    options.setdefault("verbosity", SILENT)
    options.setdefault("combine_kernel_metrics", operator.add)
    profiled = nsightx.analyze.kernel(configs=configs, **options)(fn)
    t0 = time.perf_counter()
    res = profiled()
    return res, time.perf_counter() - t0


def ncu_options(runs, metrics):
    return {"backend": "ncu", "runs": runs, "metrics": list(metrics), "clock_control": "none"}


def joined_kernel(name, args, out):
    """The joined call: ``@analyze.kernel(backend="cupti", counters=ROOFLINE_METRICS)`` (times and counters)."""
    fn, configs, _ = KERNELS[name]
    joined, t_joined = measure(
        fn,
        configs,
        backend="cupti",
        runs=args.runs,
        counters=METRICS,
        counter_runs=args.ncu_runs,
        clock_control="none",
    )
    df = joined.to_dataframe()
    df.to_csv(out / f"{name}-joined.csv", index=False)
    roof = joined.roofline()
    roof.to_csv(out / f"{name}-roofline.csv", index=False)
    with pd.option_context("display.width", 250, "display.max_columns", 30, "display.max_rows", 200):
        print(f"\n== {name}: joined ({joined.backend}), {t_joined:.1f} s")
        print(df[["Annotation", "Metric", *joined.data.plan.params, "AvgValue", "NumRuns", "Tool", "Flags"]])
        print(roof.drop(columns=["Config", "Seq"]))
    return joined, roof, {"joined_s": t_joined}


def flop_check(name, roof):
    """FLOP counted by ncu over the 2 n^3 of an n x n matmul, per config (sum over the region's kernels)."""
    out = {}
    for n, group in roof.groupby("n"):
        out[str(n)] = float(group["FLOP"].sum() / (2.0 * float(n) ** 3))
    print(f"{name}: FLOP counted / 2n^3 per n: {out}")
    return out


def flag_cases(args):
    """The issue's flag checks on real cases (CUPTI, the default backend on the H200)."""
    cases = {}
    small, _ = measure(vector_add, [(1 << 12,)], backend="cupti", runs=args.runs)
    cases["vector_add_16KiB"] = small.to_dataframe()["Flags"].tolist()
    warm, _ = measure(vector_add, [(1 << 24,)], backend="cupti", runs=args.runs, cache_control="none")
    cases["vector_add_64MiB_cache_none"] = warm.to_dataframe()["Flags"].tolist()
    big, _ = measure(fp32_matmul, [(4096,)], backend="cupti", runs=args.runs)
    df = big.to_dataframe()
    cases["fp32_matmul_4096"] = df["Flags"].tolist()
    cases["fp32_matmul_4096_ci_pct"] = float(100 * (df["CI95_Upper"] - df["AvgValue"]).iloc[0] / df["AvgValue"].iloc[0])
    checks = {
        "16KiB short": all("short" in f for f in cases["vector_add_16KiB"]),
        "16KiB launch_bound": all("launch_bound" in f for f in cases["vector_add_16KiB"]),
        "cache none warm": all("warm" in f for f in cases["vector_add_64MiB_cache_none"]),
        "matmul 4096 no flag": all(f == "" for f in cases["fp32_matmul_4096"]),
    }
    print("\n== flags:", json.dumps(cases, indent=1), "\nchecks:", checks)
    return cases, checks


def cost(args):
    """The joined call's cost against a CUPTI call and ncu calls (fp32 matmul sweep, 4 configs).

    ``ncu_one_run_s`` is one ncu run per config (the issue's "one ncu pass per config"), ``ncu_same_runs_s`` asks
    ncu for as many runs as CUPTI made: what measuring everything with ncu would cost.
    """
    metrics = METRICS
    _, t_cupti = measure(fp32_matmul, MATMUL_SIZES, backend="cupti", runs=args.runs)
    _, t_one = measure(fp32_matmul, MATMUL_SIZES, **ncu_options(1, metrics))
    _, t_few = measure(fp32_matmul, MATMUL_SIZES, **ncu_options(args.ncu_runs, metrics))
    _, t_joined = measure(
        fp32_matmul,
        MATMUL_SIZES,
        backend="cupti",
        runs=args.runs,
        counters=metrics,
        counter_runs=args.ncu_runs,
        clock_control="none",
    )
    _, t_all = measure(fp32_matmul, MATMUL_SIZES, **ncu_options(args.runs, metrics))
    out = {
        "configs": len(MATMUL_SIZES),
        "cupti_runs": args.runs,
        "counter_runs": args.ncu_runs,
        "cupti_s": t_cupti,
        "ncu_one_run_s": t_one,
        "ncu_counter_runs_s": t_few,
        "joined_s": t_joined,
        "ncu_same_runs_s": t_all,
        "joined_over_cupti_plus_ncu_one_run": t_joined / (t_cupti + t_one),
        "joined_over_ncu_same_runs": t_joined / t_all,
    }
    print("\n== cost:", json.dumps(out, indent=1))
    return out


def reconcile_matmul(args, out):
    """cupti against ncu on the fp32 matmul sweep n=512..4096, each difference explained (split-K at n=512)."""
    times, _ = measure(fp32_matmul, MATMUL_SIZES, backend="cupti", runs=args.runs)
    under_ncu, _ = measure(fp32_matmul, MATMUL_SIZES, **ncu_options(args.ncu_runs, ["gpu__time_duration.sum"]))
    frame = nsightx.reconcile(times, under_ncu)
    frame.to_csv(out / "reconcile-fp32-matmul.csv", index=False)
    text = render_text(frame)
    print("\n== reconcile cupti vs ncu (fp32 matmul):\n" + text)
    return {"table": frame.to_dict("records"), "text": text}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--ncu-runs", type=int, default=2)
    parser.add_argument("--only", nargs="*", default=list(KERNELS), help="kernels to join (default: all four)")
    parser.add_argument(
        "--parts",
        nargs="*",
        default=["joined", "flags", "reconcile", "cost"],
        choices=["joined", "flags", "reconcile", "cost"],
        help="parts to run (default: all; split them over several commands to stay under a time limit)",
    )
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    record = {
        "command": " ".join(sys.argv),
        "host": platform.node(),
        "torch": torch.__version__,
        "gpu": torch.cuda.get_device_name(0),
        "nsightx": nsightx.__version__,
    }
    METRICS[:] = roofline_metrics()
    record["ncu_metrics"] = list(METRICS)
    frames, timings, flops = [], {}, {}
    for name in args.only if "joined" in args.parts else ():
        try:
            joined, roof, timings[name] = joined_kernel(name, args, args.out)
        except nsightx.NsightxError as e:  # keep going: one kernel's failure must not hide the others
            print(f"{name}: {type(e).__name__}: {e}", file=sys.stderr)
            record.setdefault("errors", {})[name] = f"{type(e).__name__}: {e}"
            continue
        record.setdefault("environment", {})[name] = dict(joined.environment)
        labels = [f"{a} {p}" for a, p in zip(roof["Annotation"], _param_text(roof), strict=True)]
        frames.append(roof.assign(Annotation=labels))
        if KERNELS[name][2] is not None:
            flops[name] = flop_check(name, roof)
    record["timings"], record["flop_over_2n3"] = timings, flops
    if frames:
        table = pd.concat([f[[c for c in f.columns if c not in KERNELS_PARAMS]] for f in frames], ignore_index=True)
        table.to_csv(args.out / "roofline-all.csv", index=False)
        draw_roofline(table, args.out / "roofline.png", title="H200: nsightx roofline (ncu counters, CUPTI times)")
        record["roofline_png"] = str(args.out / "roofline.png")
    if "flags" in args.parts:
        flags = section(record, "flags", lambda: flag_cases(args))
        if flags is not None:
            record["flags"], record["flag_checks"] = flags
    if "reconcile" in args.parts:
        section(record, "reconcile", lambda: reconcile_matmul(args, args.out))
    if "cost" in args.parts:
        section(record, "cost", lambda: cost(args))
    name = "verdict-" + "-".join(args.parts) + ".json"
    (args.out / name).write_text(json.dumps(record, indent=1, default=str))
    print(f"\nwrote {args.out / name}")
    return 0 if all(record.get("flag_checks", {}).values()) and "errors" not in record else 1


def section(record, name, fn):
    """Run one part; an nsightx error is recorded and the other parts still run."""
    try:
        value = fn()
    except nsightx.NsightxError as e:
        print(f"{name}: {type(e).__name__}: {e}", file=sys.stderr)
        record.setdefault("errors", {})[name] = f"{type(e).__name__}: {e}"
        return None
    if name != "flags":
        record[name] = value
    return value


KERNELS_PARAMS = ("n", "rows", "cols")


def _param_text(roof):
    params = [c for c in KERNELS_PARAMS if c in roof.columns]
    return [", ".join(f"{p}={row[p]}" for p in params) for _, row in roof.iterrows()]


if __name__ == "__main__":
    sys.exit(main())
