"""What a person reads from ``nsightx show``, ``doctor`` and the progress line, against a naive reference.

The reference is built from the docs, not from nsightx's code: docs/api.md's command table (``nsightx show FILE``
prints a saved result, a raw ``raw_data-*.jsonl`` or a save "in readable units"; warnings met while reading are
one line each on stderr; every misuse is one line on stderr with exit status 2), nsightx._units' module docstring
(each value in the largest prefix of its unit under which it is at least 1, four significant digits, ``-`` for a
missing or infinite value) and docs/api.md's ``verbosity`` row (a progress line on a terminal, none when silent).
A mean is computed exactly, with :class:`fractions.Fraction`, from the values themselves (a result's per-run
values, or the records of the raw file's lines), so that no statistics code of nsightx is on both sides.

Where the docs are silent this does not guess: how wide an RSD past 1e300 % is printed, and whether the progress
line's count includes the warm-up calls (the progress module's docstring says it does; the docs do not).
"""

from __future__ import annotations

import importlib.metadata
import io
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import warnings
from fractions import Fraction
from pathlib import Path

import pytest
from _synthetic import make_result
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_cli_reference import _cli

import nsightx

EXAMPLES = int(os.environ.get("NSIGHTX_REFERENCE_EXAMPLES", "25"))
"""Examples per run (more while hunting: ``NSIGHTX_REFERENCE_EXAMPLES=1500``)."""
FAST = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
FIXTURES = Path(__file__).parents[2] / "fixtures" / "results"
TIME, RATE = "t", "r"
EDGES = [0.0, -0.0, 5e-324, 1e-310, 1.7e308, -1.7e308, 9999.5, 999.95, 9.9995e-4, 0.00099995, 123456.7]
VALUES = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False),
    st.floats(min_value=1e-6, max_value=1e12),
    st.sampled_from([*EDGES, math.inf, -math.inf, math.nan]),
)


def _nsightx(*argv: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}  # a pipe: the whole table
    return subprocess.run(
        [sys.executable, "-m", "nsightx", *argv], capture_output=True, text=True, timeout=300, env=env
    )


def _readable(value: float, unit: str) -> tuple[float, str]:
    """The factor and the unit to show ``value`` (ns, or GB/s) in: the largest under which it is at least 1."""
    if unit == "ns":
        steps = [(1e9, "s"), (1e6, "ms"), (1e3, "us"), (1.0, "ns")]
    else:  # GB/s: the decimal prefixes of B/s
        steps = [(f / 1e9, p + "B/s") for f, p in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))]
        steps.append((1e-9, "B/s"))
    return next(((f, u) for f, u in steps if abs(value) >= f), steps[-1])


def _exponent(q: Fraction) -> int:
    """The decimal exponent of ``q`` > 0 (``floor(log10(q))``), exactly, also where ``float(q)`` is 0."""
    e = len(str(q.numerator)) - len(str(q.denominator))
    while Fraction(10) ** e > q:
        e -= 1
    while Fraction(10) ** (e + 1) <= q:
        e += 1
    return e


def _shows(text: str, exact: Fraction, slack: Fraction) -> bool:
    """Whether ``text`` is ``exact`` to four significant digits (whole numbers from 9999.5 on).

    ``slack``: how far the mean as a float may be from ``exact`` (half its spacing), in the shown unit.
    """
    if exact == 0:
        return float(text) == 0
    digit = Fraction(10) ** (_exponent(abs(exact)) - 3)
    tolerance = max(digit / 2, Fraction(1, 2) if abs(exact) >= Fraction(99995, 10) else Fraction(0))
    return abs(Fraction(text) - exact) <= tolerance * (1 + Fraction(1, 10**9)) + slack


FACTORS = {"s": 1e9, "ms": 1e6, "us": 1e3, "ns": 1.0, "PB/s": 1e6, "TB/s": 1e3, "GB/s": 1.0, "MB/s": 1e-3}
FACTORS.update({"kB/s": 1e-6, "B/s": 1e-9})


def _check_row(row: dict[str, str], values: list[float], unit: str) -> None:
    """The row's Runs and Mean against the values: the exact mean to four digits, or ``-``.

    The float mean may differ from the exact one by a running sum's rounding (nsightx's mean is pandas' Kahan sum
    over n, and both give 0 for ``[-1e20, 1.0, 1e20]``, exactly 1/3; the docs promise no more than that mean), and
    the unit is then checked only where that rounding cannot move the mean across a unit's boundary.
    """
    kept = [v for v in values if not math.isnan(v)]
    assert row["Runs"] == str(len(kept)), (row, values)
    if not kept or any(math.isinf(v) for v in kept):
        assert row["Mean"] == "-", (row, values)
        return
    exact = sum(map(Fraction, kept)) / len(kept)
    rounding = len(kept) * Fraction(1, 2**53) * sum(abs(Fraction(v)) for v in kept) / len(kept)
    slack = rounding + Fraction(math.ulp(float(exact))) / 2
    number, _, shown = row["Mean"].partition(" ")
    if rounding <= abs(exact) / 10**6:
        assert shown == _readable(float(exact), unit)[1], (row, values)
    factor = Fraction(FACTORS[shown])
    assert _shows(number, exact / factor, slack / factor), (row, values, float(exact))


