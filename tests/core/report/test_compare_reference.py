"""``nsightx.compare`` and the CI gate against a naive reference written from the docs, over random result pairs.

A baseline and a new result are built through the real code (``build_results``, as the backends' runs reach it)
from random shapes: 1-5 configs whose parameters are ints, floats, str, bool and None, 1-3 annotations, 1-2
metrics (a time, lower is better, and a rate in ``GB/s``, higher is better), 2-30 runs a side, the new side's
true means shifted by a chosen factor (exactly 1 too) with noise of a chosen size, NaN/inf values and failed or
missing regions now and then, configs, annotations and metrics that only one side has, the configs of the new
side in another order, and either side saved to a file (JSON or Parquet) and read back.

The reference follows docs/ci.md section 3 and docs/api.md (``nsightx.compare``) with pandas and SciPy: rows
are matched by (function, annotation, metric, parameter values); a row's runs are its finite values; the ratio
of means, the two-sided Mann-Whitney U test (``scipy.stats.mannwhitneyu``: exact up to 50 runs a side without
ties, else the normal approximation), Holm's adjustment over the rows compared, the 95 % percentile bootstrap
interval (``scipy.stats.bootstrap``: another random stream, so its ends are compared within their Monte Carlo
error), the noise floor (the quieter side's 1.4826 x MAD / median) and the verdict rule. Rows are compared by
key, so a value on another row fails; a verdict is compared only where no quantity it rests on is within the
reference's own uncertainty of its limit. Then properties that hold whatever the reference says: identical
inputs never regress, a 2x shift with low noise is found in the right direction, swapping the sides flips the
direction, and the gate (``gate_failed``, ``nsightx compare``'s exit status, the pytest plugin's gate) agrees
with the verdicts.
"""

from __future__ import annotations

import math
import os
import random
import tempfile
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import scipy.stats
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import nsightx
from nsightx._report.compare import gate_failed
from nsightx._report.history import save
from nsightx._report.pytest_gate import Gate, GateSettings
from nsightx._results.profileresults import ProfileResults, build_results
from nsightx._results.records import Record, RegionRun, RunRecords
from nsightx._results.schema import PlanInfo
from nsightx.cli import main

TIME, RATE = "gpu__time_duration.sum", "dram__bytes_read.sum.per_second"
UNITS = {TIME: "ns", RATE: "GB/s"}
ANNOTATIONS = ("gemm", "copy", "norm", "scan")
FAILED = "failed"
EXAMPLES = int(os.environ.get("NSIGHTX_REFERENCE_EXAMPLES", "40"))
"""Examples per run (more while hunting: ``NSIGHTX_REFERENCE_EXAMPLES=300``)."""
THRESHOLD, ALPHA = 5.0, 0.05
"""The defaults of ``nsightx.compare``, which every comparison here uses."""

Key = tuple[str, str, str]
"""(annotation, metric, parameter values as text): a row of the comparison."""


# --- the shapes -----------------------------------------------------------------------------------------------


def config_values(kinds: tuple[str, ...], cid: int) -> tuple[Any, ...]:
    """The parameter values of config ``cid``: the first parameter tells the configs apart, the others repeat."""
    out: list[Any] = []
    for i, kind in enumerate(kinds):
        if kind == "int":
            out.append(cid * 64 + 1 if i == 0 else cid % 2)
        elif kind == "float":
            out.append(cid + 0.5 if i == 0 else 0.25 * (cid % 2))
        elif kind == "str":
            out.append(f"s{cid}" if i == 0 else f"t{cid % 2}")
        elif kind == "bool":
            out.append(cid % 2 == 0)
        else:
            out.append(None)
    return tuple(out)


@dataclass
class Side:
    """One result's content, as the reference reads it."""

    params: tuple[str, ...]
    configs: list[tuple[Any, ...]]
    runs: int
    annotations: tuple[str, ...]
    metrics: tuple[str, ...]
    # (annotation, config index, run) -> None (the region did not run), FAILED, or metric -> value
    cells: dict[tuple[str, int, int], Any] = field(default_factory=dict)
    saved: str | None = None
    """``json`` or ``parquet``: the side is passed to compare as a saved file; ``None``: in memory."""


@dataclass
class Pair:
    base: Side
    new: Side
    factor: float
    rsd: float


