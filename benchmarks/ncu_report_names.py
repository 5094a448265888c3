"""The ncu report and log names written with ``output_prefix`` (issue 20, part 4), on a GPU machine.

Calls one decorated function three times with ``output_prefix="<dir>/exp1_"``, after putting a file where the
second call's report would go (as an earlier nsight-python run would have), and lists what was written: the
names in each result's environment and the folder's files. Expected: ``exp1_ncu-output-scale-0``, then ``-2``
(``-1`` was taken), then ``-3``, each ``.ncu-rep`` with its ``.log``, and the placeholder untouched.

Usage (GPU machine, repository root; never locks clocks)::

    PYTHONPATH=.:backends:plugins python3 benchmarks/ncu_report_names.py --json names.json
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path


def scale(n: int) -> None:
    """The profiled function (in ``__main__``: cloudpickled by value to the ncu worker)."""
    import torch

    import nsightx

    x = torch.ones(n, device="cuda")
    with nsightx.annotate("scale"):
        x.mul_(2)


def main() -> int:
    import nsightx

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", help="write the listing here")
    parser.add_argument("--dir", help="output folder (default: a new temporary one)")
    args = parser.parse_args()
    folder = Path(args.dir or tempfile.mkdtemp(prefix="nsightx-names-"))
    folder.mkdir(parents=True, exist_ok=True)
    profiled = nsightx.analyze.kernel(
        configs=[(1 << 16,)], runs=2, backend="ncu", output_prefix=f"{folder}/exp1_", clock_control="none"
    )(scale)
    calls = [dict(profiled().environment)]
    taken = folder / "exp1_ncu-output-scale-1.ncu-rep"
    taken.write_text("placeholder: an earlier run's report")
    calls += [dict(profiled().environment) for _ in range(2)]
    out = {
        "command": " ".join([sys.executable, *sys.argv]),
        "folder": str(folder),
        "written": [{"ncu_report": c.get("ncu_report"), "ncu_log": c.get("ncu_log")} for c in calls],
        "files": sorted(p.name for p in folder.iterdir()),
        "placeholder_untouched": taken.read_text() == "placeholder: an earlier run's report",
    }
    names = [Path(str(c["ncu_report"])).name for c in out["written"]]  # type: ignore[index]
    out["as_expected"] = names == [f"exp1_ncu-output-scale-{n}.ncu-rep" for n in (0, 2, 3)] and bool(
        out["placeholder_untouched"]
    )
    print(json.dumps(out, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1), encoding="utf-8")
    return 0 if out["as_expected"] else 1


if __name__ == "__main__":
    sys.exit(main())
