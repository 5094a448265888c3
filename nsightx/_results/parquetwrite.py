"""Writing a result as one Parquet file: the per-run values as the table users open, the rest beside it.

Layout (format 2 of the Parquet result; the result's own schema version is 1, or 2 for a joined result):

- the file's table is one row per per-run value (``ResultData.values``, in order): ``annotation``, ``config``,
  ``run``, ``metric``, ``kernel``, ``unit``, ``value`` and then one column per parameter (its value in the row's
  config; a name that clashes with a fixed column gets ``param_`` prefixed, again until no other column has it:
  :func:`param_columns`). ``pd.read_parquet(path)``,
  ``pl.read_parquet(path)`` and DuckDB's ``read_parquet`` return exactly this table;
- the file's key-value metadata holds the rest: ``nsightx`` (JSON: schema version, layout format, nsightx version,
  time, plan, environment, per-config devices and hosts), and ``nsightx.runs``, ``nsightx.records``,
  ``nsightx.regions``, ``nsightx.collectors``: each an Arrow IPC stream of one table (the runs' keys and how many
  records, regions and collector values each run holds; then every record, region execution and collector value
  in the order of ``data.runs``), and ``nsightx.digest``, a BLAKE2b digest of the JSON and those four parts;
- a column that the records share with the table, or the region executions with the records, is stored once
  (format 2): the JSON's ``shared`` names them (``{"records": [...], "regions": [...]}``) and the part leaves
  them out. In the common case (one record per value and per region execution, as the host backend writes) the
  records part holds only ``seq`` and the regions part ``host_ns``, ``failed`` and ``attributes``, so the
  footer, which every reader parses whole into memory, is a quarter of format 1's (a million records: 11.5 MB of
  footer cost the reader about 70 MB at its peak). Format 1 (every column in its part, ``shared`` absent) is
  still read.

The string columns are Arrow dictionaries (pandas reads them as ``category``; writing and reading them skips
hashing a million strings). The table is zstd-compressed Parquet and its data pages carry CRC32 checksums, so a
changed byte in the table is an error on reading, not a changed number.

Why metadata rather than more columns or row groups: the records, regions and collector values have other row
counts than the values (several kernels or metrics per region, one region per run and annotation, four collector
values per run), so as columns they would pad the user's table with empty cells, and row groups of a tagged union
would put rows of another kind into the table every tool reads. Why Arrow IPC with LZ4 for them, measured on a
million records (2-core machine): 11.4 bytes per record against 9.0 as nested Parquet (zstd), but 59 ms to write
and 24 ms to read against 634 ms and 195 ms; the values are doubles that no codec shrinks, so Parquet's encodings
save little there. Parquet's footer holds the metadata: readers cap it (pyarrow at 100 MB by default, which
``nsightx.load`` raises), so ``pandas.read_parquet`` of a file with more than about 8 million records needs
``thrift_string_size_limit`` passed through.

pyarrow is imported when a file is written or read, never by ``import nsightx``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from nsightx._results.parquetparts import LENGTHS_KEY, with_parts
from nsightx._results.schema import written_version
from nsightx._results.store import Text

if TYPE_CHECKING:
    import pyarrow as pa

    from nsightx._results.schema import ResultData
    from nsightx._results.store import (
        CollectorColumns,
        RecordColumns,
        RegionColumns,
        ResultColumns,
        ValueColumns,
    )

PARQUET_FORMAT = 2
"""Version of this layout (``format`` in the ``nsightx`` metadata); a newer one is refused with an upgrade hint."""
SHARED_KEY = "shared"
"""The field of the ``nsightx`` JSON (format 2) naming the columns a part takes from another table."""
RECORD_FIELDS = ("annotation", "config", "run", "kernel", "metric", "value", "unit", "seq")
"""The records part's columns, in order."""
FROM_TABLE = RECORD_FIELDS[:-1]
"""Columns the records part may take from the file's table (format 2): all but ``seq``."""
FROM_RECORDS = ("annotation", "config", "run")
"""Columns the regions part may take from the records (format 2)."""
META_KEY = "nsightx"
PARTS = ("runs", "records", "regions", "collectors")
"""The side tables, each stored under the metadata key ``nsightx.<part>``."""
DIGEST_KEY = "nsightx.digest"
VALUE_COLUMNS = ("annotation", "config", "run", "metric", "kernel", "unit", "value")
"""The fixed columns of the file's table, in order (parameter columns follow)."""
KIND_NONE, KIND_BOOL, KIND_INT, KIND_FLOAT, KIND_STR = range(5)
"""How a collector value is stored: its ``kind`` says which of ``number``, ``integer`` and ``text`` holds it."""


