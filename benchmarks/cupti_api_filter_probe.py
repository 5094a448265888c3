"""Does the installed libcupti accept per-API activity switches, and which callback ids does it refuse?

    PYTHONPATH=.:backends:plugins python benchmarks/cupti_api_filter_probe.py OUT.json

cupti-python's callback-id enums may list APIs newer than the loaded libcupti knows. This probe switches every
runtime and driver callback id off one by one (launch APIs stay on), records which ones CUPTI refuses, then runs a
small traced loop (fp32 matmul n = 512 and 2048 with an external id pushed around each) and counts records per run
and kernels that got an external id, with and without the filter. Everything is switched back on at the end.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any


def main() -> int:
    import torch
    from cupti import cupti

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.zeros(1, device="cuda")
    K = cupti.ActivityKind
    kinds = (int(K.CONCURRENT_KERNEL), int(K.EXTERNAL_CORRELATION), int(K.RUNTIME), int(K.DRIVER))
    ext_kind = int(cupti.ExternalCorrelationKind.CUSTOM2)
    seen: dict[str, Any] = {"kernels": [], "ext": {}, "records": 0, "api_names": {}}

    def requested() -> tuple[int, int]:
        return 256 * 1024, 0

    def completed(acts: Any) -> None:
        seen["records"] += len(acts)
        for a in acts:
            if a.kind == kinds[0]:
                seen["kernels"].append(a.correlation_id)
            elif a.kind == kinds[1]:
                seen["ext"][a.correlation_id] = a.external_id
            elif a.kind in (kinds[2], kinds[3]):
                key = ("rt" if a.kind == kinds[2] else "drv") + f":{a.cbid}"
                seen["api_names"][key] = seen["api_names"].get(key, 0) + 1

    cupti.activity_register_callbacks(requested, completed)
    report: dict[str, Any] = {"cupti_version": None}
    try:
        report["cupti_version"] = int(cupti.get_version())
    except Exception as e:
        report["cupti_version"] = f"{type(e).__name__}: {e}"

    def loop(runs: int = 10) -> None:
        ext = 0
        for n in (512, 2048):
            for _ in range(runs):
                a = torch.randn(n, n, device="cuda")
                b = torch.randn(n, n, device="cuda")
                ext += 1
                cupti.activity_push_external_correlation_id(ext_kind, ext)
                a @ b
                cupti.activity_pop_external_correlation_id(ext_kind)
        torch.cuda.synchronize()
        cupti.activity_flush_all(int(cupti.ActivityFlag.FLUSH_FORCED))

    def traced(label: str) -> None:
        seen.update(kernels=[], ext={}, records=0, api_names={})
        t0 = time.perf_counter()
        loop()
        report[label] = {
            "records_per_run": seen["records"] / 20,
            "kernels": len(seen["kernels"]),
            "kernels_with_ext_id": sum(1 for c in seen["kernels"] if c in seen["ext"]),
            "wall_ms": round((time.perf_counter() - t0) * 1e3, 2),
            "api_records_by_cbid": dict(sorted(seen["api_names"].items(), key=lambda kv: -kv[1])[:25]),
        }

    for k in kinds:
        cupti.activity_enable(k)
    loop()  # warm-up
    traced("unfiltered")
    refused: dict[str, list[str]] = {}
    accepted: dict[str, int] = {}
    for label, enum, switch in (
        ("runtime", cupti.RuntimeApiTraceCbid, cupti.activity_enable_runtime_api),
        ("driver", cupti.DriverApiTraceCbid, cupti.activity_enable_driver_api),
    ):
        for member in enum:
            if member.name in ("INVALID", "SIZE", "FORCE_INT"):
                continue
            try:
                switch(int(member), 1 if "Launch" in member.name else 0)
                accepted[label] = accepted.get(label, 0) + 1
            except Exception as e:
                refused.setdefault(label, []).append(f"{member.name}={int(member)}: {type(e).__name__}: {e}"[:160])
    report["accepted"] = accepted
    report["refused_count"] = {k: len(v) for k, v in refused.items()}
    report["refused_first"] = {k: v[:12] for k, v in refused.items()}
    report["enum_sizes"] = {
        "runtime_SIZE": int(cupti.RuntimeApiTraceCbid.SIZE),
        "driver_SIZE": int(cupti.DriverApiTraceCbid.SIZE),
    }
    loop()
    traced("filtered")
    for enum, switch in (
        (cupti.RuntimeApiTraceCbid, cupti.activity_enable_runtime_api),
        (cupti.DriverApiTraceCbid, cupti.activity_enable_driver_api),
    ):
        for member in enum:
            try:
                switch(int(member), 1)
            except Exception:
                pass
    traced("unfiltered_again")
    for k in kinds:
        cupti.activity_disable(k)
    text = json.dumps(report, indent=1)
    with open(sys.argv[1] if len(sys.argv) > 1 else "cupti_api_filter_probe.json", "w", encoding="utf-8") as fh:
        fh.write(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
