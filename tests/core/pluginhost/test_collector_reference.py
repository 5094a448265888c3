"""Third-party collectors, registered every documented way, against a naive reference, on the real host backend.

A random *setup* is a set of collectors, each registered one of the ways docs/plugins.md names: an
``InfoCollector`` in ``info_collectors``, a ``@nsightx.experimental.collect`` function, a ``(name, fn, scope)``
tuple, a plugin's own collector object (``name``, ``scope``, ``collect``, optionally ``start``/``stop``), a set
registered by an in-process plugin object (``PluginHost.register``, before or after the host loads; on by default
or named), and the pip-installed example plugin's ``hostload`` set (an entry point of the group ``nsightx``),
sometimes blocked. Names are drawn from a pool with odd text, result columns and the function's parameter;
answers are ints, floats, NaN, +-inf, bools, str, None, numpy scalars, dicts, or a raise.

The reference (docs/plugins.md, "Collectors in one decorator", "Writing a plugin package", "Hooks"; docs/api.md,
"Collectors"):

- a name equal to a result column or a parameter, or two collectors of one name: ``ConfigError`` before anything
  runs (no collector and no function called);
- ``once``: once per call, before the first config; ``config``: once per config before its warm-up runs; ``run``:
  before every measured run (not warm-up runs); ``annotation``: each time a region opens in a measured run; a
  collector's ``start`` before all of that and ``stop`` after it; ``start`` returning ``False``: never collected,
  no column; ``nsightx_register_collectors``: once per plugin host;
- legacy collectors get nsight-python's arguments (trimmed to arity), the others a ``CollectContext`` whose fields
  that do not apply are ``None``;
- the per-run frame holds each value in its rows (a dict: one column per key; numpy scalars converted; a raise an
  empty cell); the aggregated frame has ``<name>_Avg/_Min/_Max`` for a numeric config/run/annotation value and one
  column for once values and text; the same after ``save``/``load`` (.parquet) and ``load`` of the raw file.

Where the docs are silent the test does not compare: the aggregated frame of a bool or an always-empty collector,
``_Std`` (sample or population), the order of collector columns, and a default set whose collector has the name
of one the call names (the call's own is kept; kernel.py drops the default's, no error).
"""

from __future__ import annotations

import contextlib
import importlib
import io
import math
import os
import subprocess
import sys
import time
import warnings
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import nsightx
from nsightx import CollectionScope, ConfigError, InfoCollector
from nsightx._pluginhost.listing import describe
from nsightx._pluginhost.plugins import LoaderSettings, PluginHost, set_default_host
from nsightx.experimental import collect

PLUGIN = Path(nsightx.__file__).resolve().parents[1] / "plugins" / "example_plugin"
EXAMPLES = int(os.environ.get("NSIGHTX_REFERENCE_EXAMPLES", "60"))
"""Examples per run (more while hunting: ``NSIGHTX_REFERENCE_EXAMPLES=400``)."""
HUNTING = os.environ.get("NSIGHTX_REFERENCE_HUNT")
"""Set while hunting: random examples instead of the same ones every run."""

NAMES = ("c0", "c1", "c2", "odd name é|,x", "AvgValue", "Config", "n")
"""Collector names: plain, odd text, two result columns, the function's parameter."""
RESERVED = {"AvgValue", "Config", "n"}
KINDS = ("int", "float", "nan", "inf", "bool", "str", "none", "raise", "np", "dict", "slow")
WAYS = ("ctx", "decorated", "tuple", "object", "plugin", "plugin-default")
SCOPES = tuple(CollectionScope)
NUMERIC = {"int", "float", "nan", "inf", "np", "slow"}


class Boom(Exception):
    """What a collector raises on purpose."""


@dataclass(frozen=True)
class Spec:
    """One collector: its name, scope, how it is registered, what it answers, and for objects its start."""

    name: str
    scope: CollectionScope
    way: str
    kind: str
    start: str = "none"
    """For ``object``: ``none`` (no start/stop), ``go`` (start returns None), ``off`` (start returns False)."""
    arity: int = 1
    """For legacy collectors: how many positional parameters its function takes (it is trimmed to them)."""


