"""Reconcile two backends' times of the same sweep: where they differ, say why, from the data.

``nsightx reconcile A B`` (and :func:`reconcile`) matches the rows of two results of the same function by
(annotation, parameter values), takes each side's time metric (the first metric whose unit is ``ns``), and for each
row whose means differ by more than ``threshold_pct`` percent looks for the causes the results themselves show:

``serialized``
    One side ran each kernel alone (its environment says ``SerializesKernels``: ncu's kernel replay, with a cache
    flush before each kernel) and the region launched several kernels; the kernel whose mean moved most is named
    with both means.
``kernel_count``
    The two sides saw a different number of kernels in the region (their most frequent launch sequences).
``span_gaps``
    One side timed the whole region (a ``region`` record: CUDA events' span on the stream, the host's wall time),
    the other its kernels: the region's time includes the idle gaps between kernels and the launch latency.
    Where the kernel side recorded the region's span and kernel sum (CUPTI's ``span_ns``/``device_ns``), the gap
    is given in numbers.
``clocks``
    The mean measured SM clocks (``MeasuredSMClockMHz``) of the two sides differ by more than
    :data:`CLOCK_PCT` percent.
``cache``
    The two sides measured with different ``cache_control``.
``kernel``
    None of the above, but both sides have per-kernel times: the kernel whose mean moved most, with both means.

A row with none of these is ``unexplained``. Every sentence is built from the two results' numbers; nothing is
a fixed text about a backend.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from nsightx._api.kernel import ProfiledFunction
from nsightx._errors import CompareError, ConfigError
from nsightx._report.compare import resolve
from nsightx._report.noise import config_key
from nsightx._report.views import format_value
from nsightx._results.join import base_name
from nsightx.columns import MEASURED_SM_CLOCK, SERIALIZES_KERNELS

if TYPE_CHECKING:
    import pandas as pd

    from nsightx._results.profileresults import ProfileResults

DEFAULT_THRESHOLD_PCT = 5.0
"""Differences of means at or under this percentage are not explained."""
CLOCK_PCT = 2.0
"""Mean measured SM clocks further apart than this percentage are a cause."""
WHOLE_REGION = "region"


@dataclass
class Side:
    """One result's evidence about one (annotation, config) row."""

    backend: str
    metric: str
    unit: str | None
    values: list[float] = field(default_factory=list)
    kernels: dict[tuple[int, str], list[float]] = field(default_factory=lambda: defaultdict(list))
    """(launch order, base name) -> per-run kernel times of the time metric."""
    sequences: list[tuple[str, ...]] = field(default_factory=list)
    whole_region: bool = False
    span_ns: list[float] = field(default_factory=list)
    device_ns: list[float] = field(default_factory=list)
    clocks: list[float] = field(default_factory=list)
    serializes: bool = False
    cache_control: str = ""
    params: dict[str, Any] = field(default_factory=dict)
    """The row's parameter values by name (as this side's plan declares them)."""

    @property
    def mean(self) -> float:
        """Mean of the row's finite values."""
        return statistics.fmean(self.values) if self.values else math.nan

    @property
    def sequence(self) -> tuple[str, ...]:
        """The most frequent launch sequence of the region's kernels."""
        if not self.sequences:
            return ()
        counts = Counter(self.sequences)
        return max(counts, key=lambda s: counts[s])


RowKey = tuple[str, str, str]
"""(function, annotation, config by parameter name as JSON: :func:`nsightx._report.noise.config_key`, as compare)."""


def time_metric(res: ProfileResults) -> str:
    """A result's time metric: the first metric of its plan whose values are in ns."""
    units = {v.metric: v.unit for v in res.data.values}
    for m in [*res.data.plan.metrics, *units]:
        if units.get(m) == "ns":
            return m
    raise ConfigError(
        f"reconcile: {res.data.plan.function} [{res.backend}] has no time metric (unit ns); it holds "
        f"{sorted(units)}; reconcile compares the times of two backends"
    )