FACTORS = st.sampled_from([1.0, 1.0, 0.5, 2.0, 0.8, 1.25, 0.95, 1.06, 0.99, 1.01])
RSDS = st.sampled_from([0.0, 0.0005, 0.005, 0.02, 0.1, 0.4])
MEANS = st.sampled_from([3.0, 1250.0, 55_600.0, 2.5e6])
SIGNED_MEANS = st.one_of(MEANS, st.sampled_from([-1250.0, -3.0]))
"""A derived metric may be negative: there too, "larger" is worse for a time and "smaller" for a rate."""
ODD = st.sampled_from([math.nan, math.inf, -math.inf, FAILED, None])


def _fill(draw: Any, side: Side, cids: list[int], means: dict[Any, float], factor: float, rsd: float) -> None:
    rng = random.Random(draw(st.integers(0, 2**32)))
    odd_rate = draw(st.sampled_from([0.0, 0.0, 0.05, 0.3]))
    for c, cid in enumerate(cids):
        for r in range(side.runs):
            for ann in side.annotations:
                if rng.random() < odd_rate:
                    odd = draw(ODD)
                    if odd is None or odd == FAILED:
                        side.cells[(ann, c, r)] = odd
                        continue
                    side.cells[(ann, c, r)] = {m: odd for m in side.metrics}
                    continue
                side.cells[(ann, c, r)] = {
                    m: means[(ann, m, cid)] * factor * (1.0 + rng.gauss(0.0, rsd)) for m in side.metrics
                }


@st.composite
def pairs(draw: Any) -> Pair:
    """A baseline and a new side sharing some of their configs, annotations and metrics."""
    n_params = draw(st.integers(1, 3))
    kinds = tuple(draw(st.sampled_from(["int", "float", "str"])) for _ in range(1)) + tuple(
        draw(st.sampled_from(["int", "float", "str", "bool", "none"])) for _ in range(n_params - 1)
    )
    params = ("n", "dtype", "tile")[:n_params]
    n_configs = draw(st.integers(1, 5))
    base_cids = list(range(n_configs))
    new_cids = [c for c in base_cids if draw(st.integers(0, 7))] or [0]
    new_cids = draw(st.permutations(new_cids))
    if draw(st.integers(0, 4)) == 0:
        new_cids = [*new_cids, n_configs]  # a config only the new side has
    anns = ANNOTATIONS[: draw(st.integers(1, 3))]
    new_anns = anns if draw(st.integers(0, 4)) else (*anns[: max(1, len(anns) - 1)], "scan")
    metrics = draw(st.sampled_from([(TIME,), (TIME, RATE), (RATE,)]))
    new_metrics = metrics if draw(st.integers(0, 6)) else (TIME,)
    means = {(a, m, c): draw(SIGNED_MEANS) for a in ANNOTATIONS for m in (TIME, RATE) for c in range(n_configs + 1)}
    factor, rsd = draw(FACTORS), draw(RSDS)
    base_runs = draw(st.integers(2, 30))
    new_runs = base_runs if draw(st.booleans()) else draw(st.integers(2, 30))
    base = Side(params, [config_values(kinds, c) for c in base_cids], base_runs, anns, metrics)
    new = Side(params, [config_values(kinds, c) for c in new_cids], new_runs, new_anns, new_metrics)
    _fill(draw, base, base_cids, means, 1.0, rsd)
    _fill(draw, new, new_cids, means, factor, rsd)
    if draw(st.integers(0, 4)) == 0:  # the new side declares its parameters in another order
        order = draw(st.permutations(range(n_params)))
        new.params = tuple(params[i] for i in order)
        new.configs = [tuple(cfg[i] for i in order) for cfg in new.configs]
    base.saved = draw(st.sampled_from([None, None, "json", "parquet"]))
    new.saved = draw(st.sampled_from([None, "json"]))
    return Pair(base, new, factor, rsd)


def _run(side: Side, c: int, r: int) -> RunRecords:
    records, regions = [], []
    for ann in side.annotations:
        cell = side.cells.get((ann, c, r))
        if cell is None:
            continue
        regions.append(RegionRun(annotation=ann, config=c, run=r, host_ns=1000 + r, failed=cell == FAILED))
        if cell == FAILED:
            continue
        for m, v in cell.items():
            records.append(Record(annotation=ann, config=c, run=r, kernel=f"k{ann}", metric=m, value=v, unit=UNITS[m]))
    return RunRecords(config=c, run=r, records=tuple(records), regions=tuple(regions))