@dataclass
class Setup:
    """A whole call: the collectors, configs, runs, regions, and the example plugin's use."""

    specs: list[Spec]
    configs: int
    runs: int
    warmup: int
    regions: list[str]
    hostload: str
    """``named`` (info_collectors=["hostload"]), ``blocked`` (the entry point blocked), ``off`` (not named)."""
    register_after_load: bool


@st.composite
def setups(draw: st.DrawFn) -> Setup:
    """A random setup; names repeat now and then (a ``ConfigError`` case)."""
    specs: list[Spec] = []
    for _ in range(draw(st.integers(0, 5))):
        way = draw(st.sampled_from(WAYS))
        scope = draw(st.sampled_from(SCOPES))
        specs.append(
            Spec(
                name=draw(st.sampled_from(NAMES))
                if draw(st.integers(0, 7)) == 0
                else draw(st.sampled_from(NAMES[:4])) + str(len(specs)),
                scope=scope,
                way=way,
                kind=draw(st.sampled_from(KINDS)),
                start=draw(st.sampled_from(["none", "go", "off"])) if way == "object" else "none",
                arity=draw(st.integers(0, MAX_ARITY[scope])),
            )
        )
    return Setup(
        specs=specs,
        configs=draw(st.integers(1, 2)),
        runs=draw(st.integers(1, 3)),
        warmup=draw(st.integers(0, 2)),
        regions=draw(st.lists(st.sampled_from(["a", "b", "é x"]), min_size=1, max_size=2, unique=True)),
        hostload=draw(st.sampled_from(["named", "blocked", "off"])),
        register_after_load=draw(st.booleans()),
    )


# --- the answers: a pure function of what the collector is told --------------------------------------------------


def answer(spec: Spec, config: int | None, run: int | None, annotation: str | None) -> Any:
    """What ``spec`` answers when told (config, run, annotation); ``Boom`` for a raise."""
    base = 100 * (config if config is not None else 7) + 10 * (run if run is not None else 5) + len(annotation or "")
    k = spec.kind
    if k == "raise":
        raise Boom(spec.name)
    if k in ("int", "slow"):
        if k == "slow":
            time.sleep(0.001)
        return base
    if k == "np":
        return np.int64(base) if base % 2 else np.float32(base + 0.5)
    if k == "dict":
        return {f"{spec.name}.x": base, f"{spec.name}.y": f"t{config}{annotation}"}
    return {
        "float": base + 0.25,
        "nan": math.nan,
        "inf": math.inf if base % 2 else -math.inf,
        "bool": base % 2 == 0,
        "str": f"s{config}{annotation}",
        "none": None,
    }[k]


def stored(value: Any) -> dict[str, Any]:
    """The columns a returned value becomes: numpy scalars converted, a dict one column per key."""
    if isinstance(value, dict):
        return {k: stored(v)[""] for k, v in value.items()}
    if isinstance(value, np.generic):
        return {"": value.item()}
    return {"": value}


LEGACY = {"decorated", "tuple"}


@dataclass
class Log:
    """Everything the collectors and the function saw, in order."""

    events: list[tuple[Any, ...]] = field(default_factory=list)
    hooks: Counter[str] = field(default_factory=Counter)
    listing: str = ""
    """What ``nsightx plugins`` printed for the host."""


def _told(spec: Spec, ctx_or_args: Any, legacy: bool) -> tuple[int | None, int | None, str | None]:
    """(config, run, annotation) as the collector was told them; for a legacy one, from its arguments."""
    if not legacy:
        ctx = ctx_or_args
        assert ctx.scope is spec.scope and ctx.function == "work" and ctx.backend == "host"
        if ctx.config is not None:
            assert ctx.args == (ctx.config + 1,) and dict(ctx.params) == {"n": ctx.config + 1}
        return ctx.config, ctx.run, ctx.annotation
    args = ctx_or_args
    if spec.scope is CollectionScope.ANNOTATION and args:
        annotation, rest = args[0], args[1:]
    else:
        annotation, rest = None, args
    return (rest[0] - 1 if rest else None), None, annotation


