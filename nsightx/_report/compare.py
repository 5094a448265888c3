"""Compare two saved results: per (function, annotation, config, metric), is the new one slower?

For each row present in both results, the raw per-run values (after ``combine_kernel_metrics`` and
``derive_metric``, before any normalisation) of baseline and new are compared:

- ``Ratio`` = mean(new) / mean(baseline), with a 95% percentile-bootstrap interval (``Ratio_CI_Lower/Upper``);
- ``PValue``: two-sided Mann-Whitney U test on the runs; ``PValueAdj``: Holm-adjusted over all rows compared
  (of each test, for folders of the pytest plugin);
- ``Significant``: ``PValueAdj < alpha`` and the ratio's interval excludes 1;
- ``NoiseFloorPct``: how much the mean moves when nothing changed (:mod:`nsightx._report.noise`: the quieter
  side's run-to-run spread, and the spread between the baseline's stored processes when it has a history);
- ``Regression``: significant, in the "worse" direction of the metric, larger than ``threshold_pct`` and larger
  than the noise floor. A significant change within the floor is ``within noise``.

Lower is better for every metric except those whose unit is a rate (``.../s``: TFLOP/s, GB/s, derived
throughput), where a drop is the regression. Rows are matched by parameter values, not by config index, so a
sweep that gained or lost configs still compares the ones both have; the values are matched by parameter name,
so declaring the parameters in another order changes nothing. Results stored by the pytest plugin are
matched by test first (:mod:`nsightx._report.sources`), and the table gains a ``Test`` column.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from nsightx._errors import CompareError, ConfigError, ConfigTypeError
from nsightx._report import noise
from nsightx._report.history import HISTORY
from nsightx._report.sources import Source, load_side
from nsightx._report.twosample import bootstrap_ratio_ci, holm, mann_whitney_u
from nsightx._report.unmatched import names, nothing_compared
from nsightx._results.dataframe import throttled_runs
from nsightx._results.flags import flags_cell, row_flags
from nsightx._results.profileresults import ProfileResults
from nsightx._run.provenance import differences

if TYPE_CHECKING:
    import pandas as pd

DEFAULT_THRESHOLD_PCT = 5.0
"""Default smallest slowdown, in percent, that fails ``nsightx compare``."""
DEFAULT_ALPHA = 0.05
"""Default significance level (after the Holm adjustment)."""


def higher_is_better(unit: str | None, metric: str) -> bool:
    """Whether a larger value is an improvement: rates (``TFLOP/s``, ``GB/s``, ``.../second``) and throughput."""
    u = (unit or "").strip().lower()
    return u.endswith(("/s", "/sec", "/second", "per second")) or "throughput" in metric.lower()


@dataclass
class _Samples:
    test: str
    label: str
    function: str
    annotation: str
    metric: str
    params: tuple[str, ...]
    config: tuple[Any, ...]
    unit: str | None = None
    values: list[float] = field(default_factory=list)
    flags: str = ""
    """The row's quality flags in its own result (``nsightx._results.flags``), as a ``Flags`` cell."""
    between: tuple[float, int] = (math.nan, 1)
    """Baseline side: the spread between its stored processes' means (percent) and how many there are."""


_SampleMap = dict[tuple[str, str, str, str, str], _Samples]
"""Samples keyed by (test, function, annotation, metric, config as JSON by parameter name)."""


def _samples(sources: Iterable[Source], by_test: bool) -> _SampleMap:
    out: _SampleMap = {}
    for src in sources:
        res = src.result
        plan = res.data.plan
        flags = row_flags(res.data, throttled_runs(res.data))
        between = noise.between_pct(src.history)
        test = src.test if by_test else ""
        for v in res.data.values:
            cfg = tuple(plan.configs[v.config]) if 0 <= v.config < len(plan.configs) else (v.config,)
            key = (test, plan.function, v.annotation, v.metric, noise.config_key(plan.params, cfg))
            s = out.get(key)
            if s is None:
                label = src.label if by_test else ""
                s = out[key] = _Samples(
                    test, label, plan.function, v.annotation, v.metric, tuple(plan.params), cfg, v.unit
                )
                s.flags = flags_cell(flags.get((v.annotation, v.metric, v.config), ()))
                s.between = between.get(key[1:], (math.nan, 1))
            if s.unit is None and v.unit:
                s.unit = v.unit  # a failed run has no unit: the row's unit is its first measured run's
            if math.isfinite(v.value):
                s.values.append(float(v.value))
    return out


