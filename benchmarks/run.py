"""The one runner of the benchmark suite: run a named benchmark, or record an output made elsewhere, in one format.

    python benchmarks/run.py --list
    python benchmarks/run.py NAME [--machine LABEL] [-- ARGS...]       # run it here, then record it
    python benchmarks/run.py NAME --from FILE [--machine LABEL] [--command TEXT] [--date ISO] [--tree REV]

Each benchmark (:data:`SUITE`, the table of ``benchmarks/README.md``) is one script that writes its numbers to a
file. The runner starts it with this tree first on ``PYTHONPATH`` (``.``, ``backends``, ``plugins``), with the
suite's default arguments and then ``ARGS``, and records what it wrote:

- ``benchmarks/results/NAME/latest.json``: date, tree (git commit, ``+dirty`` for uncommitted changes), machine,
  command, exit status, the headline numbers (the figures the README quotes against the goal's target) and the
  script's whole output under ``result``; ``latest.md`` shows the same as a table;
- one line appended to ``benchmarks/results/NAME/history.jsonl``: the same without ``result``.

``--from FILE`` records an output made elsewhere instead of running (the GPU machine's ``run_gpu.sh`` writes its
files under ``$OUT``; they come back as files), with the command that made it and the machine it ran on.
``--no-latest`` only appends the history line (for older outputs added after a newer one).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import shlex
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = HERE / "results"

Headline = dict[str, Any]


@dataclass(frozen=True)
class Benchmark:
    """One benchmark of the suite: its script, how it is started and how its output is summarised."""

    script: str
    goal: str
    args: tuple[str, ...]
    output: str  # "json": the script takes --json FILE; "dir": --out DIR (backend_overhead); "log": LOG path
    headline: Callable[[Any], Headline]


def _r(x: float, digits: int = 3) -> float:
    return round(float(x), digits)


def overhead_headline(data: dict[str, Any]) -> Headline:
    """Paired-median ratio to the bare loop per workload and variant (one process, or the median over processes of
    ``overhead_summary.py``'s group ``after``)."""
    if "workloads" in data:
        return {
            f"{w} {v}": _r(r)
            for w, wd in data["workloads"].items()
            for v, r in wd["ratio_paired_median"].items()
            if v != "bare"
        }
    group = data.get("after") or next(iter(data.values()))
    return {f"{w} {v}": _r(s["median"]) for w, wd in group.items() for v, s in wd.items() if v != "bare"}


def data_path_headline(data: dict[str, Any]) -> Headline:
    """Per shape (and tree, when several): ``to_dataframe()`` over the pandas floor, save and load in ms, bytes per
    record."""
    trees = {row["tree"] for row in data["rows"]}
    out: Headline = {}
    for row in data["rows"]:
        key = row["shape"] if len(trees) == 1 else f"{Path(row['tree']).name} {row['shape']}"
        out[f"{key} to_dataframe/floor"] = _r(row["ratio"], 2)
        out[f"{key} save ms"] = _r(row["save_s"] * 1e3, 1)
        out[f"{key} load ms"] = _r(row["load_s"] * 1e3, 1)
        out[f"{key} bytes/record"] = _r(row["bytes_per_record"], 1)
    return out


def run_loop_headline(data: dict[str, Any]) -> Headline:
    """CPU microseconds per run of a call beside an empty region, per call size and case.

    With ``--nvml``: the nvml plugin's part of a run and its per-run work alone, per tree and sampler. With
    ``--events``: per tree and case, the events session's CPU time, stream objects and driver queries per run. With
    ``--fixed``: per tree, the 1x1 call, the 4x11 call and that call's fixed part, in microseconds.
    """
    cases = data["cases"]
    out: Headline = {}
    if data.get("fixed"):  # --fixed: per tree, the 1x1 call and the 4x11 call's fixed part, in microseconds
        for case, m in data["median"].items():
            out[f"{Path(case).name} 1x1 call us"] = _r(m["1x1_us"], 1)
            out[f"{Path(case).name} 4x11 call us"] = _r(m["4x11_us"], 1)
            out[f"{Path(case).name} 4x11 fixed us"] = _r(m["4x11_fixed_us"], 1)
        return out
    if data.get("events"):  # --events: per tree and case, the session's CPU time and what it asked per run
        for tree, by_case in data["median"].items():
            for case, m in by_case.items():
                out[f"{Path(tree).name} {case} us/run"] = _r(m["us_per_run"], 2)
                out[f"{Path(tree).name} {case} stream objects/run"] = _r(m["stream_objects_per_run"], 2)
                out[f"{Path(tree).name} {case} driver queries/run"] = _r(m["driver_queries_per_run"], 2)
        return out
    if data.get("nvml"):
        for case, m in data["median"].items():
            name = f"{Path(case.split(' [')[0]).name} [{case.split(' [')[1]}"
            out[f"{name} nvml-off us/run"] = _r(m["nvml_minus_off_us"], 2)
            out[f"{name} parts us/run"] = _r(m["parts_us"], 2)
        return out
    for case in cases:
        prefix = "" if len(cases) == 1 else f"{Path(case.split(' [')[0]).name}{case[len(case.split(' [')[0]) :]} "
        for size, m in data["median"][case].items():
            out[f"{prefix}{size} runs us/run"] = _r(m["call_us"], 2)
    return out


def gate_rates_headline(data: dict[str, Any]) -> Headline:
    """Each gate's A/A false alarms and A/B detections, as ``k / n``."""
    return {
        key.replace("_", " "): f"{v['k']} / {v['n']}"
        for key, v in data.items()
        if isinstance(v, dict) and {"k", "n"} <= set(v)
    }


def ncu_overhead_headline(data: dict[str, Any]) -> Headline:
    """Per metric set: the median wall time of plain ncu, of the ncu backend, and their ratio."""
    rows = data.get("summary")
    if rows is None:  # outputs older than the summary: the medians from the measurements
        import statistics

        rows = []
        for label in dict.fromkeys(m["metrics"] for m in data["measurements"] if "metrics" in m):
            walls = {
                side: statistics.median(
                    m["wall_s"] for m in data["measurements"] if m.get("metrics") == label and m["side"] == side
                )
                for side in ("plain", "nsightx")
            }
            rows.append({"metrics": label, "plain_s": walls["plain"], "nsightx_s": walls["nsightx"]})
    out: Headline = {}
    for s in rows:
        out[f"{s['metrics']} plain s"] = _r(s["plain_s"], 2)
        out[f"{s['metrics']} nsightx s"] = _r(s["nsightx_s"], 2)
        out[f"{s['metrics']} ratio"] = _r(s["nsightx_s"] / s["plain_s"])
    return out


def examples_headline(log: str) -> Headline:
    """How many of NVIDIA's examples passed, failed, errored or were skipped, and pytest's exit status."""
    out: Headline = {}
    for outcome in ("PASSED", "FAILED", "ERROR", "SKIPPED"):  # -v lines and -rA summary lines name the same tests
        found = re.findall(rf"^(?:{outcome} (\S+::\S+)|(\S+::\S+) {outcome}\b)", log, re.M)
        out[outcome.lower()] = len({a or b for a, b in found})
    rc = re.search(r"pytest rc=(\d+)", log)
    out["pytest rc"] = int(rc.group(1)) if rc else None
    return out


def sandwich_headline(data: dict[str, Any]) -> Headline:
    """Per size: the kernel time between two torch.profiler sessions over the time in a fresh process."""
    return {f"n={n} sandwiched/fresh": _r(r, 4) for n, r in data["ratios"].items()}


def range_profiler_headline(data: dict[str, Any]) -> Headline:
    """Steps that passed, steps that failed (names), and the largest difference to ncu of the compared metrics."""
    steps = data.get("steps", [])
    out: Headline = {
        "steps ok": sum(1 for s in steps if s.get("ok")),
        "steps failed": [s["name"] for s in steps if not s.get("ok") and not s.get("skipped")],
    }
    diffs = [abs(c["rel_diff"]) * 100 for c in data.get("comparison", []) if c.get("rel_diff") is not None]
    out["max |diff to ncu| %"] = _r(max(diffs), 2) if diffs else None
    return out


SUITE: dict[str, Benchmark] = {
    "overhead": Benchmark(
        "backend_overhead.py",
        "issues 13, 35: a call (and call + to_dataframe) against the bare CUDA-events loop",
        ("--reps", "9", "--no-profile"),
        "dir",
        overhead_headline,
    ),
    "data_path": Benchmark(
        "data_path.py", "issue 35: to_dataframe, save, load against the pandas floor", (), "json", data_path_headline
    ),
    "run_loop": Benchmark(
        "run_loop_cost.py", "issue 35: the run loop's cost per run, host backend", (), "json", run_loop_headline
    ),
    "gate_rates": Benchmark(
        "gate_rates.py",
        "issue 37: the CI gate's false alarms and detections",
        ("--busy", "2"),
        "json",
        gate_rates_headline,
    ),
    "ncu_overhead": Benchmark(
        "ncu_overhead.py",
        "issues 12, 20: the ncu backend against plain ncu",
        ("--repeats", "2"),
        "json",
        ncu_overhead_headline,
    ),
    "nvidia_examples": Benchmark(
        "nsight_python_examples.sh",
        "issues 20, 36: NVIDIA's nsight-python examples through nsightx",
        (),
        "log",
        examples_headline,
    ),
    "profiler_sandwich": Benchmark(
        "profiler_sandwich.py",
        "issues 13, 36: kernel times after another CUPTI client (torch.profiler)",
        (),
        "json",
        sandwich_headline,
    ),
    "range_profiler": Benchmark(
        "range_profiler_probe.py",
        "issue 40: counters in process through CUPTI's Range Profiler",
        (),
        "json",
        range_profiler_headline,
    ),
}


def tree_of(root: Path = ROOT) -> str | None:
    """The git commit of ``root`` (short), with ``+dirty`` when tracked files differ from it; None outside git."""
    try:
        rev = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True
        )
    except OSError:
        return None
    if rev.returncode != 0:
        return None
    return rev.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")


