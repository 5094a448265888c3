"""``nsightx.reconcile`` against a naive reference written from its docs (docs/api.md, the module docstring).

Two results of one sweep are built through the real code from random sides: per row (annotation, config) either
kernel records (a random launch sequence, its per-kernel times) or one ``region`` record for the whole region,
runs that are NaN or infinite, CUPTI's ``span_ns``/``device_ns`` on some regions, ``MeasuredSMClockMHz`` per run
(sometimes NaN), ``SerializesKernels``, ``cache_control``, a time metric that is not the plan's first metric, and
parameters with look-alike values (``1``, ``1.0``, ``"1"``, ``True``) declared in either order. The reference
says, from the docs alone, which rows are matched (function, annotation, parameter values by name; a value's
type counts as it does for ``nsightx.compare``), each side's mean of finite values, the difference, and which
causes each row above the threshold gets with which numbers; the frame and the CLI text are compared with it.
"""

from __future__ import annotations

import math
import os
import statistics
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nsightx import CompareError
from nsightx._api.reconcile import reconcile
from nsightx._report.views import format_value
from nsightx._results.profileresults import ProfileResults, build_results
from nsightx._results.records import CollectorValue, Record, RegionRun, RunRecords
from nsightx._results.schema import PlanInfo
from nsightx.cli import main

EXAMPLES = int(os.environ.get("NSIGHTX_REFERENCE_EXAMPLES", "40"))
"""Examples per property (more while hunting: ``NSIGHTX_REFERENCE_EXAMPLES=400``)."""

TIMES = ("gpu__time_duration.sum", "region__stream_span_duration")
BYTES = "dram__bytes.sum"
ANNOTATIONS = ("mm", "add")
KERNELS = ("gemm", "reduce", "tail")
LOOKALIKES = (1, 1.0, "1", True, 2, "2")
CLOCK = "MeasuredSMClockMHz"


@dataclass
class Row:
    """One (annotation, config) of one side."""

    whole_region: bool
    kernels: tuple[str, ...]
    runs: list[list[float]]  # per run: per kernel (or the whole region) time; a run's values are all finite or not
    span: float | None = None
    device: float | None = None


@dataclass
class Side:
    """One result, as drawn."""

    backend: str
    params: tuple[str, ...]
    configs: list[dict[str, Any]]  # by parameter name
    metrics: tuple[str, ...]
    serializes: bool
    cache: str
    clocks: dict[tuple[int, int], float] = field(default_factory=dict)  # (config, run) -> clock read
    rows: dict[tuple[str, int], Row] = field(default_factory=dict)
    function: str = "f"

    @property
    def metric(self) -> str:
        return next(m for m in self.metrics if m in TIMES)


TIME_VALUES = st.one_of(st.integers(0, 3).map(float), st.integers(100, 10**6).map(lambda i: i + 0.25))


@st.composite
def sides(draw: Any) -> tuple[Side, Side, float]:
    both_params = draw(st.booleans())
    names = ("n", "m") if both_params else ("n",)
    pool = [dict(zip(names, v, strict=True)) for v in _products(names)]
    out = []
    for backend in draw(st.sampled_from([("cupti", "ncu"), ("events", "cupti"), ("cupti", "cupti")])):
        params = tuple(draw(st.permutations(names)))
        configs = draw(st.lists(st.sampled_from(pool), min_size=1, max_size=4, unique_by=lambda c: _tagged(c)))
        if out and draw(st.integers(0, 4)):  # mostly the same sweep, in another order, a config more or less
            shared = [c for c in draw(st.permutations(out[0].configs)) if draw(st.integers(0, 4))]
            configs = [*shared, *(c for c in configs[:1] if _tagged(c) not in {_tagged(s) for s in shared})]
            configs = configs or out[0].configs[:1]
        first = draw(st.sampled_from([(TIMES[0],), (BYTES, TIMES[0]), (TIMES[1], TIMES[0])]))
        side = Side(backend, params, configs, first, draw(st.booleans()), draw(st.sampled_from(["all", "none"])))
        runs = draw(st.integers(1, 3))
        for c in range(len(configs)):
            for r in range(runs):
                clock = draw(st.sampled_from([None, 1980.0, 1700.0, 1995.0, math.nan]))
                if clock is not None:
                    side.clocks[(c, r)] = clock
            for ann in ANNOTATIONS[: draw(st.integers(1, 2))]:
                whole = draw(st.integers(0, 3)) == 0
                kernels = () if whole else tuple(draw(st.lists(st.sampled_from(KERNELS), min_size=1, max_size=3)))
                row = Row(whole, kernels, [])
                for _ in range(runs):
                    bad = draw(st.sampled_from([None, None, None, None, math.nan, math.inf]))
                    n = 1 if whole else len(kernels)
                    row.runs.append([bad] * n if bad is not None else [draw(TIME_VALUES) for _ in range(n)])
                finite = [run for run in row.runs if all(math.isfinite(v) for v in run)]
                if not whole and finite and draw(st.booleans()):
                    row.device = sum(statistics.fmean(k) for k in zip(*finite, strict=True)) or 1.0
                    row.span = row.device + draw(st.sampled_from([0.0, 500.0, 1234.5]))
                side.rows[(ann, c)] = row
        out.append(side)
    if draw(st.integers(0, 15)) == 0:
        out[1].function = "g"
    return out[0], out[1], draw(st.sampled_from([0.0, 5.0, 50.0]))


