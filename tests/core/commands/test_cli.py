"""The nsightx command on a machine without a GPU (as CI is)."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from nsightx.cli import _parser, main

NO_GPU = os.environ.get("CI") == "true" or not os.path.exists("/dev/nvidia0")


@pytest.mark.skipif(not NO_GPU, reason="checks the no-GPU explanation")
def test_doctor_explains_no_gpu(capsys, plugin_host):
    assert main(["doctor"]) == 0
    out = capsys.readouterr().out
    assert "No GPU backend is available here" in out
    assert "yes host" in out
    assert "Python" in out and "ncu on PATH" in out


def test_demo_prints_table_and_files(tmp_path):
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "nsightx.cli",
            "demo",
            "--runs",
            "3",
            "--output",
            str(tmp_path) + "/",
            "--backend",
            "host",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "Mean" in out.stdout and "95% CI" in out.stdout and "matmul" in out.stdout
    assert re.search(r" [\d.]+ [kMGTP]?FLOP/s ", out.stdout), "a rate in its readable prefix (issue 38)"
    assert not re.search(r" 0\.0\d* [kMGTP]?FLOP/s", out.stdout), out.stdout
    assert "device: CPU (host backend)" in out.stdout and "GPU: None" not in out.stdout
    assert "e+0" not in out.stdout  # durations in us/ms, not 2.068e+04 ns
    assert re.search(r"\d+(\.\d+)? (us|ms) ", out.stdout), out.stdout
    assert "processed_data-matmul-0.csv" in out.stdout
    assert (tmp_path / "result-matmul-0.parquet").exists()


def test_demo_output_without_separator_is_a_folder(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "nsightx.cli", "demo", "--runs", "2", "--output", "demo-out", "--backend", "host"],
        capture_output=True,
        text=True,
        check=True,
        cwd=tmp_path,
    )
    files = [
        "processed_data-matmul-0.csv",
        "profiled_data-matmul-0.csv",
        "raw_data-matmul-0.jsonl",
        "result-matmul-0.parquet",
    ]
    assert sorted(p.name for p in (tmp_path / "demo-out").iterdir()) == files
    assert sorted(p.name for p in tmp_path.iterdir()) == ["demo-out"]
    listing = out.stdout.split("files written under", 1)[1].splitlines()
    assert listing[0].strip() == f"{tmp_path / 'demo-out'}:" and [x.strip() for x in listing[1:]] == files


def test_backends_and_plugins_commands(capsys, plugin_host):
    assert main(["backends"]) == 0
    assert "host" in capsys.readouterr().out
    assert main(["plugins"]) == 0
    assert "host (built-in)" in capsys.readouterr().out


def _nsightx(*argv: str, cwd=None) -> subprocess.CompletedProcess[str]:
    """Run ``python -m nsightx ARGV`` in a real subprocess, as a user's shell would."""
    return subprocess.run(
        [sys.executable, "-m", "nsightx", *argv], capture_output=True, text=True, cwd=cwd, timeout=120
    )


@pytest.fixture(scope="module")
def bad_files(tmp_path_factory):
    """Files that are not results: text that is not JSON, bytes that are not UTF-8, JSON of another shape."""
    folder = tmp_path_factory.mktemp("bad")
    (folder / "garbage.json").write_text("this is not json\n")
    (folder / "binary.json").write_bytes(b"\xff\xfe\x00\x81")
    (folder / "other.json").write_text('{"a": 1}')
    (folder / "empty").mkdir()
    (folder / "a_file").write_text("x")
    return folder