def _by_test(base: Sequence[Source], new: Sequence[Source]) -> bool:
    """Whether rows are matched by test: every result on both sides was stored by the pytest plugin."""
    both = [*base, *new]
    if all(s.test for s in both):
        return True
    for side, name in ((base, "baseline"), (new, "new")):
        functions = [s.result.data.plan.function for s in side]
        twice = sorted({f for f in functions if functions.count(f) > 1})
        if twice:
            raise CompareError(
                f"the {name} holds several tests that time {names(twice)}, and the other side's results are not "
                "stored per test; compare two folders written by pytest --nsightx-save, or one result with one"
            )
    return False


def resolve(source: object) -> list[ProfileResults]:
    """Results named by ``source``: a ProfileResults, a saved result file, or a folder of them.

    The folder holds ``result-*.parquet`` (or ``.json``) files or is a baseline store of the pytest plugin
    (:func:`nsightx._report.sources.load_side`); the newest result of each function (of each test, in a store)
    is used.

    Raises:
        ResultSchemaError: a file is not a saved result, or a folder holds none.
    """
    return [s.result for s in load_side(source)]


def _describe(sources: Sequence[Source]) -> str:
    parts = []
    for s in sources:
        r = s.result
        gpu = r.environment.get("GPU") or r.environment.get("CPU") or "?"
        stored = f", {len(s.history)} stored processes" if len(s.history) > 1 else ""
        parts.append(f"{r.data.plan.function} [{r.backend}, {gpu}, {r.data.created}{stored}]")
    shown = "; ".join(parts[:3])
    return shown + (f"; and {len(parts) - 3} more" if len(parts) > 3 else "")


def _check_gate(threshold_pct: object, alpha: object, history: object = HISTORY) -> None:
    """Refuse a threshold that is not a finite percentage >= 0, an alpha outside (0, 1), or a history below 1."""
    if not (isinstance(threshold_pct, int | float) and threshold_pct >= 0 and math.isfinite(threshold_pct)):
        raise ConfigError(f"threshold_pct must be a number >= 0 (percent), got {threshold_pct!r}")
    if not (isinstance(alpha, int | float) and 0 < alpha < 1):
        raise ConfigError(f"alpha must be between 0 and 1, got {alpha!r}")
    if not (isinstance(history, int) and not isinstance(history, bool) and history >= 1):
        raise ConfigError(f"history must be a whole number of stored processes >= 1 (1: none), got {history!r}")