def _rows(stdout: str) -> list[dict[str, str]]:
    """The table under the heading as dicts, cells split on the two spaces that separate columns."""
    lines = stdout.splitlines()
    header = re.split(r"  +", lines[1].strip())
    return [dict(zip(header, re.split(r"  +", line.strip()), strict=True)) for line in lines[2:]]


@FAST
@given(
    st.lists(st.lists(VALUES, min_size=1, max_size=6), min_size=2, max_size=2),
    st.sampled_from(["json", "parquet"]),
    st.booleans(),
)
def test_show_prints_the_exact_mean_of_the_values_in_readable_units(
    tmp_path_factory: pytest.TempPathFactory, series: list[list[float]], kind: str, positive: bool
) -> None:
    """Values at the float range's edges, NaN and inf: the mean is the values' own, to four digits, or ``-``."""
    if positive:
        series = [[abs(v) for v in s] for s in series]
    values = {("a", 0, TIME): series[0], ("a", 0, RATE): series[1]}
    result = make_result(values, params=["n"], configs=[(1,)], units={TIME: "ns", RATE: "GB/s"})
    saved = result.save(tmp_path_factory.mktemp("show") / f"result-f.{kind}")
    status, out, err = _cli(["show", str(saved)])
    assert status == 0, err
    rows = _rows(out)
    assert [r["Metric"] for r in rows] == [TIME, RATE]
    for row, (s, unit) in zip(rows, ((series[0], "ns"), (series[1], "GB/s")), strict=True):
        _check_row(row, s, unit)


def test_a_row_of_no_valid_run_shows_a_dash_and_no_unit() -> None:
    """Region ``b`` failed in config 1 of the schema-1 fixture: its Mean was ``- nan`` (the NaN Unit as a unit)."""
    for commit in ("d6b4a1c", "ac282eb"):
        for name in ("result.json", "raw_data.jsonl"):
            status, out, err = _cli(["show", str(FIXTURES / commit / name)])
            assert status == 0, err
            expected = json.loads((FIXTURES / commit / "expected.json").read_text())["values"]
            rows = _rows(out)
            assert len(rows) == 4 and "nan" not in out
            for row in rows:
                config = 0 if row["n"] == "1" else 1
                runs = [v[4] for v in expected if v[0] == row["Annotation"] and v[1] == config]
                _check_row(row, [math.nan if v is None else float(v) for v in runs], "ns")


def test_an_infinite_mean_is_a_dash_without_a_unit(tmp_path: Path) -> None:
    values = {("a", 0, TIME): [1.0, math.inf, 2.0]}
    saved = make_result(values, params=["n"], configs=[(1,)]).save(tmp_path / "result-f.json")
    status, out, _ = _cli(["show", str(saved)])
    assert status == 0 and _rows(out)[0]["Mean"] == "-", out


def test_show_says_nothing_but_its_own_lines_on_stderr_at_the_float_range_edge(tmp_path: Path) -> None:
    """Sums and spreads past 1.8e308 are mended, yet numpy's 'overflow encountered' warnings reached stderr."""
    values = {("a", 0, TIME): [1.7e308, 1.7e308, 1.7e308], ("a", 0, RATE): [284.0, 1.7e308, -1.7e308, 1.0, 2.0]}
    saved = make_result(values, params=["n"], configs=[(1,)]).save(tmp_path / "result-f.json")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        frame = nsightx.load(str(saved)).to_dataframe()
    assert math.isfinite(frame["AvgValue"].iloc[0])
    out = _nsightx("show", str(saved))
    assert out.returncode == 0, out.stderr
    for row, series in zip(_rows(out.stdout), values.values(), strict=True):
        _check_row(row, list(series), "ns")
    assert all(line.startswith("nsightx show: ") for line in out.stderr.splitlines()), out.stderr


KILLED = """
import os, signal, sys
import nsightx
calls = 0

@nsightx.analyze.kernel(configs=[(1, "x y"), (20, "é\\t")], runs=4, warmup=1, backend="host",
                        output_prefix=sys.argv[1] + "/", verbosity=0)
def swept(n, label):
    global calls
    calls += 1
    if calls == 9:
        os.kill(os.getpid(), signal.SIGKILL)
    with nsightx.annotate("region one"):
        sum(range(n * 1000))

swept()
"""