ERROR_PATHS = [
    # bad option
    (["demo", "--frobnicate"], "nsightx demo: error: unrecognized arguments: --frobnicate (see nsightx demo --help)"),
    (["--frobnicate"], "nsightx: error: unrecognized arguments: --frobnicate"),
    (["demo", "--runs", "x"], "nsightx demo: error: argument --runs: must be a whole number >= 1 or 'auto', got 'x'"),
    (["compare", "a.json", "b.json", "--threshold", "five"], "argument --threshold: must be a number >= 0 (percent)"),
    (["compare", "a.json", "b.json", "--threshold", "-5"], "nsightx compare: error: argument --threshold: must be"),
    (["compare", "a.json", "b.json", "--alpha", "3"], "nsightx compare: error: argument --alpha: must be a number"),
    (["compare", "a.json", "b.json", "--history", "0"], "nsightx compare: error: argument --history: must be"),
    (["reconcile", "a.json", "b.json", "--threshold", "-1"], "nsightx reconcile: error: argument --threshold: must"),
    (["compare", "only-one.json"], "nsightx compare: error: the following arguments are required: new"),
    (["doctor", "extra"], "nsightx doctor: error: unrecognized arguments: extra"),
    # unknown command
    (["bogus"], "nsightx: error: argument COMMAND: invalid choice: 'bogus'"),
    # missing file
    (["compare", "/nonexistent/a.json", "/nonexistent/b.json"], "nsightx compare: cannot read result file"),
    # unreadable result files
    (["compare", "{bad}/garbage.json", "{bad}/garbage.json"], "garbage.json' is not an nsightx result: Invalid JSON"),
    (["compare", "{bad}/binary.json", "{bad}/binary.json"], "binary.json' starts with a UTF-16 LE byte-order mark"),
    (["compare", "{bad}/other.json", "{bad}/other.json"], "other.json' is not an nsightx result: field"),
    (["compare", "{bad}/empty", "{bad}/empty"], "empty' holds no saved result (result-*.parquet or result-*.json)"),
    # a command failing with an NsightxError
    (["demo", "--runs", "0"], "nsightx demo: error: argument --runs: must be a whole number >= 1 or 'auto', got '0'"),
    (["demo", "--backend", "nonexistent"], "nsightx demo: unknown backend 'nonexistent'; registered backends:"),
    (["demo", "--backend", "host", "--output", "{bad}/a_file/sub"], "/a_file/sub: cannot create or write that folder"),
]


@pytest.mark.parametrize(("argv", "message"), ERROR_PATHS, ids=[" ".join(a) for a, _ in ERROR_PATHS])
def test_every_error_is_one_line_on_stderr_and_exit_2(bad_files, argv, message):
    out = _nsightx(*(a.format(bad=bad_files) for a in argv))
    lines = out.stderr.strip().splitlines()
    assert out.returncode == 2, out
    assert len(lines) == 1 and message in lines[0], out.stderr
    assert "Traceback" not in out.stderr and out.stdout == ""
    command = argv[0] if argv[0] in _parser().commands else None
    assert lines[0].startswith(f"nsightx {command}:" if command else "nsightx:"), "named by its command"
    python_names = re.findall(r"\b(output_prefix='|threshold_pct|alpha=|history=|runs=|backend=)", lines[0])
    assert not python_names, f"the command line's option names, not the Python API's: {lines[0]}"


def test_bare_nsightx_prints_help_on_stdout_and_exits_2():
    out = _nsightx()
    assert out.returncode == 2 and out.stderr == ""
    assert out.stdout.startswith("usage: nsightx") and "compare" in out.stdout and "exit status:" in out.stdout


def test_version_and_help_exit_0():
    from nsightx import __version__

    version = _nsightx("--version")
    assert (version.returncode, version.stdout, version.stderr) == (0, f"nsightx {__version__}\n", "")
    assert main(["--version"]) == 0 and main(["--help"]) == 0
    assert main(["compare", "--help"]) == 0


