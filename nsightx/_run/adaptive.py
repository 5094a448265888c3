"""When a config has been measured enough: a fixed count, or ``runs="auto"``'s stopping rule.

The run loop asks a :class:`StopRule` for one :class:`ConfigStopper` per config, feeds it each measured run's
records, and asks before every measured run whether to go on. With a fixed count the answer depends only on the
run index. Under ``runs="auto"`` a config stops at the first of:

- ``target``: every (annotation, metric) seen has a 95% confidence interval of the mean (the DataFrame's
  ``CI95_Lower`` .. ``CI95_Upper``) whose farther end is at most ``target_ci_pct`` percent of the mean away from
  it, after at least ``min_runs`` runs;
- ``max_runs``: ``max_runs`` measured runs were made;
- ``budget``: one more run (at the mean duration of the runs so far) would overrun ``time_budget_s``, the
  wall time allowed for the config's measured runs (``min_runs`` are always made);
- ``no_values``: after ``min_runs`` runs the backend has reported no value in process (ncu, whose values are
  read from its report after the sweep), so there is nothing to judge; the config stops at ``min_runs``.

Values of several kernels in one region are summed per run for the rule (the quantity that
``combine_kernel_metrics=operator.add`` would report), without the kernels of ``ignore_kernel_list``, which the
result drops too; failed regions (NaN) are skipped.
"""

from __future__ import annotations

import math
import operator
import time
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from nsightx._errors import ConfigError, ConfigTypeError
from nsightx._results.records import Record
from nsightx._results.stats import fsum_mean, interval_reach, percent_of

STOP_COLUMN = "StopReason"
"""Name of the CONFIG-scope value (and DataFrame column) recording why a config stopped under ``runs="auto"``."""


class ConfigStopper:
    """Decides, for one config, whether another measured run is needed."""

    def observe(self, records: Iterable[Record]) -> None:
        """Take the records of the measured run that just finished."""

    def stop_reason(self, done: int) -> str | None:
        """Why no further run is needed after ``done`` measured runs, or ``None`` to go on."""
        raise NotImplementedError


@dataclass(frozen=True)
class FixedRuns:
    """``runs=N``: every config gets exactly ``N`` measured runs."""

    runs: int

    @property
    def max_runs(self) -> int:
        """Upper bound on measured runs per config."""
        return self.runs

    @property
    def records_reason(self) -> bool:
        """Whether the stop reason is worth recording (not for a fixed count)."""
        return False

    def start_config(self) -> ConfigStopper:
        """A stopper for the next config."""
        return _Fixed(self.runs)


class _Fixed(ConfigStopper):
    def __init__(self, runs: int) -> None:
        self.runs = runs

    def stop_reason(self, done: int) -> str | None:
        return "runs" if done >= self.runs else None


@dataclass(frozen=True)
class AdaptiveRuns:
    """``runs="auto"``: measure each config until its confidence interval is tight enough (or a limit hits).

    Example:
        >>> rule = AdaptiveRuns(min_runs=3, max_runs=50, target_ci_pct=1.0, time_budget_s=5.0)
        >>> stopper = rule.start_config()
        >>> stopper.stop_reason(0) is None
        True
    """

    min_runs: int = 5
    """Measured runs made before the rule is consulted (at least 2, so that a CI exists)."""
    max_runs: int = 100
    """Measured runs after which a config stops whatever its CI."""
    target_ci_pct: float = 1.0
    """Target half-width of the 95% CI of the mean, in percent of the mean."""
    time_budget_s: float = 10.0
    """Wall time allowed for one config's measured runs, in seconds."""
    ignore_kernels: frozenset[str] = frozenset()
    """Kernels whose values the rule leaves out, as the result does (``ignore_kernel_list``): a steady helper kernel
    summed in would make a noisy region's interval look tight."""
    clock: Callable[[], float] = field(default=time.monotonic, compare=False, repr=False)
    """Clock in seconds (replaceable in tests)."""

    @property
    def records_reason(self) -> bool:
        """Whether the stop reason is worth recording (always, under ``runs="auto"``)."""
        return True

    def start_config(self) -> ConfigStopper:
        """A stopper for the next config; its budget clock starts now."""
        return _Adaptive(self)

    def describe(self) -> str:
        """One line for the INFO summary."""
        return (
            f"auto ({self.min_runs}-{self.max_runs} runs, CI +/-{self.target_ci_pct:g}%, "
            f"{self.time_budget_s:g} s/config)"
        )


StopRule = FixedRuns | AdaptiveRuns
"""What the plan carries: a fixed count or the adaptive rule."""


