"""The Parquet result file: ``save("x.parquet")`` and ``nsightx.load`` give back every column and value.

Round trips over the committed fixtures (results written by earlier versions, as JSON) and over synthetic results
that hold what a result can hold (NaN values, failed regions, collectors of every scope with every value type,
several kernels per region, ``normalize_against``, region attributes, a ONCE entry); the file's own table is
what ``pandas.read_parquet`` returns; a file that is not a whole, consistent result is refused with a
``ResultSchemaError`` that names the file and the part; loading checks columns and leaves the objects unbuilt
until ``.data`` is read.
"""

from __future__ import annotations

import json
import math
import warnings
from pathlib import Path

import _paths
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import nsightx
from nsightx import ResultSchemaError
from nsightx._results.parquetparts import LENGTHS_KEY, read_parts, with_parts
from nsightx._results.profileresults import ProfileResults, build_results
from nsightx._results.records import CollectorValue, Record, RegionRun, RunRecords
from nsightx._results.schema import PlanInfo

FIXTURES = _paths.FIXTURES / "results"
METRIC = "gpu__time_duration.sum"


def _same(a: ProfileResults, b: ProfileResults) -> None:
    """Every field, record, value and both DataFrames are identical (NaN equal to NaN)."""
    assert a.data.model_dump_json() == b.data.model_dump_json()
    nan_free = [{"value": 0.0} if math.isnan(r.value) else {} for r in a.records]
    assert [r.model_copy(update=u) for r, u in zip(a.records, nan_free, strict=True)] == [
        r.model_copy(update=u) for r, u in zip(b.records, nan_free, strict=True)
    ]
    assert [math.isnan(r.value) for r in a.records] == [math.isnan(r.value) for r in b.records]
    assert [type(c.value) for r in a.data.runs for c in r.collectors] == [
        type(c.value) for r in b.data.runs for c in r.collectors
    ]
    pd.testing.assert_frame_equal(a.to_dataframe(), b.to_dataframe(), check_exact=True)
    pd.testing.assert_frame_equal(a.runs_dataframe(), b.runs_dataframe(), check_exact=True)


def _load(path: Path) -> ProfileResults:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # incomplete fixtures warn
        return nsightx.load(path)


@pytest.mark.parametrize("commit", sorted(p.name for p in FIXTURES.iterdir() if p.is_dir()))
def test_committed_results_round_trip_through_parquet(tmp_path: Path, commit: str):
    old = _load(FIXTURES / commit / "result.json")
    path = old.save(tmp_path / "r.parquet")
    assert path.read_bytes()[:4] == b"PAR1"
    back = _load(path)
    _same(old, back)


def _synthetic(normalize: str | None = None, kernels: int = 2) -> ProfileResults:
    """Two configs x three runs, two regions; region ``b`` fails in config 1 run 2; collectors of every scope."""
    runs = [RunRecords(config=-1, run=-1, collectors=(CollectorValue(name="driver", scope="once", value="575.1"),))]
    for c in range(2):
        for r in range(3):
            records, regions = [], []
            for name in ("a", "b"):
                failed = name == "b" and c == 1 and r == 2
                for k in range(kernels):
                    value = math.nan if failed else 100.0 * (c + 1) + r + k / 3
                    records.append(Record(name, c, r, f"kern<{k}>", METRIC, value, "ns", k))
                attrs = {"kernel_count": kernels, "device_ns": 5.5, "launch_bound": r == 0, "note": None}
                regions.append(RegionRun(name, c, r, 1000 + r, failed, attrs if name == "a" else {}))
            collectors = (
                CollectorValue(name="clock", scope="run", config=c, run=r, value=1980.5 - r),
                CollectorValue(name="temp", scope="run", config=c, run=r, value=40 + r),
                CollectorValue(name="reasons", scope="run", config=c, run=r, value=None if r == 1 else "none"),
                CollectorValue(name="throttled", scope="run", config=c, run=r, value=r == 2),
                CollectorValue(name="occ", scope="annotation", config=c, run=r, annotation="a", value=0.5 * r),
            )
            if r == 0:
                collectors += (CollectorValue(name="mem", scope="config", config=c, value=c * 2**40),)
            runs.append(RunRecords(c, r, tuple(records), tuple(regions), collectors))
    plan = PlanInfo(
        function="f",
        params=("n", "value", "label"),
        configs=((1, 0.5, "x"), (2, None, "y")),
        runs=3,
        warmup=0,
        metrics=(METRIC,),
        backend="cupti",
        cache_control="all",
        clock_control="none",
        replay_mode="kernel",
        normalize_against=normalize,
        combine_kernel_metrics="sum" if kernels > 1 else None,
    )
    env = {"GPU": "H100", "nsightx": "0.1.0", "rated_sm_clock_mhz": 1980, "ecc": True, "cc": 9.0, "none": None}
    return build_results(
        plan, runs, env, combine=(lambda x, y: x + y) if kernels > 1 else None, created="2026-12-05T00:00:00+00:00"
    )


