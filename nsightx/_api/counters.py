"""One :class:`~nsightx.ProfileResults` from the runs of a time backend and of a counter backend of the same sweep.

The pure join is :func:`nsightx._results.join.join_runs`; this module checks that the two sides measured the same
function over the same configs and builds the joined result, once, through the one result builder
(:func:`join_sides`). With ``@analyze.kernel(counters=[...])`` a call measures two sets of runs, building no result
for either: the times with the decorator's own options (:func:`without_counters`), then the counters with
:func:`counter_spec` (``backend="auto"``, which picks the backend that can read them, ``counter_runs`` fixed runs).
``nsightx.join_results`` (:func:`joined_results`) joins two results a user measured. Which backend measured each
metric is the joined plan's ``metric_backends``, which the DataFrame's ``Tool`` column reads.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from nsightx._errors import ConfigError
from nsightx._results.join import join_runs
from nsightx._results.output import OutputLocation
from nsightx._results.profileresults import ProfileResults, build_results
from nsightx._results.records import RunRecords, Scalar
from nsightx._results.schema import PlanInfo
from nsightx._spec.options import ProfileSpec

DROPPED_ENV = ("SerializesKernels",)
"""Counter-side environment keys not carried over: the joined times were not measured under replay."""


@dataclass(frozen=True)
class Side:
    """One side of a join: the runs one backend measured and what was asked of it (no result built)."""

    plan: PlanInfo
    """What was asked (its backend names the side)."""
    runs: Sequence[RunRecords]
    """Every run, in order."""
    environment: Mapping[str, Scalar]
    """Where it was measured."""
    location: OutputLocation | None = None
    """Where the side's files went (its raw file); the joined result's files go to the time side's."""


def joined_results(
    times: ProfileResults,
    counters: ProfileResults,
    *,
    combine: Callable[[float, float], float] | None = None,
) -> ProfileResults:
    """Times of ``times`` and counters of ``counters`` in one result (``Tool`` says which measured each row).

    Args:
        times: The time backend's result (e.g. CUPTI over ``runs`` runs).
        counters: The counter backend's result of the same function and configs (e.g. ncu over a few runs).
        combine: ``combine_kernel_metrics`` for regions of several kernels.

    Raises:
        ConfigError: the two results measured different functions, parameters or configs.
        JoinError: a region's kernels differ between the two (see :func:`nsightx._results.join.join_runs`).
    """
    return join_sides(
        Side(times.data.plan, times.data.runs, times.environment),
        Side(counters.data.plan, counters.data.runs, counters.environment),
        combine=combine,
        configs=times._configs,
    )


def join_sides(
    times: Side,
    counters: Side,
    *,
    combine: Callable[[float, float], float] | None = None,
    configs: Sequence[tuple[Any, ...]] | None = None,
    output_csv: bool = False,
) -> ProfileResults:
    """One result from the runs of a time side and a counter side, built once (``counters=`` and ``join_results``).

    Which backend measured each metric is the plan's ``metric_backends`` (the DataFrame's ``Tool``). With the time
    side's ``location``, the joined result's files are written there.

    Raises:
        ConfigError: the two sides measured different functions, parameters or configs.
        JoinError: a region's kernels differ between the two.
    """
    tp, cp = times.plan, counters.plan
    for what, a, b in (("function", tp.function, cp.function), ("params", tp.params, cp.params)):
        if a != b:
            raise ConfigError(f"cannot join results of different {what}: {a!r} ({tp.backend}) vs {b!r} ({cp.backend})")
    if tp.configs != cp.configs:
        raise ConfigError(
            f"cannot join {tp.function}: the configs differ ({len(tp.configs)} under {tp.backend}, "
            f"{len(cp.configs)} under {cp.backend}); measure both over the same configs"
        )
    joined = join_runs(times.runs, counters.runs, backends=(tp.backend, cp.backend), time_metrics=tp.metrics)
    metrics = tuple(dict.fromkeys([*tp.metrics, *(m for m in joined.sources if m not in tp.metrics)]))
    plan = tp.model_copy(
        update={"backend": f"{tp.backend}+{cp.backend}", "metrics": metrics, "metric_backends": dict(joined.sources)}
    )
    env: dict[str, Scalar] = {k: v for k, v in counters.environment.items() if k not in DROPPED_ENV}
    env.update(times.environment)
    return build_results(
        plan, joined.runs, env, combine=combine, configs=configs, location=times.location, output_csv=output_csv
    )


def without_counters(spec: ProfileSpec) -> ProfileSpec:
    """The spec of the time call of ``counters=``: the decorator's own, without the counters."""
    return spec.model_copy(update={"counters": None})


def counter_spec(spec: ProfileSpec) -> ProfileSpec:
    """The spec of the counter call of ``counters=``: those metrics, ``counter_runs`` fixed runs, "auto" backend.

    What shapes the values of one call only (``derive_metric``, ``normalize_against``) stays with the joined
    result's time side; the parallel and adaptive options do not apply to the counter call.
    """
    return spec.model_copy(
        update={
            "counters": None,
            "backend": "auto",
            "metrics": spec.counters,
            "runs": min(spec.counter_runs, spec.runs) if isinstance(spec.runs, int) else spec.counter_runs,
            "min_runs": None,
            "max_runs": None,
            "target_ci_pct": None,
            "time_budget_s": None,
            "derive_metric": None,
            "normalize_against": None,
            "parallel_devices": None,
        }
    )
