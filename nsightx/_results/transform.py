"""Pure transformations from raw backend records to per-run values.

``ignore_kernel_list`` drops kernels, ``combine_kernel_metrics`` folds several kernels of one region into one
value, and ``derive_metric`` adds metrics computed from the measured ones. All three work by identity:
records are grouped by (annotation, config, run, metric), never matched by position.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import math
import warnings
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from nsightx._errors import ConfigError, KernelCountError, MeasurementError, TransformError
from nsightx._results.records import Lean, Record, RunRecords, fast_builder

FAILED_KERNEL = "failed"


@dataclasses.dataclass(frozen=True, slots=True)
class RunValue(Lean):
    """One value of one metric for one region in one run, after combining and deriving.

    A lean record type, like the raw records (see :mod:`nsightx._results.records`): a result holds one per run, region
    and metric.
    """

    annotation: str
    config: int
    run: int
    metric: str
    value: float
    unit: str | None = None
    kernel: str = ""
    """Kernel name(s): ``a|b`` when several kernels were combined; ``failed`` for a failed region."""


new_run_value: Callable[[str, int, int, str, float, str | None, str], RunValue] = fast_builder(RunValue)
"""``RunValue(annotation, config, run, metric, value, unit, kernel)`` through the slots' descriptors.

One is built per region, run and metric on the measured path of a call; the dataclass constructor of a frozen
class is ~40% slower (see the fast builders of :mod:`nsightx._results.records`)."""


def _key(r: Record) -> tuple[str, int, int, str]:
    return (r.annotation, r.config, r.run, r.metric)


def combine_records(
    runs: Sequence[RunRecords],
    metrics: Sequence[str],
    *,
    ignore_kernels: Iterable[str] = (),
    combine: Callable[[float, float], float] | None = None,
) -> list[RunValue]:
    """Turn raw records into one value per (annotation, config, run, metric).

    Raises:
        KernelCountError: a region launched several kernels and ``combine`` is None.
    """
    groups, region_metrics, failed, order = _group(runs, set(ignore_kernels))
    out: list[RunValue] = []
    requested = set(metrics)
    for rid in order:
        ann, cfg, run_i = rid
        if rid in failed:
            out.extend(RunValue(ann, cfg, run_i, m, math.nan, None, FAILED_KERNEL) for m in metrics)
            continue
        measured = region_metrics.get(rid)
        if measured is None:
            continue
        for metric in measured if len(measured) == 1 else _metrics_of(measured, metrics, requested):
            recs = groups[(ann, cfg, run_i, metric)]
            if len(recs) == 1:  # the common case, inline: one kernel, one value
                r = recs[0]
                out.append(new_run_value(ann, cfg, run_i, metric, r.value, r.unit, r.kernel))
            elif combine is None:
                raise kernel_count_error(recs, _counts(ann, metric, order, failed, groups))
            else:
                out.append(fold(recs, combine))
    return out


def _counts(
    annotation: str,
    metric: str,
    order: list[_Rid],
    failed: set[_Rid],
    groups: Mapping[tuple[str, int, int, str], list[Record]],
) -> dict[_Rid, int]:
    """How many kernels each measured region of ``annotation`` launched (for ``metric``), in region order."""
    return {rid: len(groups.get((*rid, metric), ())) for rid in order if rid[0] == annotation and rid not in failed}


def kernel_count_error(recs: Sequence[Record], counts: Mapping[_Rid, int]) -> KernelCountError:
    """The error for a region of several kernels without ``combine_kernel_metrics``, in nsight-python's words.

    When the annotation's regions launched different numbers of kernels (between configs or runs), nsight-python
    says "Expect same number of kernels per run" (it matches kernels to runs by position); the message then starts
    with that sentence and the average it would have printed, then goes on with the region that has several.

    Args:
        recs: The kernels of the region (one metric), in launch order.
        counts: The number of kernels of every measured region of the same annotation and metric.
    """
    recs = sorted(recs, key=_seq)
    first = recs[0]
    names = "\n".join(f"  {r.seq}: {r.kernel}" for r in recs)
    return KernelCountError(
        f"{_varying(first.annotation, counts)}"
        f"More than one (total={len(recs)}) kernel is launched within the {first.annotation} annotation.\n"
        "We expect one kernel per annotation.\n"
        f"nsightx counted them in config {first.config}, run {first.run} (metric {first.metric}); it reports "
        "one value per region.\n"
        "Try one of the following solutions:\n"
        "  - Use `combine_kernel_metrics = lambda x, y: ...` (or operator.add, max: any function (a, b) -> "
        "value) to combine the metrics of multiple kernels\n"
        "  - Add some of the kernels to the ignore_kernel_list\n"
        "  - Use `replay_mode='range'` (ncu backend) to profile the entire annotated range instead of "
        "individual kernels\n"
        f"Kernels are:\n{names}"
    )


def _varying(annotation: str, counts: Mapping[_Rid, int]) -> str:
    """nsight-python's first line when the regions of ``annotation`` launched different numbers of kernels, or ''."""
    by_count: dict[int, list[_Rid]] = {}
    for rid, n in counts.items():
        by_count.setdefault(n, []).append(rid)
    if len(by_count) < 2:
        return ""
    average = sum(counts.values()) / len(counts)
    seen = "; ".join(
        f"{n} kernel{'' if n == 1 else 's'} in {len(rids)} run(s) (first in config {rids[0][1]}, run {rids[0][2]})"
        for n, rids in sorted(by_count.items())
    )
    return (
        f"Expect same number of kernels per run. Got average of {average} per run\n"
        f"(the {annotation} annotation launched {seen}; with combine_kernel_metrics nsightx accepts counts that "
        "vary, matching kernels to runs by identity).\n"
    )


