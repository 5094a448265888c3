"""`import nsightx` does no work: no subprocess, no heavy imports, no environment changes, fast."""

from __future__ import annotations

import json
import subprocess
import sys

PROBE = r"""
import json, os, sys, time
events = []
sys.addaudithook(lambda ev, args: events.append(ev) if ev in ("subprocess.Popen", "os.system", "os.exec",
                                                              "os.posix_spawn", "ctypes.dlopen") else None)
env_before = dict(os.environ)
t0 = time.process_time()
import nsightx
cpu_s = time.process_time() - t0
print(json.dumps({"cpu_s": cpu_s, "events": events, "env_changed": dict(os.environ) != env_before,
                  "heavy": sorted(m for m in ("pandas", "numpy", "pydantic", "torch", "cupti", "pynvml",
                                              "matplotlib", "pluggy") if m in sys.modules)}))
"""


def test_import_is_cheap_and_side_effect_free():
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True)
    result = json.loads(out.stdout)
    assert result["events"] == []
    assert result["env_changed"] is False
    assert result["heavy"] == []
    # CPU time, not wall time: beside other jobs on 2 cores, the wall time of the same ~0.03 s of work stretches
    assert result["cpu_s"] < 0.3


def test_public_names_resolve():
    import nsightx

    for name in nsightx.__all__:
        assert getattr(nsightx, name) is not None, name
    assert callable(nsightx.analyze.kernel) and callable(nsightx.experimental.collect)
