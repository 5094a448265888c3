"""Reading a Parquet result (:mod:`nsightx._results.parquetwrite`) back, refusing what is not one whole result.

In order: the file must open as Parquet (page checksums verified, so a changed byte in the table is an error),
carry the ``nsightx`` metadata with a digest that matches it and the side parts, a schema version and layout
format this nsightx reads, and each table the columns and types the writer writes, without nulls where the writer
writes none. The tables then become the result's :class:`~nsightx._results.store.ResultColumns` (numpy arrays;
each string column as codes into its distinct strings), checked by the same consistency checks as a JSON file
(:mod:`nsightx._results.parquetcheck` over the columns; on a failure, the objects are built so that
:func:`nsightx._results.integrity.check_result` names the first bad entry by its JSON path). Each problem is one
:class:`ResultSchemaError` that names the file, the part or column, and what was expected.

No Python object is made per value, record or region execution: the DataFrames and a re-save read the columns;
the objects (``ProfileResults.data``, ``records``) are built from them on first use.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from pydantic import ValidationError

from nsightx._errors import ResultSchemaError
from nsightx._results.integrity import check_result
from nsightx._results.memtrim import release_freed
from nsightx._results.parquetcheck import columns_fit, ints, text
from nsightx._results.parquetparts import LENGTHS_KEY, lengths, read_parts
from nsightx._results.parquettable import BATCH, table_columns, type_name
from nsightx._results.parquetwrite import (
    DIGEST_KEY,
    FROM_RECORDS,
    FROM_TABLE,
    KIND_BOOL,
    KIND_FLOAT,
    KIND_INT,
    KIND_STR,
    META_KEY,
    PARQUET_FORMAT,
    PARTS,
    RECORD_FIELDS,
    SHARED_KEY,
    digest,
    same_column,
)
from nsightx._results.schema import SCHEMA_VERSION, PlanInfo, ResultData, describe_errors
from nsightx._results.store import (
    CollectorColumns,
    RecordColumns,
    RegionColumns,
    ResultColumns,
    RunColumns,
    ValueColumns,
)

if TYPE_CHECKING:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from nsightx._results.records import Scalar

_THRIFT_LIMIT = 2**31 - 1
"""The footer's size limit for reading (pyarrow's default, 100 MB, would refuse the metadata of ~5 million records)."""
MAGIC = b"PAR1"
"""The first (and last) four bytes of every Parquet file."""

_S, _I, _F, _B, _I8 = "string", "int64", "double", "bool", "int8"
COLUMNS: dict[str, dict[str, tuple[str, bool]]] = {
    "values": {
        "annotation": (_S, False),
        "config": (_I, False),
        "run": (_I, False),
        "metric": (_S, False),
        "kernel": (_S, False),
        "unit": (_S, True),
        "value": (_F, False),
    },
    "runs": {"config": (_I, False), "run": (_I, False), **{f"n_{p}": (_I, False) for p in PARTS[1:]}},
    "records": {
        "annotation": (_S, False),
        "config": (_I, False),
        "run": (_I, False),
        "kernel": (_S, False),
        "metric": (_S, False),
        "value": (_F, False),
        "unit": (_S, True),
        "seq": (_I, False),
    },
    "regions": {
        "annotation": (_S, False),
        "config": (_I, False),
        "run": (_I, False),
        "host_ns": (_I, False),
        "failed": (_B, False),
        "attributes": (_S, True),
    },
    "collectors": {
        "name": (_S, False),
        "scope": (_S, False),
        "config": (_I, True),
        "run": (_I, True),
        "annotation": (_S, True),
        "kind": (_I8, False),
        "number": (_F, True),
        "integer": (_I, True),
        "text": (_S, True),
    },
}
"""Per table, each column the writer writes: its type and whether it may hold nulls."""


def starts_parquet(head: bytes) -> bool:
    """Whether a file that starts with ``head`` is a Parquet file (a saved result in the columnar format)."""
    return head.startswith(MAGIC)


def parse_parquet(data: bytes | Path, source: str) -> tuple[ResultData, ResultColumns]:
    """The result in the Parquet file ``data`` (its bytes or its path), checked: its small parts and its columns.

    ``source`` is the quoted file name, for messages. No Python object is made per value or record; the result's
    objects are built from the columns when first asked for (``ProfileResults.data``). Given a path, the file is
    read through Arrow (only its pages and footer, never a second whole copy of it in memory).

    Raises:
        ResultSchemaError: the first problem found (see the module docstring).
    """
    with _system_pool():
        shell, columns = _parse(data, source)
    release_freed(columns.values.n + columns.records.n + columns.regions.n)
    return shell, columns


def _parse(data: bytes | Path, source: str) -> tuple[ResultData, ResultColumns]:
    """:func:`parse_parquet`, under the pool it picks."""
    with _unreadable(source):
        file, metadata = _open(data)
    with file:
        _refuse_newer(metadata, source)  # before the parts: a newer writer may lay them out otherwise
        sizes = lengths(metadata.get(LENGTHS_KEY.encode()), len(PARTS), source)
        if sizes is None:  # format 1: the parts are in the footer
            blobs = [metadata.get(f"nsightx.{p}".encode(), b"") for p in PARTS]
        else:
            with _unreadable(source):
                blobs = read_parts(data, sizes, source)
        meta = _check_meta(metadata, blobs, source)
        del metadata  # the footer's copy of each part (format 1) goes once that part is read
        shell = _shell(meta, source)
        check_result(shell, source)  # the plan and the per-config lists; the runs and values below, as columns
        with _unreadable(source):
            values = table_columns(file, COLUMNS["values"], source)
        release_freed(len(values["value"]))  # the pages Arrow decoded, before the side parts take their place
    with _unreadable(source):
        tables = {}
        for part in PARTS:
            tables[part] = _read_part(blobs.pop(0))
            tables[part].validate(full=True)  # dictionary indices, offsets, UTF-8: what a changed byte breaks
            _check_columns(part, tables[part], source, skip=meta[SHARED_KEY].get(part, ()))
    columns = _result_columns(values, tables, meta[SHARED_KEY], source)  # empties ``tables`` as it converts
    release_freed(columns.values.n + columns.records.n + columns.regions.n)  # Arrow's pages, before the checks
    if not columns_fit(shell.plan, columns):
        whole = shell.model_copy(update={"runs": columns.run_records(), "values": columns.run_values()})
        check_result(whole, source)  # names the first bad entry by its JSON path
        raise ResultSchemaError(f"{source}: the runs, records, regions and values do not fit together")
    return shell, columns


_POOL_LOCK = threading.Lock()
_pool_readers: list[Any] = [0, None]
"""How many reads are under way and the pool that was the default before the first of them."""


@contextmanager
def _system_pool() -> Iterator[None]:
    """Arrow's allocations while reading go to the C library's allocator, which numpy uses too.

    pyarrow's default pool (mimalloc or jemalloc) keeps what it frees for its own later use: the batches it
    decodes while reading stay resident beside the numpy arrays they become, and the numpy work after the read
    (the checks, the DataFrame) cannot reuse them. At a million records that was about 35 MB of the load's peak
    (issue 35). The default is set back when the last read under way ends; what Arrow allocated stays valid
    (each buffer remembers its pool).
    """
    import pyarrow as pa

    with _POOL_LOCK:
        if _pool_readers[0] == 0:
            _pool_readers[1] = pa.default_memory_pool()
            pa.set_memory_pool(pa.system_memory_pool())
        _pool_readers[0] += 1
    try:
        yield
    finally:
        with _POOL_LOCK:
            _pool_readers[0] -= 1
            if _pool_readers[0] == 0:
                pa.set_memory_pool(_pool_readers[1])
                _pool_readers[1] = None


@contextmanager
def _unreadable(source: str) -> Iterator[None]:
    """Turn what Arrow raises on a damaged file into one :class:`ResultSchemaError` naming ``source``."""
    import pyarrow as pa

    try:
        yield
    except (pa.ArrowException, OSError, ValueError, KeyError, TypeError, IndexError, OverflowError) as e:
        if isinstance(e, ResultSchemaError):
            raise
        raise ResultSchemaError(
            f"{source} is not a whole nsightx result: the Parquet file cannot be read ({type(e).__name__}: "
            f"{str(e)[:200]}); it was cut short or damaged (a full disk, an interrupted copy, a changed byte)"
        ) from None


def _shell(meta: dict[str, Any], source: str) -> ResultData:
    """The result's small parts (no runs, no values), validated like a JSON file's fields."""
    try:
        return ResultData.model_validate(
            {k: meta[k] for k in ("schema_version", "nsightx_version", "created", "plan", "environment")}
            | {"config_devices": tuple(meta["config_devices"]), "config_hosts": tuple(meta["config_hosts"])}
        )
    except (ValidationError, KeyError, TypeError) as e:
        what = describe_errors(e) if isinstance(e, ValidationError) else f"field {e} is missing or not a list"
        raise ResultSchemaError(f"{source}: metadata {META_KEY!r}: {what}") from None


def _open(data: bytes | Path) -> tuple[pq.ParquetFile, dict[bytes, bytes]]:
    """The file, open for reading its table, and its key-value metadata.

    String columns are read as dictionaries and page checksums verified; the footer is parsed once.
    """
    import pyarrow.parquet as pq

    with pq.ParquetFile(_source(data), thrift_string_size_limit=_THRIFT_LIMIT) as first:
        footer = first.metadata
    names = set(footer.schema.names)
    file = pq.ParquetFile(
        _source(data),
        metadata=footer,
        read_dictionary=[n for n in ("annotation", "metric", "kernel", "unit") if n in names],
        page_checksum_verification=True,
        pre_buffer=False,
        buffer_size=8 * BATCH,  # pages streamed through a small buffer, not each column chunk read whole
    )
    metadata = dict(footer.metadata or {})
    return file, metadata


def _source(data: bytes | Path) -> Any:
    """What ``pq.ParquetFile`` opens for ``data``: a buffer over its bytes, or its path."""
    import pyarrow as pa

    return pa.BufferReader(data) if isinstance(data, bytes) else str(data)


def _read_part(blob: bytes) -> pa.Table:
    """One side part (an Arrow IPC stream; the digest has already vouched for its bytes)."""
    import pyarrow as pa

    with pa.ipc.open_stream(blob) as reader:
        return reader.read_all()


def _refuse_newer(metadata: Mapping[bytes, bytes], source: str) -> None:
    """Refuse a file a newer nsightx wrote, with the upgrade hint, before its parts or digest are looked at.

    A newer format may place or cover its side parts otherwise, so checked after them it would read as a damaged
    file (nsightx at 86a5c8f and earlier tell a format-2 file that way). Metadata that does not parse is left to
    the digest check.
    """
    try:
        doc = json.loads(metadata.get(META_KEY.encode(), b"{}"))
    except ValueError:
        return
    if isinstance(doc, dict):
        _check_versions(doc, source, newer_only=True)


_VERSIONS = (("schema_version", SCHEMA_VERSION), ("format", PARQUET_FORMAT))
"""The metadata's version fields and the newest of each this nsightx reads."""


