"""Info collectors on the real host backend: scopes, context, nsight-python's convention, columns, failures."""

from __future__ import annotations

import warnings

import pytest

import nsightx
from nsightx import CollectionScope, ConfigError, ConfigTypeError, InfoCollector
from nsightx.experimental import collect

SILENT = nsightx.VerbosityLevel.SILENT
CONFIGS = [(3, "x"), (5, "y")]


def sweep(collectors, runs=3, warmup=1, annotations=("a", "b"), **options):
    @nsightx.analyze.kernel(
        configs=CONFIGS,
        runs=runs,
        warmup=warmup,
        backend="host",
        verbosity=SILENT,
        info_collectors=collectors,
        thermal_mode="off",
        **options,
    )
    def work(n, tag):
        for name in annotations:
            with nsightx.annotate(name):
                sum(range(n))

    return work()


@pytest.fixture
def no_defaults(monkeypatch):
    """A plugin host without default sets, so only the collectors under test add columns."""
    from nsightx._pluginhost import plugins as _plugins

    host = _plugins.PluginHost(_plugins.LoaderSettings(autoload=False, blocked=("nvml",))).load()
    monkeypatch.setattr(_plugins, "_default", host)
    return host


def test_each_scope_is_called_the_right_number_of_times_with_its_context(no_defaults):
    seen = {s: [] for s in CollectionScope}

    def record(scope):
        return InfoCollector(f"c_{scope.value}", lambda ctx: seen[scope].append(ctx) or 1, scope)

    sweep([record(s) for s in CollectionScope], runs=3, warmup=1)
    once, config, run, ann = (seen[s] for s in CollectionScope)
    assert len(once) == 1 and len(config) == 2
    assert len(run) == 2 * 3  # warm-up runs are not collected
    assert len(ann) == 2 * 3 * 2  # each region opening of each measured run
    assert once[0].args == () and once[0].config is None and once[0].function == "work"
    assert [(c.config, c.args, dict(c.params)) for c in config] == [
        (0, (3, "x"), {"n": 3, "tag": "x"}),
        (1, (5, "y"), {"n": 5, "tag": "y"}),
    ]
    assert [(c.config, c.run) for c in run] == [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2)]
    assert [(c.run, c.annotation) for c in ann[:4]] == [(0, "a"), (0, "b"), (1, "a"), (1, "b")]
    assert {c.backend for c in run} == {"host"} and {c.device for c in run} == {None}
    assert all(c.scope is s for s in CollectionScope for c in seen[s])


def test_every_context_equals_what_its_constructor_makes_and_is_frozen(no_defaults):
    from dataclasses import FrozenInstanceError, fields

    from nsightx.ext import CollectContext

    seen = []
    sweep([InfoCollector(f"c_{s.value}", lambda ctx: seen.append(ctx) or 1, s) for s in CollectionScope])
    for ctx in seen:
        assert ctx == CollectContext(**{f.name: getattr(ctx, f.name) for f in fields(CollectContext)})
        assert set(vars(ctx)) == {f.name for f in fields(CollectContext)}
    last = [c for c in seen if c.scope is CollectionScope.ANNOTATION][-1]
    assert last == CollectContext(
        scope=CollectionScope.ANNOTATION,
        function="work",
        args=(5, "y"),
        params={"n": 5, "tag": "y"},
        config=1,
        run=2,
        annotation="b",
        backend="host",
    )
    with pytest.raises(FrozenInstanceError):
        last.run = 0  # type: ignore[misc]


def test_device_option_reaches_the_context(no_defaults):
    from nsightx_host import HostSession

    from nsightx._results.sink import RunSink
    from nsightx._run.loop import run_loop
    from nsightx._run.plan import Plan

    got = []
    collector = InfoCollector("d", lambda ctx: got.append(ctx.device) or 0, "run")
    plan = Plan(
        function=lambda n: None,
        function_name="f",
        params=("n",),
        configs=((1,),),
        runs=2,
        warmup=0,
        metrics=("host__time_duration.sum",),
        backend="host",
        device=1,
        collectors=(collector,),
        needs_gpu=False,
    )
    run_loop(plan, HostSession(), RunSink())
    assert got == [1, 1]


