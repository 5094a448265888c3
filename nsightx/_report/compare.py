"""Compare two saved results: per (function, annotation, config, metric), is the new one slower?

For each row present in both results, the raw per-run values (after ``combine_kernel_metrics`` and
``derive_metric``, before any normalisation) of baseline and new are compared:

- ``Ratio`` = mean(new) / mean(baseline), with a 95% percentile-bootstrap interval (``Ratio_CI_Lower/Upper``);
- ``PValue``: two-sided Mann-Whitney U test on the runs; ``PValueAdj``: Holm-adjusted over all rows compared;
- ``Significant``: ``PValueAdj < alpha`` and the ratio's interval excludes 1;
- ``Regression``: significant, in the "worse" direction of the metric, and larger than ``threshold_pct``.

Lower is better for every metric except those whose unit is a rate (``.../s``: TFLOP/s, GB/s, derived
throughput), where a drop is the regression. Rows are matched by parameter values, not by config index, so a
sweep that gained or lost configs still compares the ones both have.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nsightx._errors import CompareError, ConfigError, ConfigTypeError, ResultSchemaError
from nsightx._report.stats import bootstrap_ratio_ci, holm, mann_whitney_u
from nsightx._results.dataframe import throttled_runs
from nsightx._results.flags import flags_cell, row_flags
from nsightx._results.results import ProfileResults, load

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
    function: str
    annotation: str
    metric: str
    params: tuple[str, ...]
    config: tuple[Any, ...]
    unit: str | None = None
    values: list[float] = field(default_factory=list)
    flags: str = ""
    """The row's quality flags in its own result (``nsightx._results.flags``), as a ``Flags`` cell."""


_SampleMap = dict[tuple[str, str, str, str], _Samples]
"""Samples keyed by (function, annotation, metric, config as JSON)."""


def _key(config: Sequence[Any]) -> str:
    return json.dumps(list(config), default=repr)


def _samples(results: Iterable[ProfileResults]) -> _SampleMap:
    out: _SampleMap = {}
    for res in results:
        plan = res.data.plan
        flags = row_flags(res.data, throttled_runs(res.data))
        for v in res.data.values:
            cfg = tuple(plan.configs[v.config]) if 0 <= v.config < len(plan.configs) else (v.config,)
            key = (plan.function, v.annotation, v.metric, _key(cfg))
            s = out.get(key)
            if s is None:
                s = out[key] = _Samples(plan.function, v.annotation, v.metric, tuple(plan.params), cfg, v.unit)
                s.flags = flags_cell(flags.get((v.annotation, v.metric, v.config), ()))
            if math.isfinite(v.value):
                s.values.append(float(v.value))
    return out


def resolve(source: object) -> list[ProfileResults]:
    """Results named by ``source``: a ProfileResults, a saved ``.json`` file, or a folder of ``result-*.json``.

    In a folder, the newest result of each function is used (by its ``created`` time, then its file name).

    Raises:
        ResultSchemaError: a file is not a saved result, or a folder holds none.
    """
    if isinstance(source, ProfileResults):
        return [source]
    if isinstance(source, Sequence) and not isinstance(source, str | bytes):
        return [r for item in source for r in resolve(item)]
    if not isinstance(source, str | Path):
        raise ConfigError(f"compare takes ProfileResults or a path to a saved result, got {source!r}")
    path = Path(source)
    if not path.is_dir():
        return [load(path)]
    files = sorted(path.glob("*result-*.json"))
    if not files:
        raise ResultSchemaError(
            f"{str(path)!r} holds no saved result (result-*.json); write one with output_prefix=... or "
            "ProfileResults.save(path)"
        )
    newest: dict[str, tuple[str, str, ProfileResults]] = {}
    for f in files:
        res = load(f)
        key = (res.data.created, f.name)
        prev = newest.get(res.data.plan.function)
        if prev is None or key > prev[:2]:
            newest[res.data.plan.function] = (*key, res)
    return [newest[name][2] for name in sorted(newest)]


def _describe(results: Sequence[ProfileResults]) -> str:
    parts = []
    for r in results:
        gpu = r.environment.get("GPU") or r.environment.get("CPU") or "?"
        parts.append(f"{r.data.plan.function} [{r.backend}, {gpu}, {r.data.created}]")
    return "; ".join(parts)