def _check_versions(doc: Mapping[str, Any], source: str, newer_only: bool = False) -> None:
    """Refuse a version newer than this nsightx reads, with the upgrade hint.

    Unless ``newer_only``, also refuse any other value than 1 to the newest.
    """
    for field, newest in _VERSIONS:
        got = doc.get(field)
        if type(got) is int and got > newest:
            raise ResultSchemaError(
                f"{source}: result written with {field} {got}; this nsightx reads up to {newest}; upgrade "
                "nsightx (pip install -U nsightx)"
            )
        if not newer_only and got not in range(1, newest + 1):
            raise ResultSchemaError(f"{source}: metadata field {field!r} is {got!r}; expected 1 to {newest}")


def _check_meta(metadata: Mapping[bytes, bytes], parts: list[bytes], source: str) -> dict[str, Any]:
    """The ``nsightx`` metadata, once its digest (over it and the side ``parts``), versions and fields passed."""
    meta = metadata.get(META_KEY.encode())
    if meta is None:
        raise ResultSchemaError(
            f"{source} is a Parquet file but not an nsightx result: its metadata has no {META_KEY!r} key (nsightx "
            "writes one in every result); open it with pandas.read_parquet instead"
        )
    if metadata.get(DIGEST_KEY.encode(), b"").decode(errors="replace") != digest(meta, parts):
        raise ResultSchemaError(
            f"{source} is not a whole nsightx result: the digest of its metadata ({DIGEST_KEY!r}) does not match "
            "the parts it covers (nsightx, nsightx.runs, .records, .regions, .collectors); the file was damaged "
            "or edited; restore it from a copy"
        )
    doc = json.loads(meta)  # the digest matched: this is the JSON the writer wrote
    _check_versions(doc, source)
    try:
        doc["plan"] = PlanInfo.model_validate(doc.get("plan"), strict=False)
    except ValidationError as e:
        raise ResultSchemaError(f"{source}: metadata 'plan' is not a plan: {describe_errors(e)}") from None
    doc[SHARED_KEY] = _check_shared(doc, source)
    return doc