def _sides(res: ProfileResults) -> dict[RowKey, Side]:
    """The evidence of every (annotation, config) row of one result."""
    plan, metric = res.data.plan, time_metric(res)
    out: dict[RowKey, Side] = {}

    def side(annotation: str, config: int) -> Side:
        values = list(plan.configs[config])
        key = (plan.function, annotation, config_key(plan.params, values))
        if key not in out:
            out[key] = Side(res.backend, metric, None, serializes=bool(res.environment.get(SERIALIZES_KERNELS)))
            out[key].cache_control = plan.cache_control
            out[key].params = dict(zip(plan.params, values, strict=False))
        return out[key]

    for v in res.data.values:
        if v.metric == metric and math.isfinite(v.value):
            s = side(v.annotation, v.config)
            s.values.append(float(v.value))
            s.unit = v.unit
    _kernel_evidence(res, metric, side)
    return {k: s for k, s in out.items() if s.values}


def _kernel_evidence(res: ProfileResults, metric: str, side: Callable[[str, int], Side]) -> None:
    """Per-kernel times, launch sequences, region spans and measured clocks, into each row's :class:`Side`."""
    clocks = {
        (cv.config, cv.run): float(cv.value)
        for run in res.data.runs
        for cv in run.collectors
        if cv.name == MEASURED_SM_CLOCK
        and isinstance(cv.value, int | float)
        and not isinstance(cv.value, bool)
        and math.isfinite(cv.value)
    }
    for run in res.data.runs:
        seqs: dict[tuple[str, int], dict[int, str]] = defaultdict(dict)
        for rec in run.records:
            if rec.metric != metric or not math.isfinite(rec.value):
                continue
            if rec.kernel == WHOLE_REGION:
                side(rec.annotation, rec.config).whole_region = True
                continue
            name = base_name(rec.kernel)
            side(rec.annotation, rec.config).kernels[(rec.seq, name)].append(rec.value)
            seqs[(rec.annotation, rec.config)][rec.seq] = name
        for (ann, config), by_seq in seqs.items():
            side(ann, config).sequences.append(tuple(by_seq[s] for s in sorted(by_seq)))
        for reg in run.regions:
            if reg.failed or reg.config < 0:
                continue
            s = side(reg.annotation, reg.config)
            for attr, into in (("span_ns", s.span_ns), ("device_ns", s.device_ns)):
                value = reg.attributes.get(attr)
                if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
                    into.append(float(value))
            if (reg.config, reg.run) in clocks:
                s.clocks.append(clocks[(reg.config, reg.run)])


def _fmt(value: float, unit: str | None) -> str:
    return format_value(value, unit)


def _pct(a: float, b: float) -> float:
    """Percent change from ``a`` to ``b``; from 0 to anything else it is infinite (a 0 ns mean is no match for 1 ns)."""
    if a:
        return 100.0 * (b - a) / a
    return 0.0 if b == 0 else math.copysign(math.inf, b)


def _largest_kernel_move(a: Side, b: Side) -> tuple[str, float, float] | None:
    """The kernel (by launch order and name, in both sides) whose mean time differs most."""
    both = set(a.kernels) & set(b.kernels)
    if not both:
        return None
    key = max(both, key=lambda k: abs(statistics.fmean(b.kernels[k]) - statistics.fmean(a.kernels[k])))
    return key[1], statistics.fmean(a.kernels[key]), statistics.fmean(b.kernels[key])


def _cause_serialized(a: Side, b: Side) -> str | None:
    for s, other in ((a, b), (b, a)):
        if s.serializes and not other.serializes and len(s.sequence) > 1:
            text = (
                f"{s.backend} ran the region's {len(s.sequence)} kernels one at a time (kernel replay, a cache flush "
                f"before each); {other.backend} timed them as launched"
            )
            moved = _largest_kernel_move(other, s)
            if moved is not None:
                name, t_other, t_s = moved
                text += (
                    f"; {name} moved most: {_fmt(t_other, other.unit)} ({other.backend}) vs {_fmt(t_s, s.unit)} "
                    f"({s.backend}, {_pct(t_other, t_s):+.0f}%)"
                )
            return text
    return None


def _cause_kernel_count(a: Side, b: Side) -> str | None:
    if a.whole_region or b.whole_region or not a.sequence or not b.sequence or len(a.sequence) == len(b.sequence):
        return None
    return (
        f"{a.backend} saw {len(a.sequence)} kernel(s) {list(a.sequence)}, {b.backend} {len(b.sequence)} "
        f"{list(b.sequence)}"
    )


