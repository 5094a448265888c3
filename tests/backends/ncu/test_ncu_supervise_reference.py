"""ncu's supervision against a naive reference: what outlives ncu, and where each printed byte goes (CPU only).

What outlives ncu: nothing of the process group the backend started (the fake ncu stands in for the binary).

The reference is ``nsightx_ncu._supervise``'s promise: ncu runs in its own session "so its whole process group
can be killed", and the parent "never blocks on the worker". When ncu itself ends (the out-of-memory killer took
it, it crashed) while the worker it started still runs the user's function, the call must not return with that
worker still running: it would keep launching the user's GPU work behind the next measurement, write into a
folder the call deleted, and the error would call it dead while it is not.

Where printed bytes go (:class:`~nsightx_ncu._echo.OutputRouter`, fed random chunks of both streams): the
reference reads docs/backends.md ("What the function prints reaches your stdout and stderr; ncu's own
``==PROF==`` lines stay in the log unless verbosity=DEBUG", "Everything ncu and the worker print is in the log")
and the module docstring (a tool line is one starting ``==WORD==``; ``ERR_NVGPUCTRPERM`` anywhere in a line is
ncu's refusal). Per stream, the whole bytes are split into lines after the fact and decoded as UTF-8 with
replacement, so a chunk boundary inside a line or a character changes nothing. The order of lines across the
two streams is not compared when ncu's lines are shown (the docs do not say it).
``NSIGHTX_NCU_ROUTER_EXAMPLES`` sets how many (default 300; 3000 each while hunting).
"""

from __future__ import annotations

import io
import itertools
import os
import re
import signal
import time
from pathlib import Path

import ncu_fake
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from nsightx_ncu._backend import NcuBackend
from nsightx_ncu._echo import OutputRouter

import nsightx
from nsightx._results.sink import RunSink

pytest.importorskip("cloudpickle")
pytest.importorskip("nvtx")
pytest.importorskip("ncu_report", reason="needs the ncu-report package (test dependency group)")

GONE_WITHIN_S = 30.0
"""Generous: a SIGKILLed process is gone at once, but CI is a loaded 2-core machine."""


@pytest.fixture(autouse=True)
def fake_ncu(monkeypatch, tmp_path):
    ncu_fake.use_fake_ncu(monkeypatch, tmp_path)


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie waiting for its parent to reap it does not)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    state = next((line.split()[1] for line in status.splitlines() if line.startswith("State:")), "")
    return state not in ("Z", "X")


def _gone(pid: int, within_s: float) -> bool:
    deadline = time.monotonic() + within_s
    while _alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads process states from /proc")
def test_a_worker_still_running_when_ncu_dies_does_not_outlive_the_call(monkeypatch, tmp_path):
    started = tmp_path / "worker.pid"
    monkeypatch.setenv("FAKE_NCU_CRASH_AFTER", str(started))
    marker = str(started)

    def work(n):
        import os as _os
        import time as _time

        with nsightx.annotate("slow"):
            with open(marker + ".tmp", "w") as fh:
                fh.write(str(_os.getpid()))
            _os.replace(marker + ".tmp", marker)  # the fake ncu kills itself once this exists
            _time.sleep(600)

    plan = ncu_fake.make_plan(work, ((1,),), runs=1, warmup=0)
    pid = 0
    try:
        with pytest.raises(nsightx.MeasurementError) as info:
            NcuBackend().execute(plan, RunSink())
        pid = int(started.read_text())
        assert "signal 9" in str(info.value)
        assert _gone(pid, GONE_WITHIN_S), "the ncu worker still runs the user's function after the call returned"
    finally:
        if pid and _alive(pid):
            os.kill(pid, signal.SIGKILL)  # the worker this test started (before the fix it was left running)


ROUTER_EXAMPLES = int(os.environ.get("NSIGHTX_NCU_ROUTER_EXAMPLES", "300"))
PIECES = (
    b"==PROF== Connected to process 7",
    b"==WARNING== a warning",
    b"==ERROR== ERR_NVGPUCTRPERM - The user does not have permission",
    b"==NSIGHTX== Traceback (most recent call last):",
    b"user says ERR_NVGPUCTRPERM",
    b"== not a tool line",
    b"=PROF= nor this",
    b"x==PROF== nor this",
    "h\u00e9llo \u4e2d\u6587 \U0001f600".encode(),
    b"bad \xff\xfe bytes",
    b"\r",
    b"",
    b"plain",
)


@st.composite
def streams(draw: st.DrawFn) -> list[tuple[str, bytes]]:
    """Interleaved chunks of two byte streams: pieces and line breaks, cut at random byte offsets."""
    out: list[tuple[str, bytes]] = []
    for stream in ("stdout", "stderr"):
        text = b"".join(draw(st.lists(st.sampled_from(PIECES) | st.just(b"\n"), max_size=12)))
        cuts = sorted(draw(st.lists(st.integers(0, len(text)), max_size=6)))
        bounds = [0, *cuts, len(text)]
        out += [(stream, text[a:b]) for a, b in itertools.pairwise(bounds) if b > a]
    order = draw(st.permutations(range(len(out))))
    by_stream = {"stdout": [c for c in out if c[0] == "stdout"], "stderr": [c for c in out if c[0] == "stderr"]}
    merged = []  # a random interleaving that keeps each stream's own order
    for i in order:
        merged.append(by_stream[out[i][0]].pop(0))
    return merged


def _lines(data: bytes) -> list[bytes]:
    parts = data.split(b"\n")
    return [p + b"\n" for p in parts[:-1]] + ([parts[-1]] if parts[-1] else [])


def _tool(line: bytes) -> bool:
    return re.match(rb"==[A-Z][A-Z-]*==", line) is not None


@pytest.mark.parametrize("show", [False, True])
@settings(max_examples=ROUTER_EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(chunks=streams())
def test_the_router_against_a_naive_reference(chunks, show, capsys):
    capsys.readouterr()
    log = io.BytesIO()
    router = OutputRouter(log, show_tool_lines=show)
    for stream, data in chunks:
        router.feed(stream, data)  # type: ignore[arg-type]
    router.close()
    out, err = capsys.readouterr()
    whole = {s: b"".join(d for t, d in chunks if t == s) for s in ("stdout", "stderr")}
    lines = {s: _lines(whole[s]) for s in whole}
    assert log.getvalue() == b"".join(d for _, d in chunks)
    assert out == b"".join(x for x in lines["stdout"] if not _tool(x)).decode("utf-8", "replace")
    own_err = b"".join(x for x in lines["stderr"] if not _tool(x)).decode("utf-8", "replace")
    if show:  # ncu's lines of both streams join stderr, in an order the docs leave open: compare the characters
        tools = b"".join(x for s in ("stdout", "stderr") for x in lines[s] if _tool(x)).decode("utf-8", "replace")
        assert sorted(err) == sorted(own_err + tools)
    else:
        assert err == own_err
    assert router.permission_denied == any(b"ERR_NVGPUCTRPERM" in x for s in lines for x in lines[s])
