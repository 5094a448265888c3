"""The fixed cost of a profiled call (issue 35): what a call pays whatever its number of runs.

A call of a few configs and runs builds its columns with Python loops over lists (``store.SMALL``) instead of a few
dozen numpy calls; the arrays must be those of the vectorised path, dtype and all. The git files a call reads for
its provenance are read again only when their identity changes, and the SIGTERM handler is installed once a call.
"""

from __future__ import annotations

import builtins
import shutil
import signal
import subprocess

import numpy as np
import pytest

import nsightx
from nsightx._results import store
from nsightx._results.rowparts import parts_from_rows
from nsightx._run import provenance

SILENT = nsightx.VerbosityLevel.SILENT


def _rows() -> list[tuple]:
    """Run rows as the run loop hands them: two regions, a kernel each, one run with a failed-free repeat."""
    rows = []
    for config in range(3):
        for run in range(4):
            records = [
                ("a", config, run, "k1", "m", 1.5 + run, "ns", 0),
                ("b", config, run, None, "m", 2.0 * run, "ns", 1),
            ]
            rows.append((config, run, records, (("a", 10 + run, False), ("b", 20, False)), {}, ()))
    return rows


def _same(a, b) -> None:
    """Two columns (dataclasses of arrays, ``Text`` and lists) are equal field by field, dtypes included."""
    for name in a.__dataclass_fields__:
        x, y = getattr(a, name), getattr(b, name)
        if isinstance(x, store.Text):
            assert x.names == y.names and x.codes.dtype == y.codes.dtype, name
            np.testing.assert_array_equal(x.codes, y.codes)
        elif isinstance(x, np.ndarray):
            assert x.dtype == y.dtype, name
            np.testing.assert_array_equal(x, y)
        else:
            assert x == y, name


@pytest.mark.parametrize("count", [0, 1, 12])
def test_small_columns_are_the_vectorised_ones(monkeypatch, count):
    """The small path (below ``store.SMALL`` rows) makes the arrays the vectorised path makes."""
    rows = _rows()[:count]
    small = parts_from_rows(rows)
    small_values = store.one_per_region(small.records, small.regions, ())
    monkeypatch.setattr(store, "SMALL", -1)
    large = parts_from_rows(rows)
    large_values = store.one_per_region(large.records, large.regions, ())
    for part in ("runs", "records", "regions"):
        _same(getattr(small, part), getattr(large, part))
    assert (small_values is None) == (large_values is None)
    if small_values is not None:
        _same(small_values, large_values)


@pytest.mark.parametrize("change", ["repeat", "ignored", "config", "none"])
def test_small_one_per_region_refuses_what_the_vectorised_one_refuses(monkeypatch, change):
    """Records that are not one per region execution (a region id met twice, an ignored kernel, keys that differ)
    are refused by both paths alike."""
    rows = [(0, r, [("a", 0, r, "k", "m", 1.0, "ns", 0)], (("a", 5, False),), {}, ()) for r in range(3)]
    ignored: tuple[str, ...] = ()
    if change == "repeat":
        rows[2] = (0, 1, [("a", 0, 1, "k", "m", 1.0, "ns", 0)], (("a", 5, False),), {}, ())
    elif change == "ignored":
        ignored = ("k",)
    elif change == "config":
        rows[1] = (0, 1, [("a", 1, 1, "k", "m", 1.0, "ns", 0)], (("a", 5, False),), {}, ())
    parts = parts_from_rows(rows)
    small = store.one_per_region(parts.records, parts.regions, ignored)
    monkeypatch.setattr(store, "SMALL", -1)
    large = store.one_per_region(parts.records, parts.regions, ignored)
    assert (small is None) == (large is None) == (change != "none")


def test_head_is_read_again_only_when_it_changes(tmp_path, monkeypatch):
    """A call reads its git files by identity: the second call in the same repository opens none of them."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    provenance._HEADS.clear()
    provenance.head_commit(str(repo))
    opened: list[str] = []
    real_open = builtins.open

    def counting_open(file, *args, **kwargs):
        opened.append(str(file))
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", counting_open)
    provenance.head_commit(str(repo))
    assert not [f for f in opened if f.startswith(str(repo))]
    head = repo / ".git" / "HEAD"
    new = repo / ".git" / "HEAD.new"
    new.write_text("ref: refs/heads/other\n")  # as git does: a new file renamed into place
    new.replace(head)
    key = provenance._head_key(str(repo))
    assert key is not None and key[2] == b"ref: refs/heads/other\n"


def test_a_call_installs_its_sigterm_handler_once(monkeypatch):
    """One handler for the whole run stage: set once and put back once (not once per stage)."""
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        pytest.skip("SIGTERM has a handler here: a call leaves it alone")

    def fn(n):
        with nsightx.annotate("r"):
            pass

    call = nsightx.analyze.kernel(configs=[(1,)], runs=2, warmup=0, backend="host", verbosity=SILENT)(fn)
    call()
    seen: list[object] = []
    real = signal.signal

    def counting(signum, handler):
        if signum == signal.SIGTERM:
            seen.append(handler)
        return real(signum, handler)

    monkeypatch.setattr(signal, "signal", counting)
    assert len(call().to_dataframe()) == 1
    assert len(seen) == 2 and seen[-1] is signal.SIG_DFL


class _Box:
    """A config value whose ``repr`` changes: a result must store the ``repr`` it had at its call."""

    def __init__(self) -> None:
        self.n = 0

    def __repr__(self) -> str:
        return f"_Box({self.n})"


def test_a_call_reuses_its_plan_description_only_while_it_cannot_change():
    """The stored plan (``PlanInfo``) of a function called again is the last call's, unless a config value
    could have changed since (its ``repr`` is what is stored)."""

    def fn(n):
        with nsightx.annotate("r"):
            pass

    plain = nsightx.analyze.kernel(configs=[(1,), (2,)], runs=1, warmup=0, backend="host", verbosity=SILENT)(fn)
    first, second = plain(), plain()
    assert second.data.plan is first.data.plan
    assert list(second.to_dataframe().columns) == list(first.to_dataframe().columns)
    box = _Box()
    boxed = nsightx.analyze.kernel(configs=[(box,)], runs=1, warmup=0, backend="host", verbosity=SILENT)(fn)
    before = boxed()
    box.n = 1
    after = boxed()
    assert before.data.plan.configs == (("_Box(0)",),) and after.data.plan.configs == (("_Box(1)",),)