def compare(
    baseline: object,
    new: object,
    *,
    threshold_pct: float = DEFAULT_THRESHOLD_PCT,
    alpha: float = DEFAULT_ALPHA,
    metrics: Sequence[str] | None = None,
    resamples: int = 4000,
    require_all: bool = False,
    base_ref: str | None = None,
    history: int = HISTORY,
) -> pd.DataFrame:
    """Compare two results run by run; one row per (function, annotation, config, metric).

    Args:
        baseline: The reference: ``ProfileResults``, a saved result file, or a folder of them.
        new: The candidate, in the same forms.
        threshold_pct: Smallest change, in percent, that counts as a regression (when also significant).
        alpha: Significance level, applied to Holm-adjusted p-values.
        metrics: Only these metrics (default: all metrics both results have); a list, each in at least one result.
        resamples: Bootstrap resamples for the ratio's interval.
        require_all: Rows present in only one result fail the gate (:func:`gate_failed`); by default they are
            listed and do not.
        base_ref: In a ``--nsightx-save`` folder, the save of each test to compare with: a save number or a
            commit prefix (default: the newest).
        history: Stored processes of the baseline (it and those saved before it) the noise floor is learned
            from; 1 turns that part off.

    Returns:
        A DataFrame with the columns of :data:`FIXED_COLUMNS` (``Test`` only when both sides were stored by the
        pytest plugin; ``Remeasured`` never) with the parameter columns after ``Metric``. ``Status`` is ``no
        change`` (identical runs), ``slower``, ``faster``, ``within noise`` (not significant, or not above the
        noise floor), ``too few runs``, ``only in baseline`` or ``only in new``. ``df.attrs`` holds ``baseline``,
        ``new``, ``threshold_pct``, ``alpha``, ``require_all``, ``warnings`` and ``environment`` (each provenance
        entry that differs: ``{"key", "baseline", "new"}``).

    Raises:
        ConfigError: a bad threshold, alpha or history, a metric in neither result, a ``base_ref`` naming no save.
        ConfigTypeError: ``metrics`` is a bare str (or not a list of str).
        CompareError: no row could be compared (nothing in both results, or fewer than 2 runs a side in every
            row): a gate must not pass on nothing.
        ResultSchemaError: a path is not a saved result.
    """
    _check_gate(threshold_pct, alpha, history)
    wanted = _metric_list(metrics)
    base_sources = load_side(baseline, ref=base_ref, size=history)
    new_sources = load_side(new, size=1)
    by_test = _by_test(base_sources, new_sources)
    base, cand = _samples(base_sources, by_test), _samples(new_sources, by_test)
    keys = list(dict.fromkeys([*base, *cand]))
    if wanted is not None:
        _check_metrics_exist(wanted, base, cand)
        keys = [k for k in keys if k[3] in wanted]
    rows = _rows(base, cand, keys, alpha=alpha, threshold_pct=threshold_pct, resamples=resamples)
    if not any(r["Status"] in _COMPARED for r in rows):
        raise CompareError(nothing_compared(base, cand, wanted))
    settings = {"threshold_pct": threshold_pct, "alpha": alpha, "require_all": require_all}
    return _frame(rows, [*base.values(), *cand.values()], by_test, _attrs(base_sources, new_sources, **settings))


def _frame(
    rows: list[dict[str, Any]], samples: list[_Samples], by_test: bool, attrs: dict[str, object]
) -> pd.DataFrame:
    """The comparison's DataFrame: the fixed columns around the parameter columns, and its ``attrs``."""
    import pandas as pd

    params = list(dict.fromkeys(p for s in samples for p in s.params))
    front = ("Test", *_FRONT) if by_test else _FRONT
    frame = pd.DataFrame(rows, columns=[*front, *params, *_STATS])
    frame.attrs.update(attrs)
    return frame


def _rows(
    base: _SampleMap, cand: _SampleMap, keys: Sequence[tuple[str, str, str, str, str]], **gate: Any
) -> list[dict[str, Any]]:
    """One decided row per key: the statistics of each, then the Holm adjustment, then the verdicts.

    The Holm family is every row of one test (the key's first part): all rows, unless both sides are folders of
    the pytest plugin, whose gate compares each test on its own; compared per test here too, ``nsightx compare``
    on its folders gives each test the verdict the gate gave it (over all tests at once, a test's p-values grew
    with the number of other tests, and a slowdown that failed CI passed the same comparison on the command line).
    """
    rows = [_row(base.get(k), cand.get(k), gate["resamples"]) for k in keys]
    families: dict[str, list[int]] = {}
    for i, k in enumerate(keys):
        families.setdefault(k[0], []).append(i)
    adjusted = [math.nan] * len(rows)
    for members in families.values():
        for i, p_adj in zip(members, holm([rows[i]["PValue"] for i in members]), strict=True):
            adjusted[i] = p_adj
    for r, p_adj in zip(rows, adjusted, strict=True):
        _decide(r, p_adj, gate["alpha"], gate["threshold_pct"])
    return rows


def _attrs(base: Sequence[Source], new: Sequence[Source], **settings: object) -> dict[str, object]:
    """``df.attrs`` of a comparison: what was compared, with which settings, the warnings and what differs."""
    pairs = _pairs(base, new)
    return {
        "baseline": _describe(base),
        "new": _describe(new),
        "threshold_pct": settings["threshold_pct"],
        "alpha": settings["alpha"],
        "require_all": bool(settings["require_all"]),
        "warnings": _warnings(pairs),
        "environment": _environment(pairs),
    }