_Rid = tuple[str, int, int]


def _group(
    runs: Sequence[RunRecords], ignored: set[str]
) -> tuple[dict[tuple[str, int, int, str], list[Record]], dict[_Rid, dict[str, None]], set[_Rid], list[_Rid]]:
    """Records by (region, metric), each region's metrics in the order met, the failed regions, region order."""
    groups: dict[tuple[str, int, int, str], list[Record]] = {}
    region_metrics: dict[tuple[str, int, int], dict[str, None]] = {}
    failed: set[tuple[str, int, int]] = set()
    order: list[tuple[str, int, int]] = []
    seen_regions: set[tuple[str, int, int]] = set()
    for run in runs:  # one pass, no helper calls: this runs on every record of a call before it returns
        for reg in run.regions:
            rid = (reg.annotation, reg.config, reg.run)
            if rid not in seen_regions:
                seen_regions.add(rid)
                order.append(rid)
            if reg.failed:
                failed.add(rid)
        for rec in run.records:
            if ignored and rec.kernel in ignored:
                continue
            annotation, config, run_i, metric = rec.annotation, rec.config, rec.run, rec.metric
            rid = (annotation, config, run_i)
            if rid not in seen_regions:
                seen_regions.add(rid)
                order.append(rid)
            key = (annotation, config, run_i, metric)
            group = groups.get(key)
            if group is not None:
                group.append(rec)
                continue
            groups[key] = [rec]
            measured = region_metrics.get(rid)
            if measured is None:
                region_metrics[rid] = {metric: None}
            else:
                measured[metric] = None
    return groups, region_metrics, failed, order


def _metrics_of(measured: Mapping[str, None], metrics: Sequence[str], requested: set[str]) -> list[str]:
    """The region's metrics in the requested order, then any extra ones a backend reported (ncu sections) sorted."""
    if len(measured) == 1:  # the common case: one metric per region (a time)
        return list(measured)
    present = [m for m in metrics if m in measured]
    extra = sorted(set(measured) - requested)
    return present + extra