def machine_here() -> str:
    """The GPU's name where nvidia-smi answers, else the CPU model and core count."""
    try:
        smi = subprocess.run(
            ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True, text=True, timeout=30
        )
        if smi.returncode == 0 and smi.stdout.strip():
            return smi.stdout.strip().splitlines()[0]
    except (OSError, subprocess.TimeoutExpired):
        pass
    model = platform.processor() or platform.machine()
    try:
        names = re.findall(r"^model name\s*:\s*(.+)$", Path("/proc/cpuinfo").read_text(), re.M)
        model = names[0] if names else model
    except OSError:
        pass
    return f"{model}, {os.cpu_count()} cores"


def read_output(bench: Benchmark, path: Path) -> Any:
    """The script's output: the JSON it wrote (the one ``backend_overhead_*.json`` of an output folder) or the log."""
    if bench.output == "log":
        return path.read_text(encoding="utf-8", errors="replace")
    if path.is_dir():
        found = sorted(path.glob("backend_overhead*.json"))
        if len(found) != 1:
            raise SystemExit(f"{path}: expected one backend_overhead*.json, found {len(found)}")
        path = found[0]
    return json.loads(path.read_text(encoding="utf-8"))


def record(name: str, output: Any, meta: dict[str, Any], latest: bool = True) -> dict[str, Any]:
    """Write ``results/NAME/latest.json`` and ``latest.md`` (when ``latest``) and append the history line."""
    bench = SUITE[name]
    entry = {"benchmark": name, "goal": bench.goal, **meta, "headline": bench.headline(output)}
    folder = RESULTS / name
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / "history.jsonl").open("a", encoding="utf-8") as f:
        f.write(json.dumps(entry) + "\n")
    if latest:
        full = {**entry, "result": output}
        (folder / "latest.json").write_text(json.dumps(full, indent=1) + "\n", encoding="utf-8")
        (folder / "latest.md").write_text(markdown(entry), encoding="utf-8")
    return entry


