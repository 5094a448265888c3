"""Wall time of an 8-config sweep with one worker against two (``parallel_devices``).

Usage:
  python benchmarks/parallel_sweep.py            # GPU backend ("auto") over the first two GPUs, if present
  python benchmarks/parallel_sweep.py --host     # the pool logic alone: host backend, two CPU workers

With a GPU backend each worker is pinned to its own GPU (CUDA_VISIBLE_DEVICES); the per-config means of the two
sweeps are printed side by side so that "same results within noise" can be checked.
"""

from __future__ import annotations

import argparse
import time

import nsightx


def workload_gpu(n: int) -> None:
    import torch

    a = torch.randn(n, n, device="cuda")
    b = torch.randn(n, n, device="cuda")
    with nsightx.annotate("matmul"):
        for _ in range(20):
            a @ b
    torch.cuda.synchronize()


def workload_host(n: int) -> None:
    with nsightx.annotate("sleep"):
        time.sleep(0.02 + 0.002 * (n % 5))


def sweep(devices: list[int] | None, host: bool) -> tuple[float, object]:
    fn = workload_host if host else workload_gpu
    configs = [1, 2, 3, 4, 5, 6, 7, 8] if host else [1024, 2048, 3072, 4096, 1024, 2048, 3072, 4096]
    options = {"backend": "host"} if host else {"combine_kernel_metrics": lambda a, b: a + b}
    profiled = nsightx.analyze.kernel(
        configs=configs, runs=10, verbosity=nsightx.VerbosityLevel.SILENT, parallel_devices=devices, **options
    )(fn)
    t = time.perf_counter()
    res = profiled()
    return time.perf_counter() - t, res


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--host", action="store_true", help="host backend with two CPU workers")
    args = parser.parse_args()
    one_t, one = sweep([0], args.host)
    two_t, two = sweep([0, 1], args.host)
    print(f"8 configs x 10 runs: one worker {one_t:.2f} s, two workers {two_t:.2f} s, ratio {two_t / one_t:.2f}")
    a, b = one.to_dataframe(), two.to_dataframe()  # type: ignore[attr-defined]
    for (_, ra), (_, rb) in zip(a.iterrows(), b.iterrows(), strict=True):
        print(
            f"  config {ra.iloc[2]!s:>5}  one: {ra['AvgValue']:.4g}  two: {rb['AvgValue']:.4g} "
            f"({rb['Device']})  diff {100 * (rb['AvgValue'] / ra['AvgValue'] - 1):+.1f}%"
        )


if __name__ == "__main__":
    main()
