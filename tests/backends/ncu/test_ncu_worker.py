"""The worker path on a machine without a GPU: a stand-in for the ncu executable runs the real worker.

``fixtures/ncu/fake_ncu.py`` skips ncu's options and runs the application (the real worker, with the real
cloudpickled plan and NVTX session); with ``FAKE_NCU_REPORT`` it copies a report captured on the H200 to the
``--export`` path, so the parent's reading and merging run on real data too.
"""

from __future__ import annotations

import os
import shlex
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import ncu_fake
import pytest
from nsightx_ncu._backend import NcuBackend, make_artifacts

import nsightx
from nsightx._results.sink import RunSink
from nsightx._run.plan import Plan, ThermalSettings
from nsightx.ext import child_env

pytest.importorskip("cloudpickle")
pytest.importorskip("nvtx")
pytest.importorskip("ncu_report", reason="needs the ncu-report package (test dependency group)")

FIXTURES = ncu_fake.FIXTURES
ROOT = ncu_fake.ROOT


@pytest.fixture(autouse=True)
def fake_ncu(monkeypatch, tmp_path):
    ncu_fake.use_fake_ncu(monkeypatch, tmp_path)


def make_plan(fn, configs, runs=2, warmup=1, **kw) -> Plan:
    kw.setdefault("thermal", ThermalSettings())  # these tests keep the default guard (none on CPU: it warns)
    return ncu_fake.make_plan(fn, configs, runs=runs, warmup=warmup, **kw)


def test_user_function_raising_names_config_and_run_and_keeps_earlier_runs(tmp_path):
    def work(n):
        with nsightx.annotate("scale"):
            if n == 2:
                raise MemoryError("pretend CUDA out of memory")

    sink = RunSink()
    with pytest.raises(nsightx.MeasurementError) as info:
        NcuBackend().execute(make_plan(work, ((1,), (2,))), sink)
    text = str(info.value)
    assert "config 1 (args (2,)), warm-up run -1" in text
    assert "MemoryError: pretend CUDA out of memory" in text
    assert "2 measured run(s) completed and were kept" in text
    assert "ncu log:" in text and "Traceback" in text
    assert [(r.config, r.run) for r in sink.runs] == [(0, 0), (0, 1)]
    assert all(r.regions[0].annotation == "scale" and r.regions[0].host_ns > 0 for r in sink.runs)


def test_range_replay_unsupported_api_becomes_a_clear_error(monkeypatch):
    # What ncu 2025.3.1 printed on the H200 for a range around a first (cold) torch matmul.
    monkeypatch.setenv("FAKE_NCU_SAY", (FIXTURES / "range_unsupported.log").read_text())
    monkeypatch.setenv("FAKE_NCU_EXIT", "9")

    def work(n):
        with nsightx.annotate("matmul"):
            pass

    with pytest.raises(nsightx.MeasurementError, match="range replay could not capture") as info:
        NcuBackend().execute(make_plan(work, ((1,),), replay_mode="range"), RunSink())
    assert "replay_mode='kernel'" in str(info.value) and "RecordStatusUnsupportedApi" in str(info.value)


def test_ncu_failure_quotes_the_log(monkeypatch):
    monkeypatch.setenv("FAKE_NCU_SAY", "==ERROR== Failed to find metric nsightx__bogus")
    monkeypatch.setenv("FAKE_NCU_EXIT", "1")

    def work(n):
        with nsightx.annotate("a"):
            pass

    with pytest.raises(nsightx.MeasurementError, match="exited with status 1 after config 0 run 1") as info:
        NcuBackend().execute(make_plan(work, ((1,),)), RunSink())
    assert "Failed to find metric nsightx__bogus" in str(info.value)


def test_missing_report_is_an_error():
    def work(n):
        with nsightx.annotate("a"):
            pass

    with pytest.raises(nsightx.MeasurementError, match="wrote no report"):
        NcuBackend().execute(make_plan(work, ((1,),)), RunSink())


