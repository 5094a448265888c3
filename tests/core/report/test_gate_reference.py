"""The CI gate's history, noise floor, re-measure path and CLI options against a naive reference from the docs.

tests/core/report/test_compare_reference.py checks one comparison of two results. This module checks what sits
around it (docs/ci.md sections 1 and 3, docs/api.md's ``nsightx.compare``):

- the baseline history: several processes of one test saved through the real store
  (:func:`nsightx._report.history.save`, real files in a temporary folder), the baseline picked (the newest, or
  ``base_ref``), the window of ``history`` processes ending at it, only those measured with the baseline's backend
  on the same device, the *between* spread of their means and ``NoiseFloorPct = max(within, between)``,
  ``BaselineProcesses``, and each row's verdict with that floor;
- the pytest plugin's gate (:class:`nsightx._report.pytest_gate.Gate`, the object the fixture feeds): its
  re-measures (which configs, how many times, when a row clears), what is saved, and its failures;
- ``nsightx compare``'s options on saved files (``--threshold``, ``--alpha``, ``--metric``, ``--require-all``,
  ``--history``, ``--base-ref``): its exit status against the reference verdict;
- properties: identical code measured in N processes never fails the gate, a 2x slowdown with low noise always
  does, the verdict does not depend on the order the saves were written or copied, and a history of one process
  is the plain two-result comparison.

Where the docs say "the largest difference between the means ... in percent" without saying of what, the
reference takes it relative to the smaller mean's size (the code's ``max / min - 1`` for positive means).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import random
import shutil
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_compare_reference import holm, mwu_p

import nsightx
from nsightx._report import history
from nsightx._report.compare import gate_failed
from nsightx._report.pytest_gate import Gate, GateSettings
from nsightx._results.profileresults import ProfileResults, build_results
from nsightx._results.records import Record, RegionRun, RunRecords
from nsightx._results.schema import PlanInfo
from nsightx.cli import main

TIME, RATE = "gpu__time_duration.sum", "dram__bytes_read.sum.per_second"
UNITS = {TIME: "ns", RATE: "GB/s"}
NODE = "perf/test_mm.py::test_mm"
EXAMPLES = int(os.environ.get("NSIGHTX_REFERENCE_EXAMPLES", "50"))
"""Examples per property (more while hunting: ``NSIGHTX_REFERENCE_EXAMPLES=300``)."""

Row = tuple[str, str, int]
"""(annotation, metric, n): one row of the comparison (one parameter ``n``)."""


# --- processes ---------------------------------------------------------------------------------------------------


@dataclass
class Process:
    """One measured process: per row, its per-run values; where and when it ran."""

    values: dict[Row, list[float]]
    backend: str = "cupti"
    gpu: str = "H100"
    second: int = 0
    """When it ran (seconds after a fixed start): its ``created`` time and so its save's file name."""
    commit: str = ""
    """The git commit it measured (``GitCommit``; none by default)."""

    def result(self) -> ProfileResults:
        """The process as a backend's runs reach ``build_results``."""
        ns = sorted({n for _, _, n in self.values})
        anns = sorted({a for a, _, _ in self.values})
        metrics = sorted({m for _, m, _ in self.values})
        runs = max(len(v) for v in self.values.values())
        plan = PlanInfo(
            function="bench",
            params=("n",),
            configs=tuple((n,) for n in ns),
            runs=runs,
            warmup=0,
            metrics=tuple(metrics),
            backend=self.backend,
            cache_control="all",
            clock_control="none",
            replay_mode="kernel",
        )
        out = []
        for c, n in enumerate(ns):
            for r in range(runs):
                records, regions = [], []
                for a in anns:
                    cells = {m: v[r] for (a2, m, n2), v in self.values.items() if (a2, n2) == (a, n) and r < len(v)}
                    if not cells:
                        continue
                    regions.append(RegionRun(annotation=a, config=c, run=r, host_ns=1000 + r))
                    records += [
                        Record(annotation=a, config=c, run=r, kernel=f"k{a}", metric=m, value=x, unit=UNITS[m])
                        for m, x in cells.items()
                    ]
                out.append(RunRecords(config=c, run=r, records=tuple(records), regions=tuple(regions)))
        created = f"2026-12-06T{10 + self.second // 3600:02d}:{self.second // 60 % 60:02d}:{self.second % 60:02d}+00:00"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            env = {"GPU": self.gpu, "Host": "ci-1", **({"GitCommit": self.commit} if self.commit else {})}
            return build_results(plan, out, env, created=created)