def _pairs(base: Sequence[Source], new: Sequence[Source]) -> list[tuple[ProfileResults, ProfileResults]]:
    """The (baseline, new) results measured by the same test (or, unstored, of the same function)."""
    by = {(s.test, s.result.data.plan.function): s.result for s in base}
    return [(b, s.result) for s in new if (b := by.get((s.test, s.result.data.plan.function))) is not None]


def _environment(pairs: Sequence[tuple[ProfileResults, ProfileResults]]) -> list[dict[str, object]]:
    """Each provenance entry (commit, CPU, GPU, driver, versions, host) that differs between the two sides, once."""
    seen: dict[tuple[str, str, str], dict[str, object]] = {}
    for b, n in pairs:
        for key, vb, vn in differences(b.environment, n.environment):
            seen.setdefault((key, repr(vb), repr(vn)), {"key": key, "baseline": vb, "new": vn})
    return list(seen.values())


_COMPARED = frozenset({"no change", "slower", "faster", "within noise"})
"""Statuses of a row that was actually compared (the others: only in one result, too few runs)."""

_ONLY = ("only in baseline", "only in new")


def _metric_list(metrics: object) -> frozenset[str] | None:
    """``metrics`` as a set of names; a bare str would filter by its characters and compare nothing."""
    if metrics is None:
        return None
    if isinstance(metrics, str | bytes):
        raise ConfigTypeError(
            f"metrics must be a list of metric names, got the str {metrics!r}; write metrics=[{metrics!r}]"
        )
    if not isinstance(metrics, Iterable) or isinstance(metrics, Mapping):
        raise ConfigTypeError(f"metrics must be a list of metric names, got {type(metrics).__name__} {metrics!r}")
    names = list(metrics)
    bad = [m for m in names if not isinstance(m, str) or not m]
    if bad or not names:
        raise ConfigTypeError(f"metrics must be a non-empty list of metric names (str), got {names!r}")
    return frozenset(names)


def _check_metrics_exist(wanted: frozenset[str], base: _SampleMap, cand: _SampleMap) -> None:
    have = {k[3] for k in base} | {k[3] for k in cand}
    missing = sorted(wanted - have)
    if missing:
        raise ConfigError(f"metric(s) {missing} are in neither result; the results hold {names(have)}")


def gate_failed(frame: pd.DataFrame) -> bool:
    """Whether a comparison fails the CI gate: a regression, or (``require_all``) a row only in one result."""
    if bool(frame["Regression"].any()):
        return True
    return bool(frame.attrs.get("require_all")) and only_in_one(frame) > 0


def only_in_one(frame: pd.DataFrame) -> int:
    """How many rows of a comparison are in only one of the two results."""
    return int(frame["Status"].isin(_ONLY).sum())


_FRONT = ("Function", "Annotation", "Metric")
_STATS = (
    "Unit",
    "BaselineMean",
    "NewMean",
    "BaselineRuns",
    "NewRuns",
    "Ratio",
    "Ratio_CI_Lower",
    "Ratio_CI_Upper",
    "ChangePct",
    "PValue",
    "PValueAdj",
    "NoiseFloorPct",
    "BaselineProcesses",
    "HigherIsBetter",
    "Significant",
    "Regression",
    "Status",
    "BaselineFlags",
    "NewFlags",
)
FIXED_COLUMNS = ("Test", *_FRONT, *_STATS, "Remeasured")
"""Every column a comparison frame may have except the parameter columns (they sit between the two groups):
``Test`` only when both sides were stored per test, ``Remeasured`` only in the pytest plugin's confirmed frames."""