def fold(recs: list[Record], combine: Callable[[float, float], float]) -> RunValue:
    """The value of one region and metric whose records (kernels) ``combine`` folds in launch order.

    Raises:
        ConfigError: ``combine`` raised.
        TransformError: ``combine`` returned something other than a number.
    """
    first = recs[0]
    if len(recs) == 1:
        return new_run_value(
            first.annotation, first.config, first.run, first.metric, first.value, first.unit, first.kernel
        )
    if any(a.seq > b.seq for a, b in itertools.pairwise(recs)):  # backends hand them in launch order
        recs = sorted(recs, key=_seq)
    try:
        value = functools.reduce(combine, (r.value for r in recs))
    except Exception as e:
        raise ConfigError(f"combine_kernel_metrics {combine!r} failed on {first.metric}: {e}") from e
    number = as_float(value)
    if number is None:
        raise TransformError(
            f"combine_kernel_metrics {combine!r} returned {_show(value)} for metric {first.metric!r} of annotation "
            f"{first.annotation!r} (config {first.config}, run {first.run}); it must return one number, as "
            "operator.add or max do",
            function=_fn_name(combine),
            config=first.config,
            returned=value,
        )
    kernel = "|".join([r.kernel for r in recs])
    return new_run_value(first.annotation, first.config, first.run, first.metric, number, first.unit, kernel)


def _seq(r: Record) -> int:
    return r.seq


_TEXT_TYPES = (str, bytes)  # a tuple: a union expression would be built at every call, once per record


def as_float(value: object) -> float | None:
    """``value`` as a float, or None when it is not a number (a str, None, a list, ...)."""
    if value is None or isinstance(value, _TEXT_TYPES):
        return None  # float("1.5") would parse a str: a metric value must be a number
    try:
        return float(value)  # type: ignore[arg-type]  # int, numpy scalars, 0-d arrays, Decimal, ...
    except (TypeError, ValueError, OverflowError):
        return None


def _show(value: object, limit: int = 80) -> str:
    """A short ``repr`` with the type, for messages about a returned value."""
    text = repr(value)
    if len(text) > limit:
        text = text[: limit - 3] + "..."
    return f"{text} ({type(value).__name__})"


def _fn_name(fn: Callable[..., Any]) -> str:
    return str(getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn))


def derive(
    values: list[RunValue],
    fn: Callable[..., Any],
    metrics: Sequence[str],
    configs: Sequence[tuple[Any, ...]],
    *,
    warn: bool = True,
) -> list[RunValue]:
    """Append the metrics ``fn(*metric_values, *config_args)`` computes for each (annotation, config, run).

    A scalar result is named after ``fn.__name__``; a ``(value, unit)`` tuple carries a unit; a mapping adds
    one metric per key. A result with no unit gives ``unit=None`` and one ``UserWarning`` (unless ``warn`` is
    false: the first-run check applies the same function without warning twice). A failed region (a NaN input)
    is not passed to ``fn``: it gets NaN for every metric ``fn`` returned for the call's other regions, in the
    order met, so its rows are the ones a region that ran has (one named after ``fn`` if no region ran).

    Raises:
        MeasurementError: ``fn`` raised.
        TransformError: ``fn`` returned something other than a number, a ``(number, unit)`` tuple with a str
            unit, or a mapping of str names to those.
        ConfigError: a derived metric is named like a measured one (their values would be pooled).
    """
    by_region: dict[tuple[str, int, int], dict[str, RunValue]] = defaultdict(dict)
    for v in values:
        by_region[(v.annotation, v.config, v.run)][v.metric] = v
    name = getattr(fn, "__name__", "derived")
    measured = {v.metric for v in values}
    derived: list[tuple[tuple[str, int, int], RunValue, list[tuple[str, float, str | None]] | None]] = []
    names: dict[str, None] = {}  # the derived metrics, in the order met
    warned = not warn
    for (ann, cfg, run_i), got in by_region.items():
        if not all(m in got for m in metrics):
            continue
        inputs = [got[m].value for m in metrics]
        if any(math.isnan(x) for x in inputs):  # a failed region: NaN for every derived metric, named below
            derived.append(((ann, cfg, run_i), got[metrics[0]], None))
            continue
        result = _call_derive(fn, name, inputs, configs[cfg], (ann, cfg, run_i))
        where = f"annotation {ann!r}, config {cfg} {tuple(configs[cfg])!r}, run {run_i}"
        triples = _derived(result, name, where, cfg)
        for metric, _, unit in triples:
            _check_derived(name, metric, unit, measured, warned)
            warned = warned or unit is None
            names[metric] = None
        derived.append(((ann, cfg, run_i), got[metrics[0]], triples))
    out = list(values)
    failed = [(metric, math.nan, None) for metric in names or (name,)]
    for (ann, cfg, run_i), first, made in derived:
        for metric, value, unit in failed if made is None else made:
            out.append(
                RunValue(
                    annotation=ann, config=cfg, run=run_i, metric=metric, value=value, unit=unit, kernel=first.kernel
                )
            )
    return out