def noisy(level: float, rsd: float, runs: int, rng: random.Random) -> list[float]:
    return [level * (1.0 + rng.gauss(0.0, rsd)) for _ in range(runs)]


ROWS: tuple[Row, ...] = tuple((a, m, n) for a in ("gemm", "copy") for m in (TIME, RATE) for n in (64, 128))


@dataclass
class Story:
    """A stored history of one test (oldest first) and the new process judged against it."""

    stored: list[Process]
    new: Process
    factor: float
    ref: int | None = None
    """``base_ref``: a save number (1-based, in ``stored`` order), or ``None`` for the newest."""
    size: int = history.HISTORY


@st.composite
def stories(draw: Any, *, factors: Any = None, other_devices: bool = True, max_stored: int = 7) -> Story:
    """Processes of the same code (each with its own drift), then a new one shifted by ``factor``."""
    rng = random.Random(draw(st.integers(0, 2**32)))
    rows = [r for r in ROWS if draw(st.integers(0, 3))] or [ROWS[0]]
    level = {r: draw(st.sampled_from([3.0, 1250.0, 55_600.0, -1250.0, -3.0])) for r in rows}  # derived: < 0
    drift = draw(st.sampled_from([0.0, 0.01, 0.05, 0.3]))
    rsd = draw(st.sampled_from([0.001, 0.01, 0.05]))
    runs = draw(st.integers(8, 20))

    def process(factor: float, second: int) -> Process:
        shift = 1.0 + rng.uniform(-drift, drift)
        kept = [r for r in rows if rng.random() > 0.1] or rows[:1]
        return Process({r: noisy(level[r] * factor * shift, rsd, runs, rng) for r in kept}, second=second)

    k = draw(st.integers(1, max_stored))
    stored = [process(1.0, 10 * i) for i in range(k)]
    if other_devices:
        for p in stored:
            kind = draw(st.sampled_from(["same", "same", "same", "backend", "gpu"]))
            p.backend = "events" if kind == "backend" else p.backend
            p.gpu = "H200" if kind == "gpu" else p.gpu
    factor = draw(factors if factors is not None else st.sampled_from([1.0, 1.0, 2.0, 0.5, 1.1, 1.3]))
    new = process(factor, 10 * k + 5)
    ref = draw(st.one_of(st.none(), st.integers(1, k)))
    size = draw(st.sampled_from([history.HISTORY, history.HISTORY, 1, 2, 3, 8]))
    return Story(stored, new, factor, ref, size)


def store(story: Story, root: Path) -> Path:
    """Each stored process saved in turn by the plugin's store; the store's root."""
    for p in story.stored:
        history.save(root, NODE, p.result())
    return root


# --- the reference -----------------------------------------------------------------------------------------------


def mean(values: list[float]) -> float:
    return sum(values) / len(values)


def reference_between(story: Story) -> dict[Row, tuple[float, int]]:
    """Per row: the between-process spread (percent; NaN below 2 processes) and how many processes hold it.

    docs/ci.md section 3.4: the baseline (the newest save, or the one ``base_ref`` names) and up to
    ``history - 1`` saves before it, only those measured with the baseline's backend on the same kind of device.
    """
    chosen = len(story.stored) - 1 if story.ref is None else story.ref - 1
    window = story.stored[max(0, chosen - story.size + 1) : chosen + 1]
    base = story.stored[chosen]
    same = [p for p in window if (p.backend, p.gpu) == (base.backend, base.gpu)]
    out: dict[Row, tuple[float, int]] = {}
    for row in base.values:
        means = [mean(p.values[row]) for p in same if row in p.values]
        spread = 100.0 * (max(means) - min(means)) / min(abs(m) for m in means) if len(means) >= 2 else math.nan
        out[row] = (spread, len(means))
    return out


