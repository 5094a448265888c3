"""Files and processes nsightx protects (issue 34): the umask, names and links, temporary folders, the ncu
channel, and git run by the ``env`` collector.

Everything runs the real code on the host backend or under the fake ncu (``ncu_fake.py``, the double at the
ncu-binary boundary); git is the real git.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import ncu_fake
import pytest

import nsightx
from nsightx._results.output import allocate, write_atomic
from nsightx._results.sink import RunSink

SILENT = nsightx.VerbosityLevel.SILENT


def needs_ncu_worker() -> None:
    """Skip unless the modules the ncu worker and the report reader need are installed."""
    pytest.importorskip("cloudpickle")
    pytest.importorskip("nvtx")
    pytest.importorskip("ncu_report", reason="needs the ncu-report package (test dependency group)")


UMASK_WATCHER = """
import select, sys
path, seen, n = "/proc/%s/status" % sys.argv[1], set(), 0
print("ready", flush=True)
while True:  # read the watched process's umask as often as possible, until stdin closes
    with open(path, "rb") as f:
        data = f.read()
    start = data.index(b"Umask:") + 6
    seen.add(int(data[start : data.index(b"\\n", start)], 8))
    n += 1
    if n % 64 == 0 and select.select([sys.stdin], [], [], 0)[0]:
        break
print(sorted(seen), flush=True)
"""
"""Reads a process's umask from ``/proc/<pid>/status`` without changing it (``os.umask`` would set it); run in
its own process, so it samples while the test process's threads hold the GIL."""


# --- the umask -------------------------------------------------------------------------------------------------


