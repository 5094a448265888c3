"""Reading real ``.ncu-rep`` files captured on the H200 (ncu 2025.3.1) and merging them into records.

The fixtures come from ``fixtures/ncu/capture.py`` (tiny CuPy kernels in regions named the way the worker names
them). They are read with the ``ncu-report`` package, which reads reports of older ncu versions on a machine
without a GPU. The merge tests pair the reports with worker runs shaped like the ones the worker writes.
"""

from __future__ import annotations

import math

import _paths
import pytest
from _paths import ROOT
from nsightx_ncu._reader import Action, read_report
from nsightx_ncu._report import environment, merge_runs, region_of

from nsightx._results.records import CollectorValue, RegionRun, RunRecords

pytest.importorskip("ncu_report", reason="needs the ncu-report package (test dependency group)")

FIXTURES = _paths.FIXTURES / "ncu"
TIME = "gpu__time_duration.sum"
FIVE = (
    "gpu__time_duration.sum",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "dram__bytes_read.sum",
    "gpc__cycles_elapsed.avg.per_second",
    "l1tex__t_bytes.sum",
)
PAIR = "pair/a|b@c 1%"


def read(name: str, metrics=(TIME,), deep=False) -> list[Action]:
    path = FIXTURES / f"{name}.ncu-rep"
    return read_report(str(path), metrics, deep=deep)


def worker_runs(annotations, configs, runs=2, failed=()) -> list[RunRecords]:
    return [
        RunRecords(
            config=c,
            run=r,
            regions=tuple(
                RegionRun(annotation=a, config=c, run=r, host_ns=1000, failed=(a, c, r) in failed) for a in annotations
            ),
        )
        for c in range(configs)
        for r in range(runs)
    ]


def identities(actions):
    return [(reg.annotation, reg.config, reg.run) for reg in map(region_of, actions)]


def test_one_metric_each_kernel_maps_to_its_region_and_warmups_are_not_profiled():
    actions = read("one_metric")
    assert identities(actions) == [("scale", 0, 0), ("scale", 0, 1), ("scale", 1, 0), ("scale", 1, 1)]
    assert all(a.workload == "kernel" and a.kernel for a in actions)
    assert all(a.metrics[TIME][1] == "ns" and 500 < a.metrics[TIME][0] < 100_000 for a in actions)
    merged = merge_runs(actions, worker_runs(["scale"], 2), (TIME,))
    assert merged.profiled == 4 and merged.unattributed == 0
    for run in merged.runs:
        (rec,) = run.records
        assert (rec.annotation, rec.config, rec.run, rec.metric, rec.unit, rec.seq) == (
            "scale",
            run.config,
            run.run,
            TIME,
            "ns",
            0,
        )
        assert run.regions[0].attributes["kernel_count"] == 1


def test_environment_has_rated_clocks_and_no_measured_clock_without_the_metric():
    env = environment(read("one_metric"))
    assert env == {"GPU": "NVIDIA H200", "ComputeClock": 1_980_000, "MemoryClock": 3_201_000}


def test_several_metrics_with_several_passes_and_the_measured_sm_clock():
    actions = read("multi_pass", FIVE)
    assert len(actions) == 4
    for a in actions:
        assert set(FIVE) <= set(a.metrics)
        assert a.metrics["dram__bytes_read.sum"][1] in ("byte", "Kbyte", "Mbyte")
    merged = merge_runs(actions, worker_runs(["scale"], 2), FIVE)
    assert [len(r.records) for r in merged.runs] == [5, 5, 5, 5]
    assert [r.metric for r in merged.runs[0].records] == list(FIVE)
    clock = environment(actions)["MeasuredComputeClock"]
    assert 1_000_000 < clock < 2_100_000  # kHz, the SM clock while the kernels ran (rated: 1,980,000)
    per_run = [cv for run in merged.runs for cv in run.collectors]
    assert [(cv.name, cv.scope, cv.config, cv.run) for cv in per_run] == [
        ("MeasuredSMClockMHz", "run", c, r) for c in range(2) for r in range(2)
    ]
    assert all(1000 < cv.value < 2100 for cv in per_run)


def test_measured_clock_does_not_override_a_collector_value():
    actions = read("multi_pass", FIVE)
    runs = [
        run.model_copy(
            update={
                "collectors": (
                    CollectorValue(
                        name="MeasuredSMClockMHz", scope="run", config=run.config, run=run.run, value=1755.0
                    ),
                )
            }
        )
        for run in worker_runs(["scale"], 2)
    ]
    merged = merge_runs(actions, runs, FIVE)
    assert [[cv.value for cv in run.collectors] for run in merged.runs] == [[1755.0]] * 4


def test_two_kernel_region_keeps_launch_order_and_an_escaped_annotation():
    actions = read("two_kernels")
    assert identities(actions) == [
        (PAIR, 0, 0),
        (PAIR, 0, 0),
        ("single", 0, 0),
        (PAIR, 0, 1),
        (PAIR, 0, 1),
        ("single", 0, 1),
    ]
    merged = merge_runs(actions, worker_runs([PAIR, "single"], 1), (TIME,))
    for run in merged.runs:
        pair = [r for r in run.records if r.annotation == PAIR]
        assert [r.seq for r in pair] == [0, 1]
        assert pair[0].kernel != pair[1].kernel
        counts = {reg.annotation: reg.attributes["kernel_count"] for reg in run.regions}
        assert counts == {PAIR: 2, "single": 1}