def build(side: Side) -> ProfileResults:
    """The result of ``side`` through ``build_results``, as a backend's runs reach it."""
    plan = PlanInfo(
        function="bench",
        params=side.params,
        configs=tuple(side.configs),
        runs=side.runs,
        warmup=0,
        metrics=side.metrics,
        backend="cupti",
        cache_control="all",
        clock_control="none",
        replay_mode="kernel",
    )
    runs = [_run(side, c, r) for c in range(len(side.configs)) for r in range(side.runs)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return build_results(plan, runs, {"GPU": "x"}, created="2026-12-06T00:00:00+00:00")


def source(side: Side, folder: Path, name: str) -> Any:
    """What compare is given for ``side``: the result itself, or the path of its saved copy."""
    result = build(side)
    if side.saved is None:
        return result
    return result.save(folder / f"{name}.{side.saved}")


# --- the reference ---------------------------------------------------------------------------------------------


def _text(params: tuple[str, ...], values: tuple[Any, ...]) -> str:
    """Parameter values by name as text, numpy scalars (a frame's cells) as the Python values they hold."""
    plain = (v.item() if callable(getattr(v, "item", None)) else v for v in values)
    return repr(sorted(zip(params, plain, strict=True), key=lambda pv: pv[0]))


def runs_of(side: Side) -> dict[Key, list[float]]:
    """Each row's valid runs: its finite values in run order (failed, missing and non-finite runs are not runs)."""
    out: dict[Key, list[float]] = {}
    for c, cfg in enumerate(side.configs):
        for ann in side.annotations:
            for m in side.metrics:
                cells = [side.cells.get((ann, c, r)) for r in range(side.runs)]
                if all(cell is None for cell in cells):
                    continue
                out[(ann, m, _text(side.params, cfg))] = [
                    float(cell[m]) for cell in cells if isinstance(cell, dict) and math.isfinite(cell[m])
                ]
    return out


def robust_spread(values: list[float]) -> float:
    """1.4826 x MAD / |median| in percent (docs/ci.md section 3, "within"); NaN with < 2 values or median 0."""
    s = pd.Series(values, dtype="float64")
    if len(s) < 2 or s.median() == 0:
        return math.nan
    return 100.0 * 1.4826 * (s - s.median()).abs().median() / abs(s.median())


def mwu_p(a: list[float], b: list[float]) -> float:
    """Two-sided Mann-Whitney U: exact up to 50 runs a side without ties, else normal with tie correction."""
    exact = len(set(a) | set(b)) == len(a) + len(b) and max(len(a), len(b)) <= 50
    method = "exact" if exact else "asymptotic"
    return float(scipy.stats.mannwhitneyu(a, b, alternative="two-sided", method=method).pvalue)


def holm(p: dict[Key, float]) -> dict[Key, float]:
    """Holm's step-down adjustment (textbook form)."""
    order = sorted(p, key=lambda k: p[k])
    out, running = {}, 0.0
    for i, k in enumerate(order):
        running = max(running, min(1.0, (len(order) - i) * p[k]))
        out[k] = running
    return out


def boot_ci(a: list[float], b: list[float]) -> tuple[float, float]:
    """95 % percentile bootstrap interval of mean(b) / mean(a), each sample resampled on its own."""
    res = scipy.stats.bootstrap(
        (np.asarray(a), np.asarray(b)),
        lambda x, y, axis=-1: np.mean(y, axis=axis) / np.mean(x, axis=axis),
        n_resamples=4000,
        method="percentile",
        paired=False,
        vectorized=True,
        random_state=np.random.default_rng(7),
    )
    return float(res.confidence_interval.low), float(res.confidence_interval.high)


@dataclass
class Expected:
    status: str
    base_runs: int
    new_runs: int
    base_mean: float = math.nan
    new_mean: float = math.nan
    ratio: float = math.nan
    p: float = math.nan
    p_adj: float = math.nan
    floor: float = math.nan
    ci: tuple[float, float] = (math.nan, math.nan)
    regression: bool | None = False
    """``None``: the reference's verdict rests on a quantity within its own uncertainty of a limit."""


def reference(base: Side, new: Side) -> dict[Key, Expected]:
    """The comparison as docs/ci.md section 3 and docs/api.md describe it, row by row."""
    ra, rb = runs_of(base), runs_of(new)
    out: dict[Key, Expected] = {}
    for key in {**ra, **rb}:
        a, b = ra.get(key), rb.get(key)
        e = out[key] = Expected("", len(a or []), len(b or []), _mean(a), _mean(b))
        if a is None or b is None:
            e.status = "only in new" if a is None else "only in baseline"
            continue
        if a and sorted(a) == sorted(b):
            e.status, e.ratio, e.p, e.ci = "no change", 1.0, 1.0, (1.0, 1.0)
        elif len(a) < 2 or len(b) < 2 or e.base_mean == 0:
            e.status = "too few runs"
        else:
            e.ratio, e.p, e.ci = e.new_mean / e.base_mean, mwu_p(a, b), boot_ci(a, b)
            spreads = [f for f in (robust_spread(a), robust_spread(b)) if math.isfinite(f)]  # the quieter side's
            e.floor = min(spreads, default=0.0)
    adjusted = holm({k: e.p for k, e in out.items() if not math.isnan(e.p)})
    for k, e in out.items():
        e.p_adj = adjusted.get(k, math.nan)
        if not e.status:
            _verdict(e, higher_is_better=k[1] == RATE)
    return out


def _mean(values: list[float] | None) -> float:
    return float(np.mean(values)) if values else math.nan


def _verdict(e: Expected, *, higher_is_better: bool) -> None:
    """Significant (p_adj < alpha, interval excludes 1), worse, above the threshold and the floor (ci.md 3.5)."""
    lo, hi = e.ci
    width = max(hi - lo, 1e-12)
    change = 100.0 * (e.new_mean - e.base_mean) / abs(e.base_mean)
    margins = (
        abs(e.p_adj - ALPHA) > 0.1 * ALPHA,
        abs(lo - 1.0) > 0.25 * width and abs(hi - 1.0) > 0.25 * width,
        abs(abs(change) - THRESHOLD) > 1e-6,
        abs(abs(change) - e.floor) > 1e-6 * max(1.0, e.floor),
    )
    significant = e.p_adj < ALPHA and (lo > 1.0 or hi < 1.0)
    above_floor = abs(change) > e.floor
    worse = e.new_mean < e.base_mean if higher_is_better else e.new_mean > e.base_mean
    e.status = "slower" if worse else "faster"
    if not significant or not above_floor:
        e.status = "within noise"
    e.regression = significant and worse and abs(change) > THRESHOLD and above_floor
    if not all(margins):
        e.regression = None


# --- the checks ----------------------------------------------------------------------------------------------


def rows_by_key(frame: pd.DataFrame, params: tuple[str, ...]) -> dict[Key, pd.Series]:
    out: dict[Key, pd.Series] = {}
    for _, row in frame.iterrows():
        values = tuple(None if _missing(row[p]) else row[p] for p in params)
        key = (row["Annotation"], row["Metric"], _text(params, values))
        assert key not in out, f"two rows for {key}"
        out[key] = row
    return out


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def close(got: float, want: float, rel: float = 1e-9) -> bool:
    if math.isnan(want):
        return math.isnan(got)
    return math.isclose(got, want, rel_tol=rel, abs_tol=1e-12)


def check_row(key: Key, got: pd.Series, want: Expected) -> None:
    where = f"row {key}"
    if want.regression is None:
        assert got["Status"] in ("slower", "faster", "within noise"), where
    else:
        assert got["Status"] == want.status, (where, got["Status"], want)
        assert bool(got["Regression"]) == want.regression, (where, got.to_dict(), want)
    assert (got["BaselineRuns"], got["NewRuns"]) == (want.base_runs, want.new_runs), where
    assert close(got["BaselineMean"], want.base_mean) and close(got["NewMean"], want.new_mean), where
    if want.status in ("only in new", "only in baseline", "too few runs"):
        assert not bool(got["Regression"]), where
        return
    assert close(got["Ratio"], want.ratio), (where, got["Ratio"], want.ratio)
    assert close(got["PValue"], want.p, 1e-6), (where, got.to_dict(), want)
    assert close(got["PValueAdj"], want.p_adj, 1e-6), (where, got.to_dict(), want)
    if want.status != "no change":
        assert close(got["NoiseFloorPct"], want.floor, 1e-9), (where, got["NoiseFloorPct"], want.floor)
        lo, hi = want.ci
        assert got["Ratio_CI_Lower"] <= got["Ratio_CI_Upper"], where
        if min(want.base_runs, want.new_runs) < 5:
            return  # a few runs give a coarse, lumpy bootstrap distribution: two random streams part too far
        slack = 0.25 * (hi - lo) + 1e-9 * abs(want.ratio)
        assert abs(got["Ratio_CI_Lower"] - lo) <= slack and abs(got["Ratio_CI_Upper"] - hi) <= slack, (where, got, want)


def compared(pair: Pair) -> tuple[pd.DataFrame | None, Any, Any]:
    folder = Path(tempfile.mkdtemp(prefix="nsightx-cmpref-"))
    base, new = source(pair.base, folder, "base"), source(pair.new, folder, "new")
    try:
        return nsightx.compare(base, new), base, new
    except nsightx.CompareError:
        return None, base, new


SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    derandomize="NSIGHTX_REFERENCE_RANDOM" not in os.environ,
)


