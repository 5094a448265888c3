"""Times and counters in one result: kernel times from one backend joined to hardware counters from another.

The cheap, accurate timer (CUPTI) measures every config over ``runs`` runs; Nsight Compute measures the counters
over a few runs of the same configs. :func:`join_runs` puts both into one set of runs, kernel by kernel. A counter
record finds its kernel by identity, never by position across the run: (annotation, config, launch order of the
kernel within the region, kernel name). For each region the kernels the counter side saw (in launch order, names
reduced to their base name by :func:`base_name`) must be the kernels the time side saw in its most frequent
launch sequence for that region; a region whose kernel count or names differ is a :class:`JoinError` that names
the region and both sequences, never a join of the wrong kernels.

The joined runs hold the time side's runs with their records, regions and collector values; counter run ``r``
adds its counter records to time run ``r`` (kernel names as the time side spells them). The counter side's own
time metrics (those the time side also measured) are left out: the time column is the time backend's. Which
backend measured which metric is :attr:`JoinedRuns.sources`; a joined result keeps it as its plan's
``metric_backends``, which the DataFrame's ``Tool`` column reads per row.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from nsightx._errors import MeasurementError
from nsightx._results.records import Record, RunRecords


class JoinError(MeasurementError):
    """The two backends saw different kernels in a region (count or names), or measured different configs."""


@dataclass(frozen=True)
class JoinedRuns:
    """What :func:`join_runs` produced."""

    runs: tuple[RunRecords, ...]
    """The time side's runs with the counter records added."""
    sources: Mapping[str, str]
    """Metric -> the backend that measured it."""
    regions_joined: int
    """(annotation, config) regions whose counters were attached."""


def base_name(kernel: str) -> str:
    """A kernel's base name, for matching: no ``void``, template arguments, parameter list or namespace.

    CUPTI's records carry the base name of the mangled symbol; ncu's the demangled name; both reduce to the same.
    Demangled names nest parentheses inside template arguments (``<(int)4, ...>``) and start with
    ``(anonymous namespace)::``, so the name is scanned with its nesting depth, not split at the first ``(``.
    """
    name = kernel.strip().removeprefix("void ").replace("(anonymous namespace)", "anonymous_namespace")
    kept: list[str] = []
    angle = paren = 0
    for ch in name:
        if ch == "(" and angle == 0 and paren == 0:
            break  # the parameter list
        if ch == "<":
            angle += 1
        elif ch == ">" and angle:
            angle -= 1
        elif ch == "(":
            paren += 1
        elif ch == ")" and paren:
            paren -= 1
        elif angle == 0 and paren == 0:
            kept.append(ch)
    return "".join(kept).rsplit("::", 1)[-1].strip()


RegionKey = tuple[str, int]
"""(annotation, config)."""
Launches = tuple[str, ...]
"""The base names of a region's kernels in launch order."""


def launch_sequences(runs: Sequence[RunRecords]) -> dict[RegionKey, dict[int, Launches]]:
    """Per region and run, the base names of its kernels in launch order (``seq``); whole-region records skipped."""
    kernels: dict[RegionKey, dict[int, dict[int, str]]] = defaultdict(lambda: defaultdict(dict))
    for run in runs:
        for rec in run.records:
            if rec.kernel in ("region", "range", "failed"):
                continue
            kernels[(rec.annotation, rec.config)][rec.run][rec.seq] = base_name(rec.kernel)
    return {
        region: {r: tuple(by_seq[s] for s in sorted(by_seq)) for r, by_seq in by_run.items()}
        for region, by_run in kernels.items()
    }


def _modal(sequences: Mapping[int, Launches]) -> Launches:
    """The most frequent launch sequence (the first seen among equally frequent ones)."""
    counts = Counter(sequences.values())
    return max(counts, key=lambda s: counts[s])


def _check_region(region: RegionKey, expected: Launches, got: Mapping[int, Launches], names: tuple[str, str]) -> None:
    """Raise :class:`JoinError` when any counter run of ``region`` saw other kernels than the time side."""
    for run, seq in sorted(got.items()):
        if seq == expected:
            continue
        what = "kernel count" if len(seq) != len(expected) else "kernel names"
        raise JoinError(
            f"cannot join region {region[0]!r} of config {region[1]}: the {what} differs. {names[0]} saw "
            f"{len(expected)} kernel(s) {list(expected)} (its most frequent launch sequence); {names[1]} run {run} "
            f"saw {len(seq)} kernel(s) {list(seq)}. The region launches different kernels under the two "
            "backends (cuBLAS heuristics, autotuning, a kernel ncu filtered out); measure it with one backend, "
            "or make the region launch the same kernels every run"
        )


