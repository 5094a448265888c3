"""A result's columns are held small (issue 35: peak memory of a million records under 2x its columns).

String codes are kept in the narrowest integer type that fits the names; a loaded result whose values, records
and regions hold the same column holds that array once; columns that only look equal (``-0.0`` against ``0.0``)
are not shared. Frames and values stay exactly what they were.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
from _synthetic import host_result

import nsightx
from nsightx._results.profileresults import ProfileResults
from nsightx._results.records import Record, RegionRun, RunRecords

METRIC = "host__time_duration.sum"


def _host_result(regions: int, values: list[float] | None = None) -> ProfileResults:
    """Two configs x three runs of ``regions`` regions, one record per region execution (as the host backend)."""
    runs = []
    for c in range(2):
        for r in range(3):
            names = [f"region{i}" for i in range(regions)]
            ns = values or [1000.0 + 7 * i + 100 * c + r for i in range(regions)]
            records = tuple(Record(a, c, r, "region", METRIC, v, "ns") for a, v in zip(names, ns, strict=True))
            execs = tuple(RegionRun(a, c, r, int(v)) for a, v in zip(names, ns, strict=True))
            runs.append(RunRecords(c, r, records, execs))
    return host_result(runs, [(1,), (2,)], 3)


def test_a_loaded_result_holds_each_equal_column_once_with_narrow_codes(tmp_path: Path):
    res = _host_result(300)  # 300 names: int16 codes
    back = nsightx.load(res.save(tmp_path / "r.parquet"))
    c = back.columns
    for name in ("annotation", "config", "run", "metric", "value", "unit", "kernel"):
        assert getattr(c.values, name) is getattr(c.records, name), name
    for name in ("annotation", "config", "run"):
        assert getattr(c.regions, name) is getattr(c.records, name), name
    assert c.records.annotation.codes.dtype == np.int16 and c.records.metric.codes.dtype == np.int8
    pd.testing.assert_frame_equal(back.to_dataframe(), res.to_dataframe(), check_exact=True)
    pd.testing.assert_frame_equal(back.runs_dataframe(), res.runs_dataframe(), check_exact=True)
    assert back.data.model_dump_json() == res.data.model_dump_json()


def test_columns_equal_as_numbers_but_not_in_bits_are_not_shared(tmp_path: Path):
    res = _host_result(2, [0.0, 5.0])
    c = res.columns  # the per-run values say -0.0 where the records say 0.0 (a derive could do that)
    value = c.values.value.copy()
    value[value == 0.0] = -0.0
    odd = ProfileResults.from_columns(res.data, replace(c, values=replace(c.values, value=value)))
    table = odd.save(tmp_path / "r.parquet")
    assert "value" not in json.loads(pq.read_metadata(table).metadata[b"nsightx"])["shared"]["records"]
    back = nsightx.load(table)
    assert back.columns.values.value is not back.columns.records.value
    assert np.signbit(back.columns.values.value).any() and not np.signbit(back.columns.records.value).any()