MAX_ARITY = {CollectionScope.ONCE: 0, CollectionScope.CONFIG: 1, CollectionScope.RUN: 1, CollectionScope.ANNOTATION: 2}
"""How many arguments nsight-python's convention gives each scope: none, (n,), (n,), (annotation, n)."""


def legacy_told(spec: Spec, c: int | None, a: str | None) -> tuple[int | None, None, str | None]:
    """(config, run, annotation) a legacy collector of ``spec.arity`` parameters can tell from its arguments."""
    if spec.scope is CollectionScope.ANNOTATION:
        return (c if spec.arity == 2 else None), None, (a if spec.arity >= 1 else None)
    return (c if spec.arity == 1 else None), None, None


def make(spec: Spec, log: Log) -> Any:
    """The collector of ``spec`` for the given way (a plugin's set is made by :func:`plugin_of`)."""

    def from_ctx(ctx: Any) -> Any:
        key = _told(spec, ctx, legacy=False)
        log.events.append(("collect", spec.name, spec.scope.value, *key))
        return answer(spec, *key)

    def legacy(*args: Any) -> Any:
        key = _told(spec, args, legacy=True)
        log.events.append(("collect", spec.name, spec.scope.value, *key, len(args)))
        return answer(spec, *key)

    if spec.way in LEGACY:
        fn: Any = [lambda: legacy(), lambda a: legacy(a), lambda a, b: legacy(a, b)][spec.arity]
        fn.__name__ = spec.name
        if spec.way == "tuple":
            return (spec.name, fn, spec.scope.value)
        return collect(fn, scope=spec.scope)
    if spec.way == "object":
        return Obj(spec, log, from_ctx)
    return InfoCollector(spec.name, from_ctx, spec.scope)


class Obj:
    """A plugin's own collector class: ``name``, ``scope``, ``collect`` and, per spec, ``start``/``stop``."""

    def __init__(self, spec: Spec, log: Log, fn: Any) -> None:
        self.name, self.scope, self._fn, self._log = spec.name, spec.scope, fn, log
        if spec.start != "none":
            off = spec.start == "off"

            def start(ctx: Any) -> Any:
                assert ctx.scope is CollectionScope.ONCE
                log.events.append(("start", spec.name))
                return False if off else None

            def stop() -> None:
                log.events.append(("stop", spec.name))

            self.start, self.stop = start, stop

    def collect(self, ctx: Any) -> Any:
        """The spec's answer."""
        return self._fn(ctx)


def plugin_of(index: int, spec: Spec, log: Log) -> tuple[str, Any]:
    """(set name, plugin object) registering ``spec``'s collector as a set of its own."""
    set_name = f"set{index}"

    class Plugin:
        @staticmethod
        @nsightx.hookimpl
        def nsightx_register_collectors(register: Any) -> None:
            log.hooks[set_name] += 1
            register(
                set_name,
                [make(Spec(spec.name, spec.scope, "ctx", spec.kind), log)],
                default=spec.way.endswith("default"),
            )

    return set_name, Plugin()


# --- running a setup ------------------------------------------------------------------------------------------