def test_timeout_kills_ncu_and_the_worker():
    def work(n):
        import time

        time.sleep(60)

    with pytest.raises(nsightx.MeasurementError, match=r"did not finish within ncu_timeout_s=1\.0s"):
        NcuBackend().execute(make_plan(work, ((1,),), backend_options={"ncu_timeout_s": 1}), RunSink())


def test_unpicklable_plan_is_reported():
    import threading

    lock = threading.Lock()

    def work(n):
        with lock:
            pass

    with pytest.raises(nsightx.MeasurementError, match="cannot send work to the ncu worker: closure variable `lock`"):
        NcuBackend().execute(make_plan(work, ((1,),)), RunSink())


def test_private_folder_is_0700_and_report_goes_to_output_dir(tmp_path):
    plan = make_plan(lambda n: None, ((1,),), output_dir=tmp_path / "out", output_tag="f-0", function_name="f")
    art = make_artifacts(plan)
    try:
        assert stat.S_IMODE(os.stat(art.private).st_mode) == 0o700
        assert art.report == tmp_path / "out" / "ncu-output-f-0.ncu-rep"
        assert art.log == tmp_path / "out" / "ncu-output-f-0.log"
        assert art.actions.parent == art.private
    finally:
        art.private.rmdir()


def test_child_env_carries_sys_path():
    env = child_env({"PYTHONPATH": "/already/there"})
    parts = env["PYTHONPATH"].split(os.pathsep)
    assert parts[-1] == "/already/there"
    assert str(ROOT / "backends") in parts or any(p.endswith("backends") for p in parts)


MAIN = textwrap.dedent("""
    import json, sys
    import nsightx

    @nsightx.analyze.kernel(configs=[(1,), (2,)], runs=2, backend="ncu", verbosity=0, clock_control="none")
    def scale(n):
        with nsightx.annotate("scale"):
            pass

    res = scale()
    df = res.to_dataframe()
    print(json.dumps({"rows": df[["Annotation", "n", "NumRuns", "Unit"]].to_dict("records"),
                      "gpu": res.environment["GPU"], "loaded": sorted(m for m in sys.modules if "ncu_report" in m),
                      "report": res.environment["ncu_report"]}))
""")


def test_function_from_main_end_to_end_with_a_captured_report(tmp_path):
    """A __main__ function travels by value; the fixture report stands in for what ncu would write.

    Without output_prefix the report is read and then deleted with the call's temporary folder.
    """
    report = FIXTURES / "one_metric.ncu-rep"
    script = tmp_path / "main_script.py"
    script.write_text(MAIN)
    temp = tmp_path / "temp"
    temp.mkdir()
    env = {
        **os.environ,
        "TMPDIR": str(temp),
        "FAKE_NCU_REPORT": str(report),
        "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "backends"), str(ROOT / "plugins"), *sys.path]),
    }
    out = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=120, check=False
    )
    assert out.returncode == 0, out.stderr[-3000:]
    import json

    data = json.loads(out.stdout.strip().splitlines()[-1])
    assert data["rows"] == [
        {"Annotation": "scale", "n": 1, "NumRuns": 2, "Unit": "ns"},
        {"Annotation": "scale", "n": 2, "NumRuns": 2, "Unit": "ns"},
    ]
    assert "H200" in data["gpu"]
    assert data["loaded"] == []  # the report was read in a child process
    assert data["report"] is None and list(temp.iterdir()) == []  # nothing left behind without output_prefix


def test_unknown_metric_is_an_error_naming_it(monkeypatch):
    """ncu 2025.3.1 says nothing about an unknown metric (fixtures/ncu/bad_metric.log): nsightx must."""
    report = FIXTURES / "one_metric.ncu-rep"
    monkeypatch.setenv("FAKE_NCU_REPORT", str(report))
    monkeypatch.setenv("FAKE_NCU_SAY", (FIXTURES / "bad_metric.log").read_text())

    def scale(n):
        with nsightx.annotate("scale"):
            pass

    plan = make_plan(scale, ((1,), (2,)), metrics=("gpu__time_duration.sum", "nsightx__no_such.sum"))
    sink = RunSink()
    with pytest.raises(nsightx.MeasurementError) as info:
        NcuBackend().execute(plan, sink)
    text = str(info.value)
    assert "['nsightx__no_such.sum']" in text and "ncu --query-metrics" in text and "ncu log:" in text
    assert "Profiling" in text  # the log tail
    assert len(sink.runs) == 4  # what was measured is kept


