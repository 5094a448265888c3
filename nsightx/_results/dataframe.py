"""The only module that builds pandas DataFrames: the per-run frame and the aggregated frame.

Column names follow nsight-python (``Annotation``, ``AvgValue``, ``CI95_Lower``, ...) with ``MedianValue`` and
``Tool`` added. Statistics: sample standard deviation (ddof=1), Student-t 95% confidence interval of the mean,
relative standard deviation. With ``normalize_against`` every value and spread column is divided by the
baseline's mean for the same config and metric, so no row is half converted.

Measured conditions: when RUN-scope values named ``MeasuredSMClockMHz`` and/or ``ClockEventReasons`` exist (the
``nvml`` plugin writes them; any plugin may), each run is judged :func:`throttled_runs`; the per-run frame gets a
``Throttled`` column, the aggregated one ``ThrottledRuns``, and ``StableMeasurement`` is false for a row with a
throttled run. ``ComputeClock``/``MemoryClock`` stay the backend's rated values (kHz), as in nsight-python.

Quality flags: the aggregated frame's ``Flags`` column holds each row's flag names, sorted and comma-separated
(``""`` when none); :mod:`nsightx._results.flags` computes them and documents the evidence of each.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from nsightx._errors import ConfigError
from nsightx._results.flags import flag_column
from nsightx._results.join import SOURCES_KEY, parse_sources
from nsightx._results.stats import ci_half_width
from nsightx.columns import CLOCK_EVENT_REASONS, MEASURED_MEM_CLOCK, MEASURED_SM_CLOCK

if TYPE_CHECKING:
    import pandas as pd

    from nsightx._results.schema import ResultData

STABLE_RSD_PCT = 2.0
"""A row is ``StableMeasurement`` when its relative standard deviation is under this (and no run throttled)."""
_ENV_COLUMNS = ("GPU", "Host", "ComputeClock", "MemoryClock")

NOT_THROTTLING = frozenset({"none", "gpu_idle", "applications_clocks_setting"})
"""Reasons that do not make a run throttled: an idle GPU, and clocks an administrator set on purpose."""
CLOCK_DROP_FRACTION = 0.9
"""A run whose SM clock is under this fraction of the call's median (idle reads excluded) counts as throttled."""
_CONDITIONS_FIRST = (MEASURED_SM_CLOCK, MEASURED_MEM_CLOCK)
"""Measured clocks come first among collector columns, next to the rated ones."""


def throttled_runs(data: ResultData) -> dict[tuple[int, int], bool] | None:
    """Which (config, run) were throttled; ``None`` when the result has no measured-condition values.

    A run is throttled when its clock-event reasons include one outside :data:`NOT_THROTTLING`, or when its SM
    clock is below :data:`CLOCK_DROP_FRACTION` of the median SM clock of all the call's runs (reads taken while
    the GPU reported ``gpu_idle`` are left out of both the median and this test: an idle GPU parks its clocks).
    """
    per_run: dict[tuple[int, int], dict[str, object]] = {}
    for run in data.runs:
        for cv in run.collectors:
            if cv.scope == "run" and cv.name in (MEASURED_SM_CLOCK, CLOCK_EVENT_REASONS) and cv.config is not None:
                per_run.setdefault((cv.config, cv.run or 0), {})[cv.name] = cv.value
    if not per_run:
        return None

    def clock(values: Mapping[str, object]) -> float | None:
        value = values.get(MEASURED_SM_CLOCK)
        idle = "gpu_idle" in str(values.get(CLOCK_EVENT_REASONS) or "").split("|")
        return float(value) if isinstance(value, int | float) and not isinstance(value, bool) and not idle else None

    clocks = [c for c in map(clock, per_run.values()) if c is not None]
    median = statistics.median(clocks) if clocks else None
    out: dict[tuple[int, int], bool] = {}
    for key, values in per_run.items():
        reasons = values.get(CLOCK_EVENT_REASONS)
        by_reason = isinstance(reasons, str) and any(r not in NOT_THROTTLING for r in reasons.split("|"))
        c = clock(values)
        by_clock = median is not None and c is not None and c < CLOCK_DROP_FRACTION * median
        out[key] = by_reason or by_clock
    return out


def _union_reasons(values: pd.Series) -> str:
    names = {n for v in values.dropna() for n in str(v).split("|") if n and n != "none"}
    return "|".join(sorted(names)) if names else "none"


def _collector_columns(data: ResultData) -> tuple[dict[str, str], dict[Any, dict[str, Any]]]:
    """Collector name -> scope, and lookup tables keyed by where each value applies."""
    scopes: dict[str, str] = {}
    table: dict[Any, dict[str, Any]] = defaultdict(dict)
    for run in data.runs:
        for cv in run.collectors:
            scopes.setdefault(cv.name, cv.scope)
            if cv.scope == "once":
                table["once"][cv.name] = cv.value
            elif cv.scope == "config":
                table[("config", cv.config)][cv.name] = cv.value
            elif cv.scope == "run":
                table[("run", cv.config, cv.run)][cv.name] = cv.value
            else:
                table[("ann", cv.config, cv.run, cv.annotation)][cv.name] = cv.value
    first = {n: scopes[n] for n in _CONDITIONS_FIRST if n in scopes}
    return {**first, **scopes}, table


