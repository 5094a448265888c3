"""What a one-shot script pays: a fresh process that calls ``f().to_dataframe()`` once (issue 35).

    PYTHONPATH=.:backends:plugins python benchmarks/oneshot.py --backend cupti --first user [--tree PATH]

``backend_overhead.py`` and ``call_phases.py`` warm up before they time, so they never see what a script that
profiles its sweep once pays: the first call's plugin loading, backend set-up and the imports of the frame's
modules. This script is that script. In one fresh process it imports torch, allocates the sweep's inputs
(``backend_overhead``'s ``sweep_once``) and runs each matrix size once untimed (cuBLAS' own first-use cost, which
the user's hand-written loop would pay too); then it times, in the order ``--first`` names, the bare events loop's
first call and the decorated function's first call followed by ``.to_dataframe()``, then one more of each
(warm). ``import nsightx`` is timed separately and is not in either call; with ``--import-pandas`` so is
pandas' import (a script that uses pandas imports it first; the frame needs it either way). Prints one JSON
line; run it several times with ``--first`` alternating (``run_gpu.sh oneshot`` does) and compare the first-call ratios.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def main() -> int:
    """Parse the arguments, time the first and a warm call of each variant, print one JSON line."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", choices=("cupti", "events"), required=True)
    parser.add_argument("--first", choices=("user", "bare"), required=True, help="which call is timed first")
    parser.add_argument("--tree", default=None, help="a source tree of nsightx to measure instead of this one")
    parser.add_argument(
        "--import-pandas", action="store_true", help="import pandas before timing (as a script that uses it does)"
    )
    parser.add_argument("--profile", default=None, help="write a cProfile of the first user call to this file")
    args = parser.parse_args()
    t0 = time.perf_counter()
    import torch

    t_torch = time.perf_counter() - t0
    import backend_overhead as bo

    if args.import_pandas:
        import pandas  # noqa: F401  (the script's own import: not the first call's cost)

    t0 = time.perf_counter()
    info = bo.use_tree(args.tree)  # imports nsightx
    t_import = time.perf_counter() - t0
    w = bo.WORKLOADS["sweep_once"]
    inputs = w.inputs(torch)
    for n in w.sizes:  # cuBLAS' first use of each shape: paid by any loop, so paid before either is timed
        a, b = inputs[n]
        a @ b
    torch.cuda.synchronize()
    bare = bo.make_bare(torch, w)
    user = bo.with_frame(bo.make_profiled(torch, w, args.backend, collectors=True))
    order = [("user", user), ("bare", bare)] if args.first == "user" else [("bare", bare), ("user", user)]
    times: dict[str, list[float]] = {"user": [], "bare": []}
    for rep in range(2):
        for name, fn in order:
            torch.cuda.synchronize()
            profile = cProfile.Profile() if args.profile and rep == 0 and name == "user" else None
            t0 = time.perf_counter()
            if profile:
                profile.runcall(fn)
            else:
                fn()
            times[name].append(time.perf_counter() - t0)
            if profile:
                with open(args.profile, "w", encoding="utf-8") as stream:
                    pstats.Stats(profile, stream=stream).sort_stats("cumulative").print_stats(120)
    out = {
        "backend": args.backend,
        "first": args.first,
        "pandas_imported_before": args.import_pandas,
        "torch_import_s": t_torch,
        "nsightx_import_s": t_import,
        "user_first_s": times["user"][0],
        "bare_first_s": times["bare"][0],
        "ratio_first": times["user"][0] / times["bare"][0],
        "user_warm_s": times["user"][1],
        "bare_warm_s": times["bare"][1],
        "ratio_warm": times["user"][1] / times["bare"][1],
        "device": torch.cuda.get_device_name(0),
        **info,
    }
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
