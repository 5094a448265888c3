"""Files written under ``output_prefix``: raw JSON lines during the run, CSVs and the result afterwards.

Every call reserves its tag ``<function>-<n>`` by creating its raw file with an exclusive create
(``open(path, "x")``) before the first run, so two processes (or two CI jobs) writing to one prefix at the same
moment always get different tags, and no file of another call is ever overwritten. The other files of a call
(CSVs, the result JSON) share the reserved tag and are written atomically (a temporary file in the same folder,
then ``os.replace``), so a reader never sees half a file.
"""

from __future__ import annotations

import os
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path

from nsightx._errors import ConfigError

RAW_KIND = "raw_data"
"""File kind of the raw JSON-lines file; its exclusive creation reserves the tag."""
_OTHER_FILES = (("result", "json"), ("profiled_data", "csv"), ("processed_data", "csv"))
"""Other files a call writes under its tag (backends add their own artefacts, named with the tag too)."""
_counters: dict[tuple[str, str, str], int] = {}
"""Next ``n`` to try per (folder, stem, function): a hint that saves retries; the reservation decides."""


@dataclass(frozen=True)
class OutputLocation:
    """Where one call's files go: ``<folder>/<stem><kind>-<tag>.<ext>``."""

    folder: Path
    stem: str
    tag: str
    """``<function>-<n>``."""
    sweep: str = ""
    """Random id of the call, written in every raw line and in the result's environment (``sweep``)."""

    def path(self, kind: str, ext: str) -> Path:
        """Path of one output file, e.g. ``path("profiled_data", "csv")``."""
        return self.folder / f"{self.stem}{kind}-{self.tag}.{ext}"

    @property
    def raw(self) -> Path:
        """The raw JSON-lines file (created, empty, by :func:`allocate`)."""
        return self.path(RAW_KIND, "jsonl")


def split_prefix(prefix: str) -> tuple[Path, str]:
    """Split ``output_prefix`` into (folder, file-name stem).

    A prefix that ends with a path separator, or names an existing folder, is a folder (stem ``""``);
    otherwise its last component starts every file name (``"out/exp1_"`` -> ``out/``, ``"exp1_"``).
    """
    base = Path(prefix)
    if prefix.endswith(("/", "\\")) or base.is_dir():
        return base, ""
    return base.parent, base.name


def _unusable(prefix: str, folder: Path, problem: OSError | str) -> ConfigError:
    why = problem if isinstance(problem, str) else f"{type(problem).__name__}: {problem.strerror or problem}"
    return ConfigError(
        f"output_prefix={prefix!r} cannot be used: its folder {str(folder)!r} cannot be created or written "
        f"({why}); give a folder you can write to (e.g. output_prefix='out/') or leave output_prefix unset"
    )


def prepare_folder(prefix: str) -> tuple[Path, str]:
    """Create the folder of ``prefix`` and check that a file can be created in it, before any work.

    Returns:
        (folder, stem), as :func:`split_prefix` gives them.

    Raises:
        ConfigError: the folder lies under a file, cannot be created (``/proc``, no permission) or is not
            writable; the message names ``output_prefix``.
    """
    folder, stem = split_prefix(prefix)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise _unusable(prefix, folder, e) from e
    if not folder.is_dir():
        raise _unusable(prefix, folder, "it is not a folder")
    try:
        with tempfile.TemporaryFile(dir=folder, prefix=".nsightx-write-test-"):
            pass
    except OSError as e:
        raise _unusable(prefix, folder, e) from e
    return folder, stem


def _taken(folder: Path, stem: str, tag: str) -> bool:
    """Whether a file of another call (any kind but the raw one, which was just reserved) has this tag."""
    return any((folder / f"{stem}{kind}-{tag}.{ext}").exists() for kind, ext in _OTHER_FILES)


def allocate(prefix: str, function: str) -> OutputLocation:
    """Create the folder and reserve the tag ``<function>-<n>`` for the next call of ``function``.

    ``output_prefix="out/"`` (or an existing folder) writes ``out/profiled_data-f-0.csv``; ``"out/exp1_"``
    writes ``out/exp1_profiled_data-f-0.csv``. The raw file ``<stem>raw_data-<tag>.jsonl`` is created with an
    exclusive create, which succeeds for one caller only, in this process or any other; a number whose raw file
    or any other file already exists is skipped. So another call writing to the same prefix, at the same time
    or earlier, is never overwritten.

    Raises:
        ConfigError: the folder cannot be created or written (see :func:`prepare_folder`).
    """
    folder, stem = prepare_folder(prefix)
    key = (str(folder.resolve()), stem, function)
    n = _counters.get(key, 0)
    while True:
        tag = f"{function}-{n}"
        raw = folder / f"{stem}{RAW_KIND}-{tag}.jsonl"
        try:
            with open(raw, "x", encoding="utf-8"):
                pass
        except FileExistsError:
            n += 1
            continue
        except OSError as e:
            raise _unusable(prefix, folder, e) from e
        if _taken(folder, stem, tag):  # files left by a call whose raw file was deleted: keep away from them
            raw.unlink(missing_ok=True)
            n += 1
            continue
        _counters[key] = n + 1
        return OutputLocation(folder, stem, tag, uuid.uuid4().hex)


def write_atomic(path: Path, text: str) -> Path:
    """Write ``text`` to ``path`` through a temporary file in the same folder and ``os.replace``.

    A reader (or a crash) sees either the old file or the whole new one, never a part. The file gets the mode a
    plain ``open()`` would give it (``0o666`` less the umask), not the private ``0o600`` of a temporary file.
    """
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def _umask() -> int:
    """The process's umask (read by setting it and putting it back: the only portable way)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask
