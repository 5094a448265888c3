"""A write that fails never duplicates or drops a run, and every count said is what is on disk (issue 34).

The raw file is written by the real sink, through the real run loop, on the real host backend and on the host
backend made deferred (its runs handed back in batches, as the cupti and events sessions do). Failures come
from the library boundary: the file object that ``Path.open`` returns is wrapped so that its N-th write fails,
for every N of a sweep; or from a real full file system (a small tmpfs, where mounting is allowed). SIGTERM is
sent to a real child process once it says, on its stdout, that the wanted runs are done.
"""

from __future__ import annotations

import errno
import io
import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from _sessions import DeferredPlugin

import nsightx
from nsightx import NsightxError, OutputError, ResultSchemaError
from nsightx._results.sink import read_runs

CONFIGS = [(1,), (2,), (3,)]
RUNS = 4


@pytest.fixture(params=["host", "deferredhost"])
def backend(request: pytest.FixtureRequest, plugin_host: Any) -> str:
    plugin_host.register(DeferredPlugin(), name="deferred")
    return str(request.param)


def sweep(prefix: Path, backend: str, *, configs: Any = CONFIGS, runs: int = RUNS, before: Any = None) -> Any:
    """A host sweep into ``prefix`` with a ONCE collector (one more line); ``before(call)`` runs before each call."""
    calls = {"n": 0}

    @nsightx.analyze.kernel(
        configs=configs,
        runs=runs,
        warmup=0,
        backend=backend,
        output_prefix=str(prefix) + "/",
        info_collectors=[("pid", os.getpid, "once")],
    )
    def f(n: int) -> None:
        calls["n"] += 1
        if before is not None:
            before(calls["n"])
        with nsightx.annotate("a"):
            sum(range(n))

    return f