@pytest.mark.parametrize(("normalize", "kernels"), [(None, 2), ("a", 2), (None, 1)])
def test_a_synthetic_result_round_trips_with_every_part(tmp_path: Path, normalize: str | None, kernels: int):
    res = _synthetic(normalize, kernels)
    assert any(math.isnan(v.value) for v in res.data.values)
    path = res.save(tmp_path / "r.parquet")
    assert path.read_bytes()[:4] == b"PAR1"
    back = _load(path)
    _same(res, back)
    again = _load(back.save(tmp_path / "again.json"))  # and on to JSON, unchanged
    _same(res, again)


def test_pandas_reads_the_per_run_values_with_the_parameters(tmp_path: Path):
    res = _synthetic()
    frame = pd.read_parquet(res.save(tmp_path / "r.parquet"))
    assert list(frame.columns) == [
        "annotation", "config", "run", "metric", "kernel", "unit", "value", "n", "param_value", "label"
    ]  # fmt: skip
    assert len(frame) == len(res.data.values)
    assert frame["annotation"].tolist() == [v.annotation for v in res.data.values]
    np.testing.assert_array_equal(frame["value"].to_numpy(), [v.value for v in res.data.values])
    assert frame["label"].tolist() == [("x", "y")[v.config] for v in res.data.values]
    assert frame["kernel"].iloc[0] == "kern<0>|kern<1>"


def test_load_tells_the_format_by_content_not_by_name(tmp_path: Path):
    res = _synthetic()
    parquet, js = res.save(tmp_path / "p.parquet"), res.save(tmp_path / "j.json")
    (tmp_path / "p.json").write_bytes(parquet.read_bytes())
    (tmp_path / "j.parquet").write_bytes(js.read_bytes())
    assert parquet.read_bytes()[:4] == b"PAR1" and js.read_bytes()[:1] == b"{"
    _same(res, _load(tmp_path / "p.json"))
    _same(res, _load(tmp_path / "j.parquet"))


def test_load_checks_columns_and_builds_objects_when_data_is_first_read(tmp_path: Path):
    res = _synthetic()
    back = _load(res.save(tmp_path / "r.parquet"))
    assert back._data is None
    assert back.completeness == res.completeness
    assert back.backend == "cupti" and dict(back.environment) == dict(res.environment)
    assert repr(back) == repr(res)
    assert back._data is None
    assert back.data.values == back.data.values and back._data is not None


def test_a_loaded_result_makes_its_frames_and_file_from_its_columns_without_objects(tmp_path: Path):
    res = _synthetic()
    first = res.save(tmp_path / "r.parquet")
    back = _load(first)
    frame, runs = back.to_dataframe(), back.runs_dataframe()
    again = back.save(tmp_path / "again.parquet")
    assert back._data is None  # no Python object per value, record or region execution was made
    pd.testing.assert_frame_equal(frame, res.to_dataframe(), check_exact=True)
    pd.testing.assert_frame_equal(runs, res.runs_dataframe(), check_exact=True)
    from_objects = ProfileResults(back.data)  # the same result given as objects: its columns made from them
    pd.testing.assert_frame_equal(frame, from_objects.to_dataframe(), check_exact=True)
    pd.testing.assert_frame_equal(runs, from_objects.runs_dataframe(), check_exact=True)
    _same(res, _load(again))  # the file written from the columns holds the same result


def test_columns_give_back_the_objects_they_were_made_from():
    res = _synthetic()
    data = res.data
    rebuilt = ProfileResults.from_columns(data.model_copy(update={"runs": (), "values": ()}), res.columns)
    assert rebuilt.data.model_dump_json() == data.model_dump_json()
    assert [type(c.value) for r in rebuilt.data.runs for c in r.collectors] == [
        type(c.value) for r in data.runs for c in r.collectors
    ]
    assert [dict(g.attributes) for r in rebuilt.data.runs for g in r.regions] == [
        dict(g.attributes) for r in data.runs for g in r.regions
    ]


def _parts(src: Path) -> list[bytes]:
    """The side parts of the format-2 file ``src`` (the bytes before its footer)."""
    sizes = json.loads(pq.ParquetFile(src).metadata.metadata[LENGTHS_KEY.encode()])
    return read_parts(src, sizes, "src")


