"""The ncu backend's report reading and merging against a naive reference, on random reports (CPU only).

A random report is built as data: ranges of actions (kernels with mangled and demangled names, range and graph
results, a workload kind the reader does not know), each with NVTX state (the ``nsightx`` domain holding the
region's range among push/pop and start/end ranges, foreign names in that domain, look-alike names in other
domains, no state at all) and metrics (requested ones present, missing, without a value or string-valued; deep
ones numeric, string-valued and device attributes; units as the committed H200 reports write them and the clock
units :mod:`nsightx_ncu._report` names). A double of NVIDIA's ``ncu_report`` module (the library boundary)
serves it to the real :func:`~nsightx_ncu._reader.read_report`; the actions make the JSON round trip the reader
child makes, and the real :func:`~nsightx_ncu._report.merge_runs` and :func:`~nsightx_ncu._report.environment`
turn them into records.

The reference reads docs/backends.md ("How it works", "What the result holds") and the module docstrings: a
range name is ``<annotation>|config=<i>|run=<j>`` with ``%``, ``|``, ``/`` and ``@`` percent-escaped in the
annotation, the innermost of an action's ``nsightx`` ranges names its region, one record per (annotation,
config, run, kernel, metric) in launch order (``seq``), ``nsecond`` written ``ns``, a missing metric NaN with no
unit, ``Kernel="range"`` under range replay, every numeric non-device metric after the requested ones when deep
(sorted: the docs do not say the order, the code's is compared), a failed region without records, rated clocks
in kHz and the measured SM clock as a run's mean in MHz (0.1) and the call's mean in kHz. Where the docs are
silent, nothing is compared: the kernel count of a failed region, and a string value of a requested metric (its
record is compared only when the string is no number in any spelling). A clock in a unit other than Hz, kHz,
MHz, GHz or cycle per second, msecond, usecond or nsecond (or none: kHz, as CUDA's device attributes) is no
clock: nothing tells its scale, and a guess would be a silently wrong number. A kernel is named by ncu's default
name base (``action.name()``), as nsight-python names it and matches ``ignore_kernel_list``.

``NSIGHTX_NCU_REFERENCE_EXAMPLES`` sets how many reports run (default 300; 5000 while hunting).
"""

from __future__ import annotations

import json
import math
import os
import random
import sys
import types
from dataclasses import dataclass, field
from typing import Any

import pytest
from nsightx_ncu._command import parse_range_name, range_name
from nsightx_ncu._reader import Action, read_report
from nsightx_ncu._report import environment, merge_runs

from nsightx._results.records import CollectorValue, RegionRun, RunRecords
from nsightx.ext import RegionId

EXAMPLES = int(os.environ.get("NSIGHTX_NCU_REFERENCE_EXAMPLES", "300"))

STRING, DOUBLE, FLOAT, UINT64 = 2, 4, 3, 6
KERNEL_T, RANGE_T, GRAPH_T, OTHER_T = 0, 1, 2, 9
FUNCTION, DEMANGLED, MANGLED = 0, 1, 2  # ncu_report's IAction.NameBase_*; name() defaults to FUNCTION
CLOCK = "gpc__cycles_elapsed.avg.per_second"
REQUESTABLE = (
    ("gpu__time_duration.sum", ("ns", "nsecond", "usecond", "msecond", "second")),
    ("dram__bytes_read.sum", ("byte", "Kbyte")),
    ("sm__throughput.avg.pct_of_peak_sustained_elapsed", ("%",)),
    ("smsp__inst_executed.sum", ("inst", "")),
    (CLOCK, ("hz", "Hz", "khz", "MHz", "ghz", "cycle/second", "cycle/msecond", "cycle/usecond", "cycle/nsecond")),
    (CLOCK, ("cycle/ns", "Mcycle/second", "cycle", "%")),  # units no doc names: no clock rather than a guess
)
HZ = {"hz": 1.0, "khz": 1e3, "mhz": 1e6, "ghz": 1e9}
PER = {"second": 1.0, "msecond": 1e3, "usecond": 1e6, "nsecond": 1e9}
STALE = "stale|config=0|run=0"
NAMES = (  # (function name base, demangled name); the function base is what nsight-python shows and matches
    ("gemm", "void gemm<float>(float*, int)"),
    ("vectorized_elementwise_kernel", "void at::native::vectorized_elementwise_kernel<4, F>(int, F)"),
    ("cupy_add__float32", "cupy_add__float32"),
    ("", "k"),
)
ANNOTATION_CHARS = "ab Z09_-.%|/@:=#?&+~!'\"()[]{}\\\tüé中\u2028"