def digest(meta: bytes, parts: Sequence[bytes]) -> str:
    """The BLAKE2b digest (hex) of the metadata JSON and the side parts, in order, each with its length."""
    h = hashlib.blake2b(digest_size=20)
    for chunk in (meta, *parts):
        h.update(len(chunk).to_bytes(8, "little"))
        h.update(chunk)
    return h.hexdigest()


def result_parquet(data: ResultData, columns: ResultColumns) -> bytes:
    """The bytes of the Parquet file of the result ``data`` whose runs and values are ``columns``.

    Only the plan, environment and per-config lists of ``data`` are read (its runs and values may be empty).
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    shared = shared_columns(columns)
    meta = _meta_json(data, shared)
    parts = [_table_bytes(table) for table in _side_tables(columns, shared)]
    sizes = json.dumps([len(part) for part in parts]).encode()
    metadata = {META_KEY: meta, LENGTHS_KEY: sizes, DIGEST_KEY: digest(meta, parts).encode()}
    main = _values_table(data, columns.values)
    sink = pa.BufferOutputStream()
    with pq.ParquetWriter(sink, main.schema, compression="zstd", write_page_checksum=True) as writer:
        writer.write_table(main, row_group_size=1 << 20)
        writer.add_key_value_metadata(metadata)
    return with_parts(sink.getvalue(), parts)


def shared_columns(columns: ResultColumns) -> dict[str, list[str]]:
    """Which columns the records take from the table and the regions from the records: those equal to them."""
    rec, reg = columns.records, columns.regions
    return {
        "records": [name for name in FROM_TABLE if same_column(getattr(rec, name), getattr(columns.values, name))],
        "regions": [name for name in FROM_RECORDS if same_column(getattr(reg, name), getattr(rec, name))],
    }


def same_column(column: Any, like: Any) -> bool:
    """Whether two columns hold exactly the same: both a :class:`Text` or both numpy arrays of one type.

    Floats are compared by their bits (``-0.0`` is not ``0.0``, a NaN equals the same NaN), so a column stored
    once reads back the same for both.
    """
    if column is like:
        return True
    if isinstance(column, Text):
        return isinstance(like, Text) and column.names == like.names and _equal(column.codes, like.codes)
    return isinstance(column, np.ndarray) and isinstance(like, np.ndarray) and _equal(column, like)


def _equal(a: np.ndarray[Any, Any], b: np.ndarray[Any, Any]) -> bool:
    """Whether two arrays have one type, one shape and the same bits."""
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    if a.dtype.kind == "f":
        return bool(np.array_equal(a.view(f"i{a.dtype.itemsize}"), b.view(f"i{b.dtype.itemsize}")))
    return bool(np.array_equal(a, b))


def _meta_json(data: ResultData, shared: dict[str, list[str]]) -> bytes:
    """The small parts of the result as JSON (NaN and infinities as JSON's ``NaN``/``Infinity`` tokens)."""
    doc = {
        "schema_version": written_version(data.plan),
        "format": PARQUET_FORMAT,
        "nsightx_version": data.nsightx_version,
        "created": data.created,
        "plan": data.plan.model_dump(mode="json"),
        "environment": dict(data.environment),
        "config_devices": list(data.config_devices),
        "config_hosts": list(data.config_hosts),
        SHARED_KEY: shared,
    }
    return json.dumps(doc, separators=(",", ":")).encode()


def _table_bytes(table: pa.Table) -> bytes:
    """``table`` as an Arrow IPC stream, its buffers LZ4-compressed (the digest in the metadata covers it)."""
    import pyarrow as pa

    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema, options=pa.ipc.IpcWriteOptions(compression="lz4")) as writer:
        writer.write_table(table)
    return bytes(sink.getvalue())


def strings(text: Text) -> pa.Array:
    """A string column as an Arrow dictionary array (``None`` names are nulls)."""
    import pyarrow as pa

    names = text.names
    missing = [i for i, name in enumerate(names) if name is None]
    dictionary = pa.array([name or "" for name in names], pa.string())
    indices = text.codes.astype(np.int32)
    mask = np.isin(text.codes, missing) if missing else None
    return pa.DictionaryArray.from_arrays(indices, dictionary, mask=mask)


def _values_table(data: ResultData, v: ValueColumns) -> pa.Table:
    """The table users open: one row per per-run value, parameter columns last."""
    import pyarrow as pa

    columns: dict[str, pa.Array] = {
        "annotation": strings(v.annotation),
        "config": pa.array(v.config),
        "run": pa.array(v.run),
        "metric": strings(v.metric),
        "kernel": strings(v.kernel),
        "unit": strings(v.unit),
        "value": pa.array(v.value),
    }
    configs = data.plan.configs
    positions = columns["config"]
    for i, column in enumerate(param_columns(data.plan.params)):
        columns[column] = _param_column([cfg[i] for cfg in configs]).take(positions)
    return pa.table(columns)