def test_measured_sm_clock_reaches_the_row(monkeypatch, tmp_path):
    """With gpc__cycles_elapsed.avg.per_second collected, each row shows the measured SM clock."""
    report = FIXTURES / "multi_pass.ncu-rep"
    monkeypatch.setenv("FAKE_NCU_REPORT", str(report))
    metrics = ["gpu__time_duration.sum", "gpc__cycles_elapsed.avg.per_second"]

    @nsightx.analyze.kernel(
        configs=[(1,), (2,)],
        runs=2,
        backend="ncu",
        metrics=metrics,
        verbosity=0,
        clock_control="none",
        thermal_mode="off",
        info_collectors=[],
    )
    def scale(n):
        with nsightx.annotate("scale"):
            pass

    res = scale()
    df = res.to_dataframe()
    assert {"ComputeClock", "MeasuredSMClockMHz_Avg"} <= set(df.columns)
    assert (df["ComputeClock"] == 1_980_000).all()  # rated, kHz
    assert df["MeasuredSMClockMHz_Avg"].between(1000, 2100).all()  # measured while the kernels ran, MHz
    assert 1_000_000 < res.environment["MeasuredComputeClock"] < 2_100_000


def test_report_name_starts_with_the_output_prefix_stem(tmp_path):
    plan = make_plan(
        lambda n: None, ((1,),), output_dir=tmp_path, output_tag="f-0", output_stem="exp1_", function_name="f"
    )
    art = make_artifacts(plan)
    try:
        assert art.report == tmp_path / "exp1_ncu-output-f-0.ncu-rep"
        assert art.log == tmp_path / "exp1_ncu-output-f-0.log"
    finally:
        art.private.rmdir()


def test_worker_opens_process_wide_start_end_ranges_by_default(monkeypatch):
    import nvtx
    from nsightx_ncu import _worker

    calls = []
    monkeypatch.setattr(nvtx, "start_range", lambda message, domain: calls.append(("start", message, domain)) or 7)
    monkeypatch.setattr(nvtx, "end_range", lambda rid: calls.append(("end", rid)))
    monkeypatch.setattr(nvtx, "push_range", lambda **kw: calls.append(("push", kw)))
    session = _worker.NvtxSession(*_worker.nvtx_callables("start_end"))
    from nsightx._results.records import RegionId

    session.region_enter(RegionId("warm", 0, -1))  # warm-up: no range
    session.region_exit(RegionId("warm", 0, -1), False)
    session.region_enter(RegionId("a", 0, 1))
    session.region_exit(RegionId("a", 0, 1), False)
    assert calls == [("start", "a|config=0|run=1", "nsightx"), ("end", 7)]
    with pytest.raises(ValueError, match="'start_end' or 'push_pop'"):
        _worker.nvtx_callables("both")


def test_default_start_end_path_end_to_end_with_a_captured_report(monkeypatch):
    """The report captured on the H200 with start/end ranges is attributed run by run through the real worker."""
    monkeypatch.setenv("FAKE_NCU_REPORT", str(FIXTURES / "start_end.ncu-rep"))

    def scale(n):
        with nsightx.annotate("scale"):
            pass

    sink = RunSink()
    env = NcuBackend().execute(make_plan(scale, ((1,),)), sink)
    cmd = shlex.split(str(env["ncu_command"]))
    assert cmd[cmd.index("--nvtx-include") + 1] == "regex:nsightx@.+"
    assert [(r.config, r.run) for r in sink.runs] == [(0, 0), (0, 1)]
    assert [r.regions[0].attributes["kernel_count"] for r in sink.runs] == [1, 1]
    assert all(len(r.records) == 1 and r.records[0].value > 0 for r in sink.runs)


