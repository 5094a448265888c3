"""The most common Triton script (issue 36): a module-level ``@triton.jit`` kernel, profiled with ``backend="ncu"``.

No ``__main__`` guard, the kernel and the profiled function both in ``__main__``, as NVIDIA's nsight-python
``07_triton_minimal`` example writes them. Under ncu the function runs in a worker process, so it travels by value
with the globals it uses; the kernel object holds locks and cannot be pickled, so nsightx sends its Python function
and decorator arguments and the worker rebuilds it with ``triton.jit``. Run it on a GPU machine::

    PYTHONPATH=.:backends:plugins python3 benchmarks/triton_ncu_script.py [ncu|cupti] [OUTPUT_PREFIX]

It prints one JSON line: the backend, the rows (annotation, n, AvgValue, NumRuns, Kernel) and the ncu report path.
``tests/test_triton_gpu.py`` runs it and checks that line.
"""

import json
import sys

import torch
import triton
import triton.language as tl

import nsightx

backend = sys.argv[1] if len(sys.argv) > 1 else "ncu"
prefix = sys.argv[2] if len(sys.argv) > 2 else None


@triton.jit(do_not_specialize=["n"])
def axpb(x_ptr, y_ptr, n, a, b, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    tl.store(y_ptr + offsets, a * x + b, mask=mask)


@nsightx.analyze.kernel(configs=[(1 << 16,), (1 << 20,)], runs=3, backend=backend, output_prefix=prefix)
def run_axpb(n):
    x = torch.randn(n, device="cuda")
    y = torch.empty_like(x)
    grid = (triton.cdiv(n, 1024),)
    with nsightx.annotate("axpb"):
        axpb[grid](x, y, n, 2.0, 1.0, BLOCK=1024)
    torch.testing.assert_close(y, 2.0 * x + 1.0)


results = run_axpb()
df = results.to_dataframe()
rows = df[["Annotation", "n", "AvgValue", "NumRuns", "Kernel"]].to_dict("records")
print(json.dumps({"backend": backend, "rows": rows, "ncu_report": results.environment.get("ncu_report")}, default=str))