# --- the double of ncu_report --------------------------------------------------------------------------------


@dataclass
class _Metric:
    value: Any
    unit_s: str | None
    kind_: int
    present: bool = True

    def has_value(self) -> bool:
        return self.present

    def kind(self) -> int:
        return self.kind_

    def unit(self) -> str | None:
        return self.unit_s

    def as_string(self) -> str:
        return str(self.value)

    def as_double(self) -> float:
        return float(self.value)


@dataclass
class FakeDomain:
    name_: str
    push_pop: list[str] | None
    start_end: list[str] | None

    def name(self) -> str:
        return self.name_

    def push_pop_ranges(self) -> list[str] | None:
        return self.push_pop

    def start_end_ranges(self) -> list[str] | None:
        return self.start_end


@dataclass
class FakeState:
    domains_: dict[int, FakeDomain | None]

    def domains(self) -> list[int]:
        return list(self.domains_)

    def domain_by_id(self, i: int) -> FakeDomain | None:
        return self.domains_[i]


@dataclass
class FakeAction:
    mangled: str
    demangled: str
    function: str
    workload: int
    state: FakeState | None
    metrics: dict[str, _Metric]

    def name(self, base: int = FUNCTION) -> str:
        return {FUNCTION: self.function, DEMANGLED: self.demangled, MANGLED: self.mangled}[base]

    def workload_type(self) -> int:
        return self.workload

    def nvtx_state(self) -> FakeState | None:
        return self.state

    def metric_names(self) -> list[str]:
        return list(self.metrics)

    def metric_by_name(self, name: str) -> _Metric | None:
        return self.metrics.get(name)


@dataclass
class FakeRange:
    actions: list[FakeAction]

    def num_actions(self) -> int:
        return len(self.actions)

    def action_by_idx(self, i: int) -> FakeAction:
        return self.actions[i]


@dataclass
class FakeContext:
    ranges: list[FakeRange]

    def num_ranges(self) -> int:
        return len(self.ranges)

    def range_by_idx(self, i: int) -> FakeRange:
        return self.ranges[i]


def fake_module(reports: dict[str, FakeContext]) -> types.ModuleType:
    """A module with the parts of ``ncu_report`` the reader uses, serving ``reports`` by path."""
    mod = types.ModuleType("ncu_report")
    mod.IMetric = types.SimpleNamespace(ValueKind_STRING=STRING)  # type: ignore[attr-defined]
    mod.IAction = types.SimpleNamespace(  # type: ignore[attr-defined]
        WorkloadType_KERNEL=KERNEL_T,
        WorkloadType_RANGE=RANGE_T,
        WorkloadType_GRAPH=GRAPH_T,
        NameBase_FUNCTION=FUNCTION,
        NameBase_DEMANGLED=DEMANGLED,
        NameBase_MANGLED=MANGLED,
    )
    mod.load_report = reports.__getitem__  # type: ignore[attr-defined]
    return mod


# --- random reports -------------------------------------------------------------------------------------------


@dataclass
class Program:
    """A random report with the worker's runs and the requested metrics."""

    context: FakeContext
    runs: list[RunRecords]
    metrics: tuple[str, ...]
    deep: bool
    # per action, in report order: the region it truly belongs to (None: no identity of ours)
    truth: list[RegionId | None] = field(default_factory=list)


def encode(annotation: str) -> str:
    """The docs' range name: ``%``, ``|``, ``/`` and ``@`` percent-escaped, everything else as it is."""
    escaped = "".join(f"%{ord(c):02X}" if c in "%|/@" else c for c in annotation)
    return escaped


