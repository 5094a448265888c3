"""Where finished runs go: kept in memory and, with an output file, appended to disk as they finish.

Writing each run as one JSON line the moment it completes means a crash, Ctrl-C or SIGKILL halfway through a
sweep keeps everything already measured. A sink given a :class:`~nsightx._results.schema.RawHeader` writes it as
the first line and adds the header's ``sweep`` id to every run line, so the file can be read alone
(:func:`nsightx.load`) and a line from another sweep is recognised. A write that fails (a full disk) leaves no half
line and raises :class:`~nsightx.OutputError` with the number of runs the file holds (see :class:`RunSink`).

:func:`read_runs` (and :func:`read_raw`, its runs only) read such a file back: a last line cut short by a crash is
skipped with a warning; a damaged line anywhere before it is an error that names its line number, because the
runs after it would otherwise be lost silently. Turning a raw file into a result is :func:`nsightx.load_raw`.
"""

from __future__ import annotations

import errno
import functools
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any, Protocol

from pydantic import TypeAdapter

from nsightx._errors import OutputError, ResultSchemaError, os_error_text
from nsightx._results.nulls import measured_as_null
from nsightx._results.rawread import parse_raw, starts_raw
from nsightx._results.records import RunRecords
from nsightx._results.rowgather import as_row
from nsightx._results.rowparts import PartsAhead, StoredRuns, bare_row, parts_from_rows
from nsightx._results.rows import RunRow, run_from_row, runs_from_rows
from nsightx._results.runblock import RunBlock, TimedRecord
from nsightx._results.schema import NON_FINITE_AS_TOKENS, RawHeader, gc_paused

AHEAD_MAX_RUNS = 512
"""Up to this many runs stored and expected, the frame's pieces are computed during the wait
(:meth:`RunSink.prepare_frame`, :mod:`nsightx._results.frameahead`). They read every run of the call, while the wait
of a call collected in batches covers its last batch only; and the frame's fixed costs, which this saves, matter
for small calls."""


@functools.cache
def _run_adapter() -> TypeAdapter[tuple[RunRecords]]:
    """Writes a run as a one-item list, so the adapter's root carries :data:`NON_FINITE_AS_TOKENS`.

    A dataclass's own configuration does not reach its union-typed fields (a collector value): only the root's
    does, and pydantic refuses a configuration for a dataclass root. :func:`_run_line` strips the brackets.
    """
    return TypeAdapter(tuple[RunRecords], config=NON_FINITE_AS_TOKENS)


def _run_line(run: RunRecords) -> bytes:
    """The JSON line of ``run`` (a collector's NaN or infinity as a JSON token, see :data:`NON_FINITE_AS_TOKENS`)."""
    return measured_as_null(_run_adapter().dump_json((run,))[1:-1])


class Sink(Protocol):
    """Where :meth:`~nsightx.ext.Backend.execute` and the run loop put each finished run (:class:`RunSink` is one).

    The core hands a backend the sink; a backend only calls :meth:`write`, once per run (config ``-1`` holds the
    ONCE collector values), as soon as the run is finished, so a crash later loses nothing already measured. A sink
    that also has ``add_run(row)`` (:class:`RunSink`) gets the run loop's runs in compact form there instead (a
    :data:`~nsightx._results.rows.RunRow`, see :meth:`RunSink.add_run`).
    """

    def write(self, run: RunRecords) -> None:
        """Store one finished run."""
        ...


