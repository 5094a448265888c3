"""The baseline store of the pytest plugin: one file per test, machine, commit and save, never overwritten.

``--nsightx-save=DIR`` keeps every result it is given, as pytest-benchmark's ``--benchmark-autosave`` does::

    DIR/<test>/<NNNN>_<machine>_<commit>_<YYYYmmddTHHMMSSZ>.json

``<test>`` is the test's node id in safe characters plus a hash of it (:func:`test_folder`), ``NNNN`` counts the
saves of that test (1, 2, ...), ``<machine>`` is the host name in safe characters, ``<commit>`` the first 10 hex
digits of the git commit measured (``nogit`` outside a repository) and the time is when it was measured (UTC). A
result stored by an older plugin as ``DIR/<test>.json`` is read as save number 0 of that test. A save named
``.parquet`` (a result in the columnar format, copied in by hand) is read like a ``.json`` one; the plugin
writes JSON (a few kilobytes per save, where Parquet's fixed overhead is larger).

The newest save is the baseline unless a reference picks another (:func:`pick`: a save number or a commit
prefix); the saves before it are the history the gate learns its noise floor from (docs/ci.md, section 3).

Only the standard library is imported here: pytest loads the plugin, and with it this module, at every start.
"""

from __future__ import annotations

import hashlib
import os
import re
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from nsightx._errors import ConfigError

if TYPE_CHECKING:
    from nsightx._results.profileresults import ProfileResults

NODE_KEY = "PytestNode"
"""The environment entry of a stored result that holds the node id of the test that measured it."""

HISTORY = 5
"""How many stored processes (the baseline and the saves before it) the noise floor is learned from."""

_READABLE_MAX = 120
"""Longest readable part of a test's folder name (the hash keeps names unique; the whole stays under 255 bytes)."""

_ENTRY = re.compile(
    r"^(?P<number>\d{4,})_(?P<machine>[A-Za-z0-9.-]+)_(?P<commit>[0-9a-f]{4,40}|nogit)_(?P<saved>\d{8}T\d{6}Z)\.(?:json|parquet)$"
)
"""The name of one save (:func:`entry_name`)."""
_TEST = re.compile(r"-[0-9a-f]{10}$")
"""What :func:`test_folder` names end with (to tell the plugin's folders and files from other ones)."""


def test_folder(nodeid: str) -> str:
    """The name under which a test's results are stored: its node id in safe characters, then a short hash of it.

    ``tests/test_mm.py::test_mm[1024-fp32]`` becomes ``tests_test_mm.py_test_mm_1024-fp32-<10 hex>``. Only
    ``A-Z a-z 0-9 _ . -`` appear, on every file system and in CI artifact names; the hash of the exact node id
    keeps two tests apart whose ids differ only in the characters replaced (``a/b`` and ``a_b``) or beyond the
    readable part's length.
    """
    readable = re.sub(r"[^A-Za-z0-9_.-]+", "_", nodeid).strip("_.-")[:_READABLE_MAX] or "test"
    digest = hashlib.sha1(nodeid.encode("utf-8")).hexdigest()[:10]
    return f"{readable}-{digest}"


@dataclass(frozen=True)
class Entry:
    """One stored result of one test."""

    path: Path
    test: str
    """The test's folder name (:func:`test_folder`)."""
    number: int
    """The save's number within the test (0: a file of the plugin before it kept history)."""
    machine: str = "?"
    commit: str | None = None
    saved: str = ""
    """When it was measured, ``YYYYmmddTHHMMSSZ`` (empty for save 0)."""

    def describe(self) -> str:
        """``#3 (commit 1a2b3c4d5e, host ci-7, 20261205T101500Z)``."""
        return f"#{self.number} (commit {self.commit or '-'}, host {self.machine}, {self.saved or 'time unknown'})"


def entries(folder: Path) -> list[Entry]:
    """The saves in one test's folder (and its pre-history file next to it), oldest first."""
    found: list[Entry] = []
    legacy = folder.with_name(folder.name + ".json")
    if legacy.is_file():
        found.append(Entry(legacy, folder.name, 0))
    if folder.is_dir():
        for path in folder.iterdir():
            m = _ENTRY.match(path.name)
            if m and path.is_file():
                commit = None if m["commit"] == "nogit" else m["commit"]
                found.append(Entry(path, folder.name, int(m["number"]), m["machine"], commit, m["saved"]))
    return sorted(found, key=lambda e: (e.number, e.saved, e.path.name))


def scan(root: Path) -> dict[str, list[Entry]]:
    """Every test stored under ``root`` (a ``--nsightx-save`` folder), by folder name, each oldest save first.

    ``root`` may also be one test's folder: it then holds that test only. Files and folders the plugin did not
    write are ignored; an empty answer means ``root`` is not a baseline store.
    """
    if not root.is_dir():
        return {}
    own = entries(root)
    if own and any(e.number > 0 for e in own):
        return {root.name: own}
    names = {p.name.removesuffix(".json") if p.is_file() else p.name for p in root.iterdir()}
    names = {name for name in names if _TEST.search(name)}
    stored = {name: entries(root / name) for name in sorted(names)}
    return {name: found for name, found in stored.items() if found}