def _call_derive(
    fn: Callable[..., Any], name: str, inputs: list[float], args: tuple[Any, ...], at: tuple[str, int, int]
) -> Any:
    """``fn(*inputs, *args)`` for a region that ran (no NaN input); a failure names the region it was called for."""
    try:
        return fn(*inputs, *args)
    except Exception as e:
        ann, cfg, run_i = at
        raise MeasurementError(
            f"derive_metric {name!r} raised {type(e).__name__}: {e} for annotation {ann!r}, config {cfg}, run {run_i}"
        ) from e


def _check_derived(name: str, metric: str, unit: str | None, measured: set[str], warned: bool) -> None:
    """Refuse a derived metric named like a measured one; warn (once, unless ``warned``) about a missing unit."""
    if metric in measured:
        raise ConfigError(
            f"derive_metric {name!r} returned a metric named {metric!r}, which is also measured; its values "
            "would be pooled with the measured ones. Give the derived metric its own name (return "
            f"{{'{metric}_derived': ...}}, or rename the function)"
        )
    if unit is None and not warned:
        warnings.warn(
            f"Derived metric '{metric}' does not have a unit specified. Return a tuple (value, unit) "
            "instead of just the value. np.nan will be added to the 'Unit' column in the dataframe. "
            "(nsightx warns once per call.)",
            UserWarning,
            stacklevel=4,
        )


_DERIVE_FORMS = (
    "it must return a number, a (number, unit) tuple with a str unit, or a dict of metric name (str) to "
    "either, e.g. return 2 * n**3 / t_ns / 1e3, 'TFLOP/s'"
)


def _derived(result: object, name: str, where: str, config: int) -> list[tuple[str, float, str | None]]:
    """The (metric, value, unit) triples of one ``derive_metric`` result, or a TransformError saying what is wrong."""

    def bad(problem: str) -> TransformError:
        return TransformError(
            f"derive_metric {name!r} returned {_show(result)} for {where}: {problem}; {_DERIVE_FORMS}",
            function=name,
            config=config,
            returned=result,
        )

    items = list(result.items()) if isinstance(result, Mapping) else [(name, result)]
    out: list[tuple[str, float, str | None]] = []
    for metric, item in items:
        if not isinstance(metric, str) or not metric:
            raise bad(f"the key {metric!r} is not a metric name")
        label = "" if metric == name and not isinstance(result, Mapping) else f"{metric!r}: "
        if isinstance(item, tuple):
            if len(item) != 2:
                raise bad(f"{label}a tuple must be (value, unit), this one has {len(item)} item(s)")
            value, unit = item
            if unit is not None and not isinstance(unit, str):
                raise bad(f"{label}the unit {unit!r} is of type {type(unit).__name__}, not a str")
        else:
            value, unit = item, None
        number = as_float(value)
        if number is None:
            raise bad(f"{label}the value {_show(value)} is not a number" if value is not result else "not a number")
        out.append((metric, number, unit))
    return out
