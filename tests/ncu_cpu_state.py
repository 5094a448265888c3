"""An importable module whose profiled functions use module-level state that cannot be pickled (CPU only).

Under ncu these functions travel by reference: the worker imports this module, which opens its own file, makes
its own lock and its own ctypes pointer. Used by test_ncu_payload.py.
"""

from __future__ import annotations

import atexit
import ctypes
import os
import threading

import nsightx

LOCK = threading.Lock()
LOG = open(os.devnull, "w")
atexit.register(LOG.close)
POINTER = ctypes.pointer(ctypes.c_int(3))
SILENT = {
    "backend": "ncu",
    "verbosity": 0,
    "clock_control": "none",
    "thermal_mode": "off",
    "info_collectors": [],
    "configs": [(1,), (2,)],
    "runs": 2,
}


@nsightx.analyze.kernel(**SILENT)
def scale(n):
    """Uses all three: a lock, an open file and a ctypes pointer, each made at import time."""
    with LOCK:
        LOG.write(f"{POINTER.contents.value * n}\n")
    with nsightx.annotate("scale"):
        print(f"worker pid {os.getpid()} saw {POINTER.contents.value}")