def _devices(data: ResultData) -> list[Any] | None:
    """The device of each config (``Device`` column), or None when no device was chosen."""
    if data.config_devices:
        return list(data.config_devices)
    device = data.environment.get("Device")
    return None if device is None else [device] * len(data.plan.configs)


def runs_frame(data: ResultData) -> pd.DataFrame:
    """One row per (run, annotation, metric): nsight-python's ``profiled_data`` layout, params last."""
    import pandas as pd

    plan = data.plan
    env = data.environment
    scopes, table = _collector_columns(data)
    vals = data.values
    cols: dict[str, list[Any]] = {
        "Annotation": [v.annotation for v in vals],
        "Value": [v.value for v in vals],
        "Metric": [v.metric for v in vals],
        "Kernel": [v.kernel for v in vals],
    }
    n = len(vals)
    for name in _ENV_COLUMNS:
        cols[name] = [env.get(name)] * n
    if data.config_hosts:  # a sweep spread over workers: the host of each config
        cols["Host"] = [data.config_hosts[v.config] for v in vals]
    cols["Unit"] = [v.unit for v in vals]
    sources = parse_sources(env.get(SOURCES_KEY))  # a joined result: which backend measured what
    cols["Tool"] = [sources.get(v.metric, plan.backend) for v in vals] if sources else [plan.backend] * n
    devices = _devices(data)
    if devices is not None:
        cols["Device"] = [devices[v.config] for v in vals]
    cols["Config"] = [v.config for v in vals]
    cols["Run"] = [v.run for v in vals]
    for name, scope in scopes.items():
        if scope == "once":
            cols[name] = [table["once"].get(name)] * n
        elif scope == "config":
            cols[name] = [table[("config", v.config)].get(name) for v in vals]
        elif scope == "run":
            cols[name] = [table[("run", v.config, v.run)].get(name) for v in vals]
        else:
            cols[name] = [table[("ann", v.config, v.run, v.annotation)].get(name) for v in vals]
    throttled = throttled_runs(data)
    if throttled is not None:
        cols["Throttled"] = [throttled.get((v.config, v.run)) for v in vals]
    configs = plan.configs
    for i, p in enumerate(plan.params):
        cols[p] = [configs[v.config][i] for v in vals]
    frame = pd.DataFrame(cols)
    frame["Value"] = frame["Value"].astype("float64")
    if throttled is not None:
        frame["Throttled"] = frame["Throttled"].astype("boolean")
    return frame


def _collector_stats(
    out: pd.DataFrame, frame: pd.DataFrame, grouped: Any, scopes: Mapping[str, str], keys: list[str]
) -> None:
    """Add each collector's columns to ``out``: numeric per-run values as ``_Avg/_Std/_Min/_Max``, else the first."""
    import pandas as pd

    for name, scope in scopes.items():
        col = grouped[name]
        numeric = pd.to_numeric(frame[name], errors="coerce")
        if name == CLOCK_EVENT_REASONS:
            out[name] = col.agg(_union_reasons).to_numpy()
        elif scope != "once" and numeric.notna().sum() == frame[name].notna().sum() and numeric.notna().any():
            ng = numeric.groupby([frame[k] for k in keys], sort=False, dropna=False)
            out[f"{name}_Avg"] = ng.mean().to_numpy()
            out[f"{name}_Std"] = ng.std(ddof=1).to_numpy()
            out[f"{name}_Min"] = ng.min().to_numpy()
            out[f"{name}_Max"] = ng.max().to_numpy()
        else:
            out[name] = col.first().to_numpy()


def _stability(out: pd.DataFrame, frame: pd.DataFrame, keys: list[str]) -> Any:
    """Add the CI and relative spread columns to ``out``; return ``StableMeasurement`` (and count throttled runs)."""
    import numpy as np
    import pandas as pd

    n = out["NumRuns"].to_numpy()
    half = np.array([ci_half_width(float(s), int(k)) for s, k in zip(out["StdDev"], n, strict=True)])
    with np.errstate(invalid="ignore", divide="ignore"):
        rsd = 100.0 * out["StdDev"].to_numpy() / np.abs(out["AvgValue"].to_numpy())
    rsd[~np.isfinite(rsd)] = np.nan
    out["CI95_Lower"] = out["AvgValue"] - half
    out["CI95_Upper"] = out["AvgValue"] + half
    out["RelativeStdDevPct"] = rsd
    stable = pd.array([None if math.isnan(r) else bool(r < STABLE_RSD_PCT) for r in rsd], dtype="boolean")
    if "Throttled" in frame:
        count = (
            frame["Throttled"]
            .fillna(False)
            .astype("int64")
            .groupby([frame[k] for k in keys], sort=False, dropna=False)
            .sum()
        )
        out["ThrottledRuns"] = count.to_numpy().astype("int64")
        stable[out["ThrottledRuns"].to_numpy() > 0] = False
    return stable


