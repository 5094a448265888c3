"""What a fresh process's first profiled call and first frame cost on the host, beside a warm call (issue 35).

    PYTHONPATH=.:backends:plugins python benchmarks/first_call.py [--tree PATH ...] [--backend auto|host] [--reps 7]

Each measurement is one fresh interpreter (``PYTHONDONTWRITEBYTECODE`` unset, as a pip install has ``.pyc`` files;
every tree and variant runs once untimed first so that its ``__pycache__`` exists). The child imports numpy (as
torch would have), in the ``pandas`` variant also pandas (the user's import, not ours), then nsightx, decorates a
4 x 11 host sweep and times: ``import nsightx``, the first call, the first ``to_dataframe()``, and one more of
each (warm). The ``no-pandas`` variant's first frame includes pandas' import, which a one-shot script pays in
its first ``to_dataframe()``. Trees (``--tree``, repeatable, like ``backend_overhead.py``'s; default: the
importable nsightx) alternate process by process, their order reversed every repetition. Prints the medians in
ms, one line per tree and variant, and the JSON of every process with ``--json FILE``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

VARIANTS = ("pandas", "no-pandas")
"""``pandas``: pandas imported before timing; ``no-pandas``: the first frame imports it."""
FIELDS = ("import_ms", "first_call_ms", "first_frame_ms", "warm_call_ms", "warm_frame_ms")


def child(tree: str | None, variant: str, backend: str) -> None:
    """One fresh process's measurement: print one JSON line."""
    if tree:
        root = Path(tree).resolve()
        for sub in ("plugins", "backends", ""):
            sys.path.insert(0, str(root / sub) if sub else str(root))
    import numpy  # noqa: F401  (torch would have imported it)

    if variant == "pandas":
        import pandas  # noqa: F401

    t0 = time.perf_counter()
    import nsightx

    t_import = time.perf_counter() - t0
    kwargs: dict[str, Any] = {} if backend == "auto" else {"backend": backend}

    @nsightx.analyze.kernel(configs=[1, 2, 3, 4], runs=11, verbosity=nsightx.VerbosityLevel.SILENT, **kwargs)
    def f(n: int) -> None:
        with nsightx.annotate("work"):
            sum(range(100 * n))

    times = []
    for _ in range(2):
        t0 = time.perf_counter()
        results = f()
        t1 = time.perf_counter()
        frame = results.to_dataframe()
        t2 = time.perf_counter()
        times += [t1 - t0, t2 - t1]
    out = dict(zip(FIELDS, [1e3 * t for t in (t_import, *times)], strict=True))
    out.update(tree=tree or ".", variant=variant, tool=str(frame["Tool"].iloc[0]), nsightx_file=nsightx.__file__)
    print(json.dumps(out))


def _run(tree: str | None, variant: str, backend: str) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    cmd = [sys.executable, __file__, "--child", "--backend", backend, "--variant", variant]
    if tree:
        cmd += ["--tree", tree]
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600, check=False)
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{out.stderr}")
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main() -> int:
    """Parse the arguments; as the parent, run the processes and print medians."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tree", action="append", default=None, help="a source tree of nsightx (repeatable)")
    ap.add_argument("--backend", default="auto", help="auto (what a call naming none gets) or a backend's name")
    ap.add_argument("--reps", type=int, default=7, help="timed processes per tree and variant")
    ap.add_argument("--json", default=None, help="write every process's measurement to this file")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--variant", choices=VARIANTS, default="pandas", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.tree[0] if args.tree else None, args.variant, args.backend)
        return 0
    trees: list[str | None] = list(args.tree) if args.tree else [None]
    for tree in trees:  # untimed: writes each tree's __pycache__ and loads the files into the page cache
        for variant in VARIANTS:
            _run(tree, variant, args.backend)
    runs: list[dict[str, Any]] = []
    for rep in range(args.reps):
        order = trees if rep % 2 == 0 else trees[::-1]
        for variant in VARIANTS:
            for tree in order:
                runs.append(_run(tree, variant, args.backend))
    for tree in trees:
        for variant in VARIANTS:
            mine = [r for r in runs if r["tree"] == (tree or ".") and r["variant"] == variant]
            medians = {k: statistics.median(r[k] for r in mine) for k in FIELDS}
            text = "  ".join(f"{k[:-3]} {v:7.1f}" for k, v in medians.items())
            print(f"{tree or '.'} [{variant}, {mine[0]['tool']}, n={len(mine)}] ms: {text}")
    if args.json:
        Path(args.json).write_text(json.dumps(runs, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