def _check_shared(doc: dict[str, Any], source: str) -> dict[str, list[str]]:
    """The columns the records take from the table and the regions from the records (none in format 1)."""
    if doc["format"] == 1:
        return {"records": [], "regions": []}
    got = doc.get(SHARED_KEY)
    allowed = {"records": FROM_TABLE, "regions": FROM_RECORDS}
    if not (
        isinstance(got, dict)
        and set(got) == set(allowed)
        and all(isinstance(got[k], list) and set(got[k]) <= set(allowed[k]) for k in allowed)
    ):
        raise ResultSchemaError(
            f"{source}: metadata field {SHARED_KEY!r} is {str(got)[:200]}; expected "
            f'{{"records": [names out of {", ".join(FROM_TABLE)}], '
            f'"regions": [names out of {", ".join(FROM_RECORDS)}]}}'
        )
    return {k: list(got[k]) for k in allowed}


def _check_columns(name: str, table: pa.Table, source: str, skip: Sequence[str] = (), only: str | None = None) -> None:
    """Each column the writer writes is there, of its type, without nulls where it writes none.

    ``skip``: columns this part takes from another table (format 2); ``only``: check that column alone.
    """
    for column, (kind, nullable) in COLUMNS[name].items():
        if column in skip or only not in (None, column):
            continue
        where = "the table" if name == "values" else f"part {name!r}"
        if column not in table.column_names:
            raise ResultSchemaError(
                f"{source}: {where} has no column {column!r}; every nsightx result has "
                f"{', '.join(COLUMNS[name])} (the file was edited or written by something else)"
            )
        col = table.column(column)
        got = type_name(col.type)
        if got != kind:
            raise ResultSchemaError(f"{source}: column {column!r} of {where} is {got}; expected {kind}")
        if not nullable and col.null_count:
            raise ResultSchemaError(
                f"{source}: column {column!r} of {where} has {col.null_count} null(s); expected a value in each row"
            )


