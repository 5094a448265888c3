"""``benchmarks/gpu_lag.py``'s arithmetic on made-up stamps (the script itself runs on the GPU machine only).

Two configs: in the first the host enters a region every 100 ns and each 40 ns kernel starts 10 ns after it, so
the GPU waits 60 ns between kernels, 20 of them the flush; in the second the host is far ahead and the GPU's only
gap between kernels is the 20 ns flush. The GPU's idle beyond the flush must be the first config's waits, and in
the second only the wait at the config boundary.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from _paths import ROOT
from _scripts import load_script

lag = load_script(ROOT / "benchmarks" / "gpu_lag.py", "gpu_lag_probe")


def _capture() -> Any:
    cap = lag.Capture()
    ext = 0

    def region(config: int, run: int, enter: int, start: int, end: int) -> None:
        nonlocal ext
        ext += 1
        cap.windows[ext] = SimpleNamespace(external_id=ext, config=config, run=run, enter_ns=enter, exit_ns=enter + 30)
        cap.kernels[ext] = [SimpleNamespace(start=start, end=end)]

    for run in range(3):  # host-bound: a run every 100 ns, a 40 ns kernel 10 ns after the enter
        t = 1000 + 100 * run
        region(0, run, t, t + 10, t + 50)
    t0 = 1400  # GPU-bound: regions entered 10 ns apart, kernels of 200 ns back to back with a 20 ns gap
    for run in range(4):
        start = 2000 + 220 * run
        region(1, run, t0 + 10 * run, start, start + 200)
    cap.windows[99] = SimpleNamespace(external_id=99, config=1, run=9, enter_ns=5000, exit_ns=5010)  # no kernel
    return cap


def test_rows_are_the_regions_with_kernels_in_enter_order() -> None:
    rows = lag.runs_of(_capture())
    assert [(r["config"], r["run"]) for r in rows] == [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2), (1, 3)]
    assert rows[0] == {"config": 0, "run": 0, "enter": 1000, "exit": 1030, "start": 1010, "end": 1050}


def test_the_flush_gap_comes_from_the_last_config_and_idle_is_what_exceeds_it() -> None:
    rows = lag.runs_of(_capture())
    flush = lag.flush_gap_ns(rows)
    assert flush == 20
    table = lag.per_config(rows, flush)
    first, second = table[0], table[1]
    assert first["host"] == pytest.approx(0.1) and first["gpu"] == pytest.approx(0.1)  # us: 100 ns a run
    assert first["lead"] == pytest.approx(0.01) and first["inside"] == pytest.approx(0.03)
    assert first["between"] == pytest.approx(0.07)
    assert first["idle_sum"] == pytest.approx(2 * (0.06 - 0.02))  # 60 ns gaps, 20 of them the flush
    assert second["idle_sum"] == pytest.approx((2000 - 1250 - 20) / 1e3)  # only the config boundary waited
    assert second["boundary"] == pytest.approx((1400 - 1230) / 1e3)
    assert second["gpu"] == pytest.approx(0.22)