def annotation(rng: random.Random) -> str:
    return "".join(rng.choice(ANNOTATION_CHARS) for _ in range(rng.randint(0, 8)))


def number_string(rng: random.Random) -> str:
    return rng.choice(["1,234.5", "n/a", "", "12", " 7 ", "1_000", "nan", "inf", "-3e2", "(!)", "N/A", "0x10"])


def metric_value(rng: random.Random, units: tuple[str, ...]) -> _Metric:
    unit = rng.choice(units)
    kind = rng.choice((DOUBLE, DOUBLE, FLOAT, UINT64))
    if kind == UINT64:
        value: Any = float(rng.randint(0, 2**40))
    else:
        value = rng.choice([rng.uniform(0, 1e4), rng.uniform(0, 3), 0.0, float(rng.randint(1, 10**6))])
    if unit.startswith("cycle/") or unit.lower() in HZ:
        scale = PER.get(unit.split("/", 1)[-1], HZ.get(unit.lower(), 1.0))
        value = rng.uniform(0.8e9, 2.1e9) / scale if rng.random() > 0.05 else rng.choice((math.inf, math.nan))
    roll = rng.random()
    if roll < 0.05:
        return _Metric(value, unit, kind, present=False)
    if roll < 0.1:
        return _Metric(number_string(rng), rng.choice(("", unit)), STRING)
    return _Metric(value, rng.choice((unit, unit, None)) if unit == "" else unit, kind)


def ranges_for(rng: random.Random, region: RegionId | None, kind: str) -> tuple[FakeState | None, RegionId | None]:
    """NVTX state around an action; returns the region the docs say it belongs to."""
    if rng.random() < 0.05:
        return None, None
    own = [] if region is None else [range_name(region) if rng.random() < 0.5 else encode(region.annotation)]
    if own and not own[0].endswith(f"|config={region.config}|run={region.run}"):  # type: ignore[union-attr]
        own = [f"{own[0]}|config={region.config}|run={region.run}"]  # type: ignore[union-attr]
    # a stale identity of ours further out (the docs' "innermost" range wins), and names that are not ours
    foreign = rng.choice([[], ["outer"], ["a|config=x|run=1"], ["a|run=1|config=2"], ["matmul"], [STALE]])
    ours_first = foreign + own
    other = [range_name(RegionId(annotation="other", config=9, run=9))]
    domains: dict[int, FakeDomain | None] = {}
    if rng.random() < 0.3:
        domains[0] = FakeDomain("", other, other)
    if rng.random() < 0.2:
        domains[1] = None
    if rng.random() < 0.3:
        domains[2] = FakeDomain("nsightx-other", other, None)
    if kind == "push_pop":
        domains[5] = FakeDomain("nsightx", ours_first, rng.choice([None, []]))
    else:
        domains[5] = FakeDomain("nsightx", rng.choice([None, [], foreign]), ours_first)
    items = list(domains.items())
    rng.shuffle(items)
    if own:
        return FakeState(dict(items)), region
    return FakeState(dict(items)), (parse_range_name(STALE) if foreign == [STALE] else None)


