"""How the plan travels to the ncu worker: by reference when importable, by value otherwise, named failures.

The payload is nsightx's (``nsightx._remote.payload``); the words for the worker are the ncu backend's.

The diagnostics are checked on CPU-only state (a lock, an open file, a ctypes pointer); the GPU kinds of state
are in test_ncu_state_gpu.py. End-to-end cases run the real worker under the fake ncu.
"""

from __future__ import annotations

import ctypes
import json
import subprocess
import sys
import textwrap
import threading

import ncu_fake
import pytest
from ncu_fake import make_plan
from nsightx_ncu._backend import NcuBackend

import nsightx
from nsightx._remote import payload as _payload
from nsightx._remote.travel import Destination, UnpicklableError, reference
from nsightx._results.sink import RunSink
from nsightx._run.plan import Plan

pytest.importorskip("cloudpickle")
pytest.importorskip("nvtx")

NCU_WORKER = Destination(
    "the ncu worker", "measure in process with backend='cupti' or 'events', which need no pickling"
)


def dump_plan(plan: Plan) -> bytes:
    """The plan pickled as the ncu backend ships it (its words for the worker in the errors)."""
    return _payload.dump_plan(plan, NCU_WORKER)


@pytest.fixture(autouse=True)
def fake_ncu(monkeypatch, tmp_path):
    ncu_fake.use_fake_ncu(monkeypatch, tmp_path)


def test_a_decorated_function_of_an_importable_module_travels_by_reference():
    import ncu_cpu_state

    assert reference(ncu_cpu_state.scale.fn) == ("ncu_cpu_state", "scale", 1)  # through the ProfiledFunction

    def local(n):
        pass

    assert reference(local) is None
    data = dump_plan(make_plan(ncu_cpu_state.scale.fn))
    assert b"ncu_cpu_state" in data and len(data) < 4000  # a path, not the code with its globals


def test_module_level_lock_file_and_pointer_work_by_reference(monkeypatch, capsys):
    """The worker imports the module and so builds its own lock, file and pointer."""
    import ncu_cpu_state

    monkeypatch.setenv("FAKE_NCU_REPORT", str(ncu_fake.ONE_METRIC))
    df = ncu_cpu_state.scale().to_dataframe()
    assert df["NumRuns"].tolist() == [2, 2]
    assert capsys.readouterr().out.count("saw 3") == 6  # one warm-up and two measured runs per config


@pytest.mark.parametrize("kind", ["lock", "file", "pointer"])
def test_unpicklable_closure_variable_is_named_before_ncu_starts(kind, tmp_path):
    state = {
        "lock": threading.Lock,
        "file": lambda: open(tmp_path / "f.txt", "w"),
        "pointer": lambda: ctypes.pointer(ctypes.c_int(1)),
    }[kind]()
    expected = {"lock": "_thread.lock", "file": "_io.TextIOWrapper", "pointer": "ctypes"}[kind]

    def work(n):
        with nsightx.annotate("a"):
            repr(state)

    plan = make_plan(work, output_dir=tmp_path / "out")
    with pytest.raises(UnpicklableError) as info:
        NcuBackend().execute(plan, RunSink())
    text = str(info.value)
    assert info.value.what == "closure variable `state`" and expected in info.value.type_name
    assert "cannot send work to the ncu worker: closure variable `state`" in text
    assert "create `state` inside work" in text and "importable module" in text and "info collector" in text
    assert not list((tmp_path / "out").glob("*.log"))  # ncu never started
    if kind == "file":
        state.close()


def test_helper_chain_and_config_values_are_named():
    lock = threading.Lock()

    def helper():
        with lock:
            pass

    def work(n):
        helper()

    with pytest.raises(UnpicklableError, match=r"closure variable `lock` \(through closure variable `helper`\)"):
        dump_plan(make_plan(work))
    with pytest.raises(UnpicklableError, match=r"config 1 argument `n`, a _thread.lock, cannot be pickled") as info:
        dump_plan(make_plan(lambda n: None, configs=((1,), (threading.Lock(),))))
    assert "build the object inside" in str(info.value)


def test_large_payload_warns_with_the_global_and_its_size(monkeypatch):
    monkeypatch.setattr(_payload, "LARGE_PAYLOAD_BYTES", 1 << 20)
    blob = b"x" * (3 << 20)

    def work(n):
        return len(blob)

    with pytest.warns(RuntimeWarning, match=r"is 3\.0 MiB when pickled: closure variable `blob` \(bytes\) is 3\.0 MiB"):
        dump_plan(make_plan(work))


MAIN = textwrap.dedent("""
    import ctypes, json, os, threading
    import nsightx

    LOCK = threading.Lock()
    FILE = open(os.devnull, "w")
    POINTER = ctypes.pointer(ctypes.c_int(3))
    found = {}
    for name in ("LOCK", "FILE", "POINTER"):
        src = f"def work(n):\\n    with nsightx.annotate('a'):\\n        repr({name})\\n"
        exec(src, globals())
        profiled = nsightx.analyze.kernel(configs=[(1,)], runs=1, backend="ncu", verbosity=0,
                                          thermal_mode="off", clock_control="none")(work)
        try:
            profiled()
        except nsightx.MeasurementError as e:
            found[name] = [type(e).__name__, e.what, e.type_name, str(e)]
    print(json.dumps(found))
""")


def test_main_script_globals_that_cannot_travel_are_named(tmp_path):
    """A script run as __main__: its function travels by value, and each bad global is named with its type."""
    script = tmp_path / "bench.py"
    script.write_text(MAIN)
    out = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=ncu_fake.subprocess_env(),
    )
    assert out.returncode == 0, out.stderr[-3000:]
    found = json.loads(out.stdout.strip().splitlines()[-1])
    assert found["LOCK"][:3] == ["UnpicklableError", "global `LOCK`", "_thread.lock"]
    assert found["FILE"][:3] == ["UnpicklableError", "global `FILE`", "_io.TextIOWrapper"]
    assert found["POINTER"][1] == "global `POINTER`" and "LP_c_int" in found["POINTER"][2]
    assert "is defined in __main__ (a script or a notebook)" in found["LOCK"][3]
