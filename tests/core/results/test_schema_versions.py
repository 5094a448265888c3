"""A result is saved as the oldest schema version that holds it (issue 35's debt from ``PlanInfo.metric_backends``).

Schema 1 has no ``plan.metric_backends``, and nsightx versions that read only schema 1 refuse any unknown field as
a damaged file. So a plain result is written without that field, as schema 1, and stays readable by them; a
result joined from two backends (``metric_backends`` set) is written as schema 2, which those versions refuse with
their upgrade hint. This version reads both, and schema-1 files that carry an empty ``metric_backends`` (written
between the field's addition and this change).
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pyarrow.parquet as pq
import pytest

import nsightx
from nsightx import ResultSchemaError
from nsightx._results.schema import SCHEMA_VERSION, PlanInfo, ResultData

SILENT = nsightx.VerbosityLevel.SILENT


def _result() -> nsightx.ProfileResults:
    @nsightx.analyze.kernel(configs=[(1,), (2,)], runs=2, warmup=0, backend="host", verbosity=SILENT)
    def f(n):
        with nsightx.annotate("a"):
            sum(range(100 * n))

    return f()


def _meta(path: Path) -> dict:
    return json.loads(pq.ParquetFile(path).metadata.metadata[b"nsightx"])


def _strict_v1(doc: dict) -> None:
    """What a schema-1-only reader checks: version 1, and no plan field that version 1 lacks."""
    assert doc["schema_version"] == 1
    assert set(doc["plan"]) <= set(PlanInfo.model_fields) - {"metric_backends"}


def test_a_plain_result_is_written_as_schema_1_without_the_new_field(tmp_path: Path):
    res = _result()
    _strict_v1(json.loads(res.save(tmp_path / "r.json").read_text()))
    _strict_v1(_meta(res.save(tmp_path / "r.parquet")))
    assert json.loads(res.data.model_dump_json())["schema_version"] == 1


def test_a_joined_result_is_written_as_schema_2_and_reads_back(tmp_path: Path):
    joined = nsightx.join_results(_result(), _result())
    assert joined.data.plan.metric_backends
    doc = json.loads(joined.save(tmp_path / "j.json").read_text())
    assert doc["schema_version"] == 2 == SCHEMA_VERSION
    assert doc["plan"]["metric_backends"] == dict(joined.data.plan.metric_backends)
    assert _meta(joined.save(tmp_path / "j.parquet"))["schema_version"] == 2
    for name in ("j.json", "j.parquet"):
        back = nsightx.load(tmp_path / name)
        assert back.data.plan.metric_backends == joined.data.plan.metric_backends
        assert back.to_dataframe()["Tool"].tolist() == joined.to_dataframe()["Tool"].tolist()


def test_a_schema_1_file_with_an_empty_metric_backends_still_loads(tmp_path: Path):
    res = _result()
    doc = json.loads(res.data.model_dump_json())
    doc["plan"]["metric_backends"] = {}
    path = tmp_path / "old.json"
    path.write_text(json.dumps(doc))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        back = nsightx.load(path)
    assert back.data.model_dump_json() == res.data.model_dump_json()


def test_a_newer_schema_asks_for_an_upgrade(tmp_path: Path):
    doc = json.loads(_result().data.model_dump_json())
    doc["schema_version"] = SCHEMA_VERSION + 1
    path = tmp_path / "new.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(ResultSchemaError, match=rf"schema v{SCHEMA_VERSION + 1}.*upgrade nsightx"):
        nsightx.load(path)


def test_the_version_is_written_not_stored(tmp_path: Path):
    """A result read from a schema-1 file and then joined is written as schema 2 whatever its field holds."""
    res = _result()
    data = ResultData.model_validate_json(res.data.model_dump_json())
    plan = data.plan.model_copy(update={"metric_backends": {"m": "host"}})
    joined = data.model_copy(update={"plan": plan})
    assert joined.schema_version == 1
    assert json.loads(joined.model_dump_json())["schema_version"] == 2
