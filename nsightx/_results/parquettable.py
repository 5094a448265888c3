"""Reading the columns of a Parquet result's own table (the per-run values) in batches, into arrays made once.

pyarrow's ``read`` of a million-row column decodes it into a buffer that it then copies, and its allocator keeps
what was freed: reading the table's seven columns that way took about 60 MB of resident memory beyond the 28 MB
the columns hold (issue 35: the whole load must stay under twice the columns). Here each column is read in
batches of :data:`BATCH` rows, each batch converted into its place in an array allocated once at the column's
full length: what Arrow holds at any time is one batch, and the memory it frees is what the next batch takes.

Each batch is validated (``validate(full=True)``: dictionary indices in range, UTF-8), page checksums are
verified by the reader, and a column's type and nulls are checked against what the writer writes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from nsightx._errors import ResultSchemaError
from nsightx._results.store import Text

if TYPE_CHECKING:
    import pyarrow as pa
    import pyarrow.parquet as pq

BATCH = 1 << 16
"""Rows per batch: 512 KiB of a number column."""


def type_name(t: pa.DataType) -> str:
    """The type of a column as the checks name it (a dictionary by its values; any string as ``string``)."""
    import pyarrow as pa

    if pa.types.is_dictionary(t):
        return type_name(t.value_type)
    return "string" if pa.types.is_string(t) or pa.types.is_large_string(t) else str(t)


def table_columns(file: pq.ParquetFile, spec: Mapping[str, tuple[str, bool]], source: str) -> dict[str, Any]:
    """The columns ``spec`` names (type, nullable) of the file's table: strings as :class:`Text`, numbers numpy.

    Raises:
        ResultSchemaError: a column is missing, of another type, or holds nulls where the writer writes none.
    """
    schema = file.schema_arrow
    out: dict[str, Any] = {}
    for name, (kind, nullable) in spec.items():
        if name not in schema.names:
            raise ResultSchemaError(
                f"{source}: the table has no column {name!r}; every nsightx result has "
                f"{', '.join(spec)} (the file was edited or written by something else)"
            )
        got = type_name(schema.field(name).type)
        if got != kind:
            raise ResultSchemaError(f"{source}: column {name!r} of the table is {got}; expected {kind}")
        out[name] = _read(file, name, kind, nullable, source)
    return out


def _read(file: pq.ParquetFile, name: str, kind: str, nullable: bool, source: str) -> Any:
    """One column, batch by batch, into an array of its full length."""
    n = file.metadata.num_rows
    index: dict[str | None, int] = {}
    out = np.empty(n, np.int32 if kind == "string" else np.float64 if kind == "double" else np.int64)
    at, nulls = 0, 0
    for batch in file.iter_batches(batch_size=BATCH, columns=[name], use_threads=False):
        batch.validate(full=True)
        column = batch.column(0)
        nulls += column.null_count
        if nulls and not nullable:
            continue  # counted to the end, for the message
        piece = _codes(column, index) if kind == "string" else column.to_numpy(zero_copy_only=False)
        out[at : at + len(piece)] = piece
        at += len(piece)
    if nulls and not nullable:
        raise ResultSchemaError(
            f"{source}: column {name!r} of the table has {nulls} null(s); expected a value in each row"
        )
    if at != n:
        raise ResultSchemaError(f"{source}: column {name!r} of the table holds {at} rows; its footer says {n}")
    return Text(out, list(index)) if kind == "string" else out


def _codes(column: pa.Array, index: dict[str | None, int]) -> np.ndarray[Any, Any]:
    """The codes of one batch of a string column into ``index`` (each distinct string once, nulls as ``None``).

    The same codes and names as :func:`nsightx._results.parquetcheck.text` gives for the whole column.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    arr = column if pa.types.is_dictionary(column.type) else pc.dictionary_encode(column)
    lut = [index.setdefault(s, len(index)) for s in arr.dictionary.to_pylist()]
    indices = arr.indices
    if indices.null_count:
        lut.append(index.setdefault(None, len(index)))
        indices = indices.fill_null(len(lut) - 1)
    positions = indices.to_numpy(zero_copy_only=False)
    if lut != list(range(len(lut))):
        positions = np.array(lut, dtype=np.int64)[positions]
    return positions