@SETTINGS
@given(pairs())
def test_compare_matches_the_reference(pair: Pair) -> None:
    """Every row's match, runs, means, ratio, p-values, floor, interval and verdict follow the docs."""
    want = reference(pair.base, pair.new)
    frame, _, _ = compared(pair)
    if frame is None:
        assert not any(e.status in ("no change", "slower", "faster", "within noise", "") for e in want.values())
        return
    got = rows_by_key(frame, pair.base.params)
    assert set(got) == set(want)
    for key, row in got.items():
        check_row(key, row, want[key])
    assert gate_failed(frame) == bool(frame["Regression"].any())


def _rate_side(first: Any, level: float) -> Side:
    cells: dict[tuple[str, int, int], Any] = {("gemm", 0, r): {RATE: level * (1.0 + 0.001 * r)} for r in range(12)}
    cells[("gemm", 0, 0)] = first
    return Side(("n",), [(1024,)], 12, ("gemm",), (RATE,), cells)


@pytest.mark.parametrize("saved", [None, "json"])
def test_a_failed_first_run_keeps_a_rates_direction(saved: str | None) -> None:
    """A failed run has no unit; the row's unit (and so its direction) comes from its measured runs.

    The row's unit was its first value's, so a bandwidth whose first baseline run failed lost ``GB/s``, counted
    as "lower is better", and a halved bandwidth was reported ``faster``: the gate passed a 2x regression.
    """
    base, new = _rate_side(FAILED, 400.0), _rate_side({RATE: 200.0}, 200.0)
    base.saved = saved
    frame, _, _ = compared(Pair(base, new, 0.5, 0.001))
    assert frame is not None
    row = frame.iloc[0]
    assert (row["Unit"], bool(row["HigherIsBetter"])) == ("GB/s", True)
    assert (row["Status"], bool(row["Regression"])) == ("slower", True)
    assert gate_failed(frame)


