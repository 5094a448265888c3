"""Where finished runs go: kept in memory and, with an output folder, appended to disk as they finish.

Writing each run as one JSON line the moment it completes means a crash or Ctrl-C halfway through a sweep keeps
everything already measured; :func:`read_raw` reads such a file back.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import IO

from nsightx._records import RunRecords


class RunSink:
    """Collects :class:`RunRecords`; with ``path`` set, appends each one to a JSON-lines file and flushes."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path
        self.runs: list[RunRecords] = []
        self._fh: IO[str] | None = None

    def write(self, run: RunRecords) -> None:
        """Store one finished run (and write it through to disk when a path was given)."""
        self.runs.append(run)
        if self.path is None:
            return
        if self._fh is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fh = self.path.open("a", encoding="utf-8")
        self._fh.write(run.model_dump_json() + "\n")
        self._fh.flush()

    def close(self) -> None:
        """Close the file, if one was opened."""
        if self._fh is not None:
            self._fh.close()
            self._fh = None


def read_raw(path: str | Path) -> list[RunRecords]:
    """Read a raw ``*.runs.jsonl`` file written by :class:`RunSink` (a partial last line is skipped)."""
    runs: list[RunRecords] = []
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        try:
            runs.append(RunRecords.model_validate(json.loads(line)))
        except (json.JSONDecodeError, ValueError):
            break
    return runs
