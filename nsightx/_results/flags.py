"""Quality flags: per aggregated row, the reasons not to take its number at face value.

Each flag is one small function over the evidence a result already holds (its plan, environment, per-run values,
region records and collector values); :func:`row_flags` runs them all and returns, for every
(annotation, metric, config) row, the sorted names of the flags that hold. The DataFrame shows them in a
``Flags`` column (comma-separated, ``""`` when none) and :func:`filter_flags` keeps or drops rows by flag. Pure
Python: no pandas here, so ``nsightx compare`` uses the same functions on the results it reads. The DataFrame
computes the same verdicts for all its rows at once with numpy (:mod:`nsightx._results.table_flags`); these rules
are the reference it is tested against, and it asks them about any row too close to a threshold to call.

The flags and the evidence each one is computed from (docs/flags.md says the same for users):

``launch_bound``
    In more than half of the row's runs the host took longer to issue the region's work than the GPU took to
    run it: the backend's own per-region ``launch_bound`` attribute where it records one (CUPTI: the host window
    in CUPTI's clock against the sum of the region's kernel durations), else the region's host wall time
    (``RegionRun.host_ns``) against its GPU time (``device_ns`` or ``span_ns`` attribute, else the sum of its
    ``gpu__time_duration.sum`` records). Not judged when the backend serialises kernels (its host times are
    those of the replay) or when no GPU time was recorded (the host backend).
``short``
    A time row (unit ``ns``) whose mean is below :data:`SHORT_NS`: fixed costs (launch ramp, the kernel's tail,
    the clock's start-up) are a large part of it, and a CUDA event pair resolves about half a microsecond.
``warm``
    The plan measured with ``cache_control="none"``: the caches kept what the previous run left in them.
``throttled``
    At least one of the row's runs was throttled (``nsightx._results.dataframe.throttled_runs``: a clock-event reason
    other than idle or an administrator's setting, or an SM clock under 90% of the call's median).
``clock_varied``
    The measured SM clock (``MeasuredSMClockMHz``, reads taken while the GPU said ``gpu_idle`` left out) of the
    row's runs spans more than :data:`CLOCK_VARIED_PCT` percent of its median.
``unstable``
    The row's 95% interval of the mean (:func:`~nsightx._results.stats.mean_interval`, the ``CI95_Lower`` ..
    ``CI95_Upper`` columns) reaches further from the mean than :data:`UNSTABLE_CI_PCT` percent of the mean, on
    either side (or the target given to :func:`row_flags`): the interval may be asymmetric, and its farther end
    is the one that says how far off the mean may be.
``few_runs``
    Fewer than :data:`FEW_RUNS` valid (finite) runs: the interval is wide and one outlier moves the mean.
``serialized``
    The backend serialises kernels (its environment says ``SerializesKernels``: Nsight Compute replays each
    kernel alone) and the row's region launched more than one kernel in a run, so kernels that overlap in a
    normal run were timed one after the other.
"""

from __future__ import annotations

import functools
import math
import statistics
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from nsightx._errors import ConfigError
from nsightx._results.stats import fsum_mean, interval_reach, percent_of, scale_shift, times_pow2
from nsightx.columns import CLOCK_EVENT_REASONS, MEASURED_SM_CLOCK, SERIALIZES_KERNELS

if TYPE_CHECKING:
    import pandas as pd

    from nsightx._results.records import CollectorValue, RegionRun
    from nsightx._results.schema import ResultData

SHORT_NS = 5_000.0
"""A time row whose mean is under this many nanoseconds is ``short``."""
CLOCK_VARIED_PCT = 3.0
"""A row is ``clock_varied`` when its runs' measured SM clock range exceeds this percentage of their median."""
UNSTABLE_CI_PCT = 2.0
"""A row is ``unstable`` when its CI reaches further than this percentage of its mean from it (unless a target is
given)."""
FEW_RUNS = 5
"""A row with fewer valid runs than this is ``few_runs``."""
GPU_TIME_METRIC = "gpu__time_duration.sum"
"""Per-kernel GPU time records summed for a region's GPU time when no backend attribute gives it."""

FLAGS = ("clock_varied", "few_runs", "launch_bound", "serialized", "short", "throttled", "unstable", "warm")
"""Every flag name, sorted (the order they appear in in a ``Flags`` cell)."""