def _products(names: tuple[str, ...]) -> list[tuple[Any, ...]]:
    if len(names) == 1:
        return [(v,) for v in LOOKALIKES]
    return [(a, b) for a in LOOKALIKES[:4] for b in (1, "1", 2.0)]


def _tagged(config: dict[str, Any]) -> tuple[Any, ...]:
    """A config's identity: its values by name, each with its type (1, 1.0, "1" and True are four configs)."""
    return tuple(sorted((k, type(v).__name__, v) for k, v in config.items()))


def build(side: Side) -> ProfileResults:
    """The side as the backends write it, through ``build_results``."""
    runs_n = max(len(r.runs) for r in side.rows.values())
    out = []
    for c in range(len(side.configs)):
        for r in range(runs_n):
            records, regions = [], []
            for (ann, cc), row in side.rows.items():
                if cc != c:
                    continue
                attrs = {"span_ns": row.span, "device_ns": row.device} if row.span is not None else {}
                regions.append(RegionRun(annotation=ann, config=c, run=r, host_ns=1000, attributes=attrs))
                names = ("region",) if row.whole_region else row.kernels
                for seq, (kernel, value) in enumerate(zip(names, row.runs[r], strict=True)):
                    for metric in side.metrics:
                        unit = "byte" if metric == BYTES else "ns"
                        v = value if metric == side.metric else value * 3 + 7
                        rec = Record(annotation=ann, config=c, run=r, kernel=kernel, metric=metric, value=v, unit=unit)
                        records.append(rec.model_copy(update={"seq": seq}))
            clocks = tuple(
                CollectorValue(name=CLOCK, scope="run", config=c, run=r, value=side.clocks[(c, r)])
                for _ in [0]
                if (c, r) in side.clocks
            )
            out.append(RunRecords(config=c, run=r, records=tuple(records), regions=tuple(regions), collectors=clocks))
    plan = PlanInfo(
        function=side.function,
        params=side.params,
        configs=tuple(tuple(cfg[p] for p in side.params) for cfg in side.configs),
        runs=runs_n,
        warmup=0,
        metrics=side.metrics,
        backend=side.backend,
        cache_control=side.cache,
        clock_control="none",
        replay_mode="kernel",
    )
    env = {"SerializesKernels": True} if side.serializes else {}
    return build_results(plan, out, env, combine=lambda a, b: a + b)


@dataclass
class Evidence:
    """What the docs let one side say about one row."""

    side: Side
    row: Row
    config: int

    @property
    def finite_runs(self) -> list[list[float]]:
        return [run for run in self.row.runs if all(math.isfinite(v) for v in run)]

    @property
    def mean(self) -> float:
        return statistics.fmean(sum(run) for run in self.finite_runs)

    @property
    def kernel_means(self) -> dict[tuple[int, str], float]:
        if self.row.whole_region:
            return {}
        columns = list(zip(*self.finite_runs, strict=True))
        return {(i, k): statistics.fmean(columns[i]) for i, k in enumerate(self.row.kernels)}

    @property
    def clock(self) -> float | None:
        reads = [self.side.clocks.get((self.config, r), math.nan) for r in range(len(self.row.runs))]
        finite = [c for c in reads if math.isfinite(c)]
        return statistics.fmean(finite) if finite else None


def _pct(a: float, b: float) -> float:
    if a == 0:
        return 0.0 if b == 0 else math.inf
    return 100.0 * (b - a) / a


def _moves(a: Evidence, b: Evidence) -> list[tuple[str, float, float]]:
    """Every kernel (same launch order and name on both sides) whose mean moved most (ties: any)."""
    ka, kb = a.kernel_means, b.kernel_means
    both = set(ka) & set(kb)
    if not both:
        return []
    top = max(abs(kb[k] - ka[k]) for k in both)
    return [(k[1], ka[k], kb[k]) for k in both if abs(kb[k] - ka[k]) == top]


