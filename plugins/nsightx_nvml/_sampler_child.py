"""The sampler process: reads one device's NVML values every period while runs keep starting.

Started by :class:`nsightx_nvml._sampler.ProcessSampler` as ``python -m nsightx_nvml._sampler_child '<json>'``
with the shared file, the device's NVML UUID, the period, the module that gives ``pynvml`` and the parent's pid.
It publishes each sample into the shared file (:mod:`nsightx_nvml._shm`) and parks (makes no NVML call; looks
for a new run every period for a second, then every ``parked_long_s``) once no run has started for
``idle_periods`` periods. It ends when
asked to, when its parent is gone, or when NVML cannot start (the parent then keeps reading NVML itself).

Why a process: a sampling thread in the user's process shares its GIL with the thread that launches the
kernels (every NVML call hands it over and back), and it is started and joined by every call. Measured on the
H200 (``98c9cf0:benchmarks/results/2026-12-03-s4-collector-cost-{thread,process}.json``), the process made the
collector's start/stop ~5x cheaper per call (422 -> 80 us and 171 -> 27 us); the whole-call wall time of the
split benchmark did not move beyond its noise (its ``default`` variant read 1.26-1.28x in both, an effect of
that benchmark's setup that ``backend_overhead.py``, 1.07x, does not show).
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import time

from nsightx_nvml._fields import FieldReader
from nsightx_nvml._lib import Nvml
from nsightx_nvml._shm import SharedSample

PARKED_SHORT_S = 1.0
"""For this long after parking the process looks for a new run every period (sweeps come in quick series)."""


def _load(spec: str) -> object:
    """``"pynvml"`` or ``"module:function"`` (a function returning a pynvml-like module: tests use a double)."""
    module, _, function = spec.partition(":")
    loaded = importlib.import_module(module)
    return getattr(loaded, function)() if function else loaded


def run(args: dict[str, object]) -> int:
    """Sample until asked to stop or orphaned; returns the exit status."""
    shared = SharedSample(str(args["shm"]))
    parent = int(str(args["parent"]))
    period = float(str(args["period_s"]))
    idle_ns = int(float(str(args["idle_periods"])) * period * 1e9)
    try:
        nvml = Nvml(_load(str(args["loader"])))
        nvml.init()
        sensors = nvml.parent(nvml.by_uuid(str(args["uuid"])))
    except Exception as e:  # no NVML here: the parent reads directly
        shared.set_error(f"{type(e).__name__}: {e}")
        return 1
    shared.set_pid(os.getpid())
    reader = FieldReader()
    label = str(args["uuid"])
    long_poll = float(str(args.get("parked_long_s", 0.05)))
    parked = False
    while not shared.stop_requested() and os.getppid() == parent:
        since = time.perf_counter_ns() - shared.demand_ns()
        if since > idle_ns:
            if not parked:
                parked = True
                shared.count_park()
            time.sleep(period if since < PARKED_SHORT_S * 1e9 else long_poll)
            continue
        parked = False
        taken = time.perf_counter_ns()
        try:
            shared.publish(taken, reader.read_raw(nvml, sensors, label))
        except Exception as e:  # a failed read keeps the previous sample
            shared.set_error(f"{type(e).__name__}: {e}")
        time.sleep(max(0.0, period - (time.perf_counter_ns() - taken) / 1e9))
    shared.set_pid(0)
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point: one JSON argument (see the module docstring)."""
    argv = sys.argv if argv is None else argv
    return run(json.loads(argv[1]))


if __name__ == "__main__":
    sys.exit(main())