def test_report_names_are_nsight_pythons_and_never_overwrite(tmp_path):
    """``<prefix>ncu-output-<function>-<n>``; a taken name (report or log) moves on to the next free n."""
    (tmp_path / "exp1_ncu-output-f-0.ncu-rep").write_text("someone else's report")
    (tmp_path / "exp1_ncu-output-f-1.log").write_text("someone else's log")
    plan = make_plan(
        lambda n: None, ((1,),), output_dir=tmp_path, output_tag="f-0", output_stem="exp1_", function_name="f"
    )
    first, second = make_artifacts(plan), make_artifacts(plan)  # the second call is refused the claimed name
    try:
        assert (first.report.name, first.log.name) == ("exp1_ncu-output-f-2.ncu-rep", "exp1_ncu-output-f-2.log")
        assert second.report.name == "exp1_ncu-output-f-3.ncu-rep"
        # the claim: both names created empty and exclusively (ncu's report and output then fill them)
        assert first.log.stat().st_size == 0 and first.report.stat().st_size == 0
        assert (tmp_path / "exp1_ncu-output-f-0.ncu-rep").read_text() == "someone else's report"
        assert (tmp_path / "exp1_ncu-output-f-1.log").read_text() == "someone else's log"
    finally:
        first.private.rmdir()
        second.private.rmdir()


def test_claims_from_many_threads_never_collide(tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    from nsightx_ncu._backend import reserve_name

    with ThreadPoolExecutor(8) as pool:
        names = list(pool.map(lambda _: reserve_name(tmp_path, "ncu-output-f", 0)[0].name, range(32)))
    assert sorted(names, key=lambda n: int(n.removesuffix(".ncu-rep").rsplit("-", 1)[1])) == [
        f"ncu-output-f-{n}.ncu-rep" for n in range(32)
    ]


def test_names_written_are_in_the_environment_and_the_info_line(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("FAKE_NCU_REPORT", str(FIXTURES / "start_end.ncu-rep"))
    out = tmp_path / "out"

    @nsightx.analyze.kernel(
        runs=2,
        backend="ncu",
        output_prefix=f"{out}/exp1_",
        clock_control="none",
        thermal_mode="off",
        info_collectors=[],
    )
    def scale():
        with nsightx.annotate("scale"):
            pass

    (out).mkdir()
    (out / "exp1_ncu-output-scale-0.ncu-rep").write_text("kept")  # e.g. from an nsight-python run
    envs = [scale().environment for _ in range(2)]
    reports = [Path(str(e["ncu_report"])).name for e in envs]
    logs = [Path(str(e["ncu_log"])).name for e in envs]
    assert reports == ["exp1_ncu-output-scale-1.ncu-rep", "exp1_ncu-output-scale-2.ncu-rep"]
    assert logs == ["exp1_ncu-output-scale-1.log", "exp1_ncu-output-scale-2.log"]
    assert all(Path(str(e["ncu_report"])).stat().st_size > 1000 and Path(str(e["ncu_log"])).is_file() for e in envs)
    assert (out / "exp1_ncu-output-scale-0.ncu-rep").read_text() == "kept"
    err = capsys.readouterr().err
    for e in envs:
        assert f"nsightx: scale: ncu report {e['ncu_report']}, log {e['ncu_log']}" in err


def test_a_call_that_never_started_ncu_gives_its_claim_back(tmp_path):
    import threading

    lock = threading.Lock()

    def work(n):
        with lock:
            pass

    plan = make_plan(work, ((1,),), output_dir=tmp_path / "out", output_tag="work-0")
    with pytest.raises(nsightx.MeasurementError, match="cannot be pickled"):
        NcuBackend().execute(plan, RunSink())
    assert list((tmp_path / "out").iterdir()) == []