def expected_causes(a: Evidence, b: Evidence) -> tuple[list[str], list[list[str]]]:
    """The documented causes, and for each the texts (any one of a list) it must hold."""
    causes: list[str] = []
    texts: list[list[str]] = []
    ser = [
        (s, o) for s, o in ((a, b), (b, a)) if s.side.serializes and not o.side.serializes and len(s.row.kernels) > 1
    ]
    if ser:
        s, o = ser[0]
        causes.append("serialized")
        moves = _moves(o, s)
        texts.append([f"{s.side.backend} ran the region's {len(s.row.kernels)} kernels one at a time"])
        if moves:
            texts.append(
                [
                    f"{n} moved most: {format_value(x, 'ns')} ({o.side.backend}) vs {format_value(y, 'ns')}"
                    for n, x, y in moves
                ]
            )
    if not a.row.whole_region and not b.row.whole_region and len(a.row.kernels) != len(b.row.kernels):
        causes.append("kernel_count")
        texts.append([f"{a.side.backend} saw {len(a.row.kernels)} kernel(s) {list(a.row.kernels)}"])
    gaps = [(s, k) for s, k in ((a, b), (b, a)) if s.row.whole_region and not k.row.whole_region]
    if gaps:
        s, k = gaps[0]
        causes.append("span_gaps")
        texts.append([f"{s.side.backend} timed the whole region ({s.side.metric}: {format_value(s.mean, 'ns')})"])
        if k.row.span is not None:
            texts.append([f"saw the kernels span {format_value(k.row.span, 'ns')}"])
    ca, cb = a.clock, b.clock
    if ca is not None and cb is not None and abs(_pct(ca, cb)) > 2.0:
        causes.append("clocks")
        texts.append([f"SM clock differed: {ca:.0f} MHz ({a.side.backend}) vs {cb:.0f} MHz"])
    if a.side.cache != b.side.cache:
        causes.append("cache")
        texts.append([f"cache_control differed: {a.side.cache!r} ({a.side.backend})"])
    if not causes:
        moves = _moves(a, b)
        if moves:
            causes.append("kernel")
            texts.append(
                [
                    f"{n} moved most: {format_value(x, 'ns')} ({a.side.backend}) vs "
                    f"{format_value(y, 'ns')} ({b.side.backend})"
                    for n, x, y in moves
                ]
            )
        else:
            causes.append("unexplained")
            texts.append(["no cause found in the data"])
    return causes, texts


def expected_rows(a: Side, b: Side) -> dict[tuple[Any, ...], tuple[Evidence, Evidence]]:
    """Rows in both results with a finite value on each side, keyed by (annotation, tagged config)."""

    def evidence(side: Side) -> dict[tuple[Any, ...], Evidence]:
        out = {}
        for (ann, c), row in side.rows.items():
            ev = Evidence(side, row, c)
            if ev.finite_runs:
                out[(side.function, ann, _tagged(side.configs[c]))] = ev
        return out

    ea, eb = evidence(a), evidence(b)
    return {k: (ea[k], eb[k]) for k in ea if k in eb}


def _plain(v: Any) -> Any:
    return v.item() if hasattr(v, "item") else v


def check(a: Side, b: Side, threshold: float, tmp: Any = None) -> None:
    ra, rb = build(a), build(b)
    want = expected_rows(a, b)
    if not want:
        with pytest.raises(CompareError):
            reconcile(ra, rb, threshold_pct=threshold)
        return
    frame = reconcile(ra, rb, threshold_pct=threshold)
    got = {}
    for row in frame.to_dict("records"):
        config = {p: _plain(row[p]) for p in a.params}
        got[(row["Function"], row["Annotation"], _tagged(config))] = row
    assert len(got) == len(frame)
    assert sorted(got, key=repr) == sorted(want, key=repr)
    for key, (ea, eb) in want.items():
        row = got[key]
        assert (row["BackendA"], row["BackendB"]) == (a.backend, b.backend)
        assert (row["MetricA"], row["MetricB"]) == (a.metric, b.metric)
        assert math.isclose(row["MeanA"], ea.mean, rel_tol=1e-12) and math.isclose(row["MeanB"], eb.mean, rel_tol=1e-12)
        diff = _pct(ea.mean, eb.mean)
        assert row["DiffPct"] == diff or math.isclose(row["DiffPct"], diff, rel_tol=1e-9, abs_tol=1e-9), (key, row)
        assert row["KernelsA"] == ("region" if ea.row.whole_region else len(ea.row.kernels))
        assert row["KernelsB"] == ("region" if eb.row.whole_region else len(eb.row.kernels))
        if abs(diff) <= threshold:
            assert (row["Causes"], row["Explanation"]) == ("", "within threshold"), (key, row)
            continue
        causes, texts = expected_causes(ea, eb)
        assert row["Causes"] == ",".join(causes), (key, row)
        for options in texts:
            assert any(t in row["Explanation"] for t in options), (key, options, row["Explanation"])
    if tmp is not None:
        _check_cli(frame, ra, rb, threshold, tmp)