def test_show_of_a_killed_sweeps_raw_file_is_the_mean_of_its_lines(tmp_path: Path) -> None:
    """A sweep killed in its 9th call (config 1's warm-up and 2 runs done): the raw lines' runs, and no others."""
    script = tmp_path / "killed.py"
    script.write_text(textwrap.dedent(KILLED))
    died = subprocess.run([sys.executable, str(script), str(tmp_path)], capture_output=True, timeout=300)
    assert died.returncode == -signal.SIGKILL, died.stderr
    (raw,) = tmp_path.glob("raw_data-*.jsonl")
    runs: dict[int, list[float]] = {}
    for line in raw.read_text().splitlines()[1:]:
        record = json.loads(line)
        runs.setdefault(record["config"], []).append(sum(r["value"] for r in record["records"]))
    assert {c: len(v) for c, v in runs.items()} == {0: 4, 1: 2}
    out = _nsightx("show", str(raw))
    assert out.returncode == 0, out.stderr
    assert "holds 6 of 8 planned runs" in out.stdout.splitlines()[0], out.stdout
    rows = _rows(out.stdout)
    assert [(r["Annotation"], r["n"], r["label"]) for r in rows] == [
        ("region one", "1", "x y"),
        ("region one", "20", r"é\t"),
    ]
    for row, config in zip(rows, (0, 1), strict=True):
        _check_row(row, runs[config], "ns")


def test_doctor_says_what_this_machine_has() -> None:
    """Each tool and package line agrees with what Python finds here; each backend's yes/no with its availability."""
    from nsightx._pluginhost.plugins import LoaderSettings, PluginHost

    out = _nsightx("doctor")
    assert out.returncode == 0 and out.stderr == "", out.stderr
    lines = out.stdout.splitlines()
    assert f"ncu on PATH: {shutil.which('ncu') or 'not found'}" in lines
    if shutil.which("nvidia-smi") is None:
        assert lines[3].startswith("GPU: none found (no nvidia-smi on PATH)")
    for dist in ("cupti-python", "nvidia-ml-py", "torch", "cloudpickle", "matplotlib", "dask-cuda"):
        try:
            version = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            version = "not installed"
        assert f"{dist}: {version}" in lines
    for name, avail in PluginHost(LoaderSettings()).load().availability().items():
        mark = "yes" if avail.available else "no "
        assert any(line.startswith(f"  {mark} {name} ") for line in lines), (name, out.stdout)


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _sweep(tmp_path: Path, configs: int, runs: int, warmup: int, verbosity: nsightx.VerbosityLevel) -> None:
    @nsightx.analyze.kernel(
        configs=list(range(configs)),
        runs=runs,
        warmup=warmup,
        backend="host",
        verbosity=verbosity,
        output_prefix=str(tmp_path) + "/",
    )
    def f(n: int) -> None:
        with nsightx.annotate("a"):
            pass

    f()


@pytest.mark.parametrize(("configs", "runs", "warmup"), [(3, 4, 1), (2, 1, 0), (1, 2, 3)])
def test_the_progress_line_counts_every_call_and_ends_its_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, configs: int, runs: int, warmup: int
) -> None:
    """On a terminal the last line drawn reads configs x (runs + warm-up) calls of as many, on the last config.

    The unit is calls, and the warm-up calls among them are counted: the summary line says ``x 4 run(s)``, and
    ``15/15 runs`` for 3 configs x 4 runs after a warm-up each read as three runs more than were measured.
    """
    from nsightx._run import progress

    monkeypatch.setattr(progress, "DELAY_S", 0.0)
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    _sweep(tmp_path, configs, runs, warmup, nsightx.VerbosityLevel.INFO)
    drawn = [part for part in terminal.getvalue().split("\r") if ", config" in part]
    total = configs * (runs + warmup)
    unit = f"calls ({configs * warmup} warm-up)" if warmup else "calls"
    assert drawn[-1].startswith(f"f: [{'#' * 30}] {total}/{total} {unit}, config {configs}/{configs}, ")
    assert drawn[-1].split("\n")[0].endswith("s left ") and "\n" in drawn[-1]
    silenced = _Terminal()
    monkeypatch.setattr(sys, "stderr", silenced)
    _sweep(tmp_path, configs, runs, warmup, nsightx.VerbosityLevel.SILENT)
    assert silenced.getvalue() == ""


PIPED = """
import sys
import nsightx
from nsightx._run import progress
progress.DELAY_S = 0.0

@nsightx.analyze.kernel(configs=[1, 2], runs=3, backend="host", output_prefix=sys.argv[1] + "/")
def f(n):
    with nsightx.annotate("a"):
        pass

f()
"""


def test_progress_is_silent_off_a_terminal(tmp_path: Path) -> None:
    """Through a pipe (CI logs) the progress line never shows; the one-line summary alone is on stderr."""
    out = subprocess.run([sys.executable, "-c", PIPED, str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "\r" not in out.stderr and "calls" not in out.stderr
    assert len(out.stderr.splitlines()) == 1 and out.stderr.startswith("nsightx: f: "), out.stderr
