"""Where finished runs go: kept in memory and, with an output file, appended to disk as they finish.

Writing each run as one JSON line the moment it completes means a crash, Ctrl-C or SIGKILL halfway through a
sweep keeps everything already measured. A sink given a :class:`~nsightx._results.schema.RawHeader` writes it as
the first line and adds the header's ``sweep`` id to every run line, so the file can be read alone
(:func:`nsightx.load`) and a line from another sweep is recognised.

:func:`read_runs` (and :func:`read_raw`, its runs only) read such a file back: a last line cut short by a crash is
skipped with a warning; a damaged line anywhere before it is an error that names its line number, because the
runs after it would otherwise be lost silently. Turning a raw file into a result is :func:`nsightx.load_raw`.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import IO, Protocol

from pydantic import TypeAdapter

from nsightx._errors import ResultSchemaError
from nsightx._results.rawread import parse_raw, starts_raw
from nsightx._results.records import RunRecords
from nsightx._results.schema import RawHeader


@functools.cache
def _run_adapter() -> TypeAdapter[RunRecords]:
    return TypeAdapter(RunRecords)


class Sink(Protocol):
    """Where :meth:`~nsightx.ext.Backend.execute` and the run loop put each finished run (:class:`RunSink` is one).

    The core hands a backend the sink; a backend only calls :meth:`write`, once per run (config ``-1`` holds the
    ONCE collector values), as soon as the run is finished, so a crash later loses nothing already measured.
    """

    def write(self, run: RunRecords) -> None:
        """Store one finished run."""
        ...


class RunSink:
    """Collects :class:`RunRecords`; with ``path`` set, appends each one to a JSON-lines file and flushes.

    Args:
        path: The JSON-lines file (appended to); ``None`` keeps runs in memory only.
        header: Written as the first line at once (before any run), so that even a sweep killed during its
            first run leaves a file that says what it was; its ``sweep`` id is added to every run line.
    """

    def __init__(self, path: Path | None = None, header: RawHeader | None = None) -> None:
        self.path = path
        self.runs: list[RunRecords] = []
        self._fh: IO[bytes] | None = None
        self._suffix = b""
        if path is not None and header is not None:
            self._suffix = b',"sweep":' + json.dumps(header.sweep).encode() + b"}"
            self._append(header.model_dump_json().encode())

    def _append(self, line: bytes) -> None:
        """Append one line and flush it to the operating system (it survives the process being killed)."""
        if self._fh is None:
            assert self.path is not None
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fh = self.path.open("ab")
        self._fh.write(line + b"\n")
        self._fh.flush()

    @property
    def measured(self) -> int:
        """How many measured runs (config index >= 0) were stored."""
        return sum(1 for r in self.runs if r.config >= 0)

    def write(self, run: RunRecords) -> None:
        """Store one finished run (and write it through to disk when a path was given)."""
        self.runs.append(run)
        if self.path is None:
            return
        line = _run_adapter().dump_json(run)
        if self._suffix:
            line = line[:-1] + self._suffix  # {"config":...,"sweep":"<id>"}: the run's fields stay first
        self._append(line)

    def close(self) -> None:
        """Close the file, if one was opened."""
        if self._fh is not None:
            self._fh.close()
            self._fh = None


def looks_raw(path: Path) -> bool:
    """Whether ``path`` starts like a raw JSON-lines file rather than a saved result (reads 200 bytes)."""
    try:
        with path.open("rb") as fh:
            head = fh.read(200)
    except OSError:
        return False
    return starts_raw(head)


def read_runs(path: str | Path) -> tuple[RawHeader | None, list[RunRecords]]:
    """Read a raw file: its header (``None`` when it has none) and its finished runs, in order.

    The checks are those of :mod:`nsightx._results.rawread`.

    Raises:
        ResultSchemaError: the file cannot be read, is empty, starts with a byte-order mark or holds invalid
            UTF-8; a line other than an unterminated last one is damaged (the message names the line number);
            a line belongs to another sweep than the header's; two lines hold the same run (both named); a
            run's config or run index is outside the header's plan.
    """
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as e:
        raise ResultSchemaError(f"cannot read raw file {str(path)!r}: {e}") from e
    return parse_raw(path, data)


def read_raw(path: str | Path) -> list[RunRecords]:
    """The finished runs of a raw file, with or without a header (see :func:`read_runs`)."""
    return read_runs(path)[1]
