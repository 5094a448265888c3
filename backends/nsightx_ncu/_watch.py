"""Progress of the ncu worker, read from the run file it appends to as each measured run finishes.

The worker runs under ncu in another process and its output goes to the log, so the parent cannot count runs
directly; it polls the JSON-lines file instead (a few bytes per poll) and feeds the count to the progress line.
"""

from __future__ import annotations

from pathlib import Path


class RunFileWatcher:
    """Counts the measured runs (config >= 0) in a JSON-lines run file that another process appends to.

    Args:
        path: The worker's run file (it may not exist yet).
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.runs = 0
        self._offset = 0
        self._partial = b""

    def poll(self) -> int:
        """Read what was appended since the last call; returns the measured runs seen so far."""
        try:
            with self.path.open("rb") as fh:
                fh.seek(self._offset)
                chunk = fh.read()
        except OSError:
            return self.runs
        self._offset += len(chunk)
        *lines, self._partial = (self._partial + chunk).split(b"\n")
        self.runs += sum(1 for line in lines if line.strip() and not line.startswith(b'{"config":-'))
        return self.runs