def markdown(entry: dict[str, Any]) -> str:
    """The entry as a short Markdown page: what ran where, then the headline numbers."""
    lines = [
        f"# {entry['benchmark']}: {entry['goal']}",
        "",
        f"- date: {entry['date']}",
        f"- tree: {entry['tree'] or 'unknown'}",
        f"- machine: {entry['machine']}",
        f"- command: `{entry['command']}`",
        f"- exit status: {entry['rc']}",
        *([f"- source: {entry['source']}"] if entry.get("source") else []),
        "",
        "| figure | value |",
        "| --- | --- |",
        *(f"| {k} | {v} |" for k, v in entry["headline"].items()),
    ]
    return "\n".join(lines) + "\n"


def run(name: str, extra: list[str]) -> tuple[Any, str, int]:
    """Run the benchmark with this tree first on PYTHONPATH; its output, the command line and the exit status."""
    bench = SUITE[name]
    script = HERE / bench.script
    tmp = Path(tempfile.mkdtemp(prefix=f"nsightx-{name}-"))
    if bench.output == "log":  # nsight_python_examples.sh EXAMPLES_DIR LOG [pytest args]
        if not extra:
            raise SystemExit(f"{name}: give NVIDIA's examples folder: run.py {name} -- EXAMPLES_DIR")
        out = tmp / "examples.log"
        argv = ["bash", str(script), extra[0], str(out), *extra[1:]]
    else:
        out = tmp / ("out" if bench.output == "dir" else "out.json")
        argv = [sys.executable, str(script), *bench.args, *extra, "--out" if bench.output == "dir" else "--json"]
        argv.append(str(out))
    env = dict(os.environ)
    paths = [str(ROOT), str(ROOT / "backends"), str(ROOT / "plugins")]
    env["PYTHONPATH"] = os.pathsep.join([*paths, *filter(None, [env.get("PYTHONPATH")])])
    rc = subprocess.run(argv, cwd=ROOT, env=env, check=False).returncode
    shown = {sys.executable: "python", str(script): f"benchmarks/{bench.script}"}
    command = shlex.join([shown.get(a, a) for a in argv[:-1]] + ["OUT"])
    if not out.exists():
        raise SystemExit(f"{name}: the script wrote no output (exit status {rc}); nothing recorded")
    return read_output(bench, out), command, rc


