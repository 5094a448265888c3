"""Issue 18 on the GPU: a CUPTI sweep on dask-cuda's LocalCUDACluster against the same sweep in this process.

    PYTHONPATH=/tmp/site python3 benchmarks/dask_gpu.py --out DIR [--reps 2] [--runs 20]
    python benchmarks/dask_gpu.py --out DIR --cpu-check     # the plumbing on a CPU machine (host backend)

Workload: fp32 matmul n = 512, 1024, 2048, 4096 (TF32 off), inputs drawn outside the region, one annotation
"matmul", combine_kernel_metrics=operator.add (n = 512 launches two cuBLAS kernels), backend="cupti".

The cluster is ``LocalCUDACluster(n_workers=1, threads_per_worker=1, resources={"GPU": 1})``: one worker pinned
to GPU 0 with CUDA_VISIBLE_DEVICES, offering the GPU resource each task of a GPU backend asks for. The local
call and the cluster call alternate ``--reps`` times (local first), never at the same time. For each size the
median over the reps of each side's ``MedianValue`` is compared; the check passes when every size is within 2%
and every cluster row names the GPU (``Device`` ``0:GPU-...``, ``GPU`` the device's name).

Writes DIR/dask_gpu.json (every value, the check, versions) and prints a table. Exit status 0 when the check
passed, 1 when it did not.

Wheels it needs on the GPU machine beyond its image (torch, numpy, pandas, nvidia-ml-py, cuda-bindings, cuda-core,
cloudpickle are there), as resolved for dask-cuda 26.10.0 (which pins dask and distributed 2026.7.1):
distributed==2026.7.1 dask==2026.7.1 dask-cuda==26.10.0 rapids-dask-dependency==26.10.0 click==8.5.1
fsspec==2026.9.0 jinja2==3.1.6 markupsafe==3.0.4 locket==1.0.0 msgpack==1.2.4 partd==1.4.2 psutil==7.2.2
pyyaml==6.0.4 sortedcontainers==2.4.0 tblib==3.2.2 toolz==1.2.0 tornado==6.6.1 zict==3.0.0
(bokeh, which rapids-dask-dependency also names, serves only the dashboard and is left out).
"""

from __future__ import annotations

import argparse
import json
import operator
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import nsightx

SIZES = (512, 1024, 2048, 4096)
TOLERANCE = 0.02


def matmul(n: int) -> None:
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    a = torch.randn(n, n, device="cuda")
    b = torch.randn(n, n, device="cuda")
    torch.cuda.synchronize()
    with nsightx.annotate("matmul"):
        a @ b
    torch.cuda.synchronize()


def _rows(results: nsightx.ProfileResults) -> list[dict[str, Any]]:
    df = results.to_dataframe()
    keep = [c for c in ("n", "MedianValue", "RelativeStdDevPct", "NumRuns", "Device", "GPU", "Host") if c in df]
    return [{k: (v.item() if hasattr(v, "item") else v) for k, v in row.items()} for row in df[keep].to_dict("records")]


def sleepy(n: int) -> None:
    """The --cpu-check workload: n / 100 ms of sleep (the host backend times it)."""
    with nsightx.annotate("matmul"):
        time.sleep(n / 1e5)


def _cluster(cpu_check: bool) -> Any:
    """One worker with one GPU resource: dask-cuda's LocalCUDACluster, or (--cpu-check) a plain LocalCluster."""
    options = {"n_workers": 1, "threads_per_worker": 1, "resources": {"GPU": 1}, "dashboard_address": ":0"}
    if cpu_check:
        import distributed

        return distributed.LocalCluster(processes=True, **options)
    from dask_cuda import LocalCUDACluster

    return LocalCUDACluster(**options)


def _versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {"nsightx": nsightx.__version__, "python": sys.version.split()[0]}
    for dist in ("dask", "distributed", "dask-cuda", "torch"):
        try:
            out[dist] = version(dist)
        except PackageNotFoundError:
            out[dist] = "not installed"
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--reps", type=int, default=2)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--cpu-check", action="store_true", help="plumbing only: LocalCluster, host backend, sleep")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    import distributed

    options: dict[str, Any] = {"backend": "host"} if args.cpu_check else {"backend": "cupti"}
    profiled = nsightx.analyze.kernel(
        configs=SIZES,
        runs=args.runs,
        combine_kernel_metrics=operator.add,
        verbosity=nsightx.VerbosityLevel.SILENT,
        **options,
    )(sleepy if args.cpu_check else matmul)
    sides: dict[str, list[list[dict[str, Any]]]] = {"local": [], "cluster": []}
    walls: dict[str, list[float]] = {"local": [], "cluster": []}
    environment: dict[str, Any] = {}
    start = time.perf_counter()
    with _cluster(args.cpu_check) as cluster, distributed.Client(cluster) as client:
        print(f"cluster up in {time.perf_counter() - start:.1f} s: {list(client.scheduler_info()['workers'])}")
        for _ in range(args.reps):
            for side in ("local", "cluster"):
                t = time.perf_counter()
                res = profiled() if side == "local" else profiled(executor=client)
                walls[side].append(time.perf_counter() - t)
                sides[side].append(_rows(res))
                if side == "cluster":
                    environment = dict(res.environment)
    table, ok = _compare(sides)
    device = "0:cpu" if args.cpu_check else "0:GPU-"
    named = all(str(r.get("Device", "")).startswith(device) for rep in sides["cluster"] for r in rep)
    named = named and (args.cpu_check or all(r.get("GPU") for rep in sides["cluster"] for r in rep))
    report = {
        "mode": "cpu-check" if args.cpu_check else "gpu",
        "sizes": SIZES,
        "runs": args.runs,
        "reps": args.reps,
        "tolerance": TOLERANCE,
        "within_tolerance": ok,
        "rows_name_the_device": named,
        "table": table,
        "walls_s": walls,
        "cluster_environment": environment,
        "raw": sides,
        "versions": _versions(),
    }
    (args.out / "dask_gpu.json").write_text(json.dumps(report, indent=2, default=str))
    for row in table:
        print(
            f"n={row['n']:>5}  local {row['local_ns'] / 1e3:9.2f} us  cluster {row['cluster_ns'] / 1e3:9.2f} us  "
            f"diff {100 * row['rel_diff']:+.2f}%"
        )
    print(f"within {100 * TOLERANCE:.0f}%: {ok}; rows name the device: {named}; devices {environment.get('Devices')}")
    print(f"walls (s): {walls}; wrote {args.out / 'dask_gpu.json'}")
    return 0 if ok and named else 1


def _compare(sides: dict[str, list[list[dict[str, Any]]]]) -> tuple[list[dict[str, Any]], bool]:
    """Per size: the median over reps of each side's MedianValue, and their relative difference."""
    table = []
    for n in SIZES:
        med = {
            side: statistics.median(r["MedianValue"] for rep in reps for r in rep if r["n"] == n)
            for side, reps in sides.items()
        }
        diff = med["cluster"] / med["local"] - 1
        table.append({"n": n, "local_ns": med["local"], "cluster_ns": med["cluster"], "rel_diff": diff})
    return table, all(abs(row["rel_diff"]) <= TOLERANCE for row in table)


if __name__ == "__main__":
    sys.exit(main())