def reference_floor(story: Story, row: Row) -> tuple[float, int]:
    """``NoiseFloorPct`` and ``BaselineProcesses`` of a row both sides hold (docs/ci.md section 3.4)."""
    base = story.stored[len(story.stored) - 1 if story.ref is None else story.ref - 1]
    between, processes = reference_between(story)[row]
    within = min(spread_of(base.values[row]), spread_of(story.new.values[row]))
    parts = [f for f in (within, between) if math.isfinite(f)]
    return (max(parts) if parts else 0.0), processes


def spread_of(values: list[float]) -> float:
    """1.4826 x MAD / |median| in percent, by pandas (NaN below 2 values or at median 0)."""
    s = pd.Series(values, dtype="float64")
    if len(s) < 2 or s.median() == 0:
        return math.nan
    return float(100.0 * 1.4826 * (s - s.median()).abs().median() / abs(s.median()))


def expected_regression(row: pd.Series, floor: float, threshold: float, alpha: float) -> bool | None:
    """The verdict rule (docs/ci.md 3.3 and 3.5) on the row's own statistics; None when a limit is too close."""
    change = 100.0 * (row["NewMean"] - row["BaselineMean"]) / abs(row["BaselineMean"])
    worse = change < 0 if row["Metric"] == RATE else change > 0
    significant = row["PValueAdj"] < alpha and (row["Ratio_CI_Lower"] > 1.0 or row["Ratio_CI_Upper"] < 1.0)
    if any(math.isclose(abs(change), limit, rel_tol=1e-9, abs_tol=1e-9) for limit in (threshold, floor)):
        return None
    return bool(significant and worse and abs(change) > threshold and abs(change) > floor)


def rows_of(frame: pd.DataFrame) -> dict[Row, pd.Series]:
    return {(r["Annotation"], r["Metric"], int(r["n"])): r for _, r in frame.iterrows()}


SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    derandomize="NSIGHTX_REFERENCE_RANDOM" not in os.environ,
)


def tmp() -> Path:
    return Path(tempfile.mkdtemp(prefix="nsightx-gateref-"))


def check_story(story: Story, frame: pd.DataFrame, threshold: float = 5.0, alpha: float = 0.05) -> None:
    """Every row both sides hold: the floor, the process count and the verdict the reference gives."""
    base = story.stored[len(story.stored) - 1 if story.ref is None else story.ref - 1]
    got = rows_of(frame)
    assert set(got) == set(base.values) | set(story.new.values)
    for key, row in got.items():
        if row["Status"] in ("only in baseline", "only in new", "no change", "too few runs"):
            assert not bool(row["Regression"]), key
            continue
        floor, processes = reference_floor(story, key)
        assert int(row["BaselineProcesses"]) == processes, (key, row.to_dict(), processes)
        assert math.isclose(row["NoiseFloorPct"], floor, rel_tol=1e-9, abs_tol=1e-12), (key, row.to_dict(), floor)
        want = expected_regression(row, floor, threshold, alpha)
        if want is not None:
            assert bool(row["Regression"]) == want, (key, row.to_dict(), floor)


# --- the history against the reference ---------------------------------------------------------------------------


@SETTINGS
@given(stories())
def test_a_stored_history_gives_the_documented_floor_and_verdict(story: Story) -> None:
    """The baseline, its window, the device filter, the between spread, the floor and each verdict follow the docs.

    The same store is judged three ways that must agree: ``nsightx.compare`` on the folder, the pytest plugin's
    gate reading it (with its default window of 5), and ``nsightx compare``'s exit status.
    """
    root = store(story, tmp() / "base")
    new = story.new.result()
    ref = None if story.ref is None else str(story.ref)
    frame = nsightx.compare(root, new, base_ref=ref, history=story.size)
    check_story(story, frame)
    new_path = new.save(root.parent / "new.json")
    args = ["compare", str(root), str(new_path), "--history", str(story.size), *(["--base-ref", ref] if ref else [])]
    assert main(args) == int(gate_failed(frame))
    if ref is None:  # the same processes as output_prefix files (result-*): the function's history (ci.md 3.4)
        files = tmp()
        for i, p in enumerate(story.stored):
            p.result().save(files / f"result-bench-{i:03d}.json")
        check_story(story, nsightx.compare(files, new_path, history=story.size))
    gate = Gate(GateSettings(compare_dir=root, baseline_ref=ref))
    gate.record(NODE, new)
    (outcome,) = gate.outcomes
    assert outcome.status == "compared" and outcome.frame is not None
    story.size = history.HISTORY
    check_story(story, outcome.frame)
    assert bool(gate.failures()) == gate_failed(outcome.frame)