def _write(dst: Path, table: pa.Table, metadata: dict[bytes, bytes], parts: list[bytes]) -> Path:
    """Write ``table`` with ``metadata`` to ``dst`` and ``parts`` before its footer, as nsightx lays them out."""
    sink = pa.BufferOutputStream()
    with pq.ParquetWriter(sink, table.schema) as writer:
        writer.write_table(table)
        writer.add_key_value_metadata(metadata)
    dst.write_bytes(with_parts(sink.getvalue(), parts))
    return dst


def _rewrite(src: Path, dst: Path, edit) -> Path:
    """Write ``dst``: the file's table changed by ``edit`` (a function of the table), its metadata and parts kept."""
    file = pq.ParquetFile(src)
    metadata = {k: v for k, v in file.metadata.metadata.items() if k != b"ARROW:schema"}
    return _write(dst, edit(file.read()), metadata, _parts(src))


def _duplicate_first_row(t: pa.Table) -> pa.Table:
    return pa.concat_tables([t.slice(0, 1), t])


def _set(column: str, value):
    def edit(t: pa.Table) -> pa.Table:
        i = t.column_names.index(column)
        col = t.column(column).to_pylist()
        col[0] = value
        return t.set_column(i, column, pa.array(col, t.schema.field(column).type))

    return edit


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (lambda t: t.drop_columns(["run"]), "has no column 'run'"),
        (lambda t: t.set_column(1, "config", t.column("config").cast(pa.float64())), "'config' of the table is double"),
        (_set("value", None), "'value' of the table has 1 null"),
        (_duplicate_first_row, "values[0] and values[1] are both annotation 'a', config 0, run 0"),
        (_set("config", 5), "values[0].config is 5; expected a config index from 0 to 1"),
        (_set("run", -1), "values[0].run is -1"),
    ],
)
def test_a_table_that_does_not_fit_its_result_is_refused_naming_file_and_field(tmp_path: Path, edit, expected):
    src = _synthetic().save(tmp_path / "r.parquet")
    bad = _rewrite(src, tmp_path / "bad.parquet", edit)
    with pytest.raises(ResultSchemaError) as info:
        _load(bad).data  # noqa: B018
    assert "bad.parquet" in str(info.value)
    assert expected in str(info.value)


def _with_meta(src: Path, dst: Path, key: bytes, change) -> Path:
    file = pq.ParquetFile(src)
    metadata = {k: v for k, v in file.metadata.metadata.items() if k != b"ARROW:schema"}
    metadata[key] = change(metadata[key])
    return _write(dst, file.read(), metadata, _parts(src))


def test_edited_metadata_is_refused_by_its_digest_and_a_newer_schema_asks_for_an_upgrade(tmp_path: Path):
    from nsightx._results.parquetwrite import DIGEST_KEY, digest

    src = _synthetic().save(tmp_path / "r.parquet")
    edited = _with_meta(
        src, tmp_path / "e.parquet", b"nsightx", lambda b: b.replace(b'"created":"2026', b'"created":"2027')
    )
    with pytest.raises(ResultSchemaError, match="digest"):
        _load(edited)

    def newer(meta: bytes) -> bytes:
        doc = json.loads(meta)
        doc["schema_version"] = 3
        return json.dumps(doc).encode()

    meta = newer(pq.ParquetFile(src).metadata.metadata[b"nsightx"])
    parts = _parts(src)
    step = _with_meta(src, tmp_path / "n1.parquet", b"nsightx", lambda _: meta)
    signed = _with_meta(step, tmp_path / "n.parquet", DIGEST_KEY.encode(), lambda _: digest(meta, parts).encode())
    with pytest.raises(ResultSchemaError, match=r"schema_version 3; this nsightx reads up to 2; upgrade nsightx"):
        _load(signed)


def test_a_parquet_file_of_another_program_is_refused(tmp_path: Path):
    path = tmp_path / "other.parquet"
    pd.DataFrame({"a": [1, 2]}).to_parquet(path)
    with pytest.raises(ResultSchemaError, match="not an nsightx result: its metadata has no 'nsightx' key"):
        _load(path)


def test_a_parquet_file_cut_short_is_refused(tmp_path: Path):
    data = _synthetic().save(tmp_path / "r.parquet").read_bytes()
    assert data[:4] == b"PAR1"
    for end in (4, len(data) // 2, len(data) - 5):
        (tmp_path / "cut.parquet").write_bytes(data[:end])
        with pytest.raises(ResultSchemaError, match=r"cut\.parquet"):
            _load(tmp_path / "cut.parquet")
