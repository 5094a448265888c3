"""GPU time of the ways to evict L2 before a run: torch fill_, the CUPTI backend's driver memset, the reset of
persisting lines. Medians of CUDA-event spans around one operation, and the per-operation time of 100 queued
back to back.

    PYTHONPATH=.:backends:plugins python benchmarks/flush_cost.py OUT.json
"""

from __future__ import annotations

import json
import statistics
import sys
from typing import Any


def main() -> int:
    import torch
    from nsightx_cupti import _driver
    from nsightx_cupti._session import CudaDevice

    torch.zeros(1, device="cuda")
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    buf = torch.empty(2 * l2 // 4, dtype=torch.int32, device="cuda")
    dev = CudaDevice(0, flush=True)
    ops: dict[str, Any] = {
        "torch_fill": lambda: buf.fill_(3),
        "driver_memset": dev.buffer.overwrite,  # type: ignore[union-attr]
        "reset_persisting": _driver.reset_persisting_l2,
        "reset_then_memset": lambda: (_driver.reset_persisting_l2(), dev.buffer.overwrite()),  # type: ignore[union-attr]
        "nothing": lambda: None,
    }
    out: dict[str, Any] = {"l2_bytes": l2, "flush_bytes": dev.buffer.nbytes if dev.buffer else 0}  # type: ignore[union-attr]
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for name, op in ops.items():
        single = []
        for _ in range(60):
            torch.cuda.synchronize()
            e0.record()
            op()
            e1.record()
            e1.synchronize()
            single.append(e0.elapsed_time(e1) * 1e3)
        torch.cuda.synchronize()
        e0.record()
        for _ in range(100):
            op()
        e1.record()
        e1.synchronize()
        out[name] = {
            "single_us": round(statistics.median(single[10:]), 2),
            "queued_us_each": round(e0.elapsed_time(e1) * 1e3 / 100, 2),
        }
    dev.close()
    text = json.dumps(out, indent=1)
    with open(sys.argv[1] if len(sys.argv) > 1 else "flush_cost.json", "w", encoding="utf-8") as fh:
        fh.write(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