@SETTINGS
@given(stories(factors=st.just(1.0), other_devices=False), st.data())
def test_identical_code_in_n_processes_never_fails(story: Story, data: Any) -> None:
    """A new process whose row means lie within the stored processes' means never fails the gate.

    The new process is one of the stored ones measured again (the same values, later): its mean is inside the
    range the between spread covers, so its change against the baseline is within the floor.
    """
    root = store(story, tmp() / "base")
    story.ref, story.size = None, history.HISTORY
    window = story.stored[-history.HISTORY :]
    twin = data.draw(st.sampled_from(window))
    again = Process(dict(twin.values), second=10 * len(story.stored) + 5)
    frame = nsightx.compare(root, again.result())
    assert not frame["Regression"].any(), frame[["Metric", "n", "ChangePct", "NoiseFloorPct", "Status"]]
    gate = Gate(GateSettings(compare_dir=root))
    gate.record(NODE, again.result())
    assert gate.failures() == []


@SETTINGS
@given(stories(factors=st.sampled_from([0.5, 2.0]), other_devices=False))
def test_a_doubling_with_low_noise_always_fails(story: Story) -> None:
    """Twice the time (half the rate), or half, against a quiet history: every shared row moves the right way."""
    level = {r: 1000.0 * (1 + i) for i, r in enumerate(ROWS)}
    for p in [*story.stored, story.new]:  # low noise, no drift: the floor stays far below 2x
        rng = random.Random(p.second)
        f = story.factor if p is story.new else 1.0
        p.values = {r: [level[r] * f * (1.0 + rng.gauss(0.0, 0.002)) for _ in v] for r, v in p.values.items()}
    root = store(story, tmp() / "base")
    frame = nsightx.compare(root, story.new.result(), base_ref=None if story.ref is None else str(story.ref))
    shared = frame[~frame["Status"].isin(["only in baseline", "only in new"])]
    for _, row in shared.iterrows():
        worse = (story.factor < 1.0) if row["Metric"] == RATE else (story.factor > 1.0)
        assert row["Status"] == ("slower" if worse else "faster"), row.to_dict()
        assert bool(row["Regression"]) == worse, row.to_dict()


@SETTINGS
@given(stories(max_stored=5), st.randoms(use_true_random=False))
def test_the_verdict_does_not_depend_on_the_order_saves_were_written(story: Story, shuffle: random.Random) -> None:
    """The processes before the baseline saved in another order, or the store copied file by file in any order,
    give the same comparison (the window holds them all: at most 5 stored)."""
    story.ref, story.size = None, history.HISTORY
    first = nsightx.compare(store(story, tmp() / "base"), story.new.result())
    older = story.stored[:-1]
    shuffle.shuffle(older)
    other = Story([*older, story.stored[-1]], story.new, story.factor)
    root = store(other, tmp() / "base")
    second = nsightx.compare(root, story.new.result())
    copy = tmp() / "copy"
    files = [p for p in root.rglob("*.json")]
    shuffle.shuffle(files)
    for f in files:
        (copy / f.parent.name).mkdir(parents=True, exist_ok=True)
        shutil.copyfile(f, copy / f.parent.name / f.name)
    third = nsightx.compare(copy, story.new.result())
    columns = ["Annotation", "Metric", "n", "NoiseFloorPct", "BaselineProcesses", "Regression", "Status"]
    for frame in (second, third):
        pd.testing.assert_frame_equal(first[columns], frame[columns])