def param_columns(params: Sequence[str]) -> list[str]:
    """The table's column name of each parameter: its own, or with ``param_`` prefixed until no column has it.

    A name is taken from every fixed column and every parameter's own name, so a parameter ``value`` beside one
    named ``param_value`` becomes ``param_param_value`` rather than overwriting ``param_value``'s column.
    """
    taken = {*VALUE_COLUMNS, *params}
    out = []
    for name in params:
        column = name
        if name in VALUE_COLUMNS:
            column = f"param_{name}"
            while column in taken:
                column = f"param_{column}"
            taken.add(column)
        out.append(column)
    return out


def _param_column(values: list[Any]) -> pa.Array:
    """One parameter's value per config, typed by Arrow where it can; else each value as JSON text.

    Bools beside other values are JSON text too: Arrow would read ``[0.5, False]`` as the doubles 0.5 and 0.0
    (though ``[False, 0.5]`` fails), so a flag would become a number depending on the configs' order.
    """
    import pyarrow as pa

    kinds = {type(v) for v in values if v is not None}
    if bool in kinds and len(kinds) > 1:
        return pa.array([json.dumps(v) for v in values], pa.string())
    try:
        return pa.array(values)
    except (pa.ArrowException, TypeError, ValueError, OverflowError):
        return pa.array([json.dumps(v) for v in values], pa.string())


def _side_tables(c: ResultColumns, shared: dict[str, list[str]]) -> list[pa.Table]:
    """The runs, records, regions and collector values as Arrow tables, less the ``shared`` columns."""
    import pyarrow as pa

    r = c.runs
    run_table = pa.table(
        {
            "config": r.config,
            "run": r.run,
            "n_records": r.n_records,
            "n_regions": r.n_regions,
            "n_collectors": r.n_collectors,
        }
    )
    records, regions = _records_table(c.records, shared["records"]), _regions_table(c.regions, shared["regions"])
    return [run_table, records, regions, _collectors_table(c.collectors)]


def _records_table(rec: RecordColumns, skip: Sequence[str]) -> pa.Table:
    """Every raw record: its fields as columns (strings dictionary-encoded), less those in ``skip``."""
    import pyarrow as pa

    make = {"annotation": strings, "kernel": strings, "metric": strings, "unit": strings}
    return pa.table({name: make.get(name, pa.array)(getattr(rec, name)) for name in RECORD_FIELDS if name not in skip})


def _regions_table(reg: RegionColumns, skip: Sequence[str]) -> pa.Table:
    """Every region execution, less the columns in ``skip``.

    Its attributes are JSON text (null where it has none: the host backend's).
    """
    import pyarrow as pa

    if reg.attributes is None:
        attrs = pa.nulls(reg.n, pa.string())
    else:
        attrs = pa.array(
            [json.dumps(dict(a), separators=(",", ":")) if a else None for a in reg.attributes], pa.string()
        )
    columns = {
        "annotation": strings(reg.annotation) if "annotation" not in skip else None,
        "config": reg.config,
        "run": reg.run,
        "host_ns": reg.host_ns,
        "failed": reg.failed,
        "attributes": attrs,
    }
    return pa.table({name: column for name, column in columns.items() if name not in skip})


def _collectors_table(c: CollectorColumns) -> pa.Table:
    """Every collector value; the value in the column of its type (``kind``), so 1, 1.0, True and "1" stay apart."""
    import pyarrow as pa

    raw = c.value
    kinds = [_kind(v) for v in raw]
    number = [v if k == KIND_FLOAT else None for v, k in zip(raw, kinds, strict=True)]
    integer = [int(v) if k in (KIND_INT, KIND_BOOL) else None for v, k in zip(raw, kinds, strict=True)]  # type: ignore[arg-type]
    text = [v if k == KIND_STR else None for v, k in zip(raw, kinds, strict=True)]
    n = len(raw)
    return pa.table(
        {
            "name": strings(Text.of(c.name, n)),
            "scope": strings(Text.of(c.scope, n)),
            "config": pa.array(c.config, pa.int64()),
            "run": pa.array(c.run, pa.int64()),
            "annotation": strings(Text.of(c.annotation, n)),
            "kind": pa.array(np.array(kinds, dtype=np.int8)),
            "number": pa.array(number, pa.float64()),
            "integer": pa.array(integer, pa.int64()),
            "text": pa.array(text, pa.string()),
        }
    )


def _kind(value: object) -> int:
    """The ``kind`` code of one collector value."""
    if value is None:
        return KIND_NONE
    if isinstance(value, bool):
        return KIND_BOOL
    if isinstance(value, int):
        return KIND_INT
    if isinstance(value, float):
        return KIND_FLOAT
    return KIND_STR