def program(rng: random.Random) -> Program:
    metrics = tuple(rng.sample([m for m, _ in REQUESTABLE[:-1]], rng.randint(0, 4)))
    units = dict(REQUESTABLE[:-1])
    if rng.random() < 0.1:
        units[CLOCK] = REQUESTABLE[-1][1]
    deep = rng.random() < 0.3
    annotations = list(dict.fromkeys(annotation(rng) for _ in range(rng.randint(1, 3))))
    kind = rng.choice(("start_end", "push_pop"))
    replay = rng.choice((KERNEL_T, KERNEL_T, RANGE_T))
    configs, nruns = rng.randint(1, 3), rng.randint(1, 3)
    runs, actions, truth = [], [], []
    gpu = rng.choice(["NVIDIA H200", "NVIDIA H100 80GB HBM3"])
    for c in range(configs):
        for r in range(nruns):
            failed = {a for a in annotations if rng.random() < 0.15}
            complete = rng.random() > 0.1
            if complete:
                regs = tuple(
                    RegionRun(annotation=a, config=c, run=r, host_ns=1000, failed=a in failed) for a in annotations
                )
                collectors = ()
                if rng.random() < 0.1:
                    collectors = (CollectorValue(name="MeasuredSMClockMHz", scope="run", config=c, run=r, value=1.5),)
                runs.append(RunRecords(config=c, run=r, regions=regs, collectors=collectors))
            for a in annotations:
                region = RegionId(annotation=a, config=c, run=r)
                n = 1 if replay == RANGE_T else rng.choice((0, 1, 1, 2, 3))
                for k in range(n):
                    actions.append((region, k))
    if rng.random() < 0.3:
        runs.insert(0, RunRecords(config=-1, run=0))
    fakes = []
    for region, k in actions if rng.random() < 0.95 else [*actions, (None, 0)]:
        state, owner = ranges_for(rng, region, kind)
        truth.append(owner)
        mets: dict[str, _Metric] = {}
        names = [m for m, _ in REQUESTABLE[:-1]]
        rng.shuffle(names)
        for m in names:
            if m in metrics or deep or rng.random() < 0.2:
                if rng.random() > 0.1:
                    mets[m] = metric_value(rng, units[m])
        if deep:
            for _ in range(rng.randint(0, 4)):
                mets[f"deep__m{rng.randint(0, 9)}.sum"] = metric_value(rng, ("byte", "", "cycle"))
            if rng.random() < 0.3:
                mets["launch__func_cache_config"] = _Metric("CachePreferNone", "", STRING)
        if rng.random() < 0.9:
            mets["device__attribute_display_name"] = _Metric(gpu, "", STRING)
            mets["device__attribute_clock_rate"] = _Metric(1_980_000.0, rng.choice(("", "khz")), UINT64)
            mets["device__attribute_memory_clock_rate"] = _Metric(3_201_000.0, "", UINT64)
        function, demangled = rng.choice(NAMES)
        workload = replay if replay == RANGE_T else rng.choice((KERNEL_T, KERNEL_T, GRAPH_T, OTHER_T))
        fakes.append(FakeAction(f"_Z{k}k", demangled, function, workload, state, mets))
    cut = sorted(rng.sample(range(len(fakes) + 1), min(2, len(fakes) + 1)))
    pieces = [fakes[: cut[0]], fakes[cut[0] : cut[-1]], fakes[cut[-1] :]]
    ctx = FakeContext([FakeRange(p) for p in pieces if p or rng.random() < 0.3])
    return Program(ctx, runs, metrics, deep, truth)


# --- the reference --------------------------------------------------------------------------------------------


def _number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def ref_value(metric: _Metric | None) -> tuple[float | None, str | None]:
    """(value, unit) of one record; value None where the docs are silent (a string metric that looks numeric)."""
    if metric is None or not metric.present:
        return math.nan, None
    unit = metric.unit_s or ""
    unit_out = {"nsecond": "ns", "usecond": "us", "msecond": "ms", "second": "s"}.get(unit, unit) or None
    if metric.kind_ == STRING:
        return (None if _number(metric.value) or "," in metric.value else math.nan), unit_out
    return float(metric.value), unit_out


def ref_khz(metric: _Metric) -> float:
    """kHz; an empty unit is kHz (CUDA's device attributes); a unit no doc names is no clock (NaN)."""
    unit = (metric.unit_s or "").lower()
    if unit in HZ:
        return float(metric.value) * HZ[unit] / 1e3
    if unit.startswith("cycle/") and unit[len("cycle/") :] in PER:
        return float(metric.value) * PER[unit[len("cycle/") :]] / 1e3
    return float(metric.value) if unit == "" else math.nan