@SETTINGS
@given(stories(max_stored=1))
def test_a_history_of_one_process_is_the_plain_comparison(story: Story) -> None:
    """One stored process: ``BaselineProcesses`` 1, the floor is the run-to-run part, as comparing the two files."""
    story.ref = None
    root = store(story, tmp() / "base")
    new = story.new.result()
    try:
        plain = nsightx.compare(story.stored[0].result(), new)
    except nsightx.CompareError:
        with pytest.raises(nsightx.CompareError):
            nsightx.compare(root, new)
        return
    frame = nsightx.compare(root, new)
    held = frame["Status"] != "only in new"
    assert (frame.loc[held, "BaselineProcesses"] == 1).all() and (frame.loc[~held, "BaselineProcesses"] == 0).all()
    columns = ["Annotation", "Metric", "n", "Ratio", "PValueAdj", "NoiseFloorPct", "Regression", "Status"]
    pd.testing.assert_frame_equal(frame[columns], plain[columns])


def test_the_history_of_a_negative_metric_widens_the_floor() -> None:
    """A derived metric whose stored processes' means are -10, -12 and -11 drifted by 20 % between processes.

    The between spread counted only positive means, so a negative metric's history gave no floor: the same code
    measured again at -10 (inside the stored range) was a 9 % regression of a time, and the gate failed.
    """
    rng = random.Random(1)
    row = ("gemm", TIME, 64)
    root = tmp() / "base"
    for i, level in enumerate([-10.0, -12.0, -11.0]):
        history.save(root, NODE, Process({row: noisy(level, 0.001, 12, rng)}, second=10 * i).result())
    again = Process({row: noisy(-10.0, 0.001, 12, rng)}, second=100).result()
    frame = nsightx.compare(root, again)
    (got,) = frame.to_dict("records")
    assert got["BaselineProcesses"] == 3 and math.isclose(got["NoiseFloorPct"], 20.0, rel_tol=0.01)
    assert (got["Status"], got["Regression"]) == ("within noise", False)
    gate = Gate(GateSettings(compare_dir=root))
    gate.record(NODE, again)
    assert gate.failures() == []


# --- the pytest plugin's re-measures -----------------------------------------------------------------------------

CONFIRM_NS = (64, 128, 192)


def measured(factors: dict[int, float], second: int, seed: int) -> ProfileResults:
    """A process of ``gemm`` (scaled by each config's factor) and ``copy`` (never changes) at the given configs."""
    rng = random.Random(seed)
    values = {}
    for n, f in factors.items():
        values[("gemm", TIME, n)] = noisy(1000.0 * n * f, 0.002, 12, rng)
        values[("copy", TIME, n)] = noisy(50.0 * n, 0.002, 12, rng)
    return Process(values, second=second).result()


@SETTINGS
@given(
    st.lists(st.sampled_from([1.0, 2.0]), min_size=3, max_size=3),
    st.lists(st.lists(st.sampled_from([1.0, 2.0]), min_size=3, max_size=3), min_size=4, max_size=4),
    st.integers(0, 3),
    st.booleans(),
)
def test_remeasures_follow_the_documented_rule(
    first: list[float], attempts: list[list[float]], confirm: int, save_too: bool
) -> None:
    """docs/ci.md 1 and 3.6: only a regressed row's configs are measured again, at most ``confirm`` times; a row
    fails only if every re-measure regresses too, the first one that does not clears it; what is saved is the
    measurement the verdict was made on (docs/ci.md 1: a cleared config as the re-measure that cleared it, every
    other config as first measured); the gate fails exactly when a row is left."""
    root = tmp()
    history.save(root / "base", NODE, measured(dict.fromkeys(CONFIRM_NS, 1.0), 0, 1))
    new = measured(dict(zip(CONFIRM_NS, first, strict=True)), 100, 2)
    asked: list[list[int]] = []
    remeasured: list[ProfileResults] = []

    def remeasure(indices: Any) -> ProfileResults:
        attempt = attempts[len(asked)]
        asked.append(sorted(CONFIRM_NS[i] for i in indices))
        remeasured.append(measured({CONFIRM_NS[i]: attempt[i] for i in indices}, 200 + len(asked), 10 + len(asked)))
        return remeasured[-1]

    settings_ = GateSettings(compare_dir=root / "base", confirm=confirm, save_dir=root / "new" if save_too else None)
    gate = Gate(settings_)
    gate.record(NODE, new, remeasure)
    # the reference: the regressed configs, each re-measure round by round
    left = [n for n, f in zip(CONFIRM_NS, first, strict=True) if f == 2.0]
    want_asked, note = [], {n: "" for n in left}
    for k in range(1, confirm + 1):
        if not left:
            break
        want_asked.append(sorted(left))
        still = [n for n in left if attempts[k - 1][CONFIRM_NS.index(n)] == 2.0]
        note.update({n: f"cleared by re-measure {k} (" for n in left if n not in still})
        left = still
    note.update({n: f"confirmed by {confirm} re-measure(s) (" for n in left if confirm})
    assert asked == want_asked
    (outcome,) = gate.outcomes
    assert outcome.frame is not None
    rows = rows_of(outcome.frame)
    for n in CONFIRM_NS:
        assert not bool(rows[("copy", TIME, n)]["Regression"])
        gemm = rows[("gemm", TIME, n)]
        assert bool(gemm["Regression"]) == (n in left), (n, gemm.to_dict())
        assert gemm["Status"] == ("slower" if n in note else "within noise"), gemm.to_dict()
        if confirm and n in note:
            assert str(gemm["Remeasured"]).startswith(note[n]), (n, gemm["Remeasured"], note[n])
    assert bool(gate.failures()) == bool(left)
    if save_too:  # the measurement the verdict was made on: a cleared config as the re-measure that cleared it
        (saved,) = gate.saved
        got = nsightx.load(saved).to_dataframe()
        for n in CONFIRM_NS:
            cleared = note.get(n, "").startswith("cleared by re-measure ")
            source = remeasured[int(note[n].split()[3]) - 1] if cleared else new
            want = source.to_dataframe()
            for ann in ("gemm", "copy"):
                pick = [float(f[(f["Annotation"] == ann) & (f["n"] == n)]["AvgValue"].iloc[0]) for f in (got, want)]
                assert pick[0] == pick[1], (n, ann, note.get(n), pick)


