"""Format 2 of the Parquet result (issue 35: a million records load under twice their columns' memory).

The side parts lie in the file before the footer (the footer holds their lengths and the digest), a part leaves
out the columns it shares with the table or the records, and ``pandas.read_parquet`` still returns the per-run
values. Format-1 files (the committed GPU results) load exactly as before; a changed, cut or mislaid part is
refused naming the file; a newer format asks for an upgrade. The memory-lean steps give the same answers: the
part checks made a block of runs at a time, and the value statistics computed a block of groups at a time.
"""

from __future__ import annotations

import hashlib
import json
import math
import warnings
from dataclasses import replace
from pathlib import Path

import _paths
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from _synthetic import host_result

import nsightx
from nsightx import ResultSchemaError
from nsightx._results import dataframe, parquetcheck
from nsightx._results.profileresults import ProfileResults
from nsightx._results.records import Record, RegionRun, RunRecords
from nsightx._results.store import Text

GPU_RESULTS = _paths.FIXTURES / "gpu-results"
METRIC = "host__time_duration.sum"
FORMAT1 = {  # sha256 of data.model_dump_json() of each committed format-1 file, as 86a5c8f loads it (bit for bit)
    "cupti-triton-axpb": "3b4d9d771aae4d016c730f0419c2741f4b6618bf1ec8e0ec693d633826f221ae",
    "ncu-triton-axpb": "d95b2d83ab57bed7342bc0b3538e58dab1f0f2e0e95def3a1b51183deaf219c5",
}


def _host(configs: int = 2, runs: int = 3, regions: int = 4, fail: bool = True) -> ProfileResults:
    """One record and one region execution per region and run, as the host backend writes; a NaN and a -0.0, and
    (``fail``) region 0 failing in config 0 run 1."""
    out = []
    for c in range(configs):
        for r in range(runs):
            names = [f"region{i}" for i in range(regions)]
            ns = [1000.0 + 7 * i + 100 * c + r for i in range(regions)]
            ns[0] = math.nan if (c, r) == (0, 1) else -0.0 if (c, r) == (1, 2) else ns[0]
            records = tuple(Record(a, c, r, "region", METRIC, v, "ns") for a, v in zip(names, ns, strict=True))
            failed = [fail and (c, r, i) == (0, 1, 0) for i in range(regions)]
            execs = tuple(
                RegionRun(a, c, r, 1000 + 3 * i + r, f) for i, (a, f) in enumerate(zip(names, failed, strict=True))
            )
            out.append(RunRecords(c, r, records, execs))
    return host_result(out, [(2**c,) for c in range(configs)], runs)


def _same(a: ProfileResults, b: ProfileResults) -> None:
    assert a.data.model_dump_json() == b.data.model_dump_json()
    pd.testing.assert_frame_equal(a.to_dataframe(), b.to_dataframe(), check_exact=True)
    pd.testing.assert_frame_equal(a.runs_dataframe(), b.runs_dataframe(), check_exact=True)


def _footer(path: Path) -> dict[bytes, bytes]:
    return dict(pq.ParquetFile(path).metadata.metadata)


@pytest.mark.parametrize("name", sorted(FORMAT1))
def test_a_format1_file_loads_as_before_and_saves_again_as_format2(tmp_path: Path, name: str):
    path = GPU_RESULTS / f"{name}.parquet"
    assert json.loads(_footer(path)[b"nsightx"])["format"] == 1
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the fixtures are complete; a warning would not change what is compared
        old = nsightx.load(path)
        assert hashlib.sha256(old.data.model_dump_json().encode()).hexdigest() == FORMAT1[name]
        again = nsightx.load(old.save(tmp_path / "again.parquet"))
    footer = _footer(tmp_path / "again.parquet")
    assert json.loads(footer[b"nsightx"])["format"] == 2
    assert b"nsightx.records" not in footer and b"nsightx.parts" in footer
    _same(old, again)


