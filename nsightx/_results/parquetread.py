"""Reading a Parquet result (:mod:`nsightx._results.parquetwrite`) back, refusing what is not one whole result.

In order: the file must open as Parquet (page checksums verified, so a changed byte in the table is an error),
carry the ``nsightx`` metadata with a digest that matches it and the side parts, a schema version and layout
format this nsightx reads, and each table the columns and types the writer writes, without nulls where the writer
writes none. The result is then built from the columns and checked by the same consistency checks as a JSON file
(:func:`nsightx._results.integrity.check_result`: index ranges, entries stored once, values of held runs). Each
problem is one :class:`ResultSchemaError` that names the file, the part or column, and what was expected.

Building: the per-run values, records, region executions and collector values are made from whole columns (one
``tolist`` per column, then the fast builders of :mod:`nsightx._results.records` mapped over them, with the
garbage collector paused); about 0.3 s per million records on a 2-core machine. The rest of nsightx reads results
through those objects.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from itertools import islice, repeat
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from nsightx._errors import ResultSchemaError
from nsightx._results.integrity import check_result
from nsightx._results.parquetcheck import columns_fit, completeness_of, ints
from nsightx._results.parquetwrite import (
    DIGEST_KEY,
    KIND_BOOL,
    KIND_FLOAT,
    KIND_INT,
    KIND_STR,
    META_KEY,
    PARQUET_FORMAT,
    PARTS,
    digest,
)
from nsightx._results.pending import PendingData
from nsightx._results.records import (
    CollectorValue,
    Record,
    RegionRun,
    new_collector_value,
    new_record,
    new_region_run,
    new_run_records,
)
from nsightx._results.schema import SCHEMA_VERSION, PlanInfo, ResultData, describe_errors, gc_paused
from nsightx._results.transform import new_run_value

if TYPE_CHECKING:
    import pyarrow as pa

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


def parse_parquet(data: bytes, source: str) -> PendingData:
    """The result whose Parquet bytes are ``data``, checked, to be built when first read.

    ``source`` is the quoted file name, for messages.

    Raises:
        ResultSchemaError: the first problem found (see the module docstring).
    """
    import pyarrow as pa

    try:
        main, metadata = _read_main(data)
        meta = _check_meta(metadata, source)
        tables = {"values": main, **{p: _read_part(metadata[f"nsightx.{p}".encode()]) for p in PARTS}}
        for table in tables.values():
            table.validate(full=True)  # dictionary indices in range, offsets, UTF-8: what a changed byte breaks
    except (pa.ArrowException, OSError, ValueError, KeyError, TypeError, IndexError, OverflowError) as e:
        if isinstance(e, ResultSchemaError):
            raise
        raise ResultSchemaError(
            f"{source} is not a whole nsightx result: the Parquet file cannot be read ({type(e).__name__}: "
            f"{str(e)[:200]}); it was cut short or damaged (a full disk, an interrupted copy, a changed byte)"
        ) from None
    for name, table in tables.items():
        _check_columns(name, table, source)
    shell = _shell(meta, source)
    check_result(shell, source)  # the plan and the per-config lists; the runs and values below, as columns
    build = functools.partial(_build, shell, tables, source)
    if not columns_fit(shell.plan, tables):
        check_result(build(), source)  # names the first bad entry by its JSON path
        raise ResultSchemaError(f"{source}: the runs, records, regions and values do not fit together")
    done = completeness_of(shell.plan, ints(tables["runs"].column("config")))
    return PendingData(shell.plan, shell.environment, main.num_rows, done, build)


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


def _read_main(data: bytes) -> tuple[pa.Table, Mapping[bytes, bytes]]:
    """The file's table (string columns as dictionaries) and its key-value metadata, page checksums verified."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    footer = pq.ParquetFile(pa.BufferReader(data), thrift_string_size_limit=_THRIFT_LIMIT).metadata
    names = set(footer.schema.to_arrow_schema().names)
    file = pq.ParquetFile(
        pa.BufferReader(data),
        metadata=footer,
        read_dictionary=[n for n in ("annotation", "metric", "kernel", "unit") if n in names],
        page_checksum_verification=True,
    )
    return file.read(use_threads=True), footer.metadata or {}