def run_setup(setup: Setup, folder: Path) -> tuple[Log, Any, list[warnings.WarningMessage]]:
    """Register everything, run the call on the host backend, return the log, the result (or error), warnings."""
    log = Log()
    blocked = ("nvml", "hostload") if setup.hostload == "blocked" else ("nvml",)
    host = PluginHost(LoaderSettings(blocked=blocked, default_collectors=()))
    items: list[Any] = []
    plugins = []
    for i, spec in enumerate(setup.specs):
        if spec.way.startswith("plugin"):
            set_name, plugin = plugin_of(i, spec, log)
            plugins.append((plugin, f"p{i}"))
            if spec.way == "plugin":
                items.append(set_name)
        else:
            items.append(make(spec, log))
    if not setup.register_after_load:
        for plugin, name in plugins:
            host.register(plugin, name=name)
    host.load()
    if setup.register_after_load:
        for plugin, name in plugins:
            host.register(plugin, name=name)
    if setup.hostload == "named":
        items.append("hostload")
    set_default_host(host)
    caught: list[warnings.WarningMessage] = []
    try:
        with warnings.catch_warnings(record=True) as caught, contextlib.redirect_stderr(io.StringIO()):
            warnings.simplefilter("always")
            try:

                @nsightx.analyze.kernel(
                    configs=[(i + 1,) for i in range(setup.configs)],
                    runs=setup.runs,
                    warmup=setup.warmup,
                    backend="host",
                    thermal_mode="off",
                    info_collectors=items,
                    output_prefix=str(folder) + "/",
                    output_csv=True,
                    verbosity=nsightx.VerbosityLevel.SILENT,
                )
                def work(n: int) -> None:
                    log.events.append(("call", n))
                    for name in setup.regions:
                        with nsightx.annotate(name):
                            log.events.append(("open", name))

                outcome: Any = work()
            except ConfigError as e:
                outcome = e
    finally:
        set_default_host(None)
    log.listing = describe(host)
    return log, outcome, caught


# --- the reference --------------------------------------------------------------------------------------------


def clash(setup: Setup) -> bool:
    """Whether the docs make the call a ``ConfigError``: a reserved name or two collectors of one name."""
    names = [s.name for s in setup.specs]
    return bool(RESERVED & set(names)) or len(names) != len(set(names))


def live(setup: Setup) -> list[Spec]:
    """The collectors that are collected (not those whose ``start`` said ``False``)."""
    return [s for s in setup.specs if s.start != "off"]


def expected_events(setup: Setup) -> list[Any]:
    """The event log by the docs: segments (Counters of collects, starts, stops) between calls and region opens."""
    out: list[Any] = []
    seg: Counter[tuple[Any, ...]] = Counter()

    def add(scope: CollectionScope, c: int | None, r: int | None, a: str | None) -> None:
        for s in live(setup):
            if s.scope is scope:
                told = legacy_told(s, c, a) if s.way in LEGACY else (c, r, a)
                seg[("collect", s.name, scope.value, *told, *((s.arity,) if s.way in LEGACY else ()))] += 1

    def marker(event: tuple[Any, ...]) -> None:
        nonlocal seg
        out.append(seg)
        out.append(event)
        seg = Counter()

    for s in setup.specs:
        if s.start != "none":
            seg[("start", s.name)] += 1
    add(CollectionScope.ONCE, None, None, None)
    for c in range(setup.configs):
        add(CollectionScope.CONFIG, c, None, None)
        for k in range(setup.warmup + setup.runs):
            measured = k >= setup.warmup
            if measured:
                add(CollectionScope.RUN, c, k - setup.warmup, None)
            marker(("call", c + 1))
            for a in setup.regions:
                if measured:
                    add(CollectionScope.ANNOTATION, c, k - setup.warmup, a)
                marker(("open", a))
    for s in setup.specs:
        if s.start != "none":
            seg[("stop", s.name)] += 1
    out.append(seg)
    return out


def segments(events: list[tuple[Any, ...]]) -> list[Any]:
    """The log cut the same way as :func:`expected_events`."""
    out: list[Any] = []
    seg: Counter[tuple[Any, ...]] = Counter()
    for e in events:
        if e[0] in ("call", "open"):
            out += [seg, e]
            seg = Counter()
        else:
            seg[e] += 1
    out.append(seg)
    return out


def value_of(spec: Spec, c: int, r: int, a: str) -> dict[str, Any]:
    """The columns (name -> value) ``spec`` gives the per-run row (config c, run r, annotation a)."""
    told: tuple[Any, Any, Any]
    if spec.way in LEGACY:
        told = legacy_told(spec, c, a)
    else:
        told = {
            CollectionScope.ONCE: (None, None, None),
            CollectionScope.CONFIG: (c, None, None),
            CollectionScope.RUN: (c, r, None),
            CollectionScope.ANNOTATION: (c, r, a),
        }[spec.scope]
    try:
        got = stored(answer(spec, *told))
    except Boom:
        got = {"": None}
    return {(spec.name if k == "" else k): v for k, v in got.items()}