RowKey = tuple[str, str, int]
"""(annotation, metric, config index) of one aggregated row."""


@dataclass
class RowEvidence:
    """What the flag rules read about one aggregated row."""

    annotation: str
    metric: str
    config: int
    unit: str | None = None
    values: list[float] = field(default_factory=list)
    """The row's finite per-run values (after combining and deriving, before normalisation)."""
    runs: list[int] = field(default_factory=list)
    """Run indices of those values."""

    @functools.cached_property
    def mean(self) -> float:
        """Mean of :attr:`values` (NaN without any)."""
        return fsum_mean(self.values) if self.values else math.nan

    @functools.cached_property
    def std(self) -> float:
        """Sample standard deviation of :attr:`values` (NaN under 2)."""
        n = len(self.values)
        if n < 2:
            return math.nan
        s = scale_shift(self.values)  # squares of values past 2**500 overflow, under 2**-400 underflow
        scaled = [times_pow2(v, -s) for v in self.values] if s else self.values
        mean = math.fsum(scaled) / n
        return times_pow2(math.sqrt(math.fsum((v - mean) ** 2 for v in scaled) / (n - 1)), s)

    @property
    def region(self) -> tuple[str, int]:
        """(annotation, config): the key of the row's region executions in :attr:`CallEvidence.regions`."""
        return (self.annotation, self.config)


@dataclass
class CallEvidence:
    """What the flag rules read about the whole call."""

    cache_control: str
    serializes: bool
    regions: Mapping[tuple[str, int], Sequence[RegionRun]]
    """(annotation, config) -> the region's executions."""
    gpu_ns: Mapping[tuple[str, int, int], float]
    """(annotation, config, run) -> sum of the region's ``gpu__time_duration.sum`` records."""
    clocks: Mapping[tuple[int, int], float]
    """(config, run) -> measured SM clock (MHz), idle reads left out."""
    throttled: Mapping[tuple[int, int], bool]
    """(config, run) -> throttled, as :func:`nsightx._results.dataframe.throttled_runs` judged it."""
    target_ci_pct: float = UNSTABLE_CI_PCT


def flag_warm(row: RowEvidence, call: CallEvidence) -> bool:
    """``warm``: the caches were not flushed between runs (``cache_control="none"``)."""
    return call.cache_control == "none"


def flag_short(row: RowEvidence, call: CallEvidence) -> bool:
    """``short``: a time row (unit ``ns``) whose mean is below :data:`SHORT_NS`."""
    return row.unit == "ns" and bool(row.values) and row.mean < SHORT_NS


def flag_few_runs(row: RowEvidence, call: CallEvidence) -> bool:
    """``few_runs``: fewer than :data:`FEW_RUNS` valid runs."""
    return len(row.values) < FEW_RUNS


def flag_unstable(row: RowEvidence, call: CallEvidence) -> bool:
    """``unstable``: the 95% CI's farther end is more than the target percentage of the mean away (needs 2 runs)."""
    if len(row.values) < 2 or row.mean == 0:
        return False
    reach = interval_reach(row.values, row.mean)
    return not math.isnan(reach) and percent_of(reach, row.mean) > call.target_ci_pct


def flag_throttled(row: RowEvidence, call: CallEvidence) -> bool:
    """``throttled``: one of the row's runs was throttled."""
    return any(call.throttled.get((row.config, r), False) for r in row.runs)


def flag_clock_varied(row: RowEvidence, call: CallEvidence) -> bool:
    """``clock_varied``: the runs' measured SM clock range is above :data:`CLOCK_VARIED_PCT` of their median."""
    clocks = [c for r in row.runs if (c := call.clocks.get((row.config, r))) is not None]
    if len(clocks) < 2:
        return False
    median = statistics.median(clocks)
    return median > 0 and 100.0 * (max(clocks) - min(clocks)) / median > CLOCK_VARIED_PCT


def flag_serialized(row: RowEvidence, call: CallEvidence) -> bool:
    """``serialized``: the backend runs kernels alone and the region launched more than one kernel in a run."""
    if not call.serializes:
        return False
    return any(_number(reg.attributes.get("kernel_count")) > 1 for reg in call.regions.get(row.region, ()))