def _check_gate(threshold_pct: object, alpha: object) -> None:
    """Refuse a threshold that is not a finite percentage >= 0, or an alpha outside (0, 1)."""
    if not (isinstance(threshold_pct, int | float) and threshold_pct >= 0 and math.isfinite(threshold_pct)):
        raise ConfigError(f"threshold_pct must be a number >= 0 (percent), got {threshold_pct!r}")
    if not (isinstance(alpha, int | float) and 0 < alpha < 1):
        raise ConfigError(f"alpha must be between 0 and 1, got {alpha!r}")


def compare(
    baseline: object,
    new: object,
    *,
    threshold_pct: float = DEFAULT_THRESHOLD_PCT,
    alpha: float = DEFAULT_ALPHA,
    metrics: Sequence[str] | None = None,
    resamples: int = 4000,
    require_all: bool = False,
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

    Returns:
        A DataFrame with columns ``Function, Annotation, Metric, <params>, Unit, BaselineMean, NewMean,
        BaselineRuns, NewRuns, Ratio, Ratio_CI_Lower, Ratio_CI_Upper, ChangePct, PValue, PValueAdj,
        HigherIsBetter, Significant, Regression, Status, BaselineFlags, NewFlags`` (each side's quality flags,
        see ``nsightx._results.flags``). ``Status`` is one of ``no change`` (identical
        runs), ``slower``, ``faster``, ``within noise``, ``too few runs`` (fewer than 2 valid runs on a side),
        ``only in baseline``, ``only in new``. ``df.attrs`` holds ``baseline``, ``new``, ``threshold_pct``,
        ``alpha``, ``require_all`` and ``warnings`` (different backends or GPUs).

    Raises:
        ConfigError: a bad threshold or alpha, or a metric in neither result.
        ConfigTypeError: ``metrics`` is a bare str (or not a list of str).
        CompareError: no row could be compared (no function, annotation, config or metric in both results, or
            fewer than 2 runs on a side in every row): a gate must not pass on nothing.
        ResultSchemaError: a path is not a saved result.
    """
    import pandas as pd

    _check_gate(threshold_pct, alpha)
    wanted = _metric_list(metrics)
    base_results, new_results = resolve(baseline), resolve(new)
    base, cand = _samples(base_results), _samples(new_results)
    keys = list(dict.fromkeys([*base, *cand]))
    if wanted is not None:
        _check_metrics_exist(wanted, base, cand)
        keys = [k for k in keys if k[2] in wanted]
    rows = [_row(base.get(k), cand.get(k), threshold_pct, resamples) for k in keys]
    adjusted = holm([r["PValue"] for r in rows])
    for r, p_adj in zip(rows, adjusted, strict=True):
        _decide(r, p_adj, alpha, threshold_pct)
    if not any(r["Status"] in _COMPARED for r in rows):
        raise CompareError(_nothing_compared(base, cand, wanted))
    params = list(dict.fromkeys(p for s in [*base.values(), *cand.values()] for p in s.params))
    frame = pd.DataFrame(rows, columns=[*_FRONT, *params, *_STATS])
    frame.attrs.update(
        _attrs(base_results, new_results, threshold_pct=threshold_pct, alpha=alpha, require_all=require_all)
    )
    return frame


def _attrs(base: Any, new: Any, **settings: object) -> dict[str, object]:
    """``df.attrs`` of a comparison: what was compared, with which settings, and the warnings."""
    return {
        "baseline": _describe(base),
        "new": _describe(new),
        "threshold_pct": settings["threshold_pct"],
        "alpha": settings["alpha"],
        "require_all": bool(settings["require_all"]),
        "warnings": _warnings(base, new),
    }


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
    have = {k[2] for k in base} | {k[2] for k in cand}
    missing = sorted(wanted - have)
    if missing:
        raise ConfigError(f"metric(s) {missing} are in neither result; the results hold {_names(have)}")


def _names(values: Iterable[str]) -> str:
    items = sorted(set(values))
    shown = ", ".join(repr(v) for v in items[:6])
    return (shown + f" and {len(items) - 6} more" if len(items) > 6 else shown) or "nothing"


def _configs(samples: _SampleMap) -> str:
    seen = {k[3]: s for k, s in samples.items()}
    parts = [
        "(" + ", ".join(f"{p}={v!r}" for p, v in zip(s.params, s.config, strict=False)) + ")"
        if s.params
        else str(list(s.config))
        for s in seen.values()
    ]
    shown = ", ".join(parts[:4])
    return shown + (f" and {len(parts) - 4} more" if len(parts) > 4 else "")


def _nothing_compared(base: _SampleMap, cand: _SampleMap, wanted: frozenset[str] | None) -> str:
    """Why no row of ``base`` and ``cand`` could be compared, in terms of what each side holds."""
    if not base or not cand:
        empty = "baseline" if not base else "new"
        return f"nothing to compare: the {empty} result holds no measured value"
    reasons = _disjoint(base, cand)
    if reasons:
        return "nothing to compare: " + "; ".join(reasons)
    if wanted is not None:
        both = {k[2] for k in base} & {k[2] for k in cand}
        return (
            f"nothing to compare: the metric(s) {sorted(wanted)} are not in both results; metrics in both: "
            f"{_names(both)}"
        )
    return (
        "nothing to compare: every row in both results has fewer than 2 valid runs on a side ('too few "
        "runs'); measure with runs=10 or more"
    )


def _disjoint(base: _SampleMap, cand: _SampleMap) -> list[str]:
    """One reason per level (function, then annotation, metric, config) at which the two sides share nothing."""
    fb, fn = {k[0] for k in base}, {k[0] for k in cand}
    if not fb & fn:
        return [
            f"no function is in both results (baseline: {_names(fb)}; new: {_names(fn)}); compare results "
            "of the same decorated function"
        ]
    reasons = []
    for f in sorted(fb & fn):
        kb = {k: s for k, s in base.items() if k[0] == f}
        kn = {k: s for k, s in cand.items() if k[0] == f}
        for level, label in ((1, "annotation"), (2, "metric")):
            vb, vn = {k[level] for k in kb}, {k[level] for k in kn}
            if not vb & vn:
                reasons.append(f"{f}: no {label} is in both results (baseline: {_names(vb)}; new: {_names(vn)})")
                break
        else:
            if not {k[3] for k in kb} & {k[3] for k in kn}:
                reasons.append(f"{f}: no config is in both results (baseline: {_configs(kb)}; new: {_configs(kn)})")
    return reasons


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
    "HigherIsBetter",
    "Significant",
    "Regression",
    "Status",
    "BaselineFlags",
    "NewFlags",
)
FIXED_COLUMNS = (*_FRONT, *_STATS)
"""Every column of a comparison frame except the parameter columns (they sit between the two groups)."""


def _row(a: _Samples | None, b: _Samples | None, threshold_pct: float, resamples: int) -> dict[str, Any]:
    s = a or b
    assert s is not None
    row: dict[str, Any] = {
        "Function": s.function,
        "Annotation": s.annotation,
        "Metric": s.metric,
        **dict(zip(s.params, s.config, strict=False)),
        "Unit": s.unit,
        "HigherIsBetter": higher_is_better(s.unit, s.metric),
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
            row["ChangePct"] = 100.0 * (row["Ratio"] - 1.0)
        return row
    ratio = row["NewMean"] / row["BaselineMean"]
    lo, hi = bootstrap_ratio_ci(xa, xb, resamples=resamples)
    _, p = mann_whitney_u(xa, xb)
    row.update(Ratio=ratio, Ratio_CI_Lower=lo, Ratio_CI_Upper=hi, ChangePct=100.0 * (ratio - 1.0), PValue=p)
    return row


def _decide(row: dict[str, Any], p_adj: float, alpha: float, threshold_pct: float) -> None:
    row["PValueAdj"] = p_adj
    if row.get("Status") is not None:
        return
    excludes_one = row["Ratio_CI_Lower"] > 1.0 or row["Ratio_CI_Upper"] < 1.0
    significant = bool(p_adj < alpha and excludes_one)
    worse = (row["Ratio"] < 1.0) if row["HigherIsBetter"] else (row["Ratio"] > 1.0)
    row["Significant"] = significant
    row["Regression"] = bool(significant and worse and abs(row["ChangePct"]) > threshold_pct)
    if not significant:
        row["Status"] = "within noise"
    elif row["HigherIsBetter"]:
        row["Status"] = "slower" if row["Ratio"] < 1.0 else "faster"
    else:
        row["Status"] = "slower" if row["Ratio"] > 1.0 else "faster"


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else math.nan


def _warnings(base: Sequence[ProfileResults], new: Sequence[ProfileResults]) -> list[str]:
    out: list[str] = []
    by_fn = {r.data.plan.function: r for r in base}
    for r in new:
        b = by_fn.get(r.data.plan.function)
        if b is None:
            continue
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
    return out


def regressions(frame: pd.DataFrame) -> pd.DataFrame:
    """The rows of a comparison that fail the gate (significant slowdowns above the threshold)."""
    return frame[frame["Regression"]]


def group_counts(frame: pd.DataFrame) -> dict[str, int]:
    """How many rows have each status."""
    counts: dict[str, int] = defaultdict(int)
    for status in frame["Status"]:
        counts[str(status)] += 1
    return dict(counts)