def test_saving_never_changes_the_umask_another_thread_sees(tmp_path):
    """While one thread saves in a loop, the umask stays the user's and a file made meanwhile keeps its mode."""
    status = Path(f"/proc/{os.getpid()}/status")
    if not status.exists() or "Umask:" not in status.read_text():
        pytest.skip("needs a Linux /proc that reports the umask")
    saves_wanted = 3000
    stop, failed = threading.Event(), []
    saves = [0]

    def save_in_a_loop() -> None:
        try:
            while not stop.is_set():
                write_atomic(tmp_path / "result.json", "{}")
                saves[0] += 1
        except BaseException as e:  # reported below
            failed.append(e)

    mine = tmp_path / "mine"
    mine.mkdir()
    old = os.umask(0o077)
    modes = set()
    watcher = subprocess.Popen(
        [sys.executable, "-c", UMASK_WATCHER, str(os.getpid())],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert watcher.stdin is not None and watcher.stdout is not None
    saver = threading.Thread(target=save_in_a_loop, daemon=True)
    try:
        assert watcher.stdout.readline() == "ready\n"
        saver.start()
        deadline = time.monotonic() + 120  # only a bound: the loop ends when the saver has saved enough
        while saves[0] < saves_wanted and not failed and time.monotonic() < deadline:
            path = mine / "f"
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
            modes.add(stat.S_IMODE(path.stat().st_mode))
            path.unlink()
    finally:
        stop.set()
        saver.join(60)
        watcher.stdin.close()
        seen = watcher.stdout.read()
        watcher.wait(60)
        os.umask(old)
    assert not failed, failed
    assert json.loads(seen) == [0o077]  # the umask never changed, as the kernel reports it
    assert modes == {0o600}  # a file this thread created meanwhile got the user's umask
    assert stat.S_IMODE((tmp_path / "result.json").stat().st_mode) == 0o600  # the saved file has the user's mode


# --- names -----------------------------------------------------------------------------------------------------


NAMES = {
    "matmul": "matmul",  # the common case is unchanged
    "<lambda>": "lambda",
    "a/b": "a_b",
    "../up": "___up",
    ".hidden": "_hidden",
    "two words": "two_words",
}


def test_function_names_are_made_safe_for_file_names(tmp_path):
    """A function's name never adds a folder, a hidden file or odd characters to a path."""
    out = tmp_path / "out"
    for function, safe in NAMES.items():
        location = allocate(f"{out}/", function)
        assert location.tag == f"{safe}-0", function
        assert location.raw == out / f"raw_data-{safe}-0.jsonl" and location.raw.is_file()
    made = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*"))
    assert made == ["out", *sorted(f"out/raw_data-{safe}-0.jsonl" for safe in NAMES.values())]


def test_ncu_report_shares_the_safe_tag_of_the_call(tmp_path, monkeypatch):
    """``<lambda>`` under output_prefix: the report is ``ncu-output-lambda-<n>`` with the call's own ``n``."""
    from nsightx_ncu._backend import make_artifacts

    ncu_fake.use_fake_ncu(monkeypatch, tmp_path)
    plan = ncu_fake.make_plan(lambda n: None, ((1,),), output_dir=tmp_path / "out", output_tag="lambda-3")
    assert plan.function_name == "<lambda>"
    art = make_artifacts(plan)
    art.private.rmdir()
    assert (art.report.name, art.log.name) == ("ncu-output-lambda-3.ncu-rep", "ncu-output-lambda-3.log")


def test_output_prefix_with_a_tilde_is_the_home_folder(plugin_host, tmp_path, monkeypatch):
    home, cwd = tmp_path / "home", tmp_path / "cwd"
    home.mkdir()
    cwd.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(cwd)

    @nsightx.analyze.kernel(configs=[(1,)], runs=1, backend="host", verbosity=SILENT, output_prefix="~/x/")
    def f(n):
        with nsightx.annotate("a"):
            pass

    f()
    assert sorted(p.name for p in (home / "x").iterdir()) == ["raw_data-f-0.jsonl", "result-f-0.parquet"]
    assert list(cwd.iterdir()) == []  # no folder named "~"


# --- ncu: report names, temporary folders ----------------------------------------------------------------------


def scale(n):
    with nsightx.annotate("scale"):
        pass


def test_ncu_report_name_is_never_claimed_through_a_planted_symlink(tmp_path, monkeypatch):
    """Dangling links at the predictable report and log names are skipped, never written through."""
    needs_ncu_worker()
    from nsightx_ncu._backend import NcuBackend

    ncu_fake.use_fake_ncu(monkeypatch, tmp_path)
    monkeypatch.setenv("FAKE_NCU_REPORT", str(ncu_fake.ONE_METRIC))
    out = tmp_path / "out"
    out.mkdir()
    victim = tmp_path / "victim"
    (out / "ncu-output-scale-0.ncu-rep").symlink_to(victim / "report")
    (out / "ncu-output-scale-1.log").symlink_to(victim / "log")
    victim.mkdir()
    plan = ncu_fake.make_plan(scale, output_dir=out, output_tag="scale-0")
    env = NcuBackend().execute(plan, RunSink())
    assert list(victim.iterdir()) == []
    assert Path(str(env["ncu_report"])).name == "ncu-output-scale-2.ncu-rep"
    assert Path(str(env["ncu_report"])).stat().st_size > 1000
    assert (out / "ncu-output-scale-0.ncu-rep").is_symlink() and (out / "ncu-output-scale-1.log").is_symlink()


@pytest.fixture
def private_tmp(tmp_path, monkeypatch):
    """A temporary folder of the test's own, for this process and the processes it starts."""
    temp = tmp_path / "temp"
    temp.mkdir()
    monkeypatch.setenv("TMPDIR", str(temp))
    monkeypatch.setattr(tempfile, "tempdir", None)  # computed again from TMPDIR
    return temp


def test_ncu_call_without_output_prefix_leaves_nothing_in_the_temporary_folder(tmp_path, monkeypatch, private_tmp):
    needs_ncu_worker()
    from nsightx_ncu._backend import NcuBackend

    ncu_fake.use_fake_ncu(monkeypatch, tmp_path)
    monkeypatch.setenv("FAKE_NCU_REPORT", str(ncu_fake.ONE_METRIC))
    sink = RunSink()
    env = NcuBackend().execute(ncu_fake.make_plan(scale), sink)
    assert [r.records[0].value > 0 for r in sink.runs if r.config >= 0] == [True] * 4  # the report was read
    assert env["ncu_report"] is None and env["ncu_log"] is None
    assert list(private_tmp.iterdir()) == []
    # Asked for: the report and log stay in the call's temporary folder, named in the environment.
    kept = NcuBackend().execute(ncu_fake.make_plan(scale, backend_options={"ncu_keep_report": True}), RunSink())
    report = Path(str(kept["ncu_report"]))
    assert report.parent.parent == private_tmp and report.stat().st_size > 1000 and Path(str(kept["ncu_log"])).is_file()
    shutil.rmtree(report.parent)


def test_failed_ncu_call_without_output_prefix_leaves_nothing_and_says_so(tmp_path, monkeypatch, private_tmp):
    needs_ncu_worker()
    from nsightx_ncu._backend import NcuBackend

    ncu_fake.use_fake_ncu(monkeypatch, tmp_path)
    monkeypatch.setenv("FAKE_NCU_SAY", "==ERROR== Failed to find metric nsightx__bogus")
    monkeypatch.setenv("FAKE_NCU_EXIT", "1")
    with pytest.raises(nsightx.MeasurementError) as info:
        NcuBackend().execute(ncu_fake.make_plan(scale), RunSink())
    text = str(info.value)
    assert "deleted at the end of the call" in text and "ncu_keep_report" in text
    assert "Failed to find metric nsightx__bogus" in text  # the log's tail is quoted
    assert list(private_tmp.iterdir()) == []


# --- ncu: the channel ------------------------------------------------------------------------------------------


def test_only_the_worker_the_call_started_is_served_on_the_channel(tmp_path, monkeypatch):
    """Another client of the same user gets no collector value and cannot stop the sweep with a bad request.

    The profiled function itself plays that client (it runs in the worker, which knows the socket's path but
    connects again without the secret): it sends a hello without the secret, one with a wrong secret, and a bare
    request, each followed by a ``run`` request that would make the parent fail and a ``collect`` request.
    """
    needs_ncu_worker()
    from nsightx_ncu._backend import NcuBackend

    from nsightx._remote.channel import ENV_CHANNEL
    from nsightx._run.collectors import InfoCollector

    ncu_fake.use_fake_ncu(monkeypatch, tmp_path)
    monkeypatch.setenv("FAKE_NCU_REPORT", str(ncu_fake.ONE_METRIC))
    answers = tmp_path / "answers.json"
    openers = [
        {"op": "hello", "pid": 1},
        {"op": "hello", "pid": 1, "secret": "0" * 64},
        {"op": "collect", "scope": "once", "config": None, "run": None, "annotation": None},
    ]

    def intrude(n):
        import socket

        if answers.exists():
            return
        got = []
        for first in openers:
            client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            client.settimeout(120)  # a bound only: the parent answers or closes at once
            client.connect(os.environ[ENV_CHANNEL])
            lines = [first, {"op": "run", "config": "boom", "run": 0}, openers[2]]
            client.sendall(b"".join(json.dumps(m).encode() + b"\n" for m in lines))
            data = b""
            while b"\n" not in data and (chunk := client.recv(65536)):
                data += chunk
            client.close()
            got.append(data.decode())
        answers.write_text(json.dumps(got))

    def work(n):
        intrude(n)
        scale(n)

    collector = InfoCollector("Token", lambda ctx: "parent-only-value", "once")
    sink = RunSink()
    NcuBackend().execute(ncu_fake.make_plan(work, collectors=(collector,)), sink)  # not stopped
    assert json.loads(answers.read_text()) == ["", "", ""]  # closed unanswered, each time
    assert [c.value for c in sink.runs[0].collectors] == ["parent-only-value"]  # the worker itself was served


# --- git run by the env collector -------------------------------------------------------------------------------


def test_env_collector_runs_no_program_the_repository_configures(plugin_host, tmp_path, monkeypatch):
    """A repository's fsmonitor hook and clean filter would run at every ``git status``; they must not."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    repo, marker = tmp_path / "repo", tmp_path / "marker"

    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout

    repo.mkdir()
    git("init", "-q")
    (repo / "a.txt").write_text("1\n")
    (repo / ".gitattributes").write_text("*.txt filter=evil\n")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "first")
    hook = tmp_path / "hook.sh"
    hook.write_text(f'#!/bin/sh\necho "fsmonitor $*" >> "{marker}"\nexit 1\n')
    hook.chmod(0o755)
    git("config", "core.fsmonitor", str(hook))
    git("config", "filter.evil.clean", f"sh -c 'echo clean >> \"{marker}\"; cat'")
    os.utime(repo / "a.txt", (1_000_000_000, 1_000_000_000))  # stat-dirty: status would hash it through the filter
    monkeypatch.chdir(repo)

    @nsightx.analyze.kernel(configs=[(1,)], runs=1, backend="host", verbosity=SILENT, info_collectors=["env"])
    def f(n):
        with nsightx.annotate("a"):
            pass

    row = f().to_dataframe().iloc[0]
    assert not marker.exists(), marker.read_text()
    assert row["GitCommit"] == git("rev-parse", "HEAD").strip()
    assert row["GitDirty"] is not None and not row["GitDirty"]  # content unchanged (NaN would be truthy)