def _cause_span_gaps(a: Side, b: Side) -> str | None:
    for span_side, kernel_side in ((a, b), (b, a)):
        if not span_side.whole_region or kernel_side.whole_region or not kernel_side.kernels:
            continue
        text = (
            f"{span_side.backend} timed the whole region ({span_side.metric}: {_fmt(span_side.mean, span_side.unit)}), "
            f"{kernel_side.backend} the sum of its {len(kernel_side.sequence)} kernel(s) "
            f"({_fmt(kernel_side.mean, kernel_side.unit)})"
        )
        if kernel_side.span_ns and kernel_side.device_ns:
            span, busy = statistics.fmean(kernel_side.span_ns), statistics.fmean(kernel_side.device_ns)
            text += (
                f"; {kernel_side.backend} saw the kernels span {_fmt(span, 'ns')}, of which {_fmt(span - busy, 'ns')} "
                f"idle between them; the rest, {_fmt(span_side.mean - span, 'ns')}, is launch latency and timer "
                "overhead inside the span"
            )
        return text
    return None


def _cause_clocks(a: Side, b: Side) -> str | None:
    if not a.clocks or not b.clocks:
        return None
    ca, cb = statistics.fmean(a.clocks), statistics.fmean(b.clocks)
    if abs(_pct(ca, cb)) <= CLOCK_PCT:
        return None
    return f"SM clock differed: {ca:.0f} MHz ({a.backend}) vs {cb:.0f} MHz ({b.backend}, {_pct(ca, cb):+.1f}%)"


def _cause_cache(a: Side, b: Side) -> str | None:
    if a.cache_control == b.cache_control:
        return None
    return f"cache_control differed: {a.cache_control!r} ({a.backend}) vs {b.cache_control!r} ({b.backend})"


def _cause_kernel(a: Side, b: Side) -> str | None:
    moved = _largest_kernel_move(a, b)
    if moved is None:
        return None
    name, ta, tb = moved
    return f"{name} moved most: {_fmt(ta, a.unit)} ({a.backend}) vs {_fmt(tb, b.unit)} ({b.backend})"


CAUSES: Mapping[str, Callable[[Side, Side], str | None]] = {
    "serialized": _cause_serialized,
    "kernel_count": _cause_kernel_count,
    "span_gaps": _cause_span_gaps,
    "clocks": _cause_clocks,
    "cache": _cause_cache,
}
"""Cause code -> the rule that finds it and says it with the numbers (``kernel`` is the fallback)."""


def explain(a: Side, b: Side) -> tuple[list[str], str]:
    """The causes of a difference between two sides of one row, and the sentence that gives them."""
    found = [(code, text) for code, rule in CAUSES.items() if (text := rule(a, b)) is not None]
    if not found:
        text = _cause_kernel(a, b)
        found = [("kernel", text)] if text else [("unexplained", "no cause found in the data")]
    return [c for c, _ in found], "; ".join(t for _, t in found)


def measure_on(profiled: object, backends: Sequence[str], configs: object = None) -> list[ProfileResults]:
    """Run one decorated function once per backend, each with its natural time metric.

    Raises:
        ConfigError: not two backends, or ``profiled`` is not a function decorated with ``analyze.kernel``.
    """
    if not isinstance(profiled, ProfiledFunction):
        raise ConfigError(
            f"reconcile(..., backends=...) runs a function decorated with @nsightx.analyze.kernel, got "
            f"{type(profiled).__name__}; to read saved results, give two results and no backends"
        )
    names = list(backends) if not isinstance(backends, str) else [backends]
    if len(names) != 2 or not all(isinstance(n, str) for n in names):
        raise ConfigError(f"reconcile backends must be two backend names, e.g. ('cupti', 'ncu'); got {backends!r}")
    out = []
    for name in names:
        spec = profiled.spec.model_copy(update={"backend": name, "metrics": None, "counters": None})
        out.append(ProfiledFunction(profiled.fn, spec, configs=None)(configs=configs or profiled.configs))
    return out