def aggregate(data: ResultData, configs: Sequence[tuple[Any, ...]] | None = None) -> pd.DataFrame:
    """One row per (annotation, metric, config) with mean, median, spread, CI and stability columns.

    Args:
        data: The result.
        configs: The original config objects (kept in memory by a live result) to show in parameter
            columns; ``None`` uses the JSON-safe copies stored in the result.
    """
    import pandas as pd

    plan = data.plan
    frame = runs_frame(data)
    scopes, _ = _collector_columns(data)
    if frame.empty:
        return pd.DataFrame(columns=["Annotation", "Metric", *plan.params, "AvgValue"])
    keys = ["Annotation", "Metric", "Config"]
    grouped = frame.groupby(keys, sort=False, dropna=False)
    value = grouped["Value"]
    out = grouped.size().reset_index()[keys]
    out["AvgValue"] = value.mean().to_numpy()
    out["MedianValue"] = value.median().to_numpy()
    out["StdDev"] = value.std(ddof=1).to_numpy()
    out["MinValue"] = value.min().to_numpy()
    out["MaxValue"] = value.max().to_numpy()
    out["NumRuns"] = value.count().to_numpy().astype("int64")
    out["Kernel"] = _kernel_names(frame, out, keys)
    for name in _ENV_COLUMNS:
        out[name] = data.environment.get(name)
    if data.config_hosts:
        out["Host"] = [data.config_hosts[c] for c in out["Config"].to_numpy()]
    out["Unit"] = grouped["Unit"].first().to_numpy()
    _collector_stats(out, frame, grouped, scopes, keys)
    out["StableMeasurement"] = _stability(out, frame, keys)
    row_keys = zip(out["Annotation"], out["Metric"], out["Config"], strict=True)
    out["Flags"] = flag_column(data, [(a, m, int(c)) for a, m, c in row_keys], throttled_runs(data))
    out["Normalized"] = False
    if plan.normalize_against is not None:
        out = _normalize(out, plan.normalize_against)
    out["Geomean"] = out.groupby(["Annotation", "Metric"], sort=False)["AvgValue"].transform(_geomean)
    sources = parse_sources(data.environment.get(SOURCES_KEY))  # a joined result: which backend measured what
    out["Tool"] = [sources.get(m, plan.backend) for m in out["Metric"]] if sources else plan.backend
    devices = _devices(data)
    if devices is not None:
        out["Device"] = [devices[c] for c in out["Config"].to_numpy()]
    cfgs = configs if configs is not None else plan.configs
    idx = out["Config"].to_numpy()
    params = {p: [cfgs[c][i] for c in idx] for i, p in enumerate(plan.params)}
    front = out[["Annotation", "Metric"]]
    rest = out.drop(columns=["Annotation", "Metric", "Config"])
    return pd.concat([front, pd.DataFrame(params, index=out.index), rest], axis=1)


_SCALED = ("AvgValue", "MedianValue", "StdDev", "MinValue", "MaxValue", "CI95_Lower", "CI95_Upper")


def _normalize(out: pd.DataFrame, baseline: str) -> pd.DataFrame:
    base = out[out["Annotation"] == baseline].set_index(["Config", "Metric"])["AvgValue"]
    if base.empty:
        names = sorted(out["Annotation"].unique())
        raise ConfigError(
            f"Annotation '{baseline}' not found in data. normalize_against={baseline!r} names no "
            f"annotation in the result; found {names}"
        )
    index = list(zip(out["Config"], out["Metric"], strict=True))
    missing = sorted({k for k in index if k not in base.index}, key=str)
    if missing:
        shown = ", ".join(f"config {c} / {m}" for c, m in missing[:5])
        raise ConfigError(
            f"normalize_against={baseline!r}: no baseline value for {shown}"
            f"{' and more' if len(missing) > 5 else ''}; every config must run the baseline annotation"
        )
    denom = base.loc[index].to_numpy()
    out = out.copy()
    for col in _SCALED:
        out[col] = out[col].to_numpy() / denom
    out["Unit"] = "ratio"
    out["Normalized"] = baseline
    loc = out.columns.get_loc("Normalized")
    out.insert(int(loc) + 1, "NormalizationValue", denom)  # type: ignore[arg-type]
    return out


def _geomean(values: pd.Series) -> float:
    import numpy as np

    arr = values.to_numpy(dtype="float64")
    arr = arr[np.isfinite(arr) & (arr > 0)]
    return float(np.exp(np.mean(np.log(arr)))) if arr.size else math.nan


def _kernel_names(frame: pd.DataFrame, out: pd.DataFrame, keys: list[str]) -> Any:
    """The most frequent kernel name of each group's successful runs (``failed`` if none succeeded)."""
    ok = frame[frame["Kernel"] != "failed"]
    counts = ok.groupby([*keys, "Kernel"], sort=False).size().reset_index(name="_n")
    best = counts.sort_values("_n", ascending=False, kind="stable").drop_duplicates(keys)
    merged = out[keys].merge(best[[*keys, "Kernel"]], on=keys, how="left")
    return merged["Kernel"].fillna("failed").to_numpy()
