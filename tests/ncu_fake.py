"""The fake ncu of ``fixtures/ncu/fake_ncu.py`` put in place of Nsight Compute, for the CPU tests of the ncu backend.

The fake is the double at the ncu-binary boundary: it skips ncu's options and runs the real worker with the real
pickled plan, channel and NVTX session; ``FAKE_NCU_REPORT`` makes it copy a report captured on the H200 to the
``--export`` path. Everything on this side of the binary is the real code.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from nsightx._run.plan import Plan, ThermalSettings

FIXTURES = Path(__file__).parent / "fixtures" / "ncu"
FAKE = FIXTURES / "fake_ncu.py"
ONE_METRIC = FIXTURES / "one_metric.ncu-rep"
"""A report of annotation ``scale`` over configs (1,), (2,) with runs=2 (what :func:`make_plan` describes)."""
ROOT = Path(__file__).parent.parent
FAKE_VARS = (
    "FAKE_NCU_EXIT",
    "FAKE_NCU_SAY",
    "FAKE_NCU_REPORT",
    "FAKE_NCU_PASSES",
    "FAKE_NCU_QUERY_LOG",
    "FAKE_NCU_CRASH_AFTER",
)


def use_fake_ncu(monkeypatch: Any, tmp_path: Path) -> None:
    """Make the fake the only ncu the backend finds, with none of its knobs set."""
    from nsightx_ncu import _backend

    wrapper = tmp_path / "fake-bin" / "ncu"
    wrapper.parent.mkdir()
    wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{FAKE}" "$@"\n')
    wrapper.chmod(0o755)
    monkeypatch.setenv("NSIGHTX_NCU", str(wrapper))
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    monkeypatch.setattr(_backend._locate, "STANDARD_GLOBS", ())
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # the metric-name cache stays in the test
    for var in FAKE_VARS:
        monkeypatch.delenv(var, raising=False)


def make_plan(
    fn: Any, configs: tuple[tuple[Any, ...], ...] = ((1,), (2,)), runs: int = 2, warmup: int = 1, **kw: Any
) -> Plan:
    """A plan for ``fn(n)`` on the ncu backend, thermal guard off unless ``thermal=`` says otherwise."""
    args: dict[str, Any] = {
        "function": fn,
        "function_name": fn.__name__,
        "params": ("n",),
        "configs": configs,
        "runs": runs,
        "warmup": warmup,
        "metrics": ("gpu__time_duration.sum",),
        "backend": "ncu",
        "thermal": ThermalSettings(mode="off"),
    }
    args.update(kw)
    return Plan(**args)


def subprocess_env(**extra: str) -> dict[str, str]:
    """The environment for a script run as ``__main__`` that imports nsightx from this checkout."""
    import os

    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "backends"), str(ROOT / "plugins"), *sys.path]),
        **extra,
    }