# --- nsightx compare's options on saved files ---------------------------------------------------------------------


@st.composite
def option_pairs(draw: Any) -> tuple[Process, Process]:
    """Two processes of some rows each (most shared), each shared row shifted by its own factor."""
    rng = random.Random(draw(st.integers(0, 2**32)))
    rsd = draw(st.sampled_from([0.001, 0.01, 0.05]))
    runs = draw(st.integers(5, 20)), draw(st.integers(5, 20))
    rows = [r for r in ROWS if draw(st.integers(0, 2))] or [ROWS[0]]
    sides: list[dict[Row, list[float]]] = [{}, {}]
    for r in rows:
        where = draw(st.sampled_from(["both", "both", "both", "both", "base", "new"]))
        factor = draw(st.sampled_from([1.0, 1.03, 1.08, 1.2, 2.0, 0.5]))
        level = draw(st.sampled_from([3.0, 1250.0, -40.0]))
        if where != "new":
            sides[0][r] = noisy(level, rsd, runs[0], rng)
        if where != "base":
            sides[1][r] = noisy(level * factor, rsd, runs[1], rng)
    if not sides[0] or not sides[1]:
        sides[0][ROWS[0]] = noisy(5.0, rsd, runs[0], rng)
        sides[1][ROWS[0]] = noisy(5.0, rsd, runs[1], rng)
    return Process(sides[0], second=0), Process(sides[1], second=10)