# --- properties that hold whatever the reference says --------------------------------------------------------


@st.composite
def clean_pairs(draw: Any, factors: Any = FACTORS) -> Pair:
    """Pairs of the same configs, annotations and metrics, every run measured: each row is compared."""
    pair = draw(pairs())
    factor = draw(factors)
    n = len(pair.base.configs)
    kinds_from = pair.base
    means = {(a, m, c): draw(MEANS) for a in kinds_from.annotations for m in kinds_from.metrics for c in range(n)}
    runs = draw(st.integers(10, 30)), draw(st.integers(10, 30))
    sides = []
    for side_runs, f in zip(runs, (1.0, factor), strict=True):
        side = Side(kinds_from.params, list(kinds_from.configs), side_runs, kinds_from.annotations, kinds_from.metrics)
        rng = random.Random(draw(st.integers(0, 2**32)))
        rsd = draw(st.sampled_from([0.0005, 0.002, 0.01]))
        for c in range(n):
            for r in range(side_runs):
                for a in side.annotations:
                    noise = 1.0 + rng.gauss(0.0, rsd)
                    side.cells[(a, c, r)] = {m: means[(a, m, c)] * f * noise for m in side.metrics}
        sides.append(side)
    return Pair(sides[0], sides[1], factor, 0.01)