def _same_cell(cell: Any, want: Any) -> bool:
    if want is None or (isinstance(want, float) and math.isnan(want)):
        return bool(pd.isna(cell))
    if isinstance(want, str):
        return bool(cell == want)
    if isinstance(want, bool):
        return bool(cell == want) and not pd.isna(cell)
    return not pd.isna(cell) and float(cell) == float(want)


def check_runs_frame(frame: pd.DataFrame, setup: Setup, where: str) -> None:
    """Every row's collector cells against the reference; no column for a collector whose start said False."""
    assert len(frame) == setup.configs * setup.runs * len(setup.regions), where
    for s in setup.specs:
        if s.start == "off":
            assert s.name not in frame.columns and f"{s.name}.x" not in frame.columns, (where, s)
    for _, row in frame.iterrows():
        c, r, a = int(row["Config"]), int(row["Run"]), row["Annotation"]
        for s in live(setup):
            for col, want in value_of(s, c, r, a).items():
                assert col in frame.columns, (where, s, col, list(frame.columns))
                assert _same_cell(row[col], want), (where, s, col, c, r, a, row[col], want)
        if setup.hostload == "named":
            assert isinstance(row["HostLoad1m"], float) and row["HostLoad1m"] >= 0, where
    assert setup.hostload == "named" or "HostLoad1m" not in frame.columns, where


def check_frame(frame: pd.DataFrame, setup: Setup, where: str) -> None:
    """The aggregated frame: ``_Avg/_Min/_Max`` of numeric config/run/annotation values, one column otherwise."""
    assert len(frame) == setup.configs * len(setup.regions), where
    for _, row in frame.iterrows():
        c, a = int(row["n"]) - 1, row["Annotation"]
        for s in live(setup):
            if s.kind in ("bool", "none", "raise", "nan"):
                continue  # docs silent on how these aggregate (a column of NaN only: numeric or empty?)
            per_run = [value_of(s, c, r, a) for r in range(setup.runs)]
            for col in per_run[0]:
                values = [v[col] for v in per_run]
                numeric = isinstance(values[0], int | float) and not isinstance(values[0], bool)
                if s.scope is CollectionScope.ONCE or not numeric:
                    assert col in frame.columns, (where, s, col)
                    assert _same_cell(row[col], values[0]), (where, s, col, row[col], values[0])
                    continue
                assert col not in frame.columns, (where, s, col)
                series = pd.Series([float(v) for v in values])
                for stat, want in (("_Avg", series.mean()), ("_Min", series.min()), ("_Max", series.max())):
                    assert _same_cell(row[col + stat], want), (where, s, col, stat, row[col + stat], want)
                assert col + "_Std" in frame.columns, (where, s, col)
        if setup.hostload == "named":
            assert all(f"HostLoad1m{x}" in frame.columns for x in ("_Avg", "_Std", "_Min", "_Max")), where


def _key(value: Any) -> tuple[str, Any]:
    """A stored value with its type, NaN equal to NaN (True is not 1, 3 is not 3.0)."""
    if isinstance(value, float) and math.isnan(value):
        return ("float", "nan")
    return (type(value).__name__, value)


def check_values(result: Any, setup: Setup, where: str) -> None:
    """``data.runs``' collector values, each with its scope, config, run, annotation and exact type."""
    got = Counter(
        (c.name, c.scope, c.config, c.run, c.annotation, _key(c.value))
        for run in result.data.runs
        for c in run.collectors
    )
    want: Counter[tuple[Any, ...]] = Counter()
    for s in live(setup):
        slots: list[tuple[Any, Any, Any]] = {  # type: ignore[assignment]
            CollectionScope.ONCE: [(None, None, None)],
            CollectionScope.CONFIG: [(c, None, None) for c in range(setup.configs)],
            CollectionScope.RUN: [(c, r, None) for c in range(setup.configs) for r in range(setup.runs)],
            CollectionScope.ANNOTATION: [
                (c, r, a) for c in range(setup.configs) for r in range(setup.runs) for a in setup.regions
            ],
        }[s.scope]
        for c, r, a in slots:
            for col, v in value_of(s, c if c is not None else 0, r if r is not None else 0, a or "").items():
                want[(col, s.scope.value, c, r, a, _key(v))] += 1
    got = Counter({k: n for k, n in got.items() if k[0] != "HostLoad1m"})
    assert got == want, (where, got - want, want - got)


