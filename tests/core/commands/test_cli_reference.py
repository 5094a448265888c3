"""Each option of ``nsightx plot``, ``compare`` and ``reconcile`` reaches the API call it names with the same value.

docs/api.md's command table names the API behind each command: ``nsightx plot FILE OUT [--metric M] [--type T]
[--x-log|--no-x-log] [--y-log|--no-y-log] [--title T]`` draws ``ProfileResults.plot(OUT, metric=M, plot_type=T,
x_log=..., y_log=..., title=T)`` (without ``--metric``: the first metric); ``nsightx compare`` prints the frame of
``nsightx.compare`` with the same ``threshold_pct``, ``alpha``, ``metrics``, ``history`` and ``require_all``, and
exits 1 on a regression (or, with ``--require-all``, a row only one side has), 2 on what the API refuses, else 0;
``nsightx reconcile --threshold`` is ``reconcile(threshold_pct=...)``. The naive reference here is the API call
itself, made on the same saved files (real host-backend sweeps written by ``output_prefix``, and synthetic results
whose values span decades so that the axes' automatic choices are exercised): the image the command writes must be
byte for byte the API's, the JSON must hold the API frame's settings and rows, and a misuse is one line on stderr
with exit status 2, as the API's refusal is an error.

Where the docs are silent this does not guess: how ``compare --format text`` is laid out (hunted in
tests/core/report/test_compare_formats_reference.py; here it is only compared with the API frame's rendering).
"""

from __future__ import annotations

import contextlib
import inspect
import io
import json
import math
import os
import warnings
from pathlib import Path
from typing import Any

import pytest
from _synthetic import make_result, noisy
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import nsightx
from nsightx._api.reconcile import render_text as reconcile_text
from nsightx._commands import demo
from nsightx._errors import NsightxError
from nsightx._report import history, views
from nsightx.cli import _parser, main

EXAMPLES = int(os.environ.get("NSIGHTX_REFERENCE_EXAMPLES", "12"))
"""Examples per run (more while hunting: ``NSIGHTX_REFERENCE_EXAMPLES=300``)."""
TIME, RATE = "gpu__time_duration.sum", "dram__bytes_read.sum.per_second"
HOST, DERIVED = "host__time_duration.sum", "items"
SILENT = nsightx.VerbosityLevel.SILENT
FAST = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))