def _check_cli(frame: Any, ra: ProfileResults, rb: ProfileResults, threshold: float, tmp: Any) -> None:
    """The CLI prints one line per row: function, annotation, the row's own parameters, both means, the difference."""
    import contextlib
    import io

    pa, pb = ra.save(tmp / "a.json"), rb.save(tmp / "b.json")
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(["reconcile", str(pa), str(pb), "--threshold", str(threshold)]) == 0
    lines = buf.getvalue().splitlines()
    assert len(lines) == len(frame)
    for line, row in zip(lines, frame.to_dict("records"), strict=True):
        config = ", ".join(f"{p}={_plain(row[p])}" for p in ra.data.plan.params)
        head = f"{row['Function']} {row['Annotation']} ({config}): {row['BackendA']} {format_value(row['MeanA'], 'ns')}"
        assert line.startswith(head), (line, head)
        assert line.endswith(row["Explanation"])


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture],
)
@given(drawn=sides())
def test_reconcile_matches_the_naive_reference(drawn: tuple[Side, Side, float], tmp_path: Any) -> None:
    check(*drawn, tmp=tmp_path)


def _one(backend: str, params: tuple[str, ...], configs: list[dict[str, Any]], value: float, **kw: Any) -> Side:
    """A side whose every row is one kernel ``gemm`` at ``value`` ns in one run."""
    side = Side(backend, params, configs, (TIMES[0],), False, "all", **kw)
    side.rows = {("mm", c): Row(False, ("gemm",), [[value]]) for c in range(len(configs))}
    return side


def test_rows_match_by_parameter_name_not_position():
    a = _one("cupti", ("n", "m"), [{"n": 1, "m": 2}, {"n": 2, "m": 1}], 100.0)
    a.rows[("mm", 1)] = Row(False, ("gemm",), [[300.0]])  # n=2, m=1 takes 300 ns
    b = _one("ncu", ("m", "n"), [{"n": 2, "m": 1}, {"n": 1, "m": 2}], 100.0)
    b.rows[("mm", 0)] = Row(False, ("gemm",), [[300.0]])  # the same sweep, parameters declared the other way
    frame = reconcile(build(a), build(b))
    got = {(r["n"], r["m"]): (r["MeanA"], r["MeanB"], r["Causes"]) for r in frame.to_dict("records")}
    assert got == {(1, 2): (100.0, 100.0, ""), (2, 1): (300.0, 300.0, "")}  # was paired by position: +200%, -67%


def test_a_nan_clock_read_is_no_clock_cause_and_a_zero_mean_is_not_within_threshold():
    a = _one("cupti", ("n",), [{"n": 1}], 100.0, clocks={(0, 0): math.nan})
    b = _one("ncu", ("n",), [{"n": 1}], 200.0, clocks={(0, 0): 1980.0})
    (row,) = reconcile(build(a), build(b)).to_dict("records")
    assert row["Causes"] == "kernel" and "nan" not in row["Explanation"]  # was "SM clock differed: nan MHz"
    zero = _one("host", ("n",), [{"n": 1}], 0.0)
    (row,) = reconcile(build(zero), build(b)).to_dict("records")
    assert row["DiffPct"] == math.inf and row["Causes"] == "kernel"  # was NaN and "within threshold"


def test_look_alike_parameter_values_stay_apart_in_the_frame_and_the_text(tmp_path):
    a = _one("cupti", ("n",), [{"n": 1}, {"n": 1.0}], 100.0)
    frame = reconcile(build(a), build(_one("ncu", ("n",), [{"n": 1.0}, {"n": 1}], 100.0)))
    assert [(type(v), v) for v in frame["n"]] == [(int, 1), (float, 1.0)]  # was 1.0 twice
    check(a, _one("ncu", ("n",), [{"n": 1.0}, {"n": 1}], 100.0), 5.0, tmp_path)