def reconcile(
    a: object,
    b: object = None,
    *,
    backends: Sequence[str] | None = None,
    configs: object = None,
    threshold_pct: float = DEFAULT_THRESHOLD_PCT,
) -> pd.DataFrame:
    """Match two results' time rows and explain each difference above ``threshold_pct``.

    Args:
        a: A ``ProfileResults``, a saved result file, or a folder of them (e.g. measured with cupti); with
            ``backends``, a function decorated with ``analyze.kernel``, run once on each backend.
        b: The same sweep measured with another backend (ncu, events); ``None`` with ``backends``.
        backends: Two backend names to run ``a`` on (e.g. ``("cupti", "ncu")``).
        configs: With ``backends``: the configs to run, when the decorator gave none.
        threshold_pct: Differences of the means up to this percentage are listed as ``within threshold``.

    Returns:
        One row per (function, annotation, config) in both: ``Function, Annotation, <params>, BackendA,
        BackendB, MetricA, MetricB, MeanA, MeanB, DiffPct, KernelsA, KernelsB, Causes, Explanation``. A
        parameter column whose values are of several types (``1`` and ``1.0``, or a row of a function without
        that parameter: ``None``) keeps them as given, so two rows never read as one config. ``DiffPct`` from a
        mean of 0 to another is infinite.

    Raises:
        ConfigError: a bad threshold, or a result without a time metric.
        CompareError: no row is in both results.
    """
    import pandas as pd

    if not (isinstance(threshold_pct, int | float) and threshold_pct >= 0 and math.isfinite(threshold_pct)):
        raise ConfigError(f"threshold_pct must be a number >= 0 (percent), got {threshold_pct!r}")
    if backends is not None:
        if b is not None:
            raise ConfigError("reconcile: give two results, or one decorated function and backends=, not both")
        a, b = measure_on(a, backends, configs)
    elif b is None:
        raise ConfigError("reconcile needs two results (or a decorated function and backends=('cupti', 'ncu'))")
    ra, rb = resolve(a), resolve(b)
    sa = {k: s for r in ra for k, s in _sides(r).items()}
    sb = {k: s for r in rb for k, s in _sides(r).items()}
    rows = [_row(k, sa[k], sb[k], threshold_pct) for k in sa if k in sb]
    if not rows:
        raise CompareError(
            f"reconcile: no (function, annotation, config) is in both results (A holds {len(sa)} row(s), B "
            f"{len(sb)}); measure the same sweep with both backends"
        )
    names = list(dict.fromkeys(p for r in [*ra, *rb] for p in r.data.plan.params))
    frame = pd.DataFrame(rows, columns=["Function", "Annotation", *names, *_COLUMNS])
    for name in names:
        if len({type(row.get(name)) for row in rows}) > 1:
            frame[name] = pd.Series([row.get(name) for row in rows], index=frame.index, dtype=object)
    return frame


_COLUMNS: tuple[str, ...] = ("BackendA", "BackendB", "MetricA", "MetricB", "MeanA", "MeanB", "DiffPct")
_COLUMNS += ("KernelsA", "KernelsB", "Causes", "Explanation")


def _row(key: RowKey, a: Side, b: Side, threshold_pct: float) -> dict[str, Any]:
    diff = _pct(a.mean, b.mean)
    causes, text = explain(a, b) if abs(diff) > threshold_pct else ([], "within threshold")
    return {
        "Function": key[0],
        "Annotation": key[1],
        **a.params,
        "BackendA": a.backend,
        "BackendB": b.backend,
        "MetricA": a.metric,
        "MetricB": b.metric,
        "MeanA": a.mean,
        "MeanB": b.mean,
        "DiffPct": diff,
        "KernelsA": "region" if a.whole_region else len(a.sequence),
        "KernelsB": "region" if b.whole_region else len(b.sequence),
        "Causes": ",".join(causes),
        "Explanation": text,
    }


def render_text(frame: pd.DataFrame) -> str:
    """One line per row: the config, both means, the difference and its explanation."""
    fixed = {"Function", "Annotation", *_COLUMNS}
    params = [c for c in frame.columns if c not in fixed]
    lines = []
    for _, r in frame.iterrows():
        config = ", ".join(f"{p}={r[p]}" for p in params if r[p] is not None)
        lines.append(
            f"{r['Function']} {r['Annotation']} ({config}): {r['BackendA']} {_fmt(r['MeanA'], 'ns')} vs "
            f"{r['BackendB']} {_fmt(r['MeanB'], 'ns')} ({r['DiffPct']:+.1f}%): {r['Explanation']}"
        )
    return "\n".join(lines)