def _result_columns(
    values: dict[str, Any], tables: dict[str, pa.Table], shared: dict[str, list[str]], source: str
) -> ResultColumns:
    """The result's columns from the table's columns and the side parts.

    Each run's counts are checked against the parts they count. ``tables`` is emptied as it goes: each Arrow
    table is dropped once its columns are made. A column a part takes from another table (format 2) is that
    table's array; one stored again but equal (format 1) is made the same array, so it is held once either way.
    """
    runs = tables.pop("runs")
    run_columns = RunColumns(*(ints(runs.column(c)) for c in COLUMNS["runs"]))
    parts = [tables[p].num_rows for p in PARTS[1:]]
    for n, held in zip((run_columns.n_records, run_columns.n_regions, run_columns.n_collectors), parts, strict=True):
        if int(n.sum()) != held or (len(n) and int(n.min()) < 0):
            raise ResultSchemaError(
                f"{source}: part 'runs' counts {int(n.sum())} entries, but the part it counts holds {held}; "
                "the file was edited"
            )
    table_rows = len(values["value"])
    rec = tables.pop("records")
    _check_rows("records", rec.num_rows, shared["records"], table_rows, source)
    records = RecordColumns(
        *(values[c] if c in shared["records"] else shared_with(_column(rec, c), values.get(c)) for c in RECORD_FIELDS)
    )
    del rec
    names = ("annotation", "config", "run", "metric", "value", "unit", "kernel")
    value_columns = ValueColumns(*(shared_with(values.pop(c), getattr(records, c)) for c in names))
    reg = tables.pop("regions")
    _check_rows("regions", reg.num_rows, shared["regions"], records.n, source)
    regions = _regions(reg, records, shared["regions"], source)
    return ResultColumns(value_columns, run_columns, records, regions, _collectors(tables.pop("collectors")))