def test_a_format2_file_holds_each_column_once_and_pandas_reads_the_values(tmp_path: Path):
    res = _host()
    path = res.save(tmp_path / "r.parquet")
    footer = _footer(path)
    meta = json.loads(footer[b"nsightx"])
    assert meta["format"] == 2
    assert meta["shared"] == {  # the failed region's value says kernel "failed" and no unit; its record does not
        "records": ["annotation", "config", "run", "metric", "value"],
        "regions": ["annotation", "config", "run"],
    }
    whole = json.loads(_footer(_host(fail=False).save(tmp_path / "whole.parquet"))[b"nsightx"])["shared"]
    assert whole["records"] == ["annotation", "config", "run", "kernel", "metric", "value", "unit"]
    assert not any(key.startswith(b"nsightx.r") for key in footer)  # no part in the footer: only their lengths
    sizes = json.loads(footer[b"nsightx.parts"])
    assert len(sizes) == 4 and path.stat().st_size > sum(sizes)
    table = pd.read_parquet(path)
    assert list(table.columns) == ["annotation", "config", "run", "metric", "kernel", "unit", "value", "n"]
    assert len(table) == len(res.data.values)
    np.testing.assert_array_equal(table["value"].to_numpy(), [v.value for v in res.data.values])
    back = nsightx.load(path)
    _same(res, back)
    c = back.columns
    assert c.records.value is c.values.value and c.regions.run is c.records.run
    assert np.signbit(c.records.value).any()  # the -0.0 read back as itself


def test_loading_leaves_pyarrows_default_pool_as_it_was(tmp_path: Path):
    path = _host().save(tmp_path / "r.parquet")
    before = pa.default_memory_pool().backend_name
    nsightx.load(path)
    assert pa.default_memory_pool().backend_name == before


def _parts_at(path: Path) -> tuple[int, int]:
    """Where the side parts start in the file and how many bytes they hold."""
    data = path.read_bytes()
    footer = int.from_bytes(data[-8:-4], "little")
    total = sum(json.loads(_footer(path)[b"nsightx.parts"]))
    return len(data) - 8 - footer - total, total


