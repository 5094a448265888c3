"""Files written under ``output_prefix``: raw JSON lines during the run, CSVs and the result afterwards.

Every call reserves its tag ``<function>-<n>`` by creating its raw file with an exclusive create
(``open(path, "x")``) before the first run, so two processes (or two CI jobs) writing to one prefix at the same
moment always get different tags, and no file of another call is ever overwritten. The other files of a call
(CSVs, the result file) share the reserved tag and are written atomically (a temporary file in the same folder,
then ``os.replace``), so a reader never sees half a file.
"""

from __future__ import annotations

import csv
import errno
import os
import re
import secrets
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from nsightx._errors import ConfigError

if TYPE_CHECKING:
    import pandas as pd

RAW_KIND = "raw_data"
"""File kind of the raw JSON-lines file; its exclusive creation reserves the tag."""
_OTHER_FILES = (("result", "parquet"), ("result", "json"), ("profiled_data", "csv"), ("processed_data", "csv"))
"""Other files a call writes under its tag (backends add their own artefacts, named with the tag too)."""


_UNSAFE = re.compile(r"[^\w.-]+")
"""Runs of characters that never go into a file name: anything but letters, digits, ``_``, ``-`` and ``.``."""
MAX_NAME_BYTES = 100
"""Longest function part of a file name, in UTF-8 bytes (the system's limit for a whole name is 255)."""


def safe_name(function: str) -> str:
    """The function name as it appears in file names: letters, digits, ``_``, ``-`` and ``.`` only.

    A plain name is kept as it is (``matmul``); the angle brackets of Python's own names go (``<lambda>`` ->
    ``lambda``); any other run of characters becomes one ``_`` (``a/b`` -> ``a_b``), so a name can never add a
    folder to a path; leading dots become ``_`` (no hidden file, never ``..``); the result is cut to
    :data:`MAX_NAME_BYTES`, and an empty one is ``function``.

    Example:
        >>> [safe_name(n) for n in ("matmul", "<lambda>", "../x y", ".hidden")]
        ['matmul', 'lambda', '___x_y', '_hidden']
    """
    name = _UNSAFE.sub("_", function.strip("<>"))
    dots = len(name) - len(name.lstrip("."))
    name = "_" * dots + name[dots:]
    name = name.encode("utf-8")[:MAX_NAME_BYTES].decode("utf-8", errors="ignore")
    return name or "function"


@dataclass
class TagNumbers:
    """The next ``n`` to try for the tags ``<function>-<n>`` of one decorated function.

    Each ``@analyze.kernel`` decoration starts its own at 0, as nsight-python keeps a run id per decorated function
    from 0: a function decorated anew (as a test does) writes ``...-<function>-0`` in a fresh folder even when an
    earlier function of the same name wrote there before. It is a starting point only: :func:`allocate` moves on
    past every number whose files exist, so nothing is ever overwritten.
    """

    next: int = 0
    """The first ``n`` the next call of the function tries."""


@dataclass(frozen=True)
class OutputLocation:
    """Where one call's files go: ``<folder>/<stem><kind>-<tag>.<ext>``."""

    folder: Path
    stem: str
    tag: str
    """``<function>-<n>``, the function's name made safe for file names (:func:`safe_name`)."""
    sweep: str = ""
    """Random id of the call, written in every raw line and in the result's environment (``sweep``)."""

    def path(self, kind: str, ext: str) -> Path:
        """Path of one output file, e.g. ``path("profiled_data", "csv")``."""
        return self.folder / f"{self.stem}{kind}-{self.tag}.{ext}"

    @property
    def raw(self) -> Path:
        """The raw JSON-lines file (created, empty, by :func:`allocate`)."""
        return self.path(RAW_KIND, "jsonl")

    @property
    def number(self) -> int:
        """The ``n`` of the tag ``<function>-<n>``."""
        return int(self.tag.rpartition("-")[2])


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


def allocate(prefix: str, function: str, numbers: TagNumbers | None = None) -> OutputLocation:
    """Create the folder and reserve the tag ``<function>-<n>`` for the next call of ``function``.

    ``<function>`` is :func:`safe_name` of ``function``: a name holding ``/`` or ``<>`` never reaches a path.
    ``n`` is the first free number from ``numbers.next`` (0 without ``numbers``), and ``numbers.next`` becomes
    ``n + 1``.

    ``output_prefix="out/"`` (or an existing folder) writes ``out/profiled_data-f-0.csv``; ``"out/exp1_"``
    writes ``out/exp1_profiled_data-f-0.csv``. The raw file ``<stem>raw_data-<tag>.jsonl`` is created with an
    exclusive create, which succeeds for one caller only, in this process or any other; a number whose raw file
    or any other file already exists is skipped. So another call writing to the same prefix, at the same time
    or earlier, is never overwritten.

    Raises:
        ConfigError: the folder cannot be created or written (see :func:`prepare_folder`).
    """
    folder, stem = prepare_folder(prefix)
    function = safe_name(function)
    n = numbers.next if numbers is not None else 0
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
        if numbers is not None:
            numbers.next = n + 1
        return OutputLocation(folder, stem, tag, uuid.uuid4().hex)


def csv_text(frame: pd.DataFrame) -> str:
    r"""The CSV text of ``frame`` (no index, ``\n`` line ends) that ``pandas.read_csv`` reads back row for row.

    The CSV writer quotes a field holding ``,``, ``"`` or ``\n``, but not one holding a bare ``\r``, which
    ``read_csv`` takes for a line end: a parameter ``"a\rb"`` split its row in two and shifted the columns. So
    when the plain text holds a ``\r`` (it can only come from a header or a text cell), every text field is quoted
    instead (``QUOTE_NONNUMERIC``); any other frame is written as before.
    """
    text = frame.to_csv(index=False, lineterminator="\n")
    if "\r" not in text:
        return text
    return frame.to_csv(index=False, lineterminator="\n", quoting=csv.QUOTE_NONNUMERIC)


def write_atomic(path: Path, text: str | bytes) -> Path:
    """Write ``text`` (UTF-8 text, or bytes as they are) to ``path`` through a temporary file and ``os.replace``.

    A reader (or a crash) sees either the old file or the whole new one, never a part. The temporary file is
    created with ``os.open(..., 0o666)``, so the kernel applies the umask and the file gets the mode a plain
    ``open()`` would give it. The umask is never read or changed here: ``os.umask`` is process-wide, and setting it
    even for a moment would change the mode of a file another thread creates in that moment.
    """
    fd, tmp = _create_temp(path)
    try:
        if isinstance(text, bytes):
            with os.fdopen(fd, "wb") as out:
                out.write(text)
        else:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


_TEMP_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
"""Exclusive create, never through a symbolic link (``O_NOFOLLOW`` where the system has it)."""


def _create_temp(path: Path) -> tuple[int, Path]:
    """Create a new temporary file next to ``path`` (mode ``0o666`` less the umask) and return ``(fd, name)``.

    Raises:
        FileExistsError: A hundred random names were all taken (something else creates files there).
    """
    for _ in range(100):
        tmp = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
        try:
            return os.open(tmp, _TEMP_FLAGS, 0o666), tmp
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "no free temporary file name", str(path.parent))