def _cli(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        status = main(argv)
    return status, out.getvalue(), err.getvalue()


def _host_sweep(folder: Path, scale: int) -> str:
    """A real host-backend sweep of two metrics (the time and a derived rate), saved under ``folder``."""

    @nsightx.analyze.kernel(
        configs=[16, 256, 4096],
        runs=3,
        backend="host",
        verbosity=SILENT,
        output_prefix=str(folder) + "/",
        derive_metric=lambda t, n: (n / t, "items/ns"),
    )
    def sweep(n: int) -> None:
        with nsightx.annotate("sum"):
            sum(range(n * scale))

    sweep()
    (saved,) = folder.glob("result-*.parquet")
    return str(saved)


def _synthetic(path: Path, negative: bool) -> str:
    """A saved result of two annotations and two metrics over powers of two; ``negative``: the rate below 0."""
    values: dict[tuple[str, int, str], list[float]] = {}
    for c in range(4):
        for m in (TIME, RATE):
            base = 10.0**c * (-1.0 if negative and m == RATE else 1.0)
            values[("mm", c, m)] = noisy(base, 0.05, 5, c)
            values[("other", c, m)] = noisy(base * 1.3, 0.05, 5, c + 7)
    configs = [(2**k,) for k in (4, 8, 12, 16)]
    result = make_result(values, params=["n"], configs=configs, units={TIME: "ns", RATE: "GB/s"})
    return str(result.save(path))


@pytest.fixture
def saved(plugin_host: object, tmp_path: Path) -> dict[str, str]:
    """Result files: two host sweeps (one about 3x slower), the first's raw runs, and two synthetic results."""
    files = {"host": _host_sweep(tmp_path / "host", 1), "slow": _host_sweep(tmp_path / "slow", 3)}
    files["wide"] = _synthetic(tmp_path / "result-wide.parquet", negative=False)
    files["neg"] = _synthetic(tmp_path / "result-neg.parquet", negative=True)
    (files["raw"],) = map(str, (tmp_path / "host").glob("raw_data-*.jsonl"))
    return files


def test_plot_options_draw_what_the_api_draws(saved: dict[str, str], tmp_path: Path) -> None:
    @FAST
    @given(
        st.sampled_from(["host", "wide", "neg", "raw", "folder"]),
        st.sampled_from([None, "first", "second", "nope"]),
        st.sampled_from([None, "line", "bar", "box", "violin"]),
        st.sampled_from([None, True, False]),
        st.sampled_from([None, True, False]),
        st.sampled_from([None, "", "a title", "two\nlines"]),
    )
    def check(kind: str, metric: str | None, plot_type: str | None, x_log: Any, y_log: Any, title: Any) -> None:
        given_path = str(Path(saved["host"]).parent) if kind == "folder" else saved[kind]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = nsightx.load(saved["host"] if kind == "folder" else given_path)
        metrics = list(dict.fromkeys(result.to_dataframe()["Metric"]))
        name = {"first": metrics[0], "second": metrics[-1]}.get(metric or "", metric)
        out_cli, out_api = tmp_path / "cli.png", tmp_path / "api.png"
        for p in (out_cli, out_api):
            p.unlink(missing_ok=True)
        argv = ["plot", given_path, str(out_cli)] + ([] if name is None else ["--metric", name])
        options: dict[str, Any] = {"metric": metrics[0] if name is None else name}
        for flag, key, value in (("--type", "plot_type", plot_type), ("--title", "title", title)):
            if value is not None:
                argv += [flag, value]
                options[key] = value
        for flag, key, value in (("x-log", "x_log", x_log), ("y-log", "y_log", y_log)):
            if value is not None:
                argv.append(f"--{flag}" if value else f"--no-{flag}")
                options[key] = value
        status, out, err = _cli(argv)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                result.plot(str(out_api), **options)
        except NsightxError:
            assert status == 2 and len(err.strip().splitlines()) == 1 and not out_cli.exists(), (argv, err)
            return
        assert status == 0 and out == f"{out_cli}\n", (argv, err)
        assert out_cli.read_bytes() == out_api.read_bytes(), (argv, options)

    check()


def test_plot_empty_metric_is_refused_as_the_api_refuses_it(saved: dict[str, str], tmp_path: Path) -> None:
    """``--metric ""`` drew the first metric, silently (``metric or first``); the API refuses ``metric=""``."""
    with pytest.raises(NsightxError):
        nsightx.load(saved["host"]).plot(str(tmp_path / "api.png"), metric="")
    status, out, err = _cli(["plot", saved["host"], str(tmp_path / "cli.png"), "--metric", ""])
    assert (status, out) == (2, "") and not (tmp_path / "cli.png").exists()
    assert len(err.strip().splitlines()) == 1 and err.startswith("nsightx plot: ") and "''" in err, err


def _json_matches(doc: dict[str, Any], frame: Any, settings_: dict[str, Any], failed: bool) -> None:
    assert {k: doc[k] for k in settings_} == settings_
    assert doc["failed"] is failed
    assert len(doc["rows"]) == len(frame)
    for row, record in zip(doc["rows"], frame.to_dict("records"), strict=True):
        for key, value in record.items():
            got = row[str(key)]
            if isinstance(value, float) and math.isnan(value):
                assert got is None, (key, got)
            elif isinstance(value, float) and math.isfinite(value):
                assert got == value, (key, value, got)
            elif not isinstance(value, float):
                assert got == value or str(got) == str(value), (key, value, got)


def test_compare_options_give_the_api_frame(saved: dict[str, str]) -> None:
    @FAST
    @given(
        st.sampled_from([("host", "slow"), ("slow", "host"), ("host", "host"), ("wide", "neg"), ("host", "wide")]),
        st.sampled_from([None, 0.0, 5, 7.5, 1e9]),
        st.sampled_from([None, 0.001, 0.05, 0.5]),
        st.sampled_from([None, [HOST], [DERIVED], [HOST, DERIVED], [TIME], ["nope"]]),
        st.sampled_from([None, "text", "markdown", "json", "csv"]),
        st.sampled_from([None, 1, 2, 7]),
        st.booleans(),
    )
    def check(pair: Any, threshold: Any, alpha: Any, metrics: Any, fmt: Any, history: Any, require_all: bool) -> None:
        base, new = saved[pair[0]], saved[pair[1]]
        argv, kwargs = ["compare", base, new], {}
        for flag, key, value in (("--threshold", "threshold_pct", threshold), ("--alpha", "alpha", alpha)):
            if value is not None:
                argv += [flag, repr(value)]
                kwargs[key] = value
        for metric in metrics or []:
            argv += ["--metric", metric]
        if metrics:
            kwargs["metrics"] = metrics
        if history is not None:
            argv += ["--history", str(history)]
            kwargs["history"] = history
        if require_all:
            argv.append("--require-all")
            kwargs["require_all"] = True
        argv += ["--format", fmt] if fmt else []
        status, out, err = _cli(argv)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                frame = nsightx.compare(base, new, **kwargs)
        except NsightxError:
            assert status == 2 and out == "" and len(err.strip().splitlines()) == 1, (argv, err)
            return
        one_sided = frame["Status"].isin(["only in baseline", "only in new"]).any()
        failed = bool(frame["Regression"].any() or (require_all and one_sided))
        assert status == (1 if failed else 0), (argv, err)
        if fmt == "json":
            expected = {"threshold_pct": threshold if threshold is not None else 5.0, "require_all": require_all}
            _json_matches(json.loads(out), frame, {**expected, "alpha": alpha or 0.05}, failed)
        elif fmt == "csv":
            assert out == views.render_csv(frame)
        else:
            render = (
                views.render_markdown
                if fmt == "markdown"
                else lambda f: views.render_text(f, width=views.terminal_width(False))
            )
            assert out == render(frame) + "\n"

    check()


def test_reconcile_threshold_reaches_the_api(saved: dict[str, str]) -> None:
    for a, b in (("host", "slow"), ("slow", "host"), ("host", "host")):
        for threshold in (None, 0.0, 5.0, 150.0, 1e6):
            argv = ["reconcile", saved[a], saved[b]] + ([] if threshold is None else ["--threshold", repr(threshold)])
            options = {} if threshold is None else {"threshold_pct": threshold}
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                expected = reconcile_text(nsightx.reconcile(saved[a], saved[b], **options)) + "\n"
            assert _cli(argv) == (0, expected, ""), argv


def test_defaults_are_the_api_defaults() -> None:
    """What a command does without an option is what its API call does without the argument."""
    commands = _parser().commands

    def defaults(name: str) -> dict[str, Any]:
        return {a.dest: a.default for a in commands[name]._actions if a.dest != "help"}

    api = inspect.signature(nsightx.compare).parameters
    compare = defaults("compare")
    assert compare["threshold"] == api["threshold_pct"].default and compare["alpha"] == api["alpha"].default
    assert compare["history"] == api["history"].default and compare["base_ref"] == api["base_ref"].default
    assert compare["require_all"] is api["require_all"].default and compare["metric"] == api["metrics"].default
    assert (
        defaults("reconcile")["threshold"] == inspect.signature(nsightx.reconcile).parameters["threshold_pct"].default
    )
    run = inspect.signature(demo.run).parameters
    assert {k: v for k, v in defaults("demo").items()} == {k: run[k].default for k in ("output", "runs", "backend")}
    plot = defaults("plot")
    assert [plot[k] for k in ("metric", "plot_type", "x_log", "y_log", "title")] == [None] * 5, "left to the API"


def _stored(root: Path, factors: list[float]) -> str:
    """A ``--nsightx-save`` folder: two tests, one save per factor (save ``i`` about ``factors[i]`` times slower)."""
    for number, factor in enumerate(factors):
        for node in ("tests/test_k.py::test_a", "tests/test_k.py::test_b"):
            values = {("k", c, TIME): noisy(1000.0 * (c + 1) * factor, 0.03, 6, 10 * number + c) for c in range(2)}
            result = make_result(values, params=["n"], configs=[(1,), (2,)], created=f"2026-12-0{number + 1}T00:00:00")
            history.save(root, node, result)
    return str(root)


def test_compare_save_folder_options_give_the_api_frame(tmp_path: Path) -> None:
    """``--base-ref`` and ``--history`` on ``--nsightx-save`` folders, as ``compare(base_ref=, history=)``."""
    base = _stored(tmp_path / "base", [1.0, 1.3, 0.95, 1.0])
    new = _stored(tmp_path / "new", [1.1])

    @FAST
    @given(
        st.sampled_from([None, "0", "1", "3", "0002", "7", "nogit", "", "abc"]),
        st.sampled_from([None, 1, 2, 4, 9]),
        st.sampled_from([None, 0.0, 5.0]),
        st.booleans(),
    )
    def check(base_ref: str | None, hist: int | None, threshold: float | None, require_all: bool) -> None:
        argv, kwargs = ["compare", base, new, "--format", "json"], {}
        for flag, key, value in (("--base-ref", "base_ref", base_ref), ("--history", "history", hist)):
            if value is not None:
                argv += [flag, str(value)]
                kwargs[key] = value
        if threshold is not None:
            argv += ["--threshold", repr(threshold)]
            kwargs["threshold_pct"] = threshold
        if require_all:
            argv.append("--require-all")
            kwargs["require_all"] = True
        status, out, err = _cli(argv)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                frame = nsightx.compare(base, new, **kwargs)
        except NsightxError:
            assert status == 2 and out == "" and len(err.strip().splitlines()) == 1, (argv, err)
            return
        one_sided = frame["Status"].isin(["only in baseline", "only in new"]).any()
        failed = bool(frame["Regression"].any() or (require_all and one_sided))
        assert status == (1 if failed else 0), (argv, err)
        expected = {"threshold_pct": 5.0 if threshold is None else threshold, "require_all": require_all}
        _json_matches(json.loads(out), frame, expected, failed)

    check()