def _read_part(blob: bytes) -> pa.Table:
    """One side part (an Arrow IPC stream; the digest has already vouched for its bytes)."""
    import pyarrow as pa

    with pa.ipc.open_stream(blob) as reader:
        return reader.read_all()


def _check_meta(metadata: Mapping[bytes, bytes], source: str) -> dict[str, Any]:
    """The ``nsightx`` metadata, after its digest, versions and fields were checked."""
    meta = metadata.get(META_KEY.encode())
    if meta is None:
        raise ResultSchemaError(
            f"{source} is a Parquet file but not an nsightx result: its metadata has no {META_KEY!r} key (nsightx "
            "writes one in every result); open it with pandas.read_parquet instead"
        )
    parts = [metadata.get(f"nsightx.{p}".encode(), b"") for p in PARTS]
    if metadata.get(DIGEST_KEY.encode(), b"").decode(errors="replace") != digest(meta, parts):
        raise ResultSchemaError(
            f"{source} is not a whole nsightx result: the digest of its metadata ({DIGEST_KEY!r}) does not match "
            "the parts it covers (nsightx, nsightx.runs, .records, .regions, .collectors); the file was damaged "
            "or edited; restore it from a copy"
        )
    doc = json.loads(meta)  # the digest matched: this is the JSON the writer wrote
    for field, newest in (("schema_version", SCHEMA_VERSION), ("format", PARQUET_FORMAT)):
        got = doc.get(field)
        if isinstance(got, int) and got > newest:
            raise ResultSchemaError(
                f"{source}: result written with {field} {got}; this nsightx reads up to {newest}; upgrade "
                "nsightx (pip install -U nsightx)"
            )
        if got not in range(1, newest + 1):
            raise ResultSchemaError(f"{source}: metadata field {field!r} is {got!r}; expected 1 to {newest}")
    try:
        doc["plan"] = PlanInfo.model_validate(doc.get("plan"), strict=False)
    except ValidationError as e:
        raise ResultSchemaError(f"{source}: metadata 'plan' is not a plan: {describe_errors(e)}") from None
    return doc


def _type_name(t: pa.DataType) -> str:
    import pyarrow as pa

    if pa.types.is_dictionary(t):
        return _type_name(t.value_type)
    return "string" if pa.types.is_string(t) or pa.types.is_large_string(t) else str(t)


def _check_columns(name: str, table: pa.Table, source: str) -> None:
    """Each column the writer writes is there, of its type, without nulls where it writes none."""
    for column, (kind, nullable) in COLUMNS[name].items():
        where = "the table" if name == "values" else f"part {name!r}"
        if column not in table.column_names:
            raise ResultSchemaError(
                f"{source}: {where} has no column {column!r}; every nsightx result has "
                f"{', '.join(COLUMNS[name])} (the file was edited or written by something else)"
            )
        col = table.column(column)
        got = _type_name(col.type)
        if got != kind:
            raise ResultSchemaError(f"{source}: column {column!r} of {where} is {got}; expected {kind}")
        if not nullable and col.null_count:
            raise ResultSchemaError(
                f"{source}: column {column!r} of {where} has {col.null_count} null(s); expected a value in each row"
            )


def _strings(col: pa.ChunkedArray) -> list[Any]:
    """A string column as a list (``None`` for nulls), decoding a dictionary column once per distinct value."""
    import pyarrow as pa

    out: list[Any] = []
    for arr in col.chunks:  # each chunk of a dictionary column has its own dictionary
        if not pa.types.is_dictionary(arr.type):
            out.extend(arr.to_pylist())
            continue
        names = arr.dictionary.to_pylist()
        indices = arr.indices
        if indices.null_count:
            names.append(None)
            indices = indices.fill_null(len(names) - 1)
        out.extend(map(names.__getitem__, indices.to_numpy(zero_copy_only=False).tolist()))
    return out