def reference(prog: Program) -> tuple[dict[tuple[int, int], list[tuple]], dict[tuple[int, int], dict], dict]:
    """Per completed run: its records as tuples and its regions' kernel counts and measured clock; the env."""
    flat = [a for rg in prog.context.ranges for a in rg.actions]
    read_clock = CLOCK in prog.metrics or prog.deep  # "when gpc__cycles_elapsed.avg.per_second is among the metrics"
    done = {(r.config, r.run): r for r in prog.runs if r.config >= 0}
    records: dict[tuple[int, int], list[tuple]] = {k: [] for k in done}
    extra: dict[tuple[int, int], dict] = {k: {"counts": {}, "clocks": [], "placed": 0} for k in done}
    for action, owner in zip(flat, prog.truth, strict=True):
        if owner is None or (owner.config, owner.run) not in done:
            continue
        key = (owner.config, owner.run)
        run = done[key]
        extra[key]["placed"] += 1
        clock = action.metrics.get(CLOCK)
        if read_clock and clock is not None and clock.present:
            khz = None if clock.kind_ == STRING else ref_khz(clock)
            if khz is None or math.isfinite(khz):  # NaN or inf measured no clock
                extra[key]["clocks"].append(khz)
        if any(reg.annotation == owner.annotation and reg.failed for reg in run.regions):
            continue
        seq = extra[key]["counts"].get(owner.annotation, 0)
        extra[key]["counts"][owner.annotation] = seq + 1
        kernel = "range" if action.workload == RANGE_T else (action.function or action.demangled)
        names = list(prog.metrics)
        if prog.deep:
            names += sorted(
                m
                for m, v in action.metrics.items()
                if m not in prog.metrics and v.present and v.kind_ != STRING and not m.startswith("device__attribute_")
            )
        for m in names:
            value, unit = ref_value(action.metrics.get(m))
            records[key].append((owner.annotation, owner.config, owner.run, kernel, m, value, unit, seq))
    env: dict[str, Any] = {}
    for action in flat:
        name = action.metrics.get("device__attribute_display_name")
        if name is not None and name.present:
            env["GPU"] = name.value
            for key, metric in (
                ("ComputeClock", "device__attribute_clock_rate"),
                ("MemoryClock", "device__attribute_memory_clock_rate"),
            ):
                if metric in action.metrics and action.metrics[metric].present:
                    env[key] = round(ref_khz(action.metrics[metric]))
            break
    clocks = [
        None if a.metrics[CLOCK].kind_ == STRING else ref_khz(a.metrics[CLOCK])
        for a in flat
        if read_clock and CLOCK in a.metrics and a.metrics[CLOCK].present
    ]
    clocks = [c for c in clocks if c is None or math.isfinite(c)]
    if None in clocks:  # a string-valued clock: the docs are silent
        env["MeasuredComputeClock"] = None
    elif clocks:
        env["MeasuredComputeClock"] = round(sum(clocks) / len(clocks))
    return records, extra, env


# --- the comparison -------------------------------------------------------------------------------------------


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or a == b
    return bool(a == b)


def check(prog: Program, actions: list[Action]) -> None:
    want, extra, want_env = reference(prog)
    merged = merge_runs(actions, prog.runs, prog.metrics, deep=prog.deep)
    done = [r for r in merged.runs if r.config >= 0]
    assert [(r.config, r.run) for r in merged.runs] == [(r.config, r.run) for r in prog.runs]
    assert merged.profiled == sum(e["placed"] for e in extra.values())
    assert merged.profiled + merged.unattributed == len(actions)
    for run in done:
        key = (run.config, run.run)
        got = [(r.annotation, r.config, r.run, r.kernel, r.metric, r.value, r.unit, r.seq) for r in run.records]
        assert len(got) == len(want[key]), (key, got, want[key])
        for g, w in zip(got, want[key], strict=True):
            assert w[5] is None or all(_same(x, y) for x, y in zip(g, w, strict=True)), (key, g, w)
            assert g[:5] == w[:5] and g[6:] == w[6:], (key, g, w)
        counts = {reg.annotation: reg.attributes["kernel_count"] for reg in run.regions if not reg.failed}
        assert counts == {
            reg.annotation: extra[key]["counts"].get(reg.annotation, 0) for reg in run.regions if not reg.failed
        }
        original = next(r for r in prog.runs if (r.config, r.run) == key)
        clocks = extra[key]["clocks"]
        measured = [cv.value for cv in run.collectors if cv.name == "MeasuredSMClockMHz"]
        if original.collectors:
            assert measured == [1.5]
        elif None in clocks:  # a string-valued clock: the docs are silent
            pass
        elif clocks:
            assert measured == [round(sum(clocks) / len(clocks) / 1e3, 1)], (key, measured, clocks)
        else:
            assert measured == []
    env = environment(actions)
    if want_env.get("MeasuredComputeClock", 0) is None:
        env.pop("MeasuredComputeClock", None)
        want_env.pop("MeasuredComputeClock")
    assert env == want_env


