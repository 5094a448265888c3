"""The pytest plugin's baseline store against a naive reference built from docs/ci.md (section 1) and docs/api.md.

Random stores (tests, machines, commits, measurement times, older-nsightx ``<test>.json`` files, files the plugin
did not write, files that are not a result) are written through the store's own save function, the one the
plugin calls for ``--nsightx-save``. The reference says, from the documents only:

- what is written where: ``DIR/<node id in safe characters>-<hash>/<NNNN>_<machine>_<commit>_<time>.json``,
  ``NNNN`` counting the test's saves, ``<commit>`` the first 10 hex digits (``nogit`` without one), the time the
  measurement's in UTC, nothing replaced, the node id in ``environment["PytestNode"]``;
- which save each test's baseline is: the newest save (the highest number; a ``<test>.json`` is save 0), or the
  one ``--nsightx-baseline``/``base_ref`` names: a save number, else the start of a commit (digits that number no
  save are read as a commit); a test without such a save has no baseline;
- the history: the baseline and up to ``history - 1`` saves before it.

The documents say nothing of the machine a save came from when picking (the newest save is the baseline, whoever
measured it), so the reference ignores it, as the code does. Which save of a commit ``REF`` picks when the
commit has several is not written in the documents either; the reference takes the newest, as the docstring of
:func:`nsightx._report.history.pick` says. A file that is not a result inside the history window: the documents
only say a baseline file that is not a result is ``BAD BASELINE``; the test checks that such a file is never
skipped silently (reading fails) and nothing more.
"""

from __future__ import annotations

import datetime as dt
import os
import re
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from _synthetic import make_result
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nsightx._errors import ConfigError, ResultSchemaError
from nsightx._report import history
from nsightx._report.pytest_gate import Gate, GateSettings
from nsightx._report.sources import load_side, stored_source
from nsightx._results.profileresults import ProfileResults, load

NODES = ("tests/test_a.py::test_mm[64]", "tests/test_a.py::test_mm[128]", "t/b.py::C::test x/y", "a_b", "a/b")
MACHINES = ("ci-7", "gpu-h200-1", "vm", "box.lan")
COMMITS = (
    None,
    "1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b",
    "1a2b3c4d5e00000000000000000000000000ffff",  # shares 10 digits with the one above
    "1234567890abcdef1234567890abcdef12345678",  # starts with digits only
    "0003abcdef0123456789abcdef0123456789abcd",  # starts like a save number
    "FEDCBA9876543210FEDCBA9876543210FEDCBA98",  # upper case
)


@dataclass
class Save:
    """One save as the reference sees it."""

    node: str
    number: int
    machine: str
    commit: str | None
    when: dt.datetime
    corrupt: bool = False
    path: Path | None = None


@dataclass
class Store:
    saves: list[Save] = field(default_factory=list)
    refs: list[str | None] = field(default_factory=list)
    size: int = history.HISTORY
    measured: list[str] = field(default_factory=list)
    """The tests a pytest session then measures, comparing with and saving into the same folder."""
    gate_ref: str | None = None
    """That session's ``--nsightx-baseline``."""


def result_of(save: Save) -> ProfileResults:
    """A small real result measured on ``save.machine`` at ``save.commit`` and ``save.when``."""
    res = make_result(
        {("a", 0, "gpu__time_duration.sum"): [1.0 + save.number, 2.0, 3.0]},
        params=("n",),
        configs=[(1,)],
        created=save.when.isoformat(timespec="seconds"),
    )
    env = {"Host": save.machine, **({"GitCommit": save.commit} if save.commit else {})}
    return ProfileResults(res.data.model_copy(update={"environment": {**res.data.environment, **env}}))


@st.composite
def stores(draw: Any) -> Store:
    """Saves of a few tests in random order, machines, commits and times (not always increasing)."""
    start = dt.datetime(2026, 12, 5, 10, 0, 0, tzinfo=dt.UTC)
    nodes = draw(st.lists(st.sampled_from(NODES), min_size=1, max_size=3, unique=True))
    legacy = {n for n in nodes if draw(st.integers(0, 4)) == 0}
    out = Store()
    counts = {n: 0 for n in nodes}
    for n in sorted(legacy):
        out.saves.append(Save(n, 0, "?", None, start))
    for _ in range(draw(st.integers(0, 9))):
        node = draw(st.sampled_from(nodes))
        counts[node] += 1
        when = start + dt.timedelta(seconds=draw(st.integers(-4000, 40000)))
        out.saves.append(
            Save(node, counts[node], draw(st.sampled_from(MACHINES)), draw(st.sampled_from(COMMITS)), when)
        )
    for s in out.saves:
        s.corrupt = draw(st.integers(0, 9)) == 0
    commits = [c for c in COMMITS if c]
    out.refs = [
        None,
        str(draw(st.integers(0, 12))),
        draw(st.sampled_from(commits))[: draw(st.integers(4, 40))],
        draw(st.sampled_from(["0003", "1234", "12345", "0003abc", "zz", "1a2b3c4d5e0"])),
    ]
    out.size = draw(st.sampled_from([history.HISTORY, 1, 2, 3]))
    out.measured = draw(st.lists(st.sampled_from(NODES), max_size=3, unique=True))
    out.gate_ref = draw(st.sampled_from(out.refs))
    return out