def join_runs(
    times: Sequence[RunRecords],
    counters: Sequence[RunRecords],
    *,
    backends: tuple[str, str] = ("cupti", "ncu"),
    time_metrics: Sequence[str] = (),
) -> JoinedRuns:
    """Join the counter records of ``counters`` to the kernels of ``times``.

    Args:
        times: Runs of the time backend (every config, ``runs`` runs each).
        counters: Runs of the counter backend over the same configs (a few runs each).
        backends: Names of the time and the counter backend (for :attr:`JoinedRuns.sources` and messages).
        time_metrics: The metrics the time side was asked for (its plan's), besides those its records hold: a
            metric whose every region failed there is still the time side's.

    Returns:
        The joined runs and which backend measured which metric.

    Raises:
        JoinError: a region's kernels differ between the two sides (count or names), the counter side
            measured a region the time side never saw, or measured a counter over a whole region (no kernel).
    """
    time_seqs, counter_seqs = launch_sequences(times), launch_sequences(counters)
    missing = sorted(set(counter_seqs) - set(time_seqs))
    if missing:
        raise JoinError(
            f"cannot join: {backends[1]} measured region(s) {missing} (annotation, config) that {backends[0]} never "
            "saw launch a kernel; both calls must run the same function over the same configs"
        )
    names: dict[tuple[str, int, int], str] = {}
    for region, by_run in counter_seqs.items():
        expected = _modal(time_seqs[region])
        _check_region(region, expected, by_run, backends)
        names.update(_time_names(times, region, expected))
    measured = {*time_metrics, *(rec.metric for run in times for rec in run.records)}
    _check_per_kernel(counters, measured, backends)
    extra: dict[tuple[int, int], list[Record]] = defaultdict(list)
    for run in counters:
        for rec in run.records:
            if rec.metric in measured or rec.kernel in ("region", "range", "failed"):
                continue
            kernel = names.get((rec.annotation, rec.config, rec.seq), rec.kernel)
            extra[(rec.config, rec.run)].append(rec.model_copy(update={"kernel": kernel}))
    counter_metrics = sorted({rec.metric for recs in extra.values() for rec in recs})
    joined = tuple(
        run.model_copy(update={"records": (*run.records, *extra.pop((run.config, run.run), ()))}) for run in times
    )
    leftover = sorted(extra)
    if leftover:
        raise JoinError(
            f"cannot join: {backends[1]} has counter runs {leftover} (config, run) beyond the {backends[0]} runs; "
            f"ask {backends[1]} for at most as many runs as {backends[0]}"
        )
    sources = {m: backends[0] for m in sorted(measured)} | {m: backends[1] for m in counter_metrics}
    return JoinedRuns(runs=joined, sources=sources, regions_joined=len(counter_seqs))


def _check_per_kernel(counters: Sequence[RunRecords], measured: set[str], backends: tuple[str, str]) -> None:
    """Raise :class:`JoinError` for a counter the counter side measured over a whole region, not per kernel.

    Such a record (``"range"`` under ncu's range replay, ``"region"`` from a backend without kernel records) has
    no kernel to be attached to: it was left out of the join, and the joined result lacked the counter silently.
    """
    for run in counters:
        for rec in run.records:
            if rec.metric not in measured and rec.kernel in ("region", "range"):
                raise JoinError(
                    f"cannot join {rec.metric!r} of region {rec.annotation!r} of config {rec.config}: {backends[1]} "
                    f"measured it over the whole region (kernel {rec.kernel!r}, as under replay_mode='range'), so "
                    f"it has no kernel to be attached to among {backends[0]}'s; measure the counters per kernel "
                    "(replay_mode='kernel'), or read that result on its own"
                )


def _time_names(times: Sequence[RunRecords], region: RegionKey, expected: Launches) -> dict[tuple[str, int, int], str]:
    """(annotation, config, seq) -> the kernel name as the time side spells it, from a run with the modal sequence."""
    by_run: dict[int, dict[int, str]] = defaultdict(dict)
    for run in times:
        for rec in run.records:
            if (rec.annotation, rec.config) == region and rec.kernel not in ("region", "range", "failed"):
                by_run[rec.run][rec.seq] = rec.kernel
    for kernels in by_run.values():
        if tuple(base_name(kernels[s]) for s in sorted(kernels)) == expected:
            return {(region[0], region[1], s): kernels[s] for s in kernels}
    return {}