def flag_launch_bound(row: RowEvidence, call: CallEvidence) -> bool:
    """``launch_bound``: in more than half of the judged runs, the region's host time exceeded its GPU time."""
    if call.serializes:
        return False
    verdicts = [
        v
        for reg in call.regions.get(row.region, ())
        if not reg.failed and (v := _run_launch_bound(reg, call.gpu_ns)) is not None
    ]
    return bool(verdicts) and 2 * sum(verdicts) > len(verdicts)


def _run_launch_bound(reg: RegionRun, gpu_ns: Mapping[tuple[str, int, int], float]) -> bool | None:
    """One execution's verdict: the backend's attribute, else host wall time > GPU time; None without GPU time.

    The host time is ``RegionRun.host_ns`` (docs/flags.md): a ``launch_ns`` attribute is not read here; a backend
    that measures the host window in its own clock (CUPTI) gives its verdict as the ``launch_bound`` attribute.
    """
    attrs = reg.attributes
    own = attrs.get("launch_bound")
    if isinstance(own, bool):
        return own
    gpu = _number(attrs.get("device_ns"))
    if not gpu > 0:
        gpu = _number(attrs.get("span_ns"))
    if not gpu > 0:
        gpu = gpu_ns.get((reg.annotation, reg.config, reg.run), math.nan)
    if not gpu > 0:
        return None
    return reg.host_ns > gpu


RULES: Mapping[str, Callable[[RowEvidence, CallEvidence], bool]] = {
    "clock_varied": flag_clock_varied,
    "few_runs": flag_few_runs,
    "launch_bound": flag_launch_bound,
    "serialized": flag_serialized,
    "short": flag_short,
    "throttled": flag_throttled,
    "unstable": flag_unstable,
    "warm": flag_warm,
}
"""Flag name -> its rule, in :data:`FLAGS` order."""