def test_device_on_host_backend_is_a_clear_error(no_defaults):
    with pytest.raises(nsightx.ConfigError, match="cannot run per device"):
        sweep([], runs=1, device=1)


def test_nsight_python_calling_convention(no_defaults):
    calls = {}

    @collect(scope="once")
    def driver():
        calls["once"] = ()
        return "580"

    @collect(scope=CollectionScope.CONFIG)
    def size(n):  # trimmed to its arity: gets n only
        calls.setdefault("config", []).append(n)
        return n * 2

    @collect(scope="run")
    def both(n, tag):
        calls.setdefault("run", []).append((n, tag))
        return n

    @collect(scope="annotation")
    def region(name, n, tag):
        calls.setdefault("annotation", []).append((name, n, tag))
        return name

    def varargs(*args):
        calls.setdefault("tuple", []).append(args)
        return len(args)

    df = sweep(
        [driver, size, both, region, ("nargs", varargs, "run")], runs=1, warmup=0, annotations=("a",)
    ).to_dataframe()
    assert calls["once"] == () and calls["config"] == [3, 5]
    assert calls["run"] == [(3, "x"), (5, "y")] and calls["tuple"] == [(3, "x"), (5, "y")]
    assert calls["annotation"] == [("a", 3, "x"), ("a", 5, "y")]
    assert df["driver"].tolist() == ["580", "580"]
    assert df["size_Avg"].tolist() == [6, 10] and df["nargs_Avg"].tolist() == [2, 2]
    assert df["region"].tolist() == ["a", "a"]  # non-numeric: one value, not statistics
    assert driver() == "580"  # the decorated function still works as a function


def test_aggregated_columns(no_defaults):
    counter = iter(range(100))
    res = sweep(
        [
            InfoCollector("k", lambda ctx: next(counter), "run"),
            InfoCollector("host", lambda ctx: "box", "once"),
            InfoCollector("pair", lambda ctx: {"lo": ctx.run, "hi": 10 * ctx.run}, "run"),
        ],
        runs=3,
        warmup=0,
        annotations=("a",),
    )
    raw = res.runs_dataframe()
    assert raw["k"].tolist() == [0, 1, 2, 3, 4, 5]
    assert raw.columns[-2:].tolist() == ["n", "tag"]  # parameters stay last
    df = res.to_dataframe()
    assert df["k_Avg"].tolist() == [1, 4] and df["k_Min"].tolist() == [0, 3] and df["k_Max"].tolist() == [2, 5]
    assert df["k_Std"].tolist() == pytest.approx([1.0, 1.0])
    assert df["host"].tolist() == ["box", "box"] and "host_Avg" not in df
    assert df["hi_Max"].tolist() == [20, 20] and df["lo_Avg"].tolist() == [1, 1]


def test_failing_collector_gives_empty_values_and_one_warning(no_defaults):
    def flaky(ctx):
        if ctx.run == 1:
            raise OSError("sensor busy")
        return 7.0

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = sweep(
            [InfoCollector("flaky", flaky, "run"), InfoCollector("dead", lambda ctx: 1 / 0, "config")],
            runs=3,
            warmup=0,
            annotations=("a",),
        )
    messages = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
    assert sum("'flaky'" in m for m in messages) == 1 and sum("'dead'" in m for m in messages) == 1
    assert "OSError: sensor busy" in next(m for m in messages if "'flaky'" in m)
    raw = res.runs_dataframe()
    assert raw["flaky"].isna().tolist() == [False, True, False] * 2
    df = res.to_dataframe()
    assert df["NumRuns"].tolist() == [3, 3]  # no run lost
    assert df["flaky_Avg"].tolist() == [7.0, 7.0]


