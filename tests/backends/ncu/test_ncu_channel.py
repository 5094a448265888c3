"""Collectors, the thermal guard and the progress line stay in the user's process under ncu (CPU, fake ncu).

The fake ncu (the double at the ncu-binary boundary) runs the real worker; the channel, the proxies, the parent's
collectors and guard, the supervising loop and the merge are the real code. NVML is the scripted double of
``nvml_double.py``: it exists only in this process, so a value that reaches a row proves it was read here.
"""

from __future__ import annotations

import ctypes
import dataclasses
import os
import signal
import tempfile
import threading
import time
from pathlib import Path

import ncu_fake
import pytest
from ncu_fake import make_plan
from nsightx_ncu._backend import NcuBackend
from nvml_double import GPU_A, FakeGpu, install

import nsightx
from nsightx._results.sink import RunSink
from nsightx._run.collectors import InfoCollector
from nsightx._run.plan import ThermalSettings
from nsightx._spec.makeplan import temperature_source

pytest.importorskip("cloudpickle")
pytest.importorskip("nvtx")
pytest.importorskip("ncu_report", reason="needs the ncu-report package (test dependency group)")


@pytest.fixture(autouse=True)
def fake_ncu(monkeypatch, tmp_path):
    ncu_fake.use_fake_ncu(monkeypatch, tmp_path)


def _values(run, name):
    return [c.value for c in run.collectors if c.name == name]


def test_collectors_run_in_the_parent_in_step_with_the_worker(monkeypatch, tmp_path):
    """Each RUN value is read here just before its run; collector state that cannot be pickled never travels."""
    monkeypatch.setenv("FAKE_NCU_REPORT", str(ncu_fake.ONE_METRIC))
    journal = tmp_path / "journal.txt"
    journal.write_text("")
    unpicklable = (threading.Lock(), ctypes.pointer(ctypes.c_int(7)))  # what an NVML handle is made of
    parent = os.getpid()

    def runs_done(ctx):
        with unpicklable[0]:
            return len(journal.read_text().splitlines()) + 0 * unpicklable[1].contents.value

    def where(ctx):
        return f"{os.getpid()}:{ctx.scope.value}:{ctx.config}:{ctx.annotation}"

    def scale(n):
        with open(journal, "a") as fh:
            fh.write(f"{os.getpid()}\n")
        with nsightx.annotate("scale"):
            pass

    collectors = (
        InfoCollector("RunsDone", runs_done, "run"),
        InfoCollector("Once", where, "once"),
        InfoCollector("Cfg", where, "config"),
        InfoCollector("Ann", where, "annotation"),
    )
    sink = RunSink()
    NcuBackend().execute(make_plan(scale, collectors=collectors), sink)
    measured = [r for r in sink.runs if r.config >= 0]
    assert [(r.config, r.run) for r in measured] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    # warm-up c0 | c0r0 | c0r1 | warm-up c1 | c1r0 | c1r1: runs finished before each measured run starts
    assert [_values(r, "RunsDone") for r in measured] == [[1], [2], [4], [5]]
    worker_pids = set(journal.read_text().split())
    assert len(worker_pids) == 1 and str(parent) not in worker_pids  # the function ran in the worker
    [once] = [r for r in sink.runs if r.config < 0]
    assert _values(once, "Once") == [f"{parent}:once:None:None"]
    assert _values(measured[0], "Cfg") == [f"{parent}:config:0:None"]
    assert _values(measured[2], "Cfg") == [f"{parent}:config:1:None"]
    assert [_values(r, "Ann") for r in measured][1] == [f"{parent}:annotation:0:scale"]
    assert all(r.records and r.records[0].metric == "gpu__time_duration.sum" for r in measured)


def test_collector_that_raises_warns_once_and_the_runs_go_on(monkeypatch):
    monkeypatch.setenv("FAKE_NCU_REPORT", str(ncu_fake.ONE_METRIC))

    def broken(ctx):
        raise OSError("sensor unplugged")

    def scale(n):
        with nsightx.annotate("scale"):
            pass

    sink = RunSink()
    with pytest.warns(RuntimeWarning, match="'Sensor' \\(run\\) raised OSError: sensor unplugged") as caught:
        NcuBackend().execute(make_plan(scale, collectors=(InfoCollector("Sensor", broken, "run"),)), sink)
    assert sum("Sensor" in str(w.message) for w in caught) == 1
    measured = [r for r in sink.runs if r.config >= 0]
    assert len(measured) == 4 and all(_values(r, "Sensor") == [None] for r in measured)