@SETTINGS
@given(pairs(), st.sampled_from([None, "json", "parquet"]))
def test_identical_inputs_never_regress(pair: Pair, saved: str | None) -> None:
    """A result against itself (or its saved copy) is ``no change`` (or ``too few runs``) in every row."""
    folder = Path(tempfile.mkdtemp(prefix="nsightx-cmpref-"))
    result = build(pair.base)
    other = result if saved is None else result.save(folder / f"copy.{saved}")
    try:
        frame = nsightx.compare(result, other)
    except nsightx.CompareError:
        assert all(len(v) == 0 for v in runs_of(pair.base).values())
        return
    assert set(frame["Status"]) <= {"no change", "too few runs"}
    assert not frame["Regression"].any() and not gate_failed(frame)


@SETTINGS
@given(clean_pairs(st.sampled_from([0.5, 2.0])))
def test_a_doubling_is_always_found_in_its_direction(pair: Pair) -> None:
    """Twice (or half) the time or the rate, low noise, 10+ runs a side: every row moves, in the right way."""
    frame, _, _ = compared(pair)
    assert frame is not None
    for _, row in frame.iterrows():
        worse = (pair.factor < 1.0) if row["Metric"] == RATE else (pair.factor > 1.0)
        assert row["Status"] == ("slower" if worse else "faster"), row.to_dict()
        assert bool(row["Regression"]) == worse, row.to_dict()
    assert gate_failed(frame) == any(
        (pair.factor < 1.0) if m == RATE else (pair.factor > 1.0) for m in pair.base.metrics
    )


FLIP = {"slower": "faster", "faster": "slower", "only in baseline": "only in new", "only in new": "only in baseline"}


@SETTINGS
@given(pairs())
def test_swapping_the_sides_flips_the_direction(pair: Pair) -> None:
    """compare(new, baseline) is compare(baseline, new) seen from the other side, row by row."""
    folder = Path(tempfile.mkdtemp(prefix="nsightx-cmpref-"))
    base, new = source(pair.base, folder, "base"), source(pair.new, folder, "new")
    try:
        there = rows_by_key(nsightx.compare(base, new), pair.base.params)
    except nsightx.CompareError:
        with pytest.raises(nsightx.CompareError):
            nsightx.compare(new, base)
        return
    back = rows_by_key(nsightx.compare(new, base), pair.base.params)
    assert set(there) == set(back)
    for key, row in there.items():
        other = back[key]
        a, b = row["Status"], other["Status"]
        assert (other["BaselineRuns"], other["NewRuns"]) == (row["NewRuns"], row["BaselineRuns"]), key
        if a in ("only in baseline", "only in new", "no change", "too few runs"):
            assert b == FLIP.get(a, a), key
            continue
        assert math.isclose(other["Ratio"], 1.0 / row["Ratio"], rel_tol=1e-9), key
        assert math.isclose(other["PValue"], row["PValue"], rel_tol=1e-9), key
        assert math.isclose(other["NoiseFloorPct"], row["NoiseFloorPct"], rel_tol=1e-9, abs_tol=1e-12), key
        assert b in ("within noise", FLIP[a]) if a != "within noise" else b in ("within noise", "slower", "faster")
        assert not (row["Regression"] and other["Regression"]), key
        assert not (other["Regression"] and a == "slower") and not (row["Regression"] and b == "slower"), key


@SETTINGS
@given(pairs(), st.booleans())
def test_the_gates_agree_with_the_verdicts(pair: Pair, require_all: bool) -> None:
    """``gate_failed``, ``nsightx compare``'s exit status and the pytest plugin's gate say the same thing."""
    folder = Path(tempfile.mkdtemp(prefix="nsightx-cmpref-"))
    base_result, new_result = build(pair.base), build(pair.new)
    base, new = base_result.save(folder / "base.json"), new_result.save(folder / "new.json")
    extra = ["--require-all"] if require_all else []
    try:
        frame = nsightx.compare(base, new, require_all=require_all)
    except nsightx.CompareError:
        assert main(["compare", str(base), str(new), *extra]) == 2
        return
    lone = bool(frame["Status"].isin(["only in baseline", "only in new"]).any())
    failed = bool(frame["Regression"].any()) or (require_all and lone)
    assert gate_failed(frame) == failed
    assert main(["compare", str(base), str(new), *extra]) == int(failed)
    store = folder / "store"
    save(store, "t.py::test_x", base_result)
    gate = Gate(GateSettings(compare_dir=store, require_all=require_all))
    gate.record("t.py::test_x", new_result)
    (outcome,) = gate.outcomes
    assert outcome.status == "compared" and outcome.frame is not None
    assert outcome.regressed == failed
    assert list(outcome.frame["Regression"]) == list(frame["Regression"])
    assert bool(gate.failures()) == failed