@SETTINGS
@given(
    option_pairs(),
    st.sampled_from([0.0, 2.0, 5.0, 10.0, 50.0]),
    st.sampled_from([0.01, 0.05, 0.2]),
    st.sampled_from([None, [TIME], [RATE], [TIME, RATE], ["sm__cycles_elapsed.avg"]]),
    st.booleans(),
)
def test_compare_options_end_to_end(
    pair: tuple[Process, Process], threshold: float, alpha: float, metrics: list[str] | None, require_all: bool
) -> None:
    """``--threshold``, ``--alpha``, ``--metric`` and ``--require-all`` on two saved files (docs/ci.md section 2):
    the rows of the chosen metrics only, Holm over those compared, each verdict with that threshold and alpha,
    and the exit status (0, 1 on a regression or with ``--require-all`` a lone row, 2 when nothing compares)."""
    folder = tmp()
    base, new = (p.result().save(folder / f"{name}.json") for p, name in zip(pair, ("base", "new"), strict=True))
    args = ["compare", str(base), str(new), "--threshold", str(threshold), "--alpha", str(alpha), "--format", "json"]
    args += [a for m in metrics or [] for a in ("--metric", m)] + (["--require-all"] if require_all else [])
    out = tempfile.TemporaryFile("w+")
    with contextlib.redirect_stdout(out):
        status = main(args)
    out.seek(0)
    wanted = set(metrics) if metrics else {TIME, RATE}
    a, b = ({r: v for r, v in p.values.items() if r[1] in wanted} for p in pair)
    held = {m for side in pair for _, m, _ in side.values}
    shared = [r for r in a if r in b and sorted(a[r]) != sorted(b[r])]
    if (metrics and set(metrics) - held) or not [r for r in a if r in b]:
        assert status == 2, (status, metrics)  # a --metric in neither result, or no row in both
        return
    got = {(r["Annotation"], r["Metric"], int(r["n"])): r for r in json.load(out)["rows"]}
    assert set(got) == set(a) | set(b)
    p_adj = holm({r: mwu_p(a[r], b[r]) for r in shared})
    regressed = False
    for r in shared:
        row = pd.Series(got[r])
        assert math.isclose(row["PValueAdj"], p_adj[r], rel_tol=1e-6), (r, row.to_dict(), p_adj[r])
        floor = min(spread_of(a[r]), spread_of(b[r]))
        want = expected_regression(row, floor, threshold, alpha)
        if abs(row["PValueAdj"] - alpha) < 0.1 * alpha or want is None:
            regressed |= bool(row["Regression"])
            continue
        assert bool(row["Regression"]) == want, (r, row.to_dict(), floor)
        regressed |= want
    lone = any((r in a) != (r in b) for r in {*a, *b})
    assert status == int(regressed or (require_all and lone)), (status, regressed, lone)


def test_a_side_whose_median_is_zero_leaves_the_floor_to_the_other_side() -> None:
    """A counter at 0 in most runs has no relative spread; the floor is the other side's, whichever side it is.

    ``min(NaN, x)`` is NaN and ``min(x, NaN)`` is x: a baseline with a median of 0 had a floor of 0 where the same
    pair swapped had the new side's spread, so the floor (and a verdict resting on it) depended on the direction.
    """
    rng = random.Random(3)
    row = ("gemm", TIME, 64)
    zeros = Process({row: [0.0] * 7 + [10.0] * 5}).result()
    level = Process({row: noisy(5.0, 0.02, 12, rng)}, second=5).result()
    there, back = nsightx.compare(zeros, level), nsightx.compare(level, zeros)
    floor = spread_of([v.value for v in level.data.values])
    assert math.isclose(there["NoiseFloorPct"].iloc[0], floor) and math.isclose(back["NoiseFloorPct"].iloc[0], floor)


def test_a_commit_that_starts_with_digits_only_picks_its_save() -> None:
    """``--nsightx-baseline=1234567`` (docs/ci.md: "the start of a commit") picks the save of commit 1234567...

    A reference of digits only was read as a save number and nothing else: a commit whose first hex digits are all
    decimal (about 1 in 27 for 7 digits) could not be named, and every test was ``NO BASELINE``.
    """
    rng = random.Random(5)
    row = ("gemm", TIME, 64)
    root = tmp() / "base"
    for i, commit in enumerate(["1234567890abcdef", "abcdef0123456789"]):
        p = Process({row: noisy(10.0 + i, 0.001, 12, rng)}, second=10 * i, commit=commit)
        history.save(root, NODE, p.result())
    again = Process({row: noisy(10.0, 0.001, 12, rng)}, second=100).result()
    gate = Gate(GateSettings(compare_dir=root, baseline_ref="1234567"))
    gate.record(NODE, again)
    (outcome,) = gate.outcomes
    assert outcome.status == "compared" and outcome.baseline is not None, outcome.message
    assert outcome.baseline.name.startswith("0001_ci-1_1234567890_")
    frame = nsightx.compare(root, again, base_ref="1234567")
    assert frame["BaselineProcesses"].tolist() == [1] and math.isclose(
        frame["BaselineMean"].iloc[0], 10.0, rel_tol=0.01
    )
    assert history.pick(history.entries(root / history.test_folder(NODE)), "2").number == 2  # a number still wins