def pick(found: list[Entry], ref: str | None) -> Entry:
    """The baseline among one test's saves: the newest, or the one ``ref`` names.

    Args:
        found: The test's saves, oldest first (:func:`entries`).
        ref: ``None`` (the newest), a save number (``"3"``), or the start of a commit (at least 4 hex digits;
            the newest save of that commit). Digits that number no save are read as the start of a commit.

    Raises:
        ConfigError: ``ref`` names no save of the test (the message lists the saves).
    """
    if not found:
        raise ConfigError("no stored result to pick a baseline from")
    if ref is None:
        return found[-1]
    ref = ref.strip().lower()
    number = ref.isascii() and ref.isdigit()
    chosen = [e for e in found if e.number == int(ref)] if number else []
    if not chosen and re.fullmatch(r"[0-9a-f]{4,40}", ref):  # a commit may start with digits only: 1234567
        chosen = [e for e in found if e.commit and (e.commit.startswith(ref) or ref.startswith(e.commit))]
    elif not number:
        raise ConfigError(
            f"baseline reference {ref!r} is neither a save number (such as 3) nor the start of a git commit (4 to "
            "40 hex digits); `nsightx baselines DIR` lists the stored ones"
        )
    if not chosen:
        stored = ", ".join(e.describe() for e in found[-5:])
        raise ConfigError(f"baseline reference {ref!r} matches no save of {found[0].test}; the newest are: {stored}")
    return chosen[-1]


def history(found: list[Entry], chosen: Entry, size: int = HISTORY) -> list[Entry]:
    """The chosen save and up to ``size - 1`` saves before it, oldest first: the processes the floor comes from."""
    before = [e for e in found if (e.number, e.saved) <= (chosen.number, chosen.saved) and e != chosen]
    return [*before[-(size - 1) :], chosen] if size > 1 else [chosen]


def _safe(text: str, limit: int) -> str:
    return re.sub(r"[^A-Za-z0-9.-]+", "-", text).strip("-.")[:limit] or "unknown"


def entry_name(number: int, result: ProfileResults) -> str:
    """The file name of save ``number`` of ``result`` (machine, commit and time from its environment)."""
    env = result.environment
    machine = _safe(str(env.get("Host") or socket.gethostname()), 40)
    commit = str(env.get("GitCommit") or "")
    commit = commit[:10].lower() if re.fullmatch(r"[0-9a-fA-F]{4,64}", commit) else "nogit"
    saved = re.sub(r"\D", "", result.data.created)[:14].ljust(14, "0")
    return f"{number:04d}_{machine}_{commit}_{saved[:8]}T{saved[8:]}Z.json"


def save(root: Path, nodeid: str, result: ProfileResults) -> Path:
    """Store ``result`` as the next save of test ``nodeid`` under ``root``; nothing already there is replaced.

    The file name is claimed exclusively first (``O_EXCL``: another process saving the same test at the same
    moment takes the next number), then written atomically. The stored copy's environment names the test
    (:data:`NODE_KEY`), so ``nsightx compare`` can match it with the other side's result of the same test.

    Raises:
        ConfigError: the folder or the file cannot be written.
    """
    from nsightx._results.profileresults import ProfileResults

    data = result.data
    stored = ProfileResults(data.model_copy(update={"environment": {**data.environment, NODE_KEY: nodeid}}))
    folder = root / test_folder(nodeid)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ConfigError(f"--nsightx-save: cannot create {str(folder)!r}: {e.strerror or e}") from e
    path = _claim(folder, stored)
    try:
        return stored.save(path)
    except BaseException:
        path.unlink(missing_ok=True)
        raise


def _claim(folder: Path, stored: ProfileResults) -> Path:
    """Create, empty, the file of the next free save number in ``folder``, and no other process's number.

    ``O_EXCL`` alone keeps only the exact name: two processes that counted the saves at the same moment would
    both claim the next number under names that differ in machine, commit or time. So a claim is kept only if no
    other file holds its number right after it was made (a process claiming that number later then sees this
    one); else it is removed and the next number tried (two that see each other both move on, leaving a gap).

    Raises:
        ConfigError: the file cannot be created, or no number is free.
    """
    number = max((e.number for e in entries(folder)), default=0) + 1
    for _ in range(1000):
        path = folder / entry_name(number, stored)
        try:
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o666))
        except FileExistsError:
            number += 1
            continue
        except OSError as e:
            raise ConfigError(f"--nsightx-save: cannot write {str(path)!r}: {e.strerror or e}") from e
        found = entries(folder)
        if not any(e.number == number and e.path != path for e in found):
            return path
        path.unlink(missing_ok=True)  # another process claimed this number at the same moment
        number = max(number, *(e.number for e in found)) + 1
    raise ConfigError(f"--nsightx-save: no free save number in {str(folder)!r}; remove old saves there")


def listing(root: Path) -> list[str]:
    """What ``nsightx baselines DIR`` prints: per test, each save (oldest first) and which one is the baseline.

    Raises:
        ConfigError: ``root`` holds no result stored by ``--nsightx-save``.
    """
    stored = scan(root)
    if not stored:
        raise ConfigError(
            f"{str(root)!r} holds no result stored by the pytest plugin (<test>/<NNNN>_<machine>_<commit>_<time>.json);"
            f" store some with pytest --nsightx-save={root}"
        )
    lines = [f"{len(stored)} test(s) in {str(root)!r}; the gate compares with the newest save of each"]
    for name, found in stored.items():
        lines.append(f"{name}: {len(found)} save(s)")
        lines += [
            f"  {'*' if e is found[-1] else ' '} #{e.number:<4} commit {e.commit or '-':<10}  host {e.machine:<20}  "
            f"{e.saved or 'time unknown'}"
            for e in found
        ]
    return lines
