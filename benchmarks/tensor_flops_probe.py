"""Which ncu counters count tensor-core FLOPs on this GPU (issue 16: the fp16 roofline points were wrong).

    python3 benchmarks/tensor_flops_probe.py OUTDIR        # runs ncu on itself with --child

Profiles torch matmuls of known work (2 n^3 FLOP) in fp16, bf16, tf32 and fp32 (tensor cores off) with every
``sm__ops_path_tensor*`` / ``sm__inst_executed_pipe_tensor*`` counter this ncu knows for the chip, and writes
OUTDIR/tensor_flops_probe.json: per kernel the counters and, per counter, counter / 2n^3 (the one that reads 1.0
for every tensor-core kernel is the FLOP count). Also keeps ``ncu --query-metrics`` filtered to tensor names.
"""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
from pathlib import Path

CASES = (("fp16", 2048), ("bf16", 2048), ("tf32", 2048), ("fp32", 1024), ("fp16", 4096))


def child() -> None:
    import torch

    for dtype, n in CASES:
        torch.backends.cuda.matmul.allow_tf32 = dtype == "tf32"
        t = {"fp16": torch.half, "bf16": torch.bfloat16}.get(dtype, torch.float32)
        a = torch.randn(n, n, device="cuda", dtype=t)
        b = torch.randn(n, n, device="cuda", dtype=t)
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_push(f"{dtype}_{n}")
        a @ b
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_pop()


def profile(ncu: str, out: Path, name: str, ranges: list[str], metrics: str) -> list[dict[str, str]]:
    """Run ncu on this script's child over the NVTX ``ranges``; keep its log and raw CSV; return the CSV's rows."""
    rep = out / name
    includes = [a for r in ranges for a in ("--nvtx-include", f"{r}/")]
    cmd = [ncu, "--nvtx", *includes, "--clock-control", "none", "--metrics", metrics, "-f", "-o", str(rep)]
    run = subprocess.run([*cmd, sys.executable, __file__, "--child"], capture_output=True, text=True, check=False)
    (out / f"ncu_{name}.log").write_text(run.stdout[-20000:] + run.stderr[-20000:])
    imp = [ncu, "--import", f"{rep}.ncu-rep", "--csv", "--page", "raw", "--print-nvtx-rename", "none"]
    raw = subprocess.run([*imp, "--print-units", "base"], capture_output=True, text=True, check=False)
    (out / f"{name}.csv").write_text(raw.stdout)
    return list(csv.DictReader(io.StringIO(raw.stdout)))


def main(out: Path) -> None:
    ncu = "/usr/local/cuda/bin/ncu"
    q = subprocess.run([ncu, "--query-metrics", "--chip", "gh100"], capture_output=True, text=True, check=False)
    names = sorted(
        {
            line.split()[0]
            for line in q.stdout.splitlines()
            if line.strip() and any(k in line.split()[0] for k in ("tensor", "gmma", "mma"))
        }
    )
    (out / "tensor_metrics_gh100.txt").write_text("\n".join(names) + "\n")
    wanted = [m for m in names if m.startswith(("sm__ops_path_tensor", "sm__inst_executed_pipe_tensor"))]
    metrics = ",".join(f"{m}.sum" for m in wanted) + ",gpu__time_duration.sum"
    rows = profile(ncu, out, "probe", [f"{d}_{n}" for d, n in CASES], metrics)
    result = []
    for i, row in enumerate(rows[1:] if rows and rows[0].get("ID") == "" else rows):
        case = CASES[min(i, len(CASES) - 1)]
        flop = 2.0 * case[1] ** 3
        vals = {}
        for k, v in row.items():
            if k and (k.startswith(("sm__", "gpu__"))):
                try:
                    vals[k] = float(str(v).replace(",", ""))
                except ValueError:
                    vals[k] = v
        ratios = {k: v / flop for k, v in vals.items() if isinstance(v, float) and v and k.startswith("sm__")}
        result.append(
            {
                "kernel": row.get("Kernel Name"),
                "index": i,
                "meta": {k: v for k, v in row.items() if k and not k.startswith(("sm__", "gpu__"))},
                "case_guess": case,
                "values": vals,
                "over_2n3": ratios,
            }
        )
    (out / "tensor_flops_probe.json").write_text(json.dumps({"metrics": wanted, "kernels": result}, indent=1))
    for r in result:
        print(r["kernel"][:70] if r["kernel"] else None, {k: round(v, 4) for k, v in r["over_2n3"].items() if v > 0.01})
    peaks(ncu, out, wanted)


def peaks(ncu: str, out: Path, wanted: list[str]) -> None:
    """Second pass, one fp16 case: the ``.peak_sustained`` (per cycle) of every tensor counter and the SM clock."""
    sub = [f"{m}.sum.peak_sustained" for m in wanted if m.startswith("sm__ops_path_tensor")]
    metrics = ",".join([*sub, "sm__cycles_elapsed.avg.per_second", "sm__inst_executed_pipe_tensor.sum.peak_sustained"])
    rows = profile(ncu, out, "peaks", ["fp16_4096"], metrics)
    for row in rows:
        print({k: v for k, v in row.items() if k and k.startswith("sm__") and v not in ("", "0")})


if __name__ == "__main__":
    if sys.argv[1:] == ["--child"]:
        child()
    else:
        out = Path(sys.argv[1])
        out.mkdir(parents=True, exist_ok=True)
        main(out)
