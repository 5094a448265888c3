"""Files under output_prefix: tags reserved atomically, folders checked before any run, prefix types."""

from __future__ import annotations

import multiprocessing
import os
from pathlib import Path

import out_workload
import pytest

import nsightx
from nsightx import ConfigError, ConfigTypeError
from nsightx._results.output import allocate
from nsightx._results.raw import read_runs

SILENT = nsightx.VerbosityLevel.SILENT


def counting(prefix, calls):
    @nsightx.analyze.kernel(configs=[1, 2], runs=2, backend="host", verbosity=SILENT, output_prefix=prefix)
    def f(n):
        calls.append(n)
        with nsightx.annotate("a"):
            pass

    return f


def test_four_processes_started_together_get_distinct_complete_files(tmp_path):
    ctx = multiprocessing.get_context("spawn")
    barrier, out = ctx.Barrier(4), ctx.Queue()
    values = [101, 202, 303, 404]
    procs = [
        ctx.Process(target=out_workload.sweep_at_once, args=(str(tmp_path) + "/", v, barrier, out)) for v in values
    ]
    for p in procs:
        p.start()
    reported = [out.get(timeout=60) for _ in procs]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    assert sorted(p.name for p in tmp_path.glob("result-*")) == [f"result-shared-{i}.parquet" for i in range(4)]
    assert len({raw for _, _, raw in reported}) == 4
    for pid, value, raw in reported:
        tag = Path(raw).name.removeprefix("raw_data-").removesuffix(".jsonl")
        res = nsightx.load(tmp_path / f"result-{tag}.parquet")
        df = res.to_dataframe()
        assert df["n"].tolist() == [value] and df["NumRuns"].tolist() == [3] and df["pid"].tolist() == [pid]
        header, runs = read_runs(raw)  # every line carries this sweep's id (read_runs checks it)
        assert header is not None and header.sweep == res.environment["sweep"]
        assert header.plan.configs == ((value,),)
        assert [(r.config, r.run) for r in runs] == [(-1, -1), (0, 0), (0, 1), (0, 2)]
        assert [c.value for c in runs[0].collectors] == [pid]


def test_tag_skips_numbers_used_by_files_of_other_calls(tmp_path):
    (tmp_path / "result-f-0.json").write_text("{}")  # a call whose raw file was deleted
    loc = allocate(str(tmp_path) + "/", "f")
    assert loc.tag == "f-1" and loc.raw.exists()
    assert not (tmp_path / "raw_data-f-0.jsonl").exists()
    assert (tmp_path / "result-f-0.json").read_text() == "{}"
    assert allocate(str(tmp_path) + "/", "f").tag == "f-2"


def test_prefix_under_a_file_is_config_error_before_any_run(tmp_path):
    (tmp_path / "file").write_text("x")
    calls: list[int] = []
    with pytest.raises(ConfigError, match=r"output_prefix=.*file/sub/.*cannot be created or written"):
        counting(str(tmp_path / "file" / "sub") + "/", calls)()
    assert calls == []


@pytest.mark.parametrize("prefix", ["/proc/nsightx-test/", "/proc/self/"])
def test_prefix_under_proc_is_config_error_before_any_run(prefix):
    calls: list[int] = []
    with pytest.raises(ConfigError, match="output_prefix"):
        counting(prefix, calls)()
    assert calls == []


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write into a read-only folder")
def test_unwritable_folder_fails_before_the_first_run(tmp_path):
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o500)
    calls: list[int] = []
    try:
        with pytest.raises(ConfigError, match=r"output_prefix.*PermissionError"):
            counting(str(folder) + "/", calls)()
    finally:
        folder.chmod(0o700)
    assert calls == []


@pytest.mark.parametrize("bad", [123, b"x/", 1.5, ["out/"]])
def test_output_prefix_must_be_str_or_pathlike(bad):
    with pytest.raises(ConfigTypeError, match=r"output_prefix must be a str or os.PathLike"):
        nsightx.analyze.kernel(output_prefix=bad)


def test_output_prefix_empty_is_config_error():
    with pytest.raises(ConfigError, match=r"output_prefix '' is not a usable path"):
        nsightx.analyze.kernel(output_prefix="")