class FailingWrites:
    """Wraps the raw files ``Path.open`` opens for appending so that their ``at``-th write (counted over all) fails.

    ``mode`` ``"transient"``: that write raises ``EIO`` and writes nothing; later writes work. ``"full"``: that
    write takes only the first half of its bytes (a short write, as on a disk filling up) and every later write
    raises ``ENOSPC``, as a full disk does. ``"interrupt-after"`` / ``"interrupt-partial"``: that write puts all
    or half of its bytes in the file, then ``KeyboardInterrupt`` is raised, as a signal handler raises it.
    """

    def __init__(self, at: int | None, mode: str) -> None:
        self.at = at
        self.mode = mode
        self.calls = 0

    def write(self, fh: Any, data: Any) -> int:
        self.calls += 1
        data = bytes(data)
        if self.at is None or self.calls < self.at:
            fh.write(data)
            return len(data)
        if self.mode.startswith("interrupt") and self.calls == self.at:  # Ctrl-C or SIGTERM during the write
            whole = self.mode == "interrupt-after"
            fh.write(data if whole else data[: len(data) // 2])
            fh.flush()
            raise KeyboardInterrupt
        if self.mode != "full":
            if self.calls == self.at:
                raise OSError(errno.EIO, os.strerror(errno.EIO))
            fh.write(data)
            return len(data)
        if self.calls == self.at:
            fh.write(data[: len(data) // 2])
            fh.flush()
            return len(data) // 2
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


class _Wrapped(io.RawIOBase):
    """A file whose ``write`` goes through :class:`FailingWrites`; everything else is the real file's."""

    def __init__(self, real: Any, faults: FailingWrites) -> None:
        self.real = real
        self.faults = faults

    def write(self, data: Any) -> int:  # type: ignore[override]
        return self.faults.write(self.real, data)

    def writable(self) -> bool:
        return True

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)

    def fileno(self) -> int:
        return int(self.real.fileno())

    def flush(self) -> None:
        if not self.real.closed:
            self.real.flush()

    def seek(self, *args: Any) -> int:
        return int(self.real.seek(*args))

    def truncate(self, size: int | None = None) -> int:
        self.real.flush()
        return int(self.real.truncate(size))

    def close(self) -> None:
        self.real.close()
        super().close()


@pytest.fixture
def faults(monkeypatch: pytest.MonkeyPatch) -> Iterator[FailingWrites]:
    failing = FailingWrites(None, "transient")
    real_open = pathlib.Path.open

    def open_(self: Path, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        fh = real_open(self, mode, *args, **kwargs)
        if self.suffix == ".jsonl" and "a" in mode:
            return _Wrapped(fh, failing)
        return fh

    monkeypatch.setattr(pathlib.Path, "open", open_)
    yield failing


def write_points(tmp_path: Path, backend: str, faults: FailingWrites) -> int:
    """How many writes to its raw file a whole sweep makes (counted through the same wrapper)."""
    faults.at, faults.calls = None, 0
    sweep(tmp_path / "count", backend)()
    return faults.calls


def check_raw(raw: Path, saved: int) -> None:
    """The raw file holds exactly ``saved`` measured runs: the first ones of the sweep, each once, measured."""
    text = raw.read_text()
    assert text == "" or text.endswith("\n"), "a half line stayed in the file"
    if text == "":  # the header's write failed: nothing is saved, and load says the file is empty
        assert saved == 0
        with pytest.raises(ResultSchemaError, match="is empty"):
            nsightx.load(raw)
        return
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no skipped line either
        _, runs = read_runs(raw)
    measured = [r for r in runs if r.config >= 0]
    order = [(c, r) for c in range(len(CONFIGS)) for r in range(RUNS)]
    assert [(r.config, r.run) for r in measured] == order[:saved]
    assert all(len(r.records) == 1 and r.records[0].run == r.run for r in measured), "a run without measurements"
    if saved:
        df = nsightx.load(raw).runs_dataframe()
        assert len(df) == saved and not df.duplicated(["n", "Run"]).any()


@pytest.mark.parametrize("mode", ["transient", "full"])
def test_a_write_failing_at_any_point_leaves_each_run_once_and_says_how_many(
    tmp_path: Path, backend: str, faults: FailingWrites, mode: str, capsys: pytest.CaptureFixture[str]
) -> None:
    points = write_points(tmp_path, backend, faults)
    assert points == 2 + len(CONFIGS) * RUNS  # the header, the ONCE row, every run
    capsys.readouterr()
    for at in range(1, points + 1):
        faults.at, faults.mode, faults.calls, folder = at, mode, 0, tmp_path / f"{mode}-{at}"
        with pytest.raises(OutputError) as info:
            sweep(folder, backend)()
        e, raw = info.value, folder / "raw_data-f-0.jsonl"
        saved = max(0, at - 3)  # the at - 1 lines before the failing one, less the header and the ONCE row
        check_raw(raw, saved)
        assert isinstance(e, NsightxError) and isinstance(e, OSError) and isinstance(e.__cause__, OSError)
        assert e.saved == saved and e.path == str(raw) and e.errno == (errno.EIO if mode == "transient" else 28)
        text = "Input/output error (EIO)" if mode == "transient" else "No space left on device (ENOSPC)"
        assert f"cannot write to the raw file {str(raw)!r}: {text}" in str(e)
        load = f"{saved} run(s) are saved in it (load them with nsightx.load({str(raw)!r}))"
        assert (load if saved else "no run is saved in it") in str(e)
        stop = f"nsightx: f stopped by OutputError; {saved} run(s) saved in {raw}; load them with nsightx.load("
        lines = capsys.readouterr().err.splitlines()
        assert lines == ([f"{stop}{str(raw)!r})"] if saved else []), at


@pytest.mark.parametrize("mode", ["interrupt-after", "interrupt-partial"])
def test_an_interrupt_during_a_write_leaves_the_line_whole_and_counted_or_not_at_all(
    tmp_path: Path, faults: FailingWrites, mode: str
) -> None:
    from nsightx._results.sink import RunSink

    def run(i: int) -> Any:
        return nsightx.ext.RunRecords(0, i, (nsightx.Record("a", 0, i, "region", "m", 1.0, "ns", 0),))

    raw = tmp_path / "raw.jsonl"
    faults.at, faults.mode = 3, mode
    sink = RunSink(raw)
    sink.write(run(0))
    sink.write(run(1))
    with pytest.raises(KeyboardInterrupt):
        sink.write(run(2))
    kept = 3 if mode == "interrupt-after" else 2  # a whole line counts; half a line is cut back
    assert sink.measured == kept
    assert raw.read_text().endswith("\n") and [r.run for r in read_runs(raw)[1]] == list(range(kept))
    sink.write(run(2))  # the loop's clean-up hands the interrupted run over again: stored once
    sink.close()
    assert sink.measured == 3 and [r.run for r in read_runs(raw)[1]] == [0, 1, 2]


@contextmanager
def small_disk(folder: Path, size: str = "200k") -> Iterator[Path]:
    """A tmpfs of ``size`` mounted on ``folder``; the test is skipped where mounting is not allowed."""
    folder.mkdir()
    if shutil.which("mount") is None or os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root and mount(8)")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"mounting a tmpfs is not allowed here: {done.stderr.decode().strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)


def test_a_full_disk_stops_the_sweep_with_the_file_named_and_the_true_count(
    tmp_path: Path, plugin_host: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    with small_disk(tmp_path / "disk") as disk:
        with pytest.raises(OutputError, match="No space left on device") as info:
            sweep(disk, "host", configs=[(n,) for n in range(40)], runs=50)()  # ~2000 lines: far over 200 KiB
        raw = disk / "raw_data-f-0.jsonl"
        e = info.value
        assert e.errno == errno.ENOSPC and e.path == str(raw) and str(raw) in str(e) and e.saved > 0
        assert capsys.readouterr().err.splitlines() == [
            f"nsightx: f stopped by OutputError; {e.saved} run(s) saved in {raw}; load them with "
            f"nsightx.load({str(raw)!r})"
        ]
        assert raw.read_text().endswith("\n")
        runs = nsightx.load(raw).runs_dataframe()
        assert len(runs) == e.saved and not runs.duplicated(["n", "Run"]).any()


def fill(folder: Path, leave: int) -> None:
    """Fill the file system of ``folder`` until only ``leave`` bytes are free."""
    st = os.statvfs(folder)
    with open(folder / "filler", "wb") as fh:
        fh.write(b"\0" * max(0, st.f_bavail * st.f_frsize - leave))


def test_a_finished_sweep_whose_result_file_does_not_fit_keeps_its_result(
    tmp_path: Path, plugin_host: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    last = 3 * 20
    with small_disk(tmp_path / "disk", "400k") as disk:
        f = sweep(disk, "host", configs=[(1,), (2,), (3,)], runs=20, before=lambda n: n == last and fill(disk, 8192))
        with pytest.raises(OutputError, match="No space left on device") as info:
            f()
        check_kept_result(info.value, disk, capsys)


def test_a_finished_sweep_whose_result_file_cannot_be_written_keeps_its_result(
    tmp_path: Path, plugin_host: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "out"

    def block_result(n: int) -> None:  # a folder where the result file goes: replacing it fails (EISDIR)
        if n == 60:
            (folder / "result-f-0.parquet").mkdir()

    with pytest.raises(OutputError, match="Is a directory") as info:
        sweep(folder, "host", configs=[(1,), (2,), (3,)], runs=20, before=block_result)()
    check_kept_result(info.value, folder, capsys)


def check_kept_result(e: OutputError, folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    raw, result = folder / "raw_data-f-0.jsonl", folder / "result-f-0.parquet"
    assert e.path == str(result) and e.raw == str(raw) and e.saved == 60
    message = str(e)
    assert f"the sweep finished, but its file {str(result)!r} cannot be written" in message
    assert f"its 60 run(s) are in {str(raw)!r} (load them with nsightx.load({str(raw)!r}))" in message
    assert ".results" in message
    assert isinstance(e.results, nsightx.ProfileResults)
    assert e.results.to_dataframe()["NumRuns"].tolist() == [20, 20, 20]
    assert nsightx.load(raw).to_dataframe()["NumRuns"].tolist() == [20, 20, 20]
    assert not [p for p in folder.iterdir() if p.name.endswith(".tmp")]
    assert "stopped" not in capsys.readouterr().err


CHILD = """
import sys, time
import nsightx

calls = {"n": 0}

@nsightx.analyze.kernel(configs=[(1,), (2,), (3,)], runs=3, warmup=0, backend="host", output_prefix=sys.argv[1])
def victim(n):
    calls["n"] += 1
    if calls["n"] == int(sys.argv[2]) + 1:  # the runs before this one are done and on disk
        print("ready", flush=True)
        time.sleep(300)  # not a synchronisation: it waits to be terminated
    with nsightx.annotate("work"):
        sum(range(n))

victim()
print("not terminated", flush=True)
"""


def test_sigterm_prints_the_stop_line_then_ends_the_process_as_sigterm(tmp_path: Path) -> None:
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    out = tmp_path / "out"
    proc = subprocess.Popen(
        [sys.executable, str(script), str(out) + "/", "4"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line == "ready\n", (line, proc.communicate(timeout=120))  # else it ended early: say how
        proc.send_signal(signal.SIGTERM)
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    raw = out / "raw_data-victim-0.jsonl"
    assert proc.returncode == -signal.SIGTERM, stderr
    assert stdout == ""
    assert stderr.splitlines() == [
        f"nsightx: victim terminated by SIGTERM after 4 completed run(s), saved in {raw}; "
        f"load them with nsightx.load({str(raw)!r})"
    ]
    assert nsightx.load(raw).to_dataframe()["NumRuns"].tolist() == [3, 1]


def test_the_sigterm_handler_is_there_only_during_a_call_in_the_main_thread(tmp_path: Path, plugin_host: Any) -> None:
    import threading

    seen: list[Any] = []
    f = sweep(tmp_path / "a", "host", configs=[(1,)], runs=1, before=lambda n: seen.append(signal.getsignal(15)))
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    f()
    assert callable(seen[0]) and signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    seen.clear()
    off_main = sweep(tmp_path / "b", "host", configs=[(1,)], runs=1, before=lambda n: seen.append(signal.getsignal(15)))
    thread = threading.Thread(target=off_main)
    thread.start()
    thread.join(timeout=120)
    assert seen == [signal.SIG_DFL]  # it ran, and installed nothing
    own = signal.signal(signal.SIGTERM, lambda *a: None)  # a handler of the program's own is left alone
    try:
        g = sweep(tmp_path / "c", "host", configs=[(1,)], runs=1, before=lambda n: seen.append(signal.getsignal(15)))
        g()
        assert seen[-1] is signal.getsignal(signal.SIGTERM) and seen[-1] is not signal.SIG_DFL
    finally:
        signal.signal(signal.SIGTERM, own)


def test_the_raw_file_of_an_undisturbed_sweep_is_unchanged(tmp_path: Path, plugin_host: Any) -> None:
    res = sweep(tmp_path, "host")()
    raw = Path(str(res.environment["raw_data"]))
    lines = raw.read_text().splitlines()
    assert len(lines) == 2 + len(CONFIGS) * RUNS and json.loads(lines[0])["kind"] == "nsightx-raw"
    assert all(json.loads(line)["sweep"] == res.environment["sweep"] for line in lines[1:])
    check_raw(raw, len(CONFIGS) * RUNS)
