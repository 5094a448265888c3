"""The run loop with a deferred session: outputs collected in batches, written in order, kept on failure."""

from __future__ import annotations

import pytest
from _sessions import DeferredHost

import nsightx
from nsightx._results.sink import RunSink
from nsightx._run.backend import COLLECT_EVERY, RunOutput
from nsightx._run.loop import run_loop
from nsightx._run.plan import Plan


def plan(fn, **kw) -> Plan:
    base = dict(
        function=fn,
        function_name="f",
        params=("n",),
        configs=((1,), (2,), (3,)),
        runs=5,
        warmup=1,
        metrics=("host__time_duration.sum",),
        backend="host",
        needs_gpu=False,
    )
    base.update(kw)
    return Plan(**base)


def work(n: int) -> None:
    with nsightx.annotate("a"):
        pass


def test_a_short_sweep_is_collected_once_and_every_measured_run_written_in_order():
    session, sink = DeferredHost(), RunSink()
    run_loop(plan(work), session, sink)
    assert session.collects == 1
    assert [(r.config, r.run) for r in sink.runs] == [(c, r) for c in range(3) for r in range(5)]
    assert all(len(r.records) == 1 and r.records[0].run == r.run for r in sink.runs)


def test_a_slow_sweep_is_collected_at_config_ends(monkeypatch):
    from nsightx._run import backend as _backend

    monkeypatch.setattr(_backend, "COLLECT_SECONDS", 0.0)  # every config end is "a second later"
    session, sink = DeferredHost(), RunSink()
    run_loop(plan(work), session, sink)
    assert session.collects == 3 and len(sink.runs) == 15


def test_long_configs_are_collected_every_so_often():
    session, sink = DeferredHost(), RunSink()
    run_loop(plan(work, configs=((1,),), runs=COLLECT_EVERY + 1, warmup=0), session, sink)
    assert session.collects == 2 and len(sink.runs) == COLLECT_EVERY + 1


def test_adaptive_rule_collects_every_run():
    from nsightx._run.adaptive import build_rule

    rule = build_rule("auto", min_runs=3, max_runs=4, target_ci_pct=1e-9, time_budget_s=None)
    session, sink = DeferredHost(), RunSink()
    run_loop(plan(work, configs=((1,),), runs=4, warmup=0, stop_rule=rule), session, sink)
    assert session.collects == 4 and [r.run for r in sink.runs] == [0, 1, 2, 3]


def test_failure_keeps_the_runs_already_measured():
    calls = {"n": 0}

    def flaky(n: int) -> None:
        calls["n"] += 1
        if calls["n"] == 4:  # 1 warm-up + 2 measured runs of config 0 done
            raise RuntimeError("boom")
        work(n)

    session, sink = DeferredHost(), RunSink()
    with pytest.raises(RuntimeError, match="boom"):
        run_loop(plan(flaky), session, sink)
    assert [(r.config, r.run) for r in sink.runs] == [(0, 0), (0, 1)]
    assert all(r.records for r in sink.runs)


# --- the deferred-collection policy, alone ----------------------------------------------------------------------


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def policy(deferred=True, needs_values=False, every=4, seconds=1.0):
    from nsightx._run.loop import CollectPolicy

    clock = FakeClock()
    return CollectPolicy(deferred, needs_values, every, seconds, clock=clock), clock


def test_policy_writes_every_run_of_an_ordinary_session():
    p, _ = policy(deferred=False)
    assert p.due(1, config_done=False) and not p.write_collects and not p.collects_each_run


def test_policy_collects_every_run_itself_for_an_adaptive_rule():
    p, _ = policy(needs_values=True)
    assert p.collects_each_run and not p.write_collects and p.due(1, config_done=False)


def test_policy_collects_a_deferred_session_every_n_runs():
    p, _ = policy(every=4)
    assert p.write_collects
    assert [p.due(n, config_done=False) for n in (1, 2, 3, 4)] == [False, False, False, True]