def _row(a: _Samples | None, b: _Samples | None, resamples: int) -> dict[str, Any]:
    s = a or b
    assert s is not None
    unit = (a.unit if a else None) or (b.unit if b else None)
    row: dict[str, Any] = {
        "Test": s.label or s.test,
        "Function": s.function,
        "Annotation": s.annotation,
        "Metric": s.metric,
        **dict(zip(s.params, s.config, strict=False)),
        "Unit": unit,
        "HigherIsBetter": higher_is_better(unit, s.metric),
        "Significant": False,
        "Regression": False,
        "BaselineFlags": a.flags if a else "",
        "NewFlags": b.flags if b else "",
    }
    xa = a.values if a else []
    xb = b.values if b else []
    row.update(
        BaselineMean=_mean(xa),
        NewMean=_mean(xb),
        BaselineRuns=len(xa),
        NewRuns=len(xb),
        Ratio=math.nan,
        Ratio_CI_Lower=math.nan,
        Ratio_CI_Upper=math.nan,
        ChangePct=math.nan,
        PValue=math.nan,
        PValueAdj=math.nan,
        NoiseFloorPct=math.nan,
        BaselineProcesses=a.between[1] if a else 0,
    )
    if a is None or b is None:
        row["Status"] = "only in new" if a is None else "only in baseline"
        return row
    if xa and sorted(xa) == sorted(xb):
        row.update(Ratio=1.0, Ratio_CI_Lower=1.0, Ratio_CI_Upper=1.0, ChangePct=0.0, PValue=1.0, Status="no change")
        return row
    if len(xa) < 2 or len(xb) < 2 or row["BaselineMean"] == 0:
        row["Status"] = "too few runs"
        if xa and xb and row["BaselineMean"] != 0:
            row["Ratio"] = row["NewMean"] / row["BaselineMean"]
            row["ChangePct"] = _change_pct(row["Ratio"], row["BaselineMean"])
        return row
    ratio = row["NewMean"] / row["BaselineMean"]
    lo, hi = bootstrap_ratio_ci(xa, xb, resamples=resamples)
    _, p = mann_whitney_u(xa, xb)
    change = _change_pct(ratio, row["BaselineMean"])
    row.update(Ratio=ratio, Ratio_CI_Lower=lo, Ratio_CI_Upper=hi, ChangePct=change, PValue=p)
    row["NoiseFloorPct"] = max((f for f in (noise.within_pct(xa, xb), a.between[0]) if math.isfinite(f)), default=0.0)
    return row


def _decide(row: dict[str, Any], p_adj: float, alpha: float, threshold_pct: float) -> None:
    """The verdict of one compared row: significant, larger than the threshold and than the noise floor."""
    row["PValueAdj"] = p_adj
    if row.get("Status") is not None:
        return
    excludes_one = row["Ratio_CI_Lower"] > 1.0 or row["Ratio_CI_Upper"] < 1.0
    significant = bool(p_adj < alpha and excludes_one)
    worse = (row["ChangePct"] < 0.0) if row["HigherIsBetter"] else (row["ChangePct"] > 0.0)
    above_floor = abs(row["ChangePct"]) > row["NoiseFloorPct"]
    row["Significant"] = significant
    row["Regression"] = bool(significant and worse and abs(row["ChangePct"]) > threshold_pct and above_floor)
    if not significant or not above_floor:
        row["Status"] = "within noise"
    else:
        row["Status"] = "slower" if worse else "faster"


def _change_pct(ratio: float, baseline_mean: float) -> float:
    """How much the mean moved, in percent of the baseline's size: > 0 when it grew, whatever its sign.

    A derived metric may be negative; there a ratio above 1 is a mean that became smaller (-10 to -20), which the
    direction rule (larger is worse for times, smaller for rates) must not read as growth.
    """
    return 100.0 * (ratio - 1.0) * math.copysign(1.0, baseline_mean)


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else math.nan


def _warnings(pairs: Sequence[tuple[ProfileResults, ProfileResults]]) -> list[str]:
    out: list[str] = []
    for b, r in pairs:
        if b.backend != r.backend:
            out.append(
                f"{r.data.plan.function}: baseline measured with {b.backend!r}, new with {r.backend!r}; "
                "backends measure different things (see the backend guide), so ratios mix methods"
            )
        gb, gn = b.environment.get("GPU"), r.environment.get("GPU")
        if gb != gn:
            out.append(f"{r.data.plan.function}: baseline ran on {gb!r}, new on {gn!r}")
        if b.data.plan.cache_control != r.data.plan.cache_control:
            out.append(
                f"{r.data.plan.function}: cache_control differs ({b.data.plan.cache_control!r} vs "
                f"{r.data.plan.cache_control!r})"
            )
    return list(dict.fromkeys(out))
