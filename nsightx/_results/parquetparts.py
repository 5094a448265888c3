"""Where a format-2 Parquet result keeps its side parts: in the file, just before the Parquet footer.

A Parquet file is ``PAR1``, the column chunks, the footer (its schema, the chunks' offsets, the key-value
metadata), the footer's length (4 bytes, little-endian) and ``PAR1`` again. Readers find the footer from the end
and each chunk by the absolute offset the footer gives, so bytes between the last chunk and the footer are read
by no one who does not look for them: ``pandas.read_parquet`` (and pyarrow, polars, DuckDB) return the same table
with or without them.

Format 1 kept the side parts in the footer's key-value metadata, and every reader parses the whole footer into
memory, several times over (the raw bytes, thrift's strings, Arrow's key-value copy, Python's ``bytes``): at a
million records its 11.5 MB cost about 70 MB at the reader's peak. Here the footer holds only their lengths
(:data:`LENGTHS_KEY`, a JSON list, one per part in order) and the parts lie, in order and back to back, right
before the footer, where :func:`read_parts` reads exactly their bytes. The digest in the footer covers them as
it did in format 1.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from nsightx._errors import ResultSchemaError

if TYPE_CHECKING:
    import pyarrow as pa

LENGTHS_KEY = "nsightx.parts"
"""The footer's key-value entry that holds the parts' lengths (format 2)."""
_TAIL = 8
"""The footer's length (4 bytes) and the closing ``PAR1``."""
_HEAD = 4
"""The opening ``PAR1``."""


def with_parts(body: pa.Buffer, parts: Sequence[bytes]) -> bytes:
    """The Parquet file ``body`` (as pyarrow wrote it) with ``parts`` placed just before its footer."""
    view = memoryview(body)
    footer = int.from_bytes(view[-_TAIL:-4], "little")
    start = len(view) - _TAIL - footer
    return b"".join([view[:start], *parts, view[start:]])


def lengths(raw: bytes | None, count: int, source: str) -> list[int] | None:
    """The ``count`` parts' lengths from the footer's :data:`LENGTHS_KEY` entry (``None``: no entry, format 1)."""
    if raw is None:
        return None
    try:
        got = json.loads(raw)
    except ValueError:
        got = None
    if not (
        isinstance(got, list)
        and len(got) == count
        and all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in got)
    ):
        raise ResultSchemaError(
            f"{source}: metadata {LENGTHS_KEY!r} is {raw[:100]!r}; expected a JSON list of {count} byte counts, "
            "one per side part (the file was damaged or edited); restore it from a copy"
        )
    return got


def read_parts(data: bytes | Path, sizes: Sequence[int], source: str) -> list[bytes]:
    """The side parts' bytes (``sizes`` long each), read from just before the footer of the file ``data``.

    Raises:
        ResultSchemaError: the parts would start before the first column chunk could (the lengths or the file
            were changed).
    """
    total = sum(sizes)
    if isinstance(data, bytes):
        end = _footer_start(len(data), data[-_TAIL:], total, source)
        view, at = memoryview(data), end - total
        out = []
        for n in sizes:
            out.append(bytes(view[at : at + n]))
            at += n
        return out
    with data.open("rb") as file:
        size = file.seek(0, 2)
        file.seek(max(size - _TAIL, 0))
        end = _footer_start(size, file.read(_TAIL), total, source)
        file.seek(end - total)
        return [file.read(n) for n in sizes]


def _footer_start(size: int, tail: bytes, total: int, source: str) -> int:
    """Where the footer starts in a file of ``size`` bytes ending in ``tail``.

    Checked to leave room for ``total`` bytes of parts after the opening magic.
    """
    footer = int.from_bytes(tail[:4], "little") if len(tail) == _TAIL else size
    start = size - _TAIL - footer
    if start - total < _HEAD:
        raise ResultSchemaError(
            f"{source} is not a whole nsightx result: its footer says the side parts hold {total} bytes, but only "
            f"{max(start - _HEAD, 0)} lie before the footer; the file was cut short or edited; restore it from a copy"
        )
    return start
