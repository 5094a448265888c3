"""What one side of a comparison holds: its results, the test each belongs to, and the stored history behind each.

A side is a ``ProfileResults``, a saved result file, a folder of ``result-*`` files (``output_prefix``), or a
baseline store of the pytest plugin (``--nsightx-save``, see :mod:`nsightx._report.history`). Each result comes
with its *history*: the results of the same test (store) or function (``result-*`` folder) saved before it in the
same folder, which the gate learns the between-process noise floor from (:mod:`nsightx._report.noise`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from nsightx._errors import ConfigError, ResultSchemaError
from nsightx._report import history as _history
from nsightx._results.profileresults import ProfileResults, load


@dataclass
class Source:
    """One result of a side, with where it came from."""

    result: ProfileResults
    test: str = ""
    """The test it measured (the store's folder name, :func:`nsightx._report.history.test_folder`), or ``""``."""
    label: str = ""
    """How the test is shown: its node id when the result names it, else :attr:`test`."""
    history: list[ProfileResults] = field(default_factory=list)
    """Stored results of the same test or function up to and including :attr:`result`, oldest first."""
    path: Path | None = None


def load_side(source: object, *, ref: str | None = None, size: int = _history.HISTORY) -> list[Source]:
    """The results named by ``source`` (see the module docstring), each with its history.

    Args:
        source: A ``ProfileResults``, a path to a saved result or a folder, a :class:`Source`, or a list of them.
        ref: In a baseline store, which save of each test to use (:func:`nsightx._report.history.pick`); by
            default the newest.
        size: How many stored processes (the chosen one included) make a history.

    Raises:
        ConfigError: ``source`` is of another type, or ``ref`` is given for something that is not a store.
        ResultSchemaError: a file is not a saved result, or a folder holds none.
    """
    if isinstance(source, Source):
        return [source]
    if isinstance(source, ProfileResults):
        return [_single(source, None)]
    if isinstance(source, Sequence) and not isinstance(source, str | bytes):
        return [s for item in source for s in load_side(item, ref=ref, size=size)]
    if not isinstance(source, str | Path):
        raise ConfigError(f"compare takes ProfileResults or a path to a saved result, got {source!r}")
    path = Path(source)
    stored = _history.scan(path) if path.is_dir() else {}
    if stored:
        return [stored_source(found, ref, size) for found in stored.values()]
    if ref is not None:
        raise ConfigError(
            f"a baseline reference ({ref!r}) picks a save in a folder written by pytest --nsightx-save; "
            f"{str(path)!r} is not one"
        )
    if not path.is_dir():
        return [_single(load(path), path)]
    return _result_folder(path, size)


def _single(result: ProfileResults, path: Path | None) -> Source:
    node = result.environment.get(_history.NODE_KEY)
    test = _history.test_folder(str(node)) if node else ""
    return Source(result, test, str(node or ""), [result], path)


def stored_source(found: list[_history.Entry], ref: str | None, size: int = _history.HISTORY) -> Source:
    """One test's baseline in a store: the save ``ref`` picks (the newest by default), with its history.

    Raises:
        ConfigError: ``ref`` names no save.
        ResultSchemaError: a save is not a result.
    """
    chosen = _history.pick(found, ref)
    processes = [load(e.path) for e in _history.history(found, chosen, size)]
    result = processes[-1]
    node = result.environment.get(_history.NODE_KEY)
    return Source(result, chosen.test, str(node or chosen.test), processes, chosen.path)


def _result_folder(path: Path, size: int) -> list[Source]:
    """The newest result of each function in a folder of ``result-*.parquet``/``.json`` (by ``created``, then name)."""
    files = sorted([*path.glob("*result-*.parquet"), *path.glob("*result-*.json")])
    if not files:
        raise ResultSchemaError(
            f"{str(path)!r} holds no saved result (result-*.parquet or result-*.json) and no save of pytest "
            "--nsightx-save (<test>/<NNNN>_*.json); write one with output_prefix=..., ProfileResults.save(path) or "
            "--nsightx-save"
        )
    by_function: dict[str, list[tuple[str, str, ProfileResults, Path]]] = {}
    for f in files:
        res = load(f)
        by_function.setdefault(res.data.plan.function, []).append((res.data.created, f.name, res, f))
    sources = []
    for name in sorted(by_function):
        ordered = sorted(by_function[name], key=lambda item: item[:2])
        newest = ordered[-1]
        sources.append(Source(newest[2], "", "", [item[2] for item in ordered[-size:]], newest[3]))
    return sources