def _cost_side(params: tuple[str, ...], configs: list[tuple[Any, ...]]) -> Side:
    """Every config of ``params`` timed by one cost model of its values by name: n / m microseconds."""
    cells: dict[tuple[str, int, int], Any] = {}
    for c, cfg in enumerate(configs):
        values = dict(zip(params, cfg, strict=True))
        for r in range(12):
            cells[("gemm", c, r)] = {TIME: 1000.0 * values["n"] / values["m"] * (1.0 + 0.001 * r)}
    return Side(params, configs, 12, ("gemm",), (TIME,), cells)


@pytest.mark.parametrize("saved", [None, "json"])
def test_parameters_declared_in_another_order_match_by_name(saved: str | None) -> None:
    """``f(n, m)`` at (1, 2) and ``f(m, n)`` at (2, 1) are one config: the same times are ``no change``.

    Rows were matched by the position of the values, so n=1, m=2 was compared with n=2, m=1: the same code was
    a 4x regression at one config and a 4x improvement at the other.
    """
    base = _cost_side(("n", "m"), [(1, 2), (2, 1)])
    new = _cost_side(("m", "n"), [(2, 1), (1, 2)])
    base.saved = saved
    frame, _, _ = compared(Pair(base, new, 1.0, 0.0))
    assert frame is not None
    assert list(frame["Status"]) == ["no change", "no change"]
    assert not gate_failed(frame)
    by_n = frame.set_index("n")
    assert by_n.loc[1, "m"] == 2 and by_n.loc[1, "BaselineMean"] == by_n.loc[1, "NewMean"]


@pytest.mark.parametrize(("metric", "new_level", "status"), [(TIME, -20.0, "faster"), (RATE, -20.0, "slower")])
def test_a_negative_mean_moves_in_the_direction_of_its_values(metric: str, new_level: float, status: str) -> None:
    """A derived metric at -10 that becomes -20 got smaller: better for a time, a regression for a rate.

    The direction was read from the ratio of means (2.0 here), so the time was a regression and the rate's drop
    was ``faster``: the gate failed an improvement and passed a 2x regression.
    """

    def side(level: float) -> Side:
        cells = {("gemm", 0, r): {metric: level * (1.0 + 0.001 * r)} for r in range(12)}
        return Side(("n",), [(1,)], 12, ("gemm",), (metric,), cells)

    frame, _, _ = compared(Pair(side(-10.0), side(new_level), 2.0, 0.001))
    assert frame is not None
    row = frame.iloc[0]
    assert row["Status"] == status and bool(row["Regression"]) == (status == "slower")
    assert math.isclose(row["Ratio"], 2.0) and math.isclose(row["ChangePct"], -100.0)


def test_a_metric_without_a_unit_beside_one_with_a_unit_is_printed(capsys: pytest.CaptureFixture[str]) -> None:
    """A unitless metric's ``Unit`` cell is missing (NaN in pandas' string column); the table shows a bare number.

    Found by the gate property: ``nsightx compare`` died with a TypeError while printing the table of a doubled
    time, so the gate gave a traceback instead of its verdict.
    """
    from _synthetic import make_result, noisy

    values = {("g", 0, "ratio"): noisy(3.0, 0.001, 12, 1), ("g", 0, TIME): noisy(3000.0, 0.001, 12, 2)}
    doubled = {k: [2.0 * x for x in v] for k, v in values.items()}
    folder = Path(tempfile.mkdtemp(prefix="nsightx-cmpref-"))
    paths = [
        make_result(v, params=["n"], configs=[(1,)], units={"ratio": None}).save(folder / f"{name}.json")
        for name, v in (("base", values), ("new", doubled))
    ]
    assert main(["compare", *map(str, paths)]) == 1
    out = capsys.readouterr().out
    assert "FAIL: 2 significant slowdown(s)" in out
    assert any(line.startswith("bench ") and " ratio " in line and " 5.999 " in line for line in out.splitlines())