def write(store: Store, root: Path) -> None:
    """Every save through the store's save function (a ``<test>.json`` for save 0), plus files it ignores."""
    for s in store.saves:
        folder = root / history.test_folder(s.node)
        if s.number == 0:
            s.path = folder.with_name(folder.name + ".json")
            result_of(s).save(s.path)
        else:
            s.path = history.save(root, s.node, result_of(s))
        if s.corrupt:
            s.path.write_text('{"schema_version": 1, "created": ' if s.number % 2 else "")
    (root / "README.md").write_text("not a result")
    (root / "notes").mkdir(exist_ok=True)
    for s in store.saves:
        folder = root / history.test_folder(s.node)
        folder.mkdir(exist_ok=True)
        (folder / "0099_x_nogit_20261205T000000Z.json.tmp").write_text("a leftover temporary file")
        (folder / "copy of 0001.json").write_text("{}")


# --- the reference -----------------------------------------------------------------------------------------------


def reference_name(s: Save) -> str:
    """ci.md: ``<NNNN>_<machine>_<commit>_<YYYYmmddTHHMMSSZ>.json``, the commit's first 10 hex digits, UTC."""
    commit = s.commit[:10].lower() if s.commit else "nogit"
    return f"{s.number:04d}_{s.machine}_{commit}_{s.when.astimezone(dt.UTC):%Y%m%dT%H%M%SZ}.json"


def reference_pick(saves: list[Save], ref: str | None) -> Save | None:
    """The newest save, or the one ``ref`` names (a save number, else the start of a commit); ``None``: none."""
    if ref is None:
        return saves[-1]
    if ref.isdigit() and any(s.number == int(ref) for s in saves):
        return next(s for s in saves if s.number == int(ref))
    if not re.fullmatch(r"[0-9a-fA-F]{4,40}", ref):
        return None
    prefix = ref.lower()
    # the name keeps 10 digits only: a longer reference matches a save whose 10 digits it starts with
    of_commit = [
        s
        for s in saves
        if s.commit and (s.commit.lower()[:10].startswith(prefix) or prefix.startswith(s.commit.lower()[:10]))
    ]
    return of_commit[-1] if of_commit else None


# --- the tests ---------------------------------------------------------------------------------------------------


def check(store: Store, root: Path) -> None:
    write(store, root)
    by_node: dict[str, list[Save]] = {}
    for s in store.saves:
        by_node.setdefault(s.node, []).append(s)
    for node, saves in by_node.items():
        for s in saves:
            if s.number:
                assert s.path == root / history.test_folder(node) / reference_name(s)
            if not s.corrupt:
                assert load(s.path).environment.get(history.NODE_KEY) == (node if s.number else None)
    listed = history.scan(root)
    assert set(listed) == {history.test_folder(n) for n in by_node}
    for node, saves in by_node.items():
        found = listed[history.test_folder(node)]
        assert [e.path for e in found] == [s.path for s in saves]
        assert found == history.entries(root / history.test_folder(node))  # the gate's own look-up
        for ref in store.refs:
            check_pick(saves, found, ref, store.size)
    for ref in store.refs:
        check_side(by_node, root, ref, store.size)
    check_gate(store, by_node, root)


def check_pick(saves: list[Save], found: list[history.Entry], ref: str | None, size: int) -> None:
    want = reference_pick(saves, ref)
    if want is None:
        with pytest.raises(ConfigError):
            history.pick(found, ref)
        return
    chosen = history.pick(found, ref)
    assert chosen.path == want.path, (ref, [s.path.name for s in saves if s.path])
    at = saves.index(want)
    window = saves[max(0, at - size + 1) : at + 1]
    assert [e.path for e in history.history(found, chosen, size)] == [s.path for s in window]
    if any(s.corrupt for s in window):
        with pytest.raises(ResultSchemaError):  # never skipped silently
            stored_source(found, ref, size)
        return
    source = stored_source(found, ref, size)
    assert source.path == want.path
    assert len(source.history) == len(window)
    assert source.result.data.created == want.when.isoformat(timespec="seconds")
    assert source.label == (want.node if want.number else source.test)