def test_output_prefix_pathlike_is_accepted(plugin_host, tmp_path):
    counting(tmp_path, [])()  # an existing folder, given as a Path
    assert sorted(p.name for p in tmp_path.iterdir()) == ["raw_data-f-0.jsonl", "result-f-0.parquet"]


@pytest.mark.parametrize("prefix", ["out/", Path("out"), Path("out/")])
def test_a_path_names_a_folder_even_before_it_exists(plugin_host, tmp_path, monkeypatch, prefix):
    # pathlib drops a trailing "/": Path("out") used to write ./outraw_data-f-0.jsonl (session 23 decisions)
    monkeypatch.chdir(tmp_path)
    counting(prefix, [])()
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["raw_data-f-0.jsonl", "result-f-0.parquet"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_a_str_without_a_separator_stays_a_file_name_prefix(plugin_host, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # nsight-python's reading of a str: "out" + "raw_data-..." when no folder "out"
    counting("out", [])()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["outraw_data-f-0.jsonl", "outresult-f-0.parquet"]


def test_atomic_files_get_the_mode_a_plain_open_gives(tmp_path):
    import os
    import stat

    from nsightx._results.output import write_atomic

    old = os.umask(0o022)
    try:
        path = write_atomic(tmp_path / "result.json", "{}")
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == 0o644  # not the 0o600 of a temporary file


# --- numbering: per decorated function, from 0, as nsight-python's run id (issue 36) ---------------------------


def test_a_function_decorated_anew_numbers_its_files_from_0_in_a_fresh_folder(plugin_host, tmp_path):
    """nsight-python's output_csv test: the same folder, removed between two decorations of one function name."""
    import shutil

    out = tmp_path / "test_output_csv"
    for _ in range(2):
        calls: list[int] = []
        f = counting(f"{out}/test_", calls)
        f()
        assert (out / "test_raw_data-f-0.jsonl").exists() and (out / "test_result-f-0.parquet").exists()
        shutil.rmtree(out)


def test_one_function_counts_its_calls_and_never_overwrites_another(plugin_host, tmp_path):
    prefix = f"{tmp_path}/"
    first = counting(prefix, [])
    first(), first()
    assert sorted(p.name for p in tmp_path.glob("raw_data-*")) == ["raw_data-f-0.jsonl", "raw_data-f-1.jsonl"]
    second = counting(prefix, [])  # same name, same folder: starts at 0, moves past the files that exist
    second()
    assert (tmp_path / "raw_data-f-2.jsonl").exists()
    first()  # the first function goes on from its own count
    assert (tmp_path / "raw_data-f-3.jsonl").exists()


def test_ncu_report_of_a_function_decorated_anew_is_number_0(plugin_host, tmp_path, monkeypatch):
    """nsight-python's ``test_parameter_output_csv`` checks ``test_ncu-output-output_csv_func-0.ncu-rep`` after an
    earlier parametrisation wrote (and deleted) the same names; under the fake ncu (the double at the binary)."""
    import shutil

    import ncu_fake

    for module in ("cloudpickle", "nvtx", "ncu_report"):
        pytest.importorskip(module)
    ncu_fake.use_fake_ncu(monkeypatch, tmp_path)
    monkeypatch.setenv("FAKE_NCU_REPORT", str(ncu_fake.ONE_METRIC))
    output_dir = tmp_path / "test_output_csv"
    for output_csv in (True, False):

        @nsightx.analyze.kernel(
            configs=[(1,), (2,)],
            runs=2,
            backend="ncu",
            output_prefix=f"{output_dir}/test_",
            output_csv=output_csv,
            verbosity=SILENT,
            thermal_mode="off",
            clock_control="none",
        )
        def output_csv_func(n):
            with nsightx.annotate("scale"):
                pass

        output_csv_func()
        for name in ("test_ncu-output-output_csv_func-0.ncu-rep", "test_ncu-output-output_csv_func-0.log"):
            assert (output_dir / name).exists(), name
        assert (output_dir / "test_profiled_data-output_csv_func-0.csv").exists() == output_csv
        shutil.rmtree(output_dir)
