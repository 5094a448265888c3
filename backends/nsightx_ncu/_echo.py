"""What ncu and the worker print: all of it into the log, the user's own lines onto the user's stdout/stderr.

ncu writes its messages (``==PROF==``, ``==WARNING==``, ``==ERROR==`` at the start of a line) into the same
streams as the application it profiles. The router keeps every byte in the log, in arrival order, and passes
every other line to this process's ``sys.stdout`` or ``sys.stderr`` (the stream it came from), looked up at
each write so that a notebook's or pytest's replacement streams receive it. ncu's lines reach the terminal
only when asked (debug verbosity).
"""

from __future__ import annotations

import re
import sys
from typing import BinaryIO, Literal

TOOL_LINE = re.compile(rb"^==[A-Z][A-Z-]*==")
"""The prefix ncu puts on each of its own lines."""

PERMISSION = b"ERR_NVGPUCTRPERM"
"""What ncu prints when the user may not read the GPU's performance counters."""

Stream = Literal["stdout", "stderr"]


class OutputRouter:
    """Splits ncu's two output streams into the log and the user's streams, line by line.

    Args:
        log: The log file (binary, opened by the caller).
        show_tool_lines: Also echo ncu's own lines (to stderr).
    """

    def __init__(self, log: BinaryIO, *, show_tool_lines: bool = False) -> None:
        self.log = log
        self.show_tool_lines = show_tool_lines
        self.permission_denied = False
        """True once ncu said ``ERR_NVGPUCTRPERM``."""
        self._partial: dict[Stream, bytes] = {"stdout": b"", "stderr": b""}

    def feed(self, stream: Stream, data: bytes) -> None:
        """Take ``data`` read from ncu's ``stream``; complete lines are routed now, a partial one waits."""
        self.log.write(data)
        self.log.flush()
        *lines, self._partial[stream] = (self._partial[stream] + data).split(b"\n")
        for line in lines:
            self._route(stream, line + b"\n")

    def close(self) -> None:
        """Route what is left of unfinished lines (the streams ended)."""
        for stream in ("stdout", "stderr"):
            rest, self._partial[stream] = self._partial[stream], b""
            if rest:
                self._route(stream, rest)

    def _route(self, stream: Stream, line: bytes) -> None:
        if PERMISSION in line:
            self.permission_denied = True
        if TOOL_LINE.match(line):
            if not self.show_tool_lines:
                return
            stream = "stderr"
        out = sys.stdout if stream == "stdout" else sys.stderr
        try:
            out.write(line.decode("utf-8", errors="replace"))
            out.flush()
        except (OSError, ValueError):  # a closed or broken stream must not stop the measurement
            pass