@pytest.mark.parametrize("seed", range(EXAMPLES))
def test_random_reports_read_and_merge_as_the_docs_say(seed, monkeypatch, tmp_path):
    rng = random.Random(seed)
    prog = program(rng)
    monkeypatch.setitem(sys.modules, "ncu_report", fake_module({"r.ncu-rep": prog.context}))
    actions = read_report("r.ncu-rep", prog.metrics, deep=prog.deep)
    actions = [Action.from_json(a) for a in json.loads(json.dumps([a.to_json() for a in actions]))]
    check(prog, actions)


def test_every_range_name_the_docs_describe_parses_back():
    rng = random.Random(7)
    for _ in range(2000):
        region = RegionId(annotation=annotation(rng), config=rng.randint(0, 10**6), run=rng.randint(0, 10**6))
        assert parse_range_name(f"{encode(region.annotation)}|config={region.config}|run={region.run}") == region
        assert parse_range_name(range_name(region)) == region


def test_ignore_kernel_list_written_for_nsight_python_drops_the_kernel(monkeypatch):
    """Regression (hunt20i): nsight-python names a kernel ``action.name()`` (ncu's function name base) and matches
    ``ignore_kernel_list`` against it; nsightx named it by its demangled signature, so such a list dropped no C++
    kernel and ``combine_kernel_metrics`` silently folded the ignored kernel's value in."""
    from nsightx._results.transform import combine_records

    def kernel(function: str, demangled: str, ns: float) -> FakeAction:
        state = FakeState({0: FakeDomain("nsightx", None, ["mm|config=0|run=0"])})
        metrics = {"gpu__time_duration.sum": _Metric(ns, "ns", DOUBLE)}
        return FakeAction(f"_Z{len(function)}{function}", demangled, function, KERNEL_T, state, metrics)

    report = FakeContext(
        [
            FakeRange(
                [
                    kernel("gemm", "void gemm<float>(float*, int)", 100.0),
                    kernel("fill_kernel", "void at::native::fill_kernel<float>(float*, float)", 7.0),
                ]
            )
        ]
    )
    monkeypatch.setitem(sys.modules, "ncu_report", fake_module({"r.ncu-rep": report}))
    actions = read_report("r.ncu-rep", ("gpu__time_duration.sum",))
    assert [a.kernel for a in actions] == ["gemm", "fill_kernel"]
    runs = [RunRecords(config=0, run=0, regions=(RegionRun(annotation="mm", config=0, run=0, host_ns=1),))]
    merged = merge_runs(actions, runs, ("gpu__time_duration.sum",)).runs
    (value,) = combine_records(
        merged, ("gpu__time_duration.sum",), ignore_kernels=["fill_kernel"], combine=lambda a, b: a + b
    )
    assert value.value == 100.0


@pytest.mark.parametrize("unit", ["cycle/ns", "Mcycle/second", "cycle", "%"])
def test_a_clock_in_a_unit_no_doc_names_is_no_measured_clock(unit):
    """Regression (hunt20i): an SM clock in an unknown unit was taken as kHz (``1.755 cycle/ns`` became 1.755 kHz,
    shown as 0.0 MHz) and the numerator of a rate was never read (``Mcycle/second`` as ``cycle/second``)."""
    action = Action(kernel="k", workload="kernel", ranges=["r|config=0|run=0"], metrics={CLOCK: (1.755, unit)})
    runs = [RunRecords(config=0, run=0, regions=(RegionRun(annotation="r", config=0, run=0, host_ns=1),))]
    (run,) = merge_runs([action], runs, (CLOCK,)).runs
    assert run.collectors == ()
    assert environment([action]) == {}