def check_listing(text: str, setup: Setup) -> None:
    """``nsightx plugins``: each plugin with where it comes from, its sets (default or by name), scopes."""
    lines = text.splitlines()
    for i, s in enumerate(setup.specs):
        if s.way.startswith("plugin"):
            at = lines.index(f"p{i} (registered in process)")
            how = "on by default" if s.way == "plugin-default" else f"enabled by name: info_collectors=['set{i}']"
            assert lines[at + 1 : at + 4] == [
                "  hooks: nsightx_register_collectors",
                f"  collectors set{i} ({how}):",
                f"    {s.name} [{s.scope.value}]",
            ], text
    assert ("hostload (nsightx-example-plugin 0.1.0)" in lines) == (setup.hostload != "blocked"), text
    assert "host (built-in) nsightx " + nsightx.__version__ in lines, text


def check(setup: Setup, folder: Path) -> None:
    """One setup against the reference: errors, calls, frames, files."""
    log, outcome, caught = run_setup(setup, folder)
    hooked = [i for i, s in enumerate(setup.specs) if s.way.startswith("plugin")]
    assert log.hooks == Counter({f"set{i}": 1 for i in hooked}), log.hooks
    check_listing(log.listing, setup)
    if clash(setup):
        assert isinstance(outcome, ConfigError), outcome
        assert not [e for e in log.events if e[0] in ("collect", "call")], log.events
        return
    assert not isinstance(outcome, Exception), outcome
    assert segments(log.events) == expected_events(setup), (setup, log.events)
    raising = {(s.name, s.scope.value) for s in live(setup) if s.kind == "raise"}
    warned = [w for w in caught if issubclass(w.category, RuntimeWarning) and "Boom" in str(w.message)]
    assert len(warned) == len(raising), (raising, [str(w.message) for w in warned])
    check_values(outcome, setup, "data")
    check_runs_frame(outcome.runs_dataframe(), setup, "runs")
    check_frame(outcome.to_dataframe(), setup, "frame")
    saved = outcome.save(folder / "again.parquet")
    loaded = nsightx.load(saved)
    check_values(loaded, setup, "parquet data")
    check_runs_frame(loaded.runs_dataframe(), setup, "parquet runs")
    check_frame(loaded.to_dataframe(), setup, "parquet frame")
    raw = nsightx.load_raw(next(folder.glob("raw_data-*.jsonl")))
    check_values(raw, setup, "raw data")
    check_runs_frame(raw.runs_dataframe(), setup, "raw runs")
    json_loaded = nsightx.load(outcome.save(folder / "again.json"))
    check_values(json_loaded, setup, "json data")
    csv_runs = pd.read_csv(next(folder.glob("profiled_data-*.csv")))
    check_runs_frame(csv_runs, setup, "csv runs")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The example plugin pip-installed into a fresh folder, put first on ``sys.path`` for this module."""
    target = tmp_path_factory.mktemp("site")
    cmd = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-compile", "--target", str(target)]
    if importlib.util.find_spec("hatchling") is not None:
        cmd += ["--no-build-isolation", "--no-index"]
    out = subprocess.run([*cmd, str(PLUGIN)], capture_output=True, text=True, timeout=300, check=False)
    assert out.returncode == 0, out.stderr
    sys.path.insert(0, str(target))
    importlib.invalidate_caches()
    yield target
    sys.path.remove(str(target))
    sys.modules.pop("nsightx_example_plugin", None)


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), derandomize=HUNTING is None)
@given(setup=setups())
def test_collectors_match_the_reference(site: Path, tmp_path_factory: pytest.TempPathFactory, setup: Setup) -> None:
    """Random collectors, registered every documented way, give what the docs say, in frames and files."""
    check(setup, tmp_path_factory.mktemp("out"))


# --- what the hunt found (each failed at 976d074) ---------------------------------------------------------------


def _host_with(plugin: Any) -> PluginHost:
    host = PluginHost(LoaderSettings(autoload=False, blocked=("nvml",))).load()
    host.register(plugin, name="mine")
    return host


def _call(host: PluginHost, collectors: list[Any], asked: list[str]) -> Any:
    set_default_host(host)
    try:

        @nsightx.analyze.kernel(
            configs=[(1,)],
            runs=2,
            backend="host",
            thermal_mode="off",
            info_collectors=collectors,
            verbosity=nsightx.VerbosityLevel.SILENT,
        )
        def work(n: int) -> None:
            asked.append("call")
            with nsightx.annotate("a"):
                pass

        return work()
    finally:
        set_default_host(None)


def test_numpy_scalars_keep_their_python_value_and_type() -> None:
    """``float()`` made ``np.int64(2**53 + 1)`` the number 2**53 and ``np.bool_(True)`` 1.0; ``item()`` keeps both."""
    big = 2**53 + 1
    collectors = [
        InfoCollector("big", lambda ctx: np.int64(big), "run"),
        InfoCollector("flag", lambda ctx: np.bool_(True), "once"),
        InfoCollector("cfg", lambda ctx: {"k": np.int32(3), "f": np.float32(2.5)}, "config"),
    ]
    result = _call(PluginHost(LoaderSettings(autoload=False, blocked=("nvml",))).load(), collectors, [])
    values = {(c.name, c.run): c.value for run in result.data.runs for c in run.collectors}
    assert values == {("flag", None): True, ("k", None): 3, ("f", None): 2.5, ("big", 0): big, ("big", 1): big}
    assert [type(values[k]) for k in [("flag", None), ("k", None), ("big", 0)]] == [bool, int, int]
    frame = result.runs_dataframe()
    assert frame["big"].tolist() == [big, big] and frame["flag"].tolist() == [True, True]
    assert result.to_dataframe()["big_Max"].tolist() == [big]


def test_a_default_collector_named_like_one_of_the_call_is_a_config_error() -> None:
    """Two collectors of one name are a ``ConfigError`` (docs/plugins.md, "Names"); the default one was dropped."""

    class Plugin:
        @staticmethod
        @nsightx.hookimpl
        def nsightx_register_collectors(register: Any) -> None:
            register("clocks", [InfoCollector("clock", lambda ctx: 1, "run")], default=True)

    asked: list[str] = []
    mine = InfoCollector("clock", lambda ctx: asked.append("mine") or 2, "run")  # type: ignore[func-returns-value]
    with pytest.raises(ConfigError, match="Duplicate info collector name 'clock'"):
        _call(_host_with(Plugin()), [mine], asked)
    assert asked == []  # refused before anything ran
    result = _call(_host_with(Plugin()), ["clocks"], asked)  # naming the default set uses it once
    assert result.runs_dataframe()["clock"].tolist() == [1, 1]


def test_the_listing_does_not_call_a_plugin_of_the_user_built_in(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``nsightx plugins`` called a plugin registered in process or by NSIGHTX_PLUGINS ``built-in nsightx <v>``."""
    (tmp_path / "my_env_plugin.py").write_text(
        "import nsightx\n\n\n@nsightx.hookimpl\ndef nsightx_register_collectors(register):\n"
        "    register('extra', [nsightx.InfoCollector('extra', lambda ctx: 1, 'once')])\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))

    class Plugin:
        @staticmethod
        @nsightx.hookimpl
        def nsightx_register_collectors(register: Any) -> None:
            register("mine", [InfoCollector("m", lambda ctx: 1, "run")])

    host = PluginHost(LoaderSettings(autoload=False, blocked=("nvml",), extra=("my_env_plugin",))).load()
    host.register(Plugin(), name="mine")
    lines = describe(host).splitlines()
    assert "mine (registered in process)" in lines and "my_env_plugin (NSIGHTX_PLUGINS)" in lines, lines
    assert f"host (built-in) nsightx {nsightx.__version__}" in lines
    sys.modules.pop("my_env_plugin", None)