def _check_rows(part: str, rows: int, taken: list[str], other_rows: int, source: str) -> None:
    """A part that takes columns from another table has that table's row count."""
    if taken and rows != other_rows:
        other = "the table" if part == "records" else "part 'records'"
        raise ResultSchemaError(
            f"{source}: part {part!r} holds {rows} rows and takes columns {', '.join(taken)} from {other}, which "
            f"holds {other_rows}; expected the same count (the file was edited)"
        )


def shared_with(column: Any, like: Any) -> Any:
    """``like`` where it holds exactly what ``column`` holds (so that one array is kept, not two), else ``column``.

    See :func:`~nsightx._results.parquetwrite.same_column` for what counts as the same.
    """
    return like if like is not None and same_column(column, like) else column


def _column(table: pa.Table, name: str) -> Any:
    """One column of a checked table as the columns hold it: strings as :class:`Text`, numbers as numpy."""
    kind = type_name(table.column(name).type)
    col = table.column(name)
    if kind == "string":
        return text(col)
    if kind == "double":
        return np.asarray(col.to_numpy(), dtype=np.float64)
    if kind == "bool":
        return np.asarray(col.to_numpy(), dtype=np.bool_)
    return ints(col)


def _regions(table: pa.Table, records: RecordColumns, taken: list[str], source: str) -> RegionColumns:
    """The region executions; attributes decoded from their JSON (only where a row has any).

    The annotation, config and run columns are the records' own arrays where the part takes them from the records
    (``taken``) or they are equal (:func:`shared_with`).
    """
    attributes = table.column("attributes")
    attrs: list[Mapping[str, Scalar]] | None = None
    if attributes.null_count < len(attributes):
        try:
            attrs = [{} if a is None else dict(json.loads(a)) for a in attributes.to_pylist()]
        except (ValueError, TypeError) as e:
            raise ResultSchemaError(
                f"{source}: column 'attributes' of part 'regions' holds {e}; expected JSON objects"
            ) from None
    annotation, config, run = (
        getattr(records, c) if c in taken else shared_with(_column(table, c), getattr(records, c))
        for c in ("annotation", "config", "run")
    )
    host_ns, failed = _column(table, "host_ns"), _column(table, "failed")
    return RegionColumns(annotation, config, run, host_ns, failed, attrs)


def _collectors(table: pa.Table) -> CollectorColumns:
    """The collector values (a few per run), each in the Python type its ``kind`` says."""
    name, scope, config, run, annotation, kind, number, integer, strs = (
        table.column(c).to_pylist() for c in COLUMNS["collectors"]
    )
    pick: dict[int, Callable[[Any, Any, Any], Any]] = {
        KIND_BOOL: lambda n, i, t: bool(i),
        KIND_INT: lambda n, i, t: i,
        KIND_FLOAT: lambda n, i, t: n,
        KIND_STR: lambda n, i, t: t,
    }
    none: Callable[[Any, Any, Any], Any] = lambda n, i, t: None  # noqa: E731
    value = [pick.get(k, none)(n, i, t) for k, n, i, t in zip(kind, number, integer, strs, strict=True)]
    return CollectorColumns(name, scope, config, run, annotation, value)
