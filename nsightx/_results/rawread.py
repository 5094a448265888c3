"""Reading a raw ``raw_data-*.jsonl`` file back: its header and the runs it holds, each checked line by line.

The writer (:class:`nsightx._results.sink.RunSink`) appends one JSON line per finished run, after a header line
that says what the sweep was. Reading refuses what the writer never produces, naming the line: a damaged line
before the last one (the runs after it could not be trusted), a line of another sweep, a run stored twice
(both line numbers), a config or run index outside the header's plan, a record filed under another run. A last
line without its newline is what a crash leaves: it is skipped with a warning. Bytes are checked first: an
empty file, a byte-order mark and invalid UTF-8 each get their own message (:mod:`nsightx._results.filebytes`).

Each run line is validated from its JSON text in strict mode (a number stays a number: ``"0"`` is not a config
index), with the ``"sweep"`` id the writer appends cut off first.
"""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter, ValidationError

from nsightx._errors import ResultSchemaError
from nsightx._results.filebytes import invalid_utf8, start_problem
from nsightx._results.integrity import check_plan, check_run
from nsightx._results.nulls import RUN_NULLS, null_locations, with_nan
from nsightx._results.records import RunRecords
from nsightx._results.schema import RAW_KIND, RawHeader, describe_errors, gc_paused, schema_message
from nsightx._warn import warn

_RAW_START = re.compile(rb'\s*\{\s*"(kind|config)"\s*:')
"""How a raw file starts: its header (``{"kind": ...``) or, in a file without a header, a run."""


@functools.cache
def _run_adapter() -> TypeAdapter[RunRecords]:
    return TypeAdapter(RunRecords)


def starts_raw(head: bytes) -> bool:
    """Whether a file that starts with ``head`` is a raw JSON-lines file rather than a saved result."""
    return _RAW_START.match(head[:200]) is not None


def parse_raw(path: Path, data: bytes) -> tuple[RawHeader | None, list[RunRecords]]:
    """The header (``None`` when there is none) and the runs of the raw file ``path`` whose bytes are ``data``.

    Raises:
        ResultSchemaError: see :func:`nsightx._results.sink.read_runs`.
    """
    problem = start_problem(data)
    if problem is not None:
        raise ResultSchemaError(f"{str(path)!r} {problem}")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        if e.reason != "unexpected end of data":
            raise ResultSchemaError(f"{str(path)!r} {invalid_utf8(data, e)}") from None
        # Cut inside a character: keep a replacement character, so that the unfinished last line stays unfinished
        # (it is skipped with a warning) rather than becoming a line that ends early but parses.
        text = data[: e.start].decode("utf-8") + "\ufffd"
    with gc_paused():
        return _Reader(path).read(text)


class _Reader:
    """One pass over the lines of one raw file."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.source = repr(str(path))
        self.header: RawHeader | None = None
        self.runs: list[RunRecords] = []
        self.lines: dict[tuple[int, int], int] = {}
        """Line number of each measured run read so far."""
        self.suffix = ""

    def read(self, text: str) -> tuple[RawHeader | None, list[RunRecords]]:
        lines = text.split("\n")
        last = len(lines)  # number of the last line; a complete file ends with "\n", so its last element is ""
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                self._line(number, line)
            except _Damaged as e:
                if number != last:
                    raise ResultSchemaError(
                        f"{self.source} line {number} is damaged ({e}); the lines after it cannot be trusted "
                        "either; repair or remove that line to read the rest"
                    ) from None
                if self.header is None and not self.runs and _RAW_START.match(line.encode()):
                    raise ResultSchemaError(  # no plan to read runs against, and no run: nothing to warn about
                        f"{self.source} ends inside its header line: the sweep was stopped before its first run "
                        "was written, so the file holds no run to load"
                    ) from None
                warn(  # no newline after it: the writer was stopped in the middle of this line
                    f"{self.path}: skipped the unfinished last line {number} (the sweep was stopped while "
                    f"writing it); {len(self.runs)} complete run line(s) read",
                    RuntimeWarning,
                )
        return self.header, self.runs

    def _line(self, number: int, line: str) -> None:
        if self.suffix and line.endswith(self.suffix):  # the common case: a run line of this sweep
            self._add(number, line[: -len(self.suffix)] + "}")
            return
        obj = _json(line)
        if isinstance(obj, dict) and obj.get("kind") == RAW_KIND:
            if self.header is not None or self.runs:
                raise ResultSchemaError(f"{self.source} line {number}: a second header; one file holds one sweep")
            self.header = _header(self.source, number, line)
            check_plan(self.header.plan, self.source, f"line {number}: plan")
            self.suffix = ',"sweep":' + json.dumps(self.header.sweep) + "}"
            return
        if not isinstance(obj, dict):
            raise ResultSchemaError(f"{self.source} line {number}: expected one run (a JSON object), got {obj!r:.80}")
        sweep = obj.pop("sweep", None)
        if self.header is not None and sweep != self.header.sweep:
            raise ResultSchemaError(
                f"{self.source} line {number} belongs to sweep {sweep!r}, not to {self.header.sweep!r} named in the "
                "header; the file mixes two sweeps and cannot be attributed"
            )
        self._add(number, json.dumps(obj, allow_nan=True) if sweep is not None else line)

    def _add(self, number: int, body: str) -> None:
        run = _validate_run(self.source, number, body)
        if self.header is not None:
            problem = check_run(run, self.header.plan, f"line {number}")
            if problem is not None:
                raise ResultSchemaError(f"{self.source} {problem}; the header's plan does not hold it")
        if run.config >= 0:
            first = self.lines.setdefault((run.config, run.run), number)
            if first != number:
                raise ResultSchemaError(
                    f"{self.source} lines {first} and {number} both hold config {run.config} run {run.run}; the "
                    "writer stores each run once, so one of them was duplicated (by an edit or a repeated write); "
                    "remove one of the two lines to read the file"
                )
        self.runs.append(run)


class _Damaged(Exception):
    """A line that is not JSON (its message says where it breaks)."""


def _json(line: str) -> Any:
    try:
        return json.loads(line)
    except json.JSONDecodeError as e:
        raise _Damaged(f"{e.msg} at column {e.colno}") from None
    except RecursionError:
        raise _Damaged("nested too deeply") from None


def _header(source: str, number: int, line: str) -> RawHeader:
    try:
        return RawHeader.model_validate_json(line, strict=True)
    except ValidationError as e:
        raise ResultSchemaError(
            schema_message(e) or f"{source} line {number}: the raw file's header is damaged: {describe_errors(e)}"
        ) from None


def _validate_run(source: str, number: int, body: str) -> RunRecords:
    """One run from its JSON text (without the sweep id); a ``null`` measured value is read as NaN."""
    adapter = _run_adapter()
    try:
        return adapter.validate_json(body, strict=True)
    except ValidationError as e:
        error = e
    if any(err["type"] == "json_invalid" for err in error.errors(include_url=False)):
        _json(body)  # raises _Damaged with the position, as json reports it
        raise _Damaged(describe_errors(error))
    fixed = with_nan(body, locs) if (locs := null_locations(error, RUN_NULLS)) else None
    if fixed is not None:
        try:
            return adapter.validate_json(fixed, strict=True)
        except ValidationError as e:
            error = e  # what is wrong beside the nulls
    raise ResultSchemaError(f"{source} line {number} is not a run: {describe_errors(error)}") from None