def _number(value: object) -> float:
    """A numeric attribute as float; NaN for anything else (bools included)."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return math.nan


def call_evidence(
    data: ResultData, throttled: Mapping[tuple[int, int], bool] | None, target_ci_pct: float | None = None
) -> CallEvidence:
    """Gather the call-wide evidence of ``data`` (``throttled`` comes from ``throttled_runs``)."""
    regions: dict[tuple[str, int], list[RegionRun]] = defaultdict(list)
    gpu_ns: dict[tuple[str, int, int], float] = defaultdict(float)
    for run in data.runs:
        for reg in run.regions:
            regions[(reg.annotation, reg.config)].append(reg)
        for rec in run.records:
            if rec.metric == GPU_TIME_METRIC and math.isfinite(rec.value):
                gpu_ns[(rec.annotation, rec.config, rec.run)] += rec.value
    return CallEvidence(
        cache_control=data.plan.cache_control,
        serializes=bool(data.environment.get(SERIALIZES_KERNELS)),
        regions=regions,
        gpu_ns=gpu_ns,
        clocks=measured_clocks(cv for run in data.runs for cv in run.collectors),
        throttled=throttled or {},
        target_ci_pct=UNSTABLE_CI_PCT if target_ci_pct is None else target_ci_pct,
    )


def measured_clocks(collectors: Iterable[CollectorValue]) -> dict[tuple[int, int], float]:
    """(config, run) -> the run's measured SM clock (MHz), reads taken while the GPU said ``gpu_idle`` left out.

    A run's clock is its last finite ``MeasuredSMClockMHz`` value; ``nsightx._results.table_flags`` reads the same.
    """
    items = (
        (cv.name, cv.config, cv.run or 0, cv.value)
        for cv in collectors
        if cv.scope == "run" and cv.config is not None and cv.name in (MEASURED_SM_CLOCK, CLOCK_EVENT_REASONS)
    )
    return run_clocks(items)


def run_clocks(items: Iterable[tuple[str, int, int, Any]]) -> dict[tuple[int, int], float]:
    """:func:`measured_clocks` of run-scope clock and reason values given as (name, config, run, value)."""
    clocks: dict[tuple[int, int], float] = {}
    idle: set[tuple[int, int]] = set()
    said_idle: dict[str, bool] = {}  # per distinct reasons text: one split, not one per run (issue 35)
    for name, config, run, value in items:
        if name == MEASURED_SM_CLOCK:
            kind = type(value)
            number = float(value) if kind is int or kind is float else _number(value)
            if math.isfinite(number):
                clocks[(config, run)] = number
        elif name == CLOCK_EVENT_REASONS:
            if type(value) is str:
                hit = said_idle.get(value)
                if hit is None:
                    hit = said_idle[value] = "gpu_idle" in value.split("|")
            else:
                hit = "gpu_idle" in str(value or "").split("|")
            if hit:
                idle.add((config, run))
    return {k: c for k, c in clocks.items() if k not in idle}


def row_evidence(data: ResultData) -> dict[RowKey, RowEvidence]:
    """The per-run values of every (annotation, metric, config) row, in first-seen order."""
    rows: dict[RowKey, RowEvidence] = {}
    for v in data.values:
        key = (v.annotation, v.metric, v.config)
        row = rows.get(key)
        if row is None:
            row = rows[key] = RowEvidence(v.annotation, v.metric, v.config, v.unit)
        if row.unit is None:
            row.unit = v.unit
        if math.isfinite(v.value):
            row.values.append(float(v.value))
            row.runs.append(v.run)
    return rows


def row_flags(
    data: ResultData,
    throttled: Mapping[tuple[int, int], bool] | None = None,
    *,
    target_ci_pct: float | None = None,
) -> dict[RowKey, tuple[str, ...]]:
    """The flags of every aggregated row of ``data``, keyed (annotation, metric, config index).

    Args:
        data: The result.
        throttled: Which (config, run) were throttled (``throttled_runs`` of the DataFrame module); ``None``: none
            known.
        target_ci_pct: The ``unstable`` threshold, percent of the mean; ``None``: :data:`UNSTABLE_CI_PCT`.

    Returns:
        Each row's flag names, sorted (an empty tuple when none holds).
    """
    call = call_evidence(data, throttled, target_ci_pct)
    return {
        key: tuple(name for name, rule in RULES.items() if rule(row, call)) for key, row in row_evidence(data).items()
    }


def flags_cell(flags: Iterable[str]) -> str:
    """The ``Flags`` cell: sorted names joined by commas (``""`` when none)."""
    return ",".join(sorted(flags))


def parse_cell(cell: object) -> frozenset[str]:
    """The flag names of a ``Flags`` cell (a comma-separated string, a tuple of names, or empty)."""
    if cell is None or (isinstance(cell, float) and math.isnan(cell)):
        return frozenset()
    if isinstance(cell, str):
        return frozenset(n.strip() for n in cell.split(",") if n.strip())
    if isinstance(cell, Iterable):
        return frozenset(str(n) for n in cell)
    return frozenset()


def _flag_names(value: str | Iterable[str] | None, argument: str) -> frozenset[str]:
    """``include``/``exclude`` as a set of known flag names; a bare str is one name."""
    if value is None:
        return frozenset()
    names = frozenset([value]) if isinstance(value, str) else frozenset(value)
    unknown = sorted(str(n) for n in names if n not in RULES)
    if unknown:
        raise ConfigError(f"filter_flags({argument}=...): unknown flag(s) {unknown}; the flags are {list(FLAGS)}")
    return names


def filter_flags(
    frame: pd.DataFrame,
    *,
    include: str | Iterable[str] | None = None,
    exclude: str | Iterable[str] | None = None,
    clean: bool = False,
) -> pd.DataFrame:
    """The rows of an aggregated DataFrame selected by their ``Flags``.

    Args:
        frame: A frame with a ``Flags`` column (``results.to_dataframe()``).
        include: Keep only rows carrying every one of these flags.
        exclude: Drop rows carrying any of these flags.
        clean: Keep only rows with no flag at all.

    Returns:
        The selected rows (a copy; the index is kept).

    Raises:
        ConfigError: the frame has no ``Flags`` column, or a flag name is unknown.

    Example:
        >>> trusted = filter_flags(results.to_dataframe(), exclude=["short", "unstable"])  # doctest: +SKIP
    """
    if "Flags" not in frame.columns:
        raise ConfigError(
            "filter_flags needs a frame with a 'Flags' column (results.to_dataframe()); got columns "
            f"{list(frame.columns)[:8]}"
        )
    want, drop = _flag_names(include, "include"), _flag_names(exclude, "exclude")
    cells = [parse_cell(c) for c in frame["Flags"]]
    keep = [i for i, c in enumerate(cells) if want <= c and not (drop & c) and (not clean or not c)]
    return frame.iloc[keep].copy()  # by position: frame[[]] (an empty frame's mask) would select no column