def test_range_replay_gives_one_range_result_per_region():
    actions = read("range_replay")
    assert {a.workload for a in actions} == {"range"}
    assert identities(actions) == [(PAIR, 0, 0), ("single", 0, 0), (PAIR, 0, 1), ("single", 0, 1)]
    merged = merge_runs(actions, worker_runs([PAIR, "single"], 1), (TIME,))
    assert {r.kernel for run in merged.runs for r in run.records} == {"range"}
    assert all(r.value > 0 for run in merged.runs for r in run.records)


def test_sections_bring_their_metrics_when_deep():
    shallow = read("section")
    deep = read("section", deep=True)
    assert set(shallow[0].metrics) == {
        TIME,
        "device__attribute_display_name",
        "device__attribute_clock_rate",
        "device__attribute_memory_clock_rate",
    }
    assert "sm__throughput.avg.pct_of_peak_sustained_elapsed" in deep[0].metrics
    merged = merge_runs(deep, worker_runs(["scale"], 1, runs=1), (TIME,), deep=True)
    names = [r.metric for r in merged.runs[0].records]
    assert names[0] == TIME and len(names) > 10
    assert not any(n.startswith("device__attribute_") for n in names)
    assert all(not math.isnan(r.value) for r in merged.runs[0].records)


def test_start_end_ranges_carry_the_identity_too():
    actions = read("start_end")
    assert identities(actions) == [("scale", 0, 0), ("scale", 0, 1)]


def test_runs_the_worker_did_not_finish_and_failed_regions():
    actions = read("one_metric")
    runs = worker_runs(["scale"], 2, failed={("scale", 0, 1)})[:3]  # config 1 run 1 never completed
    merged = merge_runs(actions, runs, (TIME,))
    assert merged.unattributed == 1
    assert [len(r.records) for r in merged.runs] == [1, 0, 1]  # the core turns the failed region into NaN
    assert merged.runs[1].regions[0].failed


def test_a_requested_metric_missing_from_the_report_is_nan():
    actions = read("one_metric", (TIME, "nsightx__no_such.sum"))
    merged = merge_runs(actions, worker_runs(["scale"], 2), (TIME, "nsightx__no_such.sum"))
    missing = [r for run in merged.runs for r in run.records if r.metric == "nsightx__no_such.sum"]
    assert len(missing) == 4 and all(math.isnan(r.value) and r.unit is None for r in missing)


def test_action_json_round_trip():
    actions = read("two_kernels")
    assert [Action.from_json(a.to_json()) for a in actions] == actions


# --- `import ncu_report` after installing nsightx for ncu, as after installing nsight-python (issue 36) ----------


def test_the_ncu_extra_brings_ncu_report_where_nvidia_publishes_it():
    import tomllib

    from packaging.requirements import Requirement

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    for extra in ("ncu", "all"):
        (req,) = [Requirement(r) for r in extras[extra] if Requirement(r).name == "ncu-report"]
        assert req.specifier.contains("2026.3.1"), req
        assert req.marker is not None
        assert req.marker.evaluate({"sys_platform": "linux", "platform_machine": "x86_64"})
        assert req.marker.evaluate({"sys_platform": "win32", "platform_machine": "AMD64"})
        assert not req.marker.evaluate({"sys_platform": "linux", "platform_machine": "aarch64"})  # no wheel there


def test_nvidia_tutorials_last_step_opens_the_kept_report(plugin_host, tmp_path, monkeypatch):
    """The tutorial ends with ``ncu_report.load_report(path)`` and counts the launches of every range."""
    import ncu_fake
    import ncu_report

    import nsightx as nsight

    pytest.importorskip("cloudpickle")
    pytest.importorskip("nvtx")
    ncu_fake.use_fake_ncu(monkeypatch, tmp_path)
    monkeypatch.setenv("FAKE_NCU_REPORT", str(ncu_fake.ONE_METRIC))

    @nsight.analyze.kernel(
        configs=[(1,), (2,)], runs=2, backend="ncu", output_prefix=f"{tmp_path}/out/", verbosity=0, thermal_mode="off"
    )
    def scale(n):
        with nsight.annotate("scale"):
            pass

    scale()
    context = ncu_report.load_report(str(tmp_path / "out" / "ncu-output-scale-0.ncu-rep"))
    launches = [context.range_by_idx(i).num_actions() for i in range(context.num_ranges())]
    assert sum(launches) == 4  # the captured report the fake ncu copies: two configs x two runs


def test_an_infinite_sm_clock_value_is_no_measured_clock():
    """Regression (hunt20i): an inf clock (a zero-length interval) made the run's clock inf MHz and the
    environment's mean raised OverflowError after the whole sweep had run; it is now left out like NaN."""
    clock = "gpc__cycles_elapsed.avg.per_second"

    def action(run, hz):
        return Action(kernel="k", workload="kernel", ranges=[f"scale|config=0|run={run}"], metrics={clock: (hz, "hz")})

    actions = [action(0, math.inf), action(1, math.inf), action(1, 1.5e9)]
    merged = merge_runs(actions, worker_runs(["scale"], 1), (clock,))
    assert [[cv.value for cv in run.collectors] for run in merged.runs] == [[], [1500.0]]
    assert environment(actions) == {"MeasuredComputeClock": 1_500_000}