@pytest.mark.parametrize("name", ["AvgValue", "GPU", "Throttled", "n"])
def test_name_collisions_fail_at_decoration(name, no_defaults):
    ran = []
    with pytest.raises(ConfigError, match=repr(name)):

        @nsightx.analyze.kernel(configs=[(1,)], backend="host", info_collectors=[(name, lambda: 1, "once")])
        def f(n):
            ran.append(n)

    assert ran == []


def test_duplicate_names_fail():
    with pytest.raises(ConfigError, match="Duplicate info collector name"):

        @nsightx.analyze.kernel(
            configs=[(1,)], backend="host", info_collectors=[("v", lambda: 1, "once"), ("v", lambda: 2, "run")]
        )
        def f(n):
            pass


def test_plugin_column_colliding_with_a_parameter_fails_before_running(no_defaults):
    class P:
        @staticmethod
        @nsightx.hookimpl
        def nsightx_register_collectors(register):
            class Cols:
                name, scope, columns = "cols", CollectionScope.RUN, ("n", "other")

                def collect(self, ctx):
                    return {"n": 1, "other": 2}

            register("cols", [Cols()])

    no_defaults.register(P(), name="p")
    ran = []

    @nsightx.analyze.kernel(configs=[(1,)], backend="host", info_collectors=["cols"], verbosity=SILENT)
    def f(n):
        ran.append(n)

    with pytest.raises(ConfigError, match="'n'"):
        f()
    assert ran == []


def test_bad_scope_and_non_callable():
    with pytest.raises(ConfigError, match="Expected one of 'once', 'config', 'run', 'annotation' or a CollectionScope"):
        collect(lambda: 1, scope="sometimes")
    with pytest.raises(ConfigTypeError):
        collect(42, scope="run")
    with pytest.raises(ConfigTypeError):

        @nsightx.analyze.kernel(configs=[(1,)], info_collectors=[object()])
        def f(n):
            pass


def test_a_mapping_is_taken_as_it_was_when_the_run_started(no_defaults):
    # answers become rows only when the run is written; a collector that reuses one dict must not see every
    # run written with its last state
    state = {"step": 0}

    def counter(ctx):
        state["step"] += 1
        return state

    res = sweep([InfoCollector("counter", counter, CollectionScope.RUN)], runs=3, annotations=("a",))
    raw = res.runs_dataframe().drop_duplicates(["Config", "Run"])
    assert raw["step"].tolist() == [1, 2, 3, 4, 5, 6]


def test_a_collector_whose_start_returns_false_is_never_asked_and_still_stopped(no_defaults):
    # start(ctx) -> False: nothing to say in this call (the nvml run collector without NVML); None goes on as before
    events = []

    class Idle:
        scope = CollectionScope.RUN

        def __init__(self, name, answer):
            self.name, self.answer = name, answer

        def start(self, ctx):
            events.append(f"start {self.name}")
            return self.answer

        def stop(self):
            events.append(f"stop {self.name}")

        def collect(self, ctx):
            events.append(f"collect {self.name} {ctx.run}")
            return 7

    res = sweep([Idle("idle", False), Idle("busy", None)], runs=2, warmup=1, annotations=("a",))
    assert events == [
        "start idle",
        "start busy",
        *[f"collect busy {r}" for _ in CONFIGS for r in range(2)],
        "stop busy",
        "stop idle",
    ]
    raw = res.runs_dataframe()
    assert "idle" not in raw.columns and raw["busy"].tolist() == [7, 7, 7, 7]


def test_a_collector_inactive_in_one_call_is_asked_again_in_the_next(no_defaults):
    answers = iter([False, True])
    asked = []

    class Sometimes:
        name, scope = "sometimes", CollectionScope.RUN

        def start(self, ctx):
            return next(answers)

        def stop(self):
            pass

        def collect(self, ctx):
            asked.append(ctx.run)
            return 1

    collector = Sometimes()
    assert "sometimes" not in sweep([collector], runs=2, annotations=("a",)).runs_dataframe().columns
    assert asked == []
    assert sweep([collector], runs=2, annotations=("a",)).runs_dataframe()["sometimes"].tolist() == [1, 1, 1, 1]
    assert asked == [0, 1, 0, 1]