class _Adaptive(ConfigStopper):
    def __init__(self, rule: AdaptiveRuns) -> None:
        self.rule = rule
        self.values: dict[tuple[str, str], list[float]] = defaultdict(list)
        self.started = rule.clock()

    def observe(self, records: Iterable[Record]) -> None:
        per_run: dict[tuple[str, str], float] = defaultdict(float)
        ignored = self.rule.ignore_kernels
        for rec in records:
            if math.isfinite(rec.value) and rec.kernel not in ignored:
                per_run[(rec.annotation, rec.metric)] += rec.value
        for key, value in per_run.items():
            self.values[key].append(value)

    def stop_reason(self, done: int) -> str | None:
        rule = self.rule
        if done < rule.min_runs:
            return None
        if not self.values:
            return "no_values"
        if all(relative_half_width(v) <= rule.target_ci_pct for v in self.values.values()):
            return "target"
        if done >= rule.max_runs:
            return "max_runs"
        elapsed = rule.clock() - self.started
        if elapsed + elapsed / done > rule.time_budget_s:
            return "budget"
        return None


def relative_half_width(values: list[float]) -> float:
    """How far the 95% CI of the mean of ``values`` reaches from the mean, in percent of the mean (inf if unknown).

    The interval is the DataFrame's (:func:`~nsightx._results.stats.mean_interval`) and the reach its farther
    end, as the ``unstable`` flag reads it, so a config that stopped on its target is not flagged ``unstable``.
    """
    n = len(values)
    if n < 2:
        return math.inf
    mean = fsum_mean(values)
    if mean == 0.0:
        return 0.0 if all(v == 0.0 for v in values) else math.inf
    reach = interval_reach(values, mean)
    return math.inf if math.isnan(reach) else percent_of(reach, mean)


ADAPTIVE_OPTIONS = ("min_runs", "max_runs", "target_ci_pct", "time_budget_s")
"""Options of ``analyze.kernel`` that apply only with ``runs="auto"``."""


def build_rule(runs: object, **options: object) -> StopRule:
    """Validate ``runs`` and the adaptive options into a :class:`StopRule`.

    Args:
        runs: A count (int >= 1) or ``"auto"``.
        **options: ``min_runs``, ``max_runs``, ``target_ci_pct``, ``time_budget_s``; ``None`` means the default.

    Returns:
        :class:`FixedRuns` or :class:`AdaptiveRuns`.

    Raises:
        ConfigError: a value is out of range, or an adaptive option is given with a fixed ``runs``.
        ConfigTypeError: a value has the wrong type.
    """
    given = {k: v for k, v in options.items() if v is not None}
    unknown = sorted(set(given) - set(ADAPTIVE_OPTIONS))
    if unknown:
        raise ConfigError(f"unknown adaptive option(s) {unknown}; accepted: {', '.join(ADAPTIVE_OPTIONS)}")
    if isinstance(runs, str) and runs.lower() == "auto":
        defaults = AdaptiveRuns()
        min_runs = int_option("min_runs", given.get("min_runs", defaults.min_runs), 2)
        max_runs = int_option("max_runs", given.get("max_runs", defaults.max_runs), 2)
        if max_runs < min_runs:
            raise ConfigError(f"max_runs ({max_runs}) must be >= min_runs ({min_runs})")
        return AdaptiveRuns(
            min_runs=min_runs,
            max_runs=max_runs,
            target_ci_pct=_positive("target_ci_pct", given.get("target_ci_pct", defaults.target_ci_pct)),
            time_budget_s=_positive("time_budget_s", given.get("time_budget_s", defaults.time_budget_s)),
        )
    count = whole_number(runs)
    if count is None:
        raise ConfigTypeError(f"runs must be an int >= 1 or 'auto', got {type(runs).__name__} {runs!r}")
    runs = count
    if runs < 1:
        raise ConfigError(f"runs must be >= 1 or 'auto', got {runs}")
    if given:
        raise ConfigError(
            f"{', '.join(sorted(given))} appl{'ies' if len(given) == 1 else 'y'} only with runs='auto', "
            f"but runs={runs}; drop {'it' if len(given) == 1 else 'them'} or set runs='auto'"
        )
    return FixedRuns(runs)


def whole_number(value: object) -> int | None:
    """``value`` as a plain int when it is a whole number: an int or an integer scalar; else None.

    An integer scalar (``numpy.int64``) is read through ``__index__``; a bool never counts (``numpy.bool_`` has
    no ``__index__``). nsight-python does not check ``runs``, so ``runs=np.int64(10)`` from a user's sweep code
    ran there; the count is kept as a plain int, which the saved plan and the columns hold.
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return int(value)
    if getattr(type(value), "__index__", None) is None:
        return None
    try:
        return operator.index(value)  # type: ignore[arg-type]  # it has __index__ (checked above)
    except TypeError:
        return None


def int_option(option: str, value: object, minimum: int) -> int:
    """``value`` as an int when it is a whole number (:func:`whole_number`) of at least ``minimum``.

    Raises:
        ConfigTypeError: not a whole number. ConfigError: below ``minimum``.
    """
    number = whole_number(value)
    if number is None:
        raise ConfigTypeError(f"{option} must be an int >= {minimum}, got {type(value).__name__} {value!r}")
    if number < minimum:
        raise ConfigError(f"{option} must be >= {minimum}, got {number}")
    return number


def _positive(option: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigTypeError(f"{option} must be a number > 0, got {type(value).__name__} {value!r}")
    if not math.isfinite(value) or value <= 0:
        raise ConfigError(f"{option} must be a finite number > 0, got {value}")
    return float(value)