def now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("name", nargs="?", help=f"one of: {', '.join(SUITE)}")
    ap.add_argument("extra", nargs="*", help="arguments for the script (after --)")
    ap.add_argument("--list", action="store_true", help="list the suite")
    ap.add_argument("--from", dest="source", type=Path, help="record this output instead of running")
    ap.add_argument("--machine", help="where it ran (default: this machine's GPU, else its CPU)")
    ap.add_argument("--command", help="with --from: the command that made the output")
    ap.add_argument("--date", help="with --from: when it ran (ISO 8601; default now)")
    ap.add_argument("--tree", help="with --from: the commit it measured (default: this tree's)")
    ap.add_argument("--rc", type=int, default=0, help="with --from: the script's exit status (0)")
    ap.add_argument("--no-latest", action="store_true", help="only append the history line")
    args = ap.parse_args(argv)
    if args.list or not args.name:
        for name, bench in SUITE.items():
            print(f"{name:<18} {bench.script:<26} {bench.goal}")
        return 0
    if args.name not in SUITE:
        ap.error(f"unknown benchmark {args.name!r}: the suite has {', '.join(SUITE)}; --list describes them")
    if args.source is not None:
        if not args.source.exists():
            ap.error(f"--from {args.source}: no such file or folder; give the output the benchmark wrote")
        output, command, rc = read_output(SUITE[args.name], args.source), args.command or "", args.rc
    else:
        output, script, rc = run(args.name, args.extra)
        command = shlex.join(["python", "benchmarks/run.py", args.name, *(["--", *args.extra] if args.extra else [])])
        command += f"  (runs: {script})"
    meta = {
        "date": args.date or now(),
        "tree": args.tree or tree_of(),
        "machine": args.machine or machine_here(),
        "command": command,
        "rc": rc,
    }
    entry = record(args.name, output, meta, latest=not args.no_latest)
    print(json.dumps(entry["headline"], indent=1))
    return rc


if __name__ == "__main__":
    sys.exit(main())