def test_unavailable_backend_message_is_joined_into_one_line(capsys, plugin_host):
    if plugin_host.availability()["ncu"].available:
        pytest.skip("ncu is available here")
    assert main(["demo", "--backend", "ncu"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "backend 'ncu' is not available" in err


def test_console_script_misuse_has_no_traceback():
    out = subprocess.run(
        [sys.executable, "-m", "nsightx.cli", "demo", "--backend", "nonexistent"], capture_output=True, text=True
    )
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert out.stderr.strip().splitlines() == [
        "nsightx demo: unknown backend 'nonexistent'; registered backends: cupti, events, host, ncu, or 'auto'"
    ]


def test_python_m_nsightx_costs_import_nsightx_nothing():
    probe = "import sys, nsightx; print(sorted(m for m in ('nsightx.__main__', 'nsightx.cli') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
    assert _nsightx("backends").stdout.startswith("'auto' picks")  # the same command as the console script


@pytest.mark.gpu
def test_demo_names_the_gpu(tmp_path):
    out = _nsightx("demo", "--runs", "3", "--output", str(tmp_path / "out"))
    assert out.returncode == 0, out.stderr
    [device] = [line for line in out.stdout.splitlines() if line.startswith("device: ")]
    assert "NVIDIA" in device and "backend)" in device and "host" not in device, device
    assert " us " in out.stdout or " ms " in out.stdout
    assert "e+0" not in out.stdout


def _without_blas_threads() -> dict[str, str]:
    """This process's environment without a chosen number of BLAS threads (the demo picks one then)."""
    from nsightx._commands.demo import BLAS_THREAD_VARIABLES

    return {k: v for k, v in os.environ.items() if k not in BLAS_THREAD_VARIABLES}


def test_demo_runs_auto_on_one_blas_thread(tmp_path):
    """Issue 38: the warning advised runs='auto', but --runs auto was refused; BLAS threads made the CPU demo swing."""
    out = subprocess.run(
        [sys.executable, "-m", "nsightx", "demo", "--runs", "auto", "--output", str(tmp_path), "--backend", "host"],
        capture_output=True,
        text=True,
        timeout=300,
        env=_without_blas_threads(),
    )
    assert out.returncode == 0, out.stderr
    assert "device: CPU (host backend), 1 BLAS thread" in out.stdout.splitlines()
    assert "run(s) in all, auto (5-100 runs" in out.stderr  # the call's line: adaptive, not 10 fixed runs
    assert "runs='auto'" not in out.stderr, "the demo's advice is in its own option names"


def test_demo_refuses_runs_that_cannot_finish_and_says_how_long(tmp_path):
    out = _nsightx("demo", "--runs", "100000000", "--output", str(tmp_path / "out"), "--backend", "host")
    assert out.returncode == 2 and out.stdout == ""
    [line] = out.stderr.splitlines()
    assert re.fullmatch(
        r"nsightx demo: --runs 100000000 would take about [\d.]+ (days|h) here \(one run of the 4 sizes takes "
        r"[\d.]+ (ms|s)\); give --runs \d+ or fewer \(at most 10 min\), or --runs auto",
        line,
    ), line
    assert not (tmp_path / "out").exists(), "refused before anything was written"


# --- nsightx show / nsightx plot: a saved result without writing code (issue 38) ---------------------------------


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """A host sweep's files (result JSON, raw JSONL), a save of the pytest plugin and a raw file cut short."""
    import nsightx
    from nsightx._pluginhost import plugins as _plugins
    from nsightx._report.history import save

    folder = tmp_path_factory.mktemp("saved")
    previous = _plugins._default
    _plugins.set_default_host(_plugins.PluginHost(_plugins.LoaderSettings()).load())
    try:

        @nsightx.analyze.kernel(
            configs=[1000, 20000, 400000],
            runs=4,
            backend="host",
            verbosity=0,
            output_prefix=str(folder / "out") + "/",
            derive_metric=lambda t, n: (n / t, "items/ns"),
        )
        def build_list(n):
            with nsightx.annotate("build"):
                list(range(n))

        result = build_list()
    finally:
        _plugins.set_default_host(previous)
    store = folder / "store"
    pytest_save = save(store, "tests/test_lists.py::test_build[1000]", result)
    raw = folder / "out" / "raw_data-build_list-0.jsonl"
    cut = folder / "cut.jsonl"
    cut.write_text(raw.read_text()[:-40])
    return {
        "result": folder / "out" / "result-build_list-0.parquet",
        "raw": raw,
        "store": store,
        "save": pytest_save,
        "cut": cut,
    }


def test_show_prints_a_saved_result_in_readable_units(saved):
    out = subprocess.run(  # no COLUMNS, output to a pipe: the whole table, as a log gets it
        [sys.executable, "-m", "nsightx", "show", str(saved["result"])],
        capture_output=True,
        text=True,
        timeout=120,
        env={k: v for k, v in os.environ.items() if k != "COLUMNS"},
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith("build_list: 3 config(s) x 4 run(s) on CPU (host backend), measured ")
    assert lines[0].endswith("[result-build_list-0.parquet]")
    assert lines[1].split()[:4] == ["Annotation", "n", "Metric", "Mean"]
    assert len(lines) == 2 + 6 and all(re.search(r" \d[\d.]* (ns|us|ms|s) ", line) for line in lines[2:5])
    assert "e+0" not in out.stdout and "e-0" not in out.stdout


def test_show_fits_the_terminal(saved):
    out = subprocess.run(
        [sys.executable, "-m", "nsightx", "show", str(saved["result"])],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "60"},
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert "tool: host" in lines  # the same in every row: said once, above the table
    table = lines[lines.index("tool: host") + 1 :]
    assert table and all(len(line) <= 60 for line in table), "\n".join(table)


@pytest.mark.parametrize("which", ["save", "store"])
def test_show_reads_the_pytest_plugins_files(saved, which):
    out = _nsightx("show", str(saved[which]))
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[0].endswith("[test tests/test_lists.py::test_build[1000]]")


def test_show_reads_a_raw_file_and_says_what_it_skipped_on_one_line(saved):
    whole = _nsightx("show", str(saved["raw"]))
    assert whole.returncode == 0 and "[raw_data-build_list-0.jsonl]" in whole.stdout.splitlines()[0]
    cut = _nsightx("show", str(saved["cut"]))
    assert cut.returncode == 0, cut.stderr
    warnings = [line for line in cut.stderr.splitlines() if "unfinished last line" in line]
    assert len(warnings) == 1 and warnings[0].startswith("nsightx show: warning: ")
    assert "holds 11 of 12 planned runs" in cut.stdout.splitlines()[0]


@pytest.mark.parametrize("kind", [None, "violin", "box", "bar"])
def test_plot_draws_a_saved_result(saved, tmp_path, kind):
    image = tmp_path / "out.png"
    extra = ["--type", kind] if kind else []
    out = _nsightx("plot", str(saved["result"]), str(image), *extra)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == str(image) and image.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert out.stderr.strip() == (
        "nsightx plot: drew host__time_duration.sum; the result also holds <lambda> (--metric NAME)"
    )


def test_plot_takes_a_raw_file_and_the_plugins_save_and_refuses_a_folder_of_several(saved, tmp_path):
    for source in (saved["raw"], saved["save"]):
        out = _nsightx("plot", str(source), str(tmp_path / "p.svg"), "--y-log", "--metric", "host__time_duration.sum")
        assert out.returncode == 0, out.stderr
    (saved["store"] / "other").mkdir(exist_ok=True)
    many = _nsightx("plot", str(saved["result"].parent), str(tmp_path / "q.png"), "--type", "pie")
    assert many.returncode == 2 and "argument --type: invalid choice: 'pie'" in many.stderr
    bad = _nsightx("plot", str(saved["result"]), str(tmp_path / "q.txt"))
    assert bad.returncode == 2 and bad.stderr.startswith("nsightx plot: cannot tell the image format")


def test_show_keeps_each_row_of_a_name_with_a_line_break_or_an_escape_on_one_line(tmp_path, capsys):
    """A raw line break in a region name or a str parameter split the row; a raw ESC reached the terminal."""
    import nsightx

    @nsightx.analyze.kernel(
        configs=[("p\nq",)],
        runs=2,
        backend="host",
        output_prefix=str(tmp_path / "x_"),
        verbosity=nsightx.VerbosityLevel.SILENT,
    )
    def f(s):
        with nsightx.annotate("a\nb\x1b[31m"):
            pass

    f()
    assert main(["show", str(next(tmp_path.glob("x_result-*")))]) == 0
    out, err = capsys.readouterr()
    rows = [line for line in out.splitlines() if "host__time_duration.sum" in line]
    assert len(rows) == 1 and rows[0].startswith(r"a\nb\x1b[31m  p\nq  host__time_duration.sum"), out
    assert "\x1b" not in out + err and r"a\nb\x1b[31m s=p\nq host__time_duration.sum" in err


NOT_PLAIN_NUMBERS = [
    (["demo", "--runs", "5_0"], "--runs", "5_0"),  # int() reads 50
    (["demo", "--runs", "\u0663"], "--runs", "\u0663"),  # Arabic-Indic three: int() reads 3
    (["demo", "--runs", " 4"], "--runs", " 4"),
    (["compare", "a.json", "b.json", "--history", "1_0"], "--history", "1_0"),
    (["compare", "a.json", "b.json", "--history", "\uff15"], "--history", "\uff15"),  # fullwidth five
    (["compare", "a.json", "b.json", "--threshold", "1_0"], "--threshold", "1_0"),  # float() reads 10.0
    (["compare", "a.json", "b.json", "--alpha", "0.0\u0665"], "--alpha", "0.0\u0665"),  # float() reads 0.05
    (["reconcile", "a.json", "b.json", "--threshold", "\u0665"], "--threshold", "\u0665"),
]


@pytest.mark.parametrize(
    ("argv", "option", "text"), NOT_PLAIN_NUMBERS, ids=[f"{a[0]} {a[-2]} {a[-1]!a}" for a in NOT_PLAIN_NUMBERS]
)
def test_a_number_not_written_in_plain_ascii_digits_is_refused(capsys, argv, option, text):
    """Python's int() and float() read underscores, other scripts' digits and spaces; the command line does not."""
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"nsightx {argv[0]}: error: argument {option}: must be " in err[0], err
    assert f"got {text!r}" in err[0]


def test_plain_numbers_are_still_read():
    parsed = _parser().parse_args(["compare", "a.json", "b.json", "--history", "12", "--threshold", "2.5e0"])
    assert (parsed.history, parsed.threshold) == (12, 2.5)
    assert _parser().parse_args(["compare", "a.json", "b.json", "--alpha", ".01"]).alpha == 0.01
    assert _parser().parse_args(["demo", "--runs", "50"]).runs == 50
