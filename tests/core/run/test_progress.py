"""The progress line: shown on a terminal for long sweeps, silent otherwise."""

from __future__ import annotations

import io
import re
import sys
import time

import nsightx
from nsightx._run import progress as _progress


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _sweep(verbosity, runs=4):
    @nsightx.analyze.kernel(configs=[1, 2], runs=runs, warmup=1, backend="host", verbosity=verbosity)
    def f(n):
        with nsightx.annotate("a"):
            time.sleep(0.002)

    return f


def test_progress_line_on_a_terminal(plugin_host, monkeypatch):
    monkeypatch.setattr(_progress, "DELAY_S", 0.0)  # show at once
    term = Terminal()
    monkeypatch.setattr(sys, "stderr", term)
    _sweep(nsightx.VerbosityLevel.INFO)()
    out = term.getvalue()
    assert "\rf: [" in out and "10/10 calls (2 warm-up), config 2/2" in out
    assert "nsightx: f: 2 config(s) x 4 run(s)" in out


def test_progress_shrinks_total_under_auto(plugin_host, monkeypatch):
    monkeypatch.setattr(_progress, "DELAY_S", 0.0)
    term = Terminal()
    monkeypatch.setattr(sys, "stderr", term)

    @nsightx.analyze.kernel(
        configs=[1, 2], runs="auto", min_runs=2, max_runs=50, target_ci_pct=50.0, warmup=0, backend="host"
    )
    def f(n):
        with nsightx.annotate("a"):
            time.sleep(0.002)

    f()
    last = term.getvalue().split("\r")[-1]
    done, total = re.search(r"(\d+)/(\d+) calls, config", last).groups()  # warmup=0: no warm-up part
    assert done == total and int(total) < 100


def test_silent_and_not_a_terminal_print_no_progress(plugin_host, monkeypatch, capsys):
    monkeypatch.setattr(_progress, "DELAY_S", 0.0)
    term = Terminal()
    monkeypatch.setattr(sys, "stderr", term)
    _sweep(nsightx.VerbosityLevel.SILENT)()
    assert term.getvalue() == ""
    monkeypatch.undo()
    monkeypatch.setattr(_progress, "DELAY_S", 0.0)
    _sweep(nsightx.VerbosityLevel.INFO)()
    err = capsys.readouterr().err
    assert "\r" not in err and "calls" not in err


def test_short_sweeps_stay_quiet(plugin_host, monkeypatch):
    term = Terminal()
    monkeypatch.setattr(sys, "stderr", term)
    _sweep(nsightx.VerbosityLevel.INFO)()
    assert "\r" not in term.getvalue()
