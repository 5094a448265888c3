"""``nsightx doctor``'s host clock line: the clock source and what a read costs (issue 35, session 17)."""

from __future__ import annotations

import time
from pathlib import Path

from nsightx._commands import clockcost
from nsightx.cli import main


def test_the_clock_source_is_read_from_its_file_and_none_without_one(tmp_path: Path) -> None:
    f = tmp_path / "current_clocksource"
    f.write_text("hpet\n")
    assert clockcost.clock_source(f) == "hpet"
    assert clockcost.clock_source(tmp_path / "missing") is None


def test_a_slow_clock_is_measured_as_slow() -> None:
    def slow() -> int:
        t = time.perf_counter_ns()
        while time.perf_counter_ns() - t < 2000:
            pass
        return t

    assert clockcost.read_cost_ns(slow, reads=50, rounds=3) >= 2000


def test_a_slow_read_is_called_out_and_a_fast_one_is_not() -> None:
    assert clockcost.clock_line("tsc", 40.0) == "host clock: tsc, 40 ns a read (time.perf_counter_ns)"
    slow = clockcost.clock_line("hpet", 1500.0)
    assert slow.startswith("host clock: hpet, 1500 ns a read") and "slow: each measured run" in slow
    assert "clock source unknown" in clockcost.clock_line("", 40.0)


def test_doctor_prints_the_host_clock(capsys, plugin_host) -> None:
    assert main(["doctor"]) == 0
    assert any(line.startswith("host clock: ") for line in capsys.readouterr().out.splitlines())