def test_default_nvml_collectors_and_thermal_guard_run_in_the_parent(plugin_host, monkeypatch):
    """The nvml plugin (default collectors) and the guard read the NVML double, which exists only here."""
    install(monkeypatch, [FakeGpu(GPU_A, sm_mhz=[1980, 1755, 1700, 1650, 1600], temp_c=[41, 42, 43, 44, 45])])
    monkeypatch.setenv("FAKE_NCU_REPORT", str(ncu_fake.ONE_METRIC))

    @nsightx.analyze.kernel(configs=[(1,), (2,)], runs=2, backend="ncu", verbosity=0, clock_control="none")
    def scale(n):
        with nsightx.annotate("scale"):
            pass

    df = scale().to_dataframe()
    assert {"DriverVersion", "GPUName", "MeasuredSMClockMHz_Avg", "GPUTemperatureC_Avg", "ThermalPauseS_Avg"} <= set(
        df.columns
    )
    assert (df["GPUName"] == "NVIDIA H200").all()
    assert (df["ThermalPauseS_Avg"] == 0.0).all()
    assert df["MeasuredSMClockMHz_Avg"].between(1600, 1980).all()


def test_manual_thermal_timeout_raises_in_the_parent_and_stops_the_worker(plugin_host, monkeypatch):
    install(monkeypatch, [FakeGpu(GPU_A, temp_c=88)])  # 1 °C below slowdown (89 °C)

    def scale(n):
        with nsightx.annotate("scale"):
            pass

    settings = ThermalSettings(mode="manual", timeout=0)  # its source as a call's plan builder resolves it
    plan = make_plan(
        scale, thermal=dataclasses.replace(settings, source=temperature_source(plugin_host, settings, None))
    )
    with pytest.raises(nsightx.CoolingTimeoutError, match="did not cool"):
        NcuBackend().execute(plan, RunSink())


@pytest.mark.parametrize("how", ["os._exit", "SIGKILL"])
def test_worker_dying_mid_run_keeps_completed_runs_and_names_the_run(how):
    def scale(n):
        if n == 2:
            if how == "os._exit":
                os._exit(9)
            os.kill(os.getpid(), signal.SIGKILL)
        with nsightx.annotate("scale"):
            pass

    sink = RunSink()
    start = time.monotonic()
    with pytest.raises(nsightx.MeasurementError) as info:
        NcuBackend().execute(make_plan(scale, warmup=0), sink)
    text = str(info.value)
    assert time.monotonic() - start < 30
    assert "the ncu worker died at config 1 (args (2,)), run 0 without finishing it" in text
    assert "2 measured run(s) completed and were kept" in text and "ncu log:" in text
    assert [(r.config, r.run) for r in sink.runs] == [(0, 0), (0, 1)]


def test_application_replay_starts_the_worker_per_pass(monkeypatch):
    monkeypatch.setenv("FAKE_NCU_REPORT", str(ncu_fake.ONE_METRIC))
    monkeypatch.setenv("FAKE_NCU_PASSES", "3")
    calls = []

    def count(ctx):
        calls.append(ctx.scope)
        return len(calls) - 1

    def scale(n):
        with nsightx.annotate("scale"):
            pass

    plan = make_plan(scale, replay_mode="application", collectors=(InfoCollector("Pass", count, "once"),))
    sink = RunSink()
    NcuBackend().execute(plan, sink)
    assert len(calls) == 3  # ONCE collectors ran once per pass, here
    assert [(r.config, r.run) for r in sink.runs] == [(-1, -1), (0, 0), (0, 1), (1, 0), (1, 1)]
    assert [c.value for c in sink.runs[0].collectors] == [2]  # the last pass's host-side records are kept


def test_ctrl_c_in_the_parent_kills_the_worker_and_cleans_up(monkeypatch, tmp_path):
    private_root = tmp_path / "t"
    private_root.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(private_root))
    pid_file = tmp_path / "worker.pid"

    def interrupt(ctx):
        if ctx.config == 1:
            raise KeyboardInterrupt
        return 0

    def scale(n):
        pid_file.write_text(str(os.getpid()))
        with nsightx.annotate("scale"):
            time.sleep(0.05)

    with pytest.raises(KeyboardInterrupt):
        NcuBackend().execute(make_plan(scale, collectors=(InfoCollector("Stop", interrupt, "config"),)), RunSink())
    left = [p.name for p in private_root.rglob("*")]
    assert left == [], left  # payload, spec, socket, report and log gone with the private folder (no output_prefix)
    worker = int(pid_file.read_text())
    deadline = time.monotonic() + 30  # generous: a loaded machine may take a while to reap it
    while not _ended(worker):
        if time.monotonic() > deadline:
            pytest.fail(f"worker {worker} still runs 30 s after Ctrl-C")
        time.sleep(0.1)


def _ended(pid: int) -> bool:
    """The process is gone or a zombie (its status file may vanish while it is read)."""
    try:
        return "State:\tZ" in Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return True