def _columns(table: pa.Table, names: Sequence[str]) -> list[list[Any]]:
    """The named columns as lists (strings through :func:`_strings`)."""
    import pyarrow as pa

    out = []
    for name in names:
        col = table.column(name)
        if pa.types.is_dictionary(col.type) or pa.types.is_string(col.type):
            out.append(_strings(col))
        else:
            out.append(col.to_pylist())
    return out


def _build(shell: ResultData, tables: dict[str, pa.Table], source: str) -> ResultData:
    """The whole result: ``shell`` with the runs and values made from the tables (runs regrouped by their counts)."""
    with gc_paused():  # millions of objects and no cycles: a collection would walk all of them again and again
        values = tuple(
            map(
                new_run_value,
                *_columns(tables["values"], ("annotation", "config", "run", "metric")),
                *_columns(tables["values"], ("value", "unit", "kernel")),
            )
        )
        runs = tables["runs"]
        counts = [runs.column(f"n_{p}").to_pylist() for p in PARTS[1:]]
        parts: list[list[Any]] = [
            _records(tables["records"]),
            _regions(tables["regions"], source),
            _collectors(tables["collectors"]),
        ]
        for part, n in zip(parts, counts, strict=True):
            if sum(n) != len(part) or min(n, default=0) < 0:
                raise ResultSchemaError(
                    f"{source}: part 'runs' counts {sum(n)} entries, but the part it counts holds {len(part)}; "
                    "the file was edited"
                )
        grouped = [_split(part, n) for part, n in zip(parts, counts, strict=True)]
        keys = [runs.column("config").to_pylist(), runs.column("run").to_pylist()]
        return shell.model_copy(update={"runs": tuple(map(new_run_records, *keys, *grouped)), "values": values})


def _records(table: pa.Table) -> list[Record]:
    return list(
        map(new_record, *_columns(table, ("annotation", "config", "run", "kernel", "metric", "value", "unit", "seq")))
    )


def _regions(table: pa.Table, source: str) -> list[RegionRun]:
    annotation, config, run, host_ns, failed, attributes = _columns(
        table, ("annotation", "config", "run", "host_ns", "failed", "attributes")
    )
    try:
        attrs = [{} if a is None else dict(json.loads(a)) for a in attributes]
    except (ValueError, TypeError) as e:
        raise ResultSchemaError(
            f"{source}: column 'attributes' of part 'regions' holds {e}; expected JSON objects"
        ) from None
    return list(map(new_region_run, annotation, config, run, host_ns, failed, attrs))


def _collectors(table: pa.Table) -> list[CollectorValue]:
    name, scope, config, run, annotation, kind, number, integer, text = _columns(table, tuple(COLUMNS["collectors"]))
    pick: dict[int, Callable[[Any, Any, Any], Any]] = {
        KIND_BOOL: lambda n, i, t: bool(i),
        KIND_INT: lambda n, i, t: i,
        KIND_FLOAT: lambda n, i, t: n,
        KIND_STR: lambda n, i, t: t,
    }
    none: Callable[[Any, Any, Any], Any] = lambda n, i, t: None  # noqa: E731
    value = [pick.get(k, none)(n, i, t) for k, n, i, t in zip(kind, number, integer, text, strict=True)]
    return list(map(new_collector_value, name, scope, config, run, annotation, value))


def _split(entries: list[Any], counts: list[int]) -> Iterator[tuple[Any, ...]]:
    """``entries`` cut into consecutive tuples of ``counts`` entries each."""
    it = iter(entries)
    return map(tuple, map(islice, repeat(it), counts))