def check_side(by_node: dict[str, list[Save]], root: Path, ref: str | None, size: int) -> None:
    """``nsightx.compare``'s side of a store: one baseline per test, the one the reference picks."""
    wants = {history.test_folder(n): reference_pick(saves, ref) for n, saves in by_node.items()}
    if not by_node:  # not a store: an empty folder (and a reference picks nothing in it)
        with pytest.raises(ConfigError if ref else ResultSchemaError):
            load_side(root, ref=ref, size=size)
        return
    window_bad = False
    for n, saves in by_node.items():
        w = wants[history.test_folder(n)]
        if w is not None:
            at = saves.index(w)
            window_bad |= any(s.corrupt for s in saves[max(0, at - size + 1) : at + 1])
    missing = any(w is None for w in wants.values())
    if missing or window_bad:  # whichever test is read first says why (the documents give no order)
        errors = (ConfigError,) * missing + (ResultSchemaError,) * window_bad
        with pytest.raises(errors):
            load_side(root, ref=ref, size=size)
        return
    side = load_side(root, ref=ref, size=size)
    assert {s.test: s.path for s in side} == {t: w.path for t, w in wants.items() if w}


def check_gate(store: Store, by_node: dict[str, list[Save]], root: Path) -> None:
    """The plugin's gate with ``--nsightx-compare=DIR --nsightx-save=DIR --nsightx-baseline=REF`` (ci.md section 1).

    Each measured test is compared with the save the reference picks (``NO BASELINE`` without one, ``BAD
    BASELINE`` when a file of its history is not a result), then added as save ``max + 1``; the stored tests no
    test measured are listed.
    """
    gate = Gate(GateSettings(compare_dir=root, save_dir=root, baseline_ref=store.gate_ref, confirm=0))
    start = dt.datetime(2026, 12, 6, 9, 0, 0, tzinfo=dt.UTC)
    for node in store.measured:
        saves = by_node.get(node, [])
        new = Save(node, max((s.number for s in saves), default=0) + 1, "pr-runner", COMMITS[1], start)
        gate.record(node, result_of(new))
        outcome = gate.outcomes[-1]
        want = reference_pick(saves, store.gate_ref) if saves else None
        if want is None:
            assert outcome.status == "no baseline", outcome
        elif any(s.corrupt for s in saves[max(0, saves.index(want) - history.HISTORY + 1) : saves.index(want) + 1]):
            assert outcome.status == "bad baseline", outcome
        else:
            assert (outcome.status, outcome.baseline) == ("compared", want.path), outcome.message
        assert gate.saved[-1] == root / history.test_folder(node) / reference_name(new)
    stored = {history.test_folder(n) for n in by_node} - {history.test_folder(n) for n in store.measured}
    assert sorted(gate.unmatched_baselines()) == sorted(root / t for t in stored)


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(store=stores())
def test_the_store_writes_and_picks_what_the_docs_say(store: Store) -> None:
    root = Path(tempfile.mkdtemp(prefix="nsx-store-"))
    try:
        check(store, root)
    finally:
        shutil.rmtree(root)


def test_a_number_another_process_claims_at_the_same_moment_is_left_to_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two pytest processes saving one test at once: ``NNNN`` counts the saves, so each save has its own number.

    The other process (another runner, commit and second) claims save 2 after this one counted the saves and
    before it claims its own file: ``O_EXCL`` passed both names, and both were save 2, so ``--nsightx-baseline=2``
    picked one of them silently and the history counted the same push twice (found by this file's reference).
    """
    node = NODES[0]
    start = dt.datetime(2026, 12, 5, 10, 0, 0, tzinfo=dt.UTC)
    history.save(tmp_path, node, result_of(Save(node, 1, "vm", None, start)))
    folder = tmp_path / history.test_folder(node)
    rival = Save(node, 2, "ci-7", COMMITS[1], start + dt.timedelta(seconds=1))
    real_open = os.open

    def open_after_the_rival(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        if Path(path).parent == folder and rival.path is None:  # this process's claim: the rival's comes first
            rival.path = folder / reference_name(rival)
            os.close(real_open(rival.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", open_after_the_rival)
    mine = history.save(tmp_path, node, result_of(Save(node, 2, "vm", None, start + dt.timedelta(seconds=2))))
    monkeypatch.undo()
    assert mine == folder / reference_name(Save(node, 3, "vm", None, start + dt.timedelta(seconds=2)))
    assert [e.number for e in history.entries(folder)] == [1, 2, 3]
    assert load(mine).environment[history.NODE_KEY] == node