def test_a_changed_cut_or_mislaid_side_part_is_refused_naming_the_file(tmp_path: Path):
    src = _host().save(tmp_path / "r.parquet")
    data = src.read_bytes()
    start, total = _parts_at(src)
    for at in (start, start + total // 2, start + total - 1):  # a changed byte in each region of the parts
        bad = bytearray(data)
        bad[at] ^= 0x40
        (tmp_path / "changed.parquet").write_bytes(bytes(bad))
        with pytest.raises(ResultSchemaError, match=r"changed\.parquet.*digest"):
            nsightx.load(tmp_path / "changed.parquet")
    (tmp_path / "noparts.parquet").write_bytes(data[:start] + data[start + total :])  # the parts cut out
    with pytest.raises(ResultSchemaError, match=r"noparts\.parquet' is not a whole nsightx result"):
        nsightx.load(tmp_path / "noparts.parquet")
    table = pq.read_table(src)  # rewritten by another tool: the footer kept, the parts gone
    pq.write_table(table.replace_schema_metadata(_footer(src)), tmp_path / "rewritten.parquet")
    with pytest.raises(ResultSchemaError, match=r"rewritten\.parquet"):
        nsightx.load(tmp_path / "rewritten.parquet")


def _with_footer(src: Path, dst: Path, change) -> Path:
    """``src`` with its footer's key-value metadata changed by ``change``, its side parts kept before the footer."""
    from nsightx._results.parquetparts import read_parts, with_parts

    metadata = {k: v for k, v in _footer(src).items() if k != b"ARROW:schema"}
    parts = read_parts(src, json.loads(metadata[b"nsightx.parts"]), "src")
    change(metadata, parts)
    sink = pa.BufferOutputStream()
    table = pq.read_table(src)
    with pq.ParquetWriter(sink, table.schema) as writer:
        writer.write_table(table)
        writer.add_key_value_metadata(metadata)
    dst.write_bytes(with_parts(sink.getvalue(), parts))
    return dst


def test_a_newer_format_asks_for_an_upgrade_and_bad_part_lengths_are_named(tmp_path: Path):
    from nsightx._results.parquetwrite import digest

    src = _host().save(tmp_path / "r.parquet")

    def newer(metadata: dict[bytes, bytes], parts: list[bytes]) -> None:
        doc = json.loads(metadata[b"nsightx"])
        doc["format"] = 3
        metadata[b"nsightx"] = json.dumps(doc).encode()
        metadata[b"nsightx.digest"] = digest(metadata[b"nsightx"], parts).encode()

    with pytest.raises(ResultSchemaError, match=r"n\.parquet': result written with format 3; this nsightx reads up "):
        nsightx.load(_with_footer(src, tmp_path / "n.parquet", newer))

    def lengths(metadata: dict[bytes, bytes], parts: list[bytes]) -> None:
        metadata[b"nsightx.parts"] = b"[1, 2]"

    with pytest.raises(ResultSchemaError, match=r"l\.parquet': metadata 'nsightx.parts' is b'\[1, 2\]'; expected"):
        nsightx.load(_with_footer(src, tmp_path / "l.parquet", lengths))


def test_part_checks_made_a_block_of_runs_at_a_time_still_find_each_problem(monkeypatch):
    monkeypatch.setattr(parquetcheck, "_BLOCK", 5)  # 4 records a run: each block ends within the second run
    res = _host(configs=3, runs=4, regions=4)
    plan, c = res.data.plan, res.columns
    assert parquetcheck.columns_fit(plan, c)
    rec = c.records
    config, run = rec.config.copy(), rec.run.copy()
    config[41] = 0  # a record of config 2 said to be config 0's
    run[30] = 0
    codes = rec.annotation.codes.copy()
    codes[45] = codes[44]  # two records of one region in one run
    for bad_records in (
        replace(rec, config=config),
        replace(rec, run=run),
        replace(rec, annotation=Text(codes, rec.annotation.names)),
    ):
        assert not parquetcheck.columns_fit(plan, replace(c, records=bad_records))


def test_value_statistics_made_a_block_of_groups_at_a_time_are_one_groupbys(monkeypatch):
    rng = np.random.default_rng(35)
    n, count = 20_000, 37
    ids = rng.integers(0, count, n)
    ids[:count] = np.arange(count)  # dense ids in first-seen order, as the frame's groups
    values = rng.lognormal(3.0, 1.0, n)
    values[rng.integers(0, n, 300)] = np.nan
    values[ids == 5] = np.nan  # a group with no value
    values[ids == 7] = 1e300  # sums that need pandas' compensated summation
    values[rng.integers(0, n, 50)] *= -1.0
    monkeypatch.setattr(dataframe, "_BLOCK_ROWS", 999)
    got = dataframe._pandas_moments(values, ids, count)
    whole = pd.Series(values).groupby(ids, sort=False)
    expected = {
        "AvgValue": whole.mean(),
        "MedianValue": whole.median(),
        "StdDev": whole.std(ddof=1),
        "MinValue": whole.min(),
        "MaxValue": whole.max(),
        "NumRuns": whole.count(),
    }
    for name, column in expected.items():
        want = column.to_numpy()
        assert got[name].dtype == (np.int64 if name == "NumRuns" else np.float64)
        assert np.array_equal(got[name].view(np.int64), want.astype(got[name].dtype).view(np.int64)), name


def test_a_newer_format_is_named_before_its_parts_or_digest_are_read(tmp_path: Path):
    """A format 3 file whose parts lie elsewhere (no lengths entry, a digest this version cannot check) gets the
    upgrade hint, not "damaged or edited" (which is what nsightx at 86a5c8f said of a format-2 file)."""
    src = _host().save(tmp_path / "r.parquet")

    def newer_layout(metadata: dict[bytes, bytes], parts: list[bytes]) -> None:
        doc = json.loads(metadata[b"nsightx"])
        doc["format"] = 3
        metadata[b"nsightx"] = json.dumps(doc).encode()
        metadata[b"nsightx.parts"] = b'{"elsewhere": true}'
        metadata[b"nsightx.digest"] = b"covers something else"

    with pytest.raises(ResultSchemaError, match=r"n3\.parquet': result written with format 3; this nsightx reads up "):
        nsightx.load(_with_footer(src, tmp_path / "n3.parquet", newer_layout))