def test_policy_collects_at_a_config_end_only_after_enough_time():
    p, clock = policy(seconds=1.0)
    clock.now = 0.5
    assert not p.due(1, config_done=True)
    clock.now = 1.0
    assert p.due(1, config_done=True)
    assert not p.due(1, config_done=False)  # mid-config: only the run count matters
    p.written()
    assert not p.due(1, config_done=True)  # the time counts from the last collection
    clock.now = 2.0
    assert p.due(1, config_done=True)


def test_policy_for_session_reads_the_limits_when_built(monkeypatch):
    from nsightx._run import backend as _backend
    from nsightx._run.loop import CollectPolicy

    monkeypatch.setattr(_backend, "COLLECT_EVERY", 3)
    p = CollectPolicy.for_session(DeferredHost(), needs_values=False)
    assert (p.deferred, p.every, p.seconds) == (True, 3, _backend.COLLECT_SECONDS)


# --- the run stage: in-process backends through the run loop, others through their own execute -----------------


def test_run_stage_drives_an_in_process_backend_through_the_run_loop(plugin_host):
    from nsightx._run.loop import execute

    backend = plugin_host.backends["host"]()
    assert not backend.measures_elsewhere()
    sink = RunSink()
    execute(backend, plan(work, configs=((1,),), runs=2, warmup=0), sink)
    assert [(r.config, r.run) for r in sink.runs] == [(0, 0), (0, 1)]
    with pytest.raises(NotImplementedError, match="measures in process"):
        backend.execute(plan(work), RunSink())


def test_run_stage_hands_an_overriding_backend_the_whole_plan():
    from nsightx._run.backend import Availability, Backend, Capabilities
    from nsightx._run.loop import execute

    class Elsewhere(Backend):
        name = "elsewhere"
        capabilities = Capabilities(metrics=None, default_metrics=("t",))

        @classmethod
        def availability(cls) -> Availability:
            return Availability(available=True)

        def execute(self, plan, sink):
            return {"where": "elsewhere"}

    assert Elsewhere.measures_elsewhere()
    assert execute(Elsewhere(), plan(work), RunSink()) == {"where": "elsewhere"}


class MappingRecords(DeferredHost):
    """A third-party session that hands its records back as mappings instead of :class:`Record` objects."""

    def __init__(self, value: object = 5.0) -> None:
        super().__init__()
        self.value = value

    def collect_runs(self) -> dict[tuple[int, int], RunOutput]:
        done = super().collect_runs()
        for (c, r), out in done.items():
            out.records[:] = [
                {"annotation": "a", "config": c, "run": r, "kernel": "k", "metric": "m", "value": self.value}
            ]
            out.record_rows = ()  # in place of the host's own record (it hands it back as a row)
        return done


def test_runs_are_plain_records_with_their_collector_values():
    from nsightx._results.records import CollectorValue, Record, RegionRun

    col = nsightx.InfoCollector("tag", lambda ctx: ctx.run, "run")
    session, sink = DeferredHost(), RunSink()
    run_loop(plan(work, collectors=(col,)), session, sink)
    first = sink.runs[0]
    assert type(first.records) is tuple and type(first.records[0]) is Record
    assert first.regions == (RegionRun("a", 0, 0, first.regions[0].host_ns, False, {}),)
    assert [r.collectors for r in sink.runs[:2]] == [
        (CollectorValue("tag", "run", 0, 0, None, 0),),
        (CollectorValue("tag", "run", 0, 1, None, 1),),
    ]


def test_records_a_backend_hands_back_as_mappings_are_validated():
    from pydantic import ValidationError

    from nsightx._results.records import Record

    sink = RunSink()
    run_loop(plan(work), MappingRecords(), sink)
    assert sink.runs[0].records == (Record("a", 0, 0, "k", "m", 5.0),)
    with pytest.raises(ValidationError, match="value"):
        run_loop(plan(work), MappingRecords(value="not a number"), RunSink())