class RunSink:
    """Collects :class:`RunRecords`; with ``path`` set, appends each one to a JSON-lines file as it arrives.

    The run loop hands it runs in compact form (:meth:`add_run`): in memory they stay tuples until something reads
    :attr:`runs`, which makes the objects then, all at once (beside an empty region on the host backend, a run
    object, its region and its record cost ~1.4 us of a run when made as the run finished, issue 35).

    Each run is stored once: a run equal to the last one stored is the same run handed over again (the run
    loop's clean-up after an interrupt that came between a write and its bookkeeping) and is skipped.

    With a file, a run is in :attr:`runs` exactly when its whole line is in the file, so :attr:`measured` is the
    number of runs on disk. Each line goes to the operating system in unbuffered writes at once (it survives the
    process being killed). A write that fails (a full disk) is cut back off the file, so no half line stays, and
    raises :class:`~nsightx.OutputError`; the sink then writes nothing more, since the next run would fail the
    same way or leave a gap.

    Args:
        path: The JSON-lines file (appended to); ``None`` keeps runs in memory only.
        header: Written as the first line at once (before any run), so that even a sweep killed during its
            first run leaves a file that says what it was; its ``sweep`` id is added to every run line.
        on_first: Called with the first measured run (config index >= 0) once it is stored, in either form; what
            it raises reaches whoever handed the run over (a profiled call's first-run checks). A hook rather
            than a subclass's override, so that handing over a run stays one call.

    Raises:
        OutputError: the header could not be written.
    """

    def __init__(
        self,
        path: Path | None = None,
        header: RawHeader | None = None,
        *,
        on_first: Callable[[RunRecords], None] | None = None,
    ) -> None:
        self.path = path
        self._first = on_first
        """Called with the first measured run once it is stored, then forgotten (see ``on_first``)."""
        self._items: list[RunRecords | RunRow | RunBlock] = []
        """Every stored run, in order: an object, or a compact row not turned into one yet."""
        self._built = 0
        """Every item before this index is a :class:`RunRecords`."""
        self._fh: IO[bytes] | None = None
        self._end = 0
        """Size of the file up to the end of its last complete line."""
        self._failed: OutputError | None = None
        self._suffix = b""
        self._ahead = PartsAhead()
        """The columns of the first runs, gathered while a deferred session still waited (see :meth:`build_ahead`)."""
        self._expected: list[RunRow] = []
        """The rows of the runs the run loop collects next, without their outputs (see :meth:`expect_runs`)."""
        self._frame: Any = None
        """The frame's pieces computed during the wait (a :class:`~nsightx._results.frameahead.FrameAhead`)."""
        self.ahead_ns: int | None = None
        """What :meth:`prepare_frame` cost when it computed the pieces (None: it did not)."""
        self.blocked_ns: int | None = None
        """How long the run loop then blocked on the session's last outputs (see :meth:`note_blocked`)."""
        if path is not None:
            # Build the run serialiser now, before any run: built at the first write (after measured run 0), its
            # allocations made the next measured run of a short region about 3x slower (13 us -> 40 us on a CPU).
            _run_adapter()
        if path is not None and header is not None:
            self._suffix = b',"sweep":' + json.dumps(header.sweep).encode() + b"}"
            try:
                self._append(header.model_dump_json().encode(), None)
            except BaseException:
                self.close()
                raise

    @property
    def runs(self) -> list[RunRecords]:
        """Every stored run, in order (the runs stored in compact form become objects now, once)."""
        items, built = self._items, self._built
        if built < len(items):
            with gc_paused():  # many objects and no cycle: see gc_paused
                items[built:] = runs_from_rows(items[built:])
            self._built = len(items)
        return items  # type: ignore[return-value]  # every item is a RunRecords now

    def stored(self, made: Callable[[], None] | None = None) -> StoredRuns:
        """Every stored run, in order, as they are stored: their columns are read without making run objects.

        Args:
            made: Called once the run objects were made, if something asks for them (see :class:`StoredRuns`).
        """
        self._expected = []  # read by prepare_frame only, during the wait
        return StoredRuns(self._items, made, self._ahead, self._frame)

    def expect_runs(self, rows: list[RunRow]) -> None:
        """Keep the rows of the runs the run loop is about to collect and store, their outputs left out.

        The run loop calls it before it waits for a deferred session's last runs, with each run's collector
        values and regions (known since the run was launched; records and attributes come with the outputs):
        :meth:`prepare_frame` reads them while the GPU works.
        """
        self._expected = rows

    def prepare_frame(self) -> None:
        """Compute the frame's pieces that read no measured value, from the runs stored and expected.

        Run while a deferred call waits for its GPU (the run loop's ``while_waiting``, see
        :mod:`nsightx._results.frameahead`). Never raises: where it fails, the frame computes them as always.
        The columns they are computed from (every column of the result but the records, the record counts and
        the regions' attributes) are kept for the result too: a session that hands every run back after its
        wait (cupti) then has only those read after it (:meth:`~nsightx._results.rowparts.PartsAhead.expect`).
        """
        expected, self._expected, self._frame = self._expected, [], None
        start = time.perf_counter_ns()
        try:
            from nsightx._results.frameahead import FrameAhead, collector_source

            items: list[Any] = [*self._items, *expected]
            if not expected or len(items) > AHEAD_MAX_RUNS or RunBlock in set(map(type, items)):
                return
            bare = [bare_row(item if type(item) is tuple else as_row(item)) for item in items]
            parts = parts_from_rows(bare)
            self._ahead.expect(self._items, expected, parts)  # the result's columns but records and attributes
            self._frame = FrameAhead.of(list(map(collector_source, items)), parts)
            self.ahead_ns = time.perf_counter_ns() - start
        except Exception:  # the frame computes them itself
            self._frame = None

    def note_blocked(self, ns: int) -> None:
        """How long the run loop blocked on the session's outputs after the work done during its last wait.

        Whether that wait hid :meth:`prepare_frame`'s work (:attr:`ahead_ns`) decides whether the function's next
        call does it (``nsightx._api.aheadpolicy``).
        """
        self.blocked_ns = ns

    def build_ahead(self) -> None:
        """Gather now the result's columns of the runs stored since the last call (see :class:`PartsAhead`).

        The run loop calls it while a deferred session still waits for later runs, when a config's last run was
        stored: their fields go into the columns' lists then, before the device finished, and what is left after
        the last wait is the last config's runs and one conversion per column.
        """
        self._ahead.add(self._items)

    @property
    def measured(self) -> int:
        """How many measured runs (config index >= 0) were stored (with a file: how many are in it)."""
        return sum(len(r) if type(r) is RunBlock else 1 for r in self._items if _config_of(r) >= 0)

    def add_run(self, row: RunRow) -> None:
        """Store one finished run given in compact form (the run loop's way: no object is made for it here).

        With a file, its line is written as :meth:`write` writes that of the same run as an object.

        Raises:
            OutputError: as :meth:`write`.
        """
        items = self._items
        if items:
            last: Any = items[-1]
            if type(last) is RunBlock:
                last = last.last_row()  # None when the block holds no run
            if type(last) is tuple:
                if last[1] == row[1] and last == row:
                    return  # handed over again: stored already
            elif last is not None and self._stored(last, row):
                return  # handed over again: stored already
        if self.path is not None:
            self._write_line(run_from_row(row), row)
            return
        items.append(row)
        if self._first is not None and row[0] >= 0:
            self._check_first(run_from_row(row))

    def open_block(self, config: int, first: int, record: TimedRecord | None) -> RunBlock | None:
        """Store from now on the runs the run loop adds to the returned block (see :mod:`nsightx._results.runblock`).

        A run is stored once the loop appended its count to the block, so a run that raises, or the loop's end
        however it comes, leaves nothing to hand over. ``None`` (the loop then hands each run over with
        :meth:`add_run`) when the sink writes a file, whose lines go out run by run, or has not checked its first
        measured run yet.
        """
        if self.path is not None or self._first is not None:
            return None
        block = RunBlock(config, first, record)
        self._items.append(block)
        return block

    def _check_first(self, run: RunRecords) -> None:
        """Hand the first measured run, stored already, to ``on_first`` (once: whatever it raises)."""
        first, self._first = self._first, None
        if first is not None:
            first(run)

    @staticmethod
    def _stored(last: RunRecords, row: RunRow) -> bool:
        """Whether ``row`` is the run object ``last`` handed over again."""
        return last.run == row[1] and last.config == row[0] and last == run_from_row(row)

    def write(self, run: RunRecords) -> None:
        """Store one finished run (and write it through to disk when a path was given).

        Raises:
            OutputError: its line could not be written (nothing of it stays in the file), or an earlier one
                could not (nothing more is written).
        """
        items = self._items
        last = _last_run(items)
        if last is not None and last.run == run.run and last.config == run.config and last == run:
            return  # handed over again: stored already
        if self.path is None:
            items.append(run)
            if self._first is not None and run.config >= 0:
                self._check_first(run)
        else:
            self._write_line(run, run)

    def _write_line(self, run: RunRecords, item: RunRecords | RunRow) -> None:
        """Append the line of ``run`` to the file, then keep ``item`` (the run or its row) in :attr:`runs`."""
        line = _run_line(run)
        if self._suffix:
            line = line[:-1] + self._suffix  # {"config":...,"sweep":"<id>"}: the run's fields stay first
        self._append(line, item)
        if self._first is not None and run.config >= 0:
            self._check_first(run)

    def _open(self) -> IO[bytes]:
        if self._fh is None:
            assert self.path is not None
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fh = self.path.open("ab", buffering=0)
            self._end = self._fh.seek(0, os.SEEK_END)
        return self._fh

    def _append(self, line: bytes, run: RunRecords | RunRow | None) -> None:
        """Append ``line`` and a newline to the file and, once all of it is there, ``run`` (or its row) to :attr:`runs`.

        An exception in between (a failed write, or Ctrl-C or SIGTERM raised in this thread) leaves either the
        whole line in the file and the run in :attr:`runs`, or neither.
        """
        if self._failed is not None:
            raise self._refused() from self._failed
        data = line + b"\n"
        try:
            fh = self._open()
        except OSError as e:
            self._failed = self._output_error(e, clean=True)
            raise self._failed from e
        start = self._end
        try:
            _write_all(fh, data)
            self._end = start + len(data)
            if run is not None:
                self._items.append(run)
        except OSError as e:
            self._failed = self._output_error(e, clean=self._cut_back())
            raise self._failed from e
        except BaseException:
            self._settle(start, len(data), run)
            raise

    def _cut_back(self) -> bool:
        """Truncate the file to its last complete line after a failed write; whether that worked."""
        if self._fh is None:
            return True
        try:
            self._fh.truncate(self._end)
        except OSError:
            return False
        return True

    def _settle(self, start: int, size: int, run: RunRecords | RunRow | None) -> None:
        """After an interrupt inside :meth:`_append`: keep a line that is whole, cut back one that is not."""
        if self._fh is None or (run is not None and self._items and self._items[-1] is run):
            return
        try:
            written = os.fstat(self._fh.fileno()).st_size - start
        except OSError:
            return
        self._end = start + size if written >= size else start
        if written >= size and run is not None:
            self._items.append(run)
        elif 0 < written < size:
            self._cut_back()

    def _output_error(self, e: OSError, clean: bool) -> OutputError:
        path = str(self.path)
        saved = self.measured
        load = f" (load them with nsightx.load({path!r}))"
        kept = f"{saved} run(s) are saved in it{load}" if saved else "no run is saved in it"
        tail = "" if clean else "; its last line may be cut short, which nsightx.load skips"
        return OutputError(
            f"cannot write to the raw file {path!r}: {os_error_text(e)}; {kept}{tail}; nothing more is written to "
            "it; free space on that disk or give output_prefix a folder on another one",
            path=path,
            errno=e.errno,
            raw=path,
            saved=saved,
        )

    def _refused(self) -> OutputError:
        path = str(self.path)
        return OutputError(
            f"the raw file {path!r} could not be written earlier; nothing more is written to it "
            f"({self.measured} run(s) are saved in it)",
            path=path,
            errno=self._failed.errno if self._failed else None,
            raw=path,
            saved=self.measured,
        )

    def close(self) -> None:
        """Close the file, if one was opened."""
        if self._fh is not None:
            fh, self._fh = self._fh, None
            fh.close()


def _config_of(item: RunRecords | RunRow | RunBlock) -> int:
    """The config index of a stored run, in any form."""
    return item[0] if isinstance(item, tuple) else item.config


def _last_run(items: list[RunRecords | RunRow | RunBlock]) -> RunRecords | None:
    """The last run stored, as an object (``None`` when there is none)."""
    last = items[-1] if items else None
    if type(last) is RunBlock:
        row = last.last_row()
        return None if row is None else run_from_row(row)
    return last if last is None or isinstance(last, RunRecords) else run_from_row(last)  # type: ignore[arg-type]


def _write_all(fh: IO[bytes], data: bytes) -> None:
    """Write all of ``data`` to the unbuffered ``fh`` (a write may take only part of it)."""
    n = fh.write(data)
    if n == len(data):
        return
    view = memoryview(data)
    while True:
        if not n:
            raise OSError(errno.EIO, f"the system took none of the last {len(view)} byte(s)")
        view = view[n:]
        if not view:
            return
        n = fh.write(view)


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
