"""The Parquet result file as another tool reads it, against the per-run frame, over random results.

docs/api.md (``save``) and docs/reliability.md ("The Parquet result file") say ``pandas.read_parquet(path)``
returns the per-run values with the parameter columns. Here random results are built through the real code
(``build_results``, the shapes of ``test_frame_reference``, with parameters of several types and names that
clash with the fixed columns), saved, and read back with pandas: every row's annotation, config, run, metric,
kernel, unit and value equal ``runs_dataframe()``'s in order, each parameter's column holds the row's config
value (typed by Arrow, or JSON text where one column mixes types, as nsightx/_results/parquetwrite.py says),
and ``nsightx.load`` gives back both frames.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow.parquet as pq
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_frame_reference import TIME, Shape, build, shapes

import nsightx
from nsightx._results.parquetwrite import param_columns

EXAMPLES = int(os.environ.get("NSIGHTX_PARQUET_REFERENCE_EXAMPLES", "60"))
"""Examples per run (300 while hunting)."""
PARAM_VALUES = {
    "int": st.integers(-5, 10**6),
    "bigint": st.sampled_from([2**63 - 1, 2**63, 2**70, -(2**63), 2**53 + 1]),
    "float": st.sampled_from([0.5, 1.0, -0.0, math.nan, math.inf, 1e300, 3.0]),
    "str": st.sampled_from(["a", "é", "日本", "", "1", "None", "x y"]),
    "bool": st.booleans(),
    "none": st.none(),
}
NAMES = ("n", "value", "param_value", "param_param_value", "config", "run", "unit", "dtype", "annotation", "kernel")
FIXED = {"annotation": "Annotation", "config": "Config", "run": "Run", "metric": "Metric", "kernel": "Kernel"}
FIXED |= {"unit": "Unit", "value": "Value"}


@st.composite
def param_shapes(draw: Any) -> Shape:
    """A random result whose parameters have random names and values of one or two types."""
    shape = draw(shapes())
    names = draw(st.lists(st.sampled_from(NAMES), min_size=1, max_size=3, unique=True))
    columns = []
    for _ in names:
        kinds = draw(st.lists(st.sampled_from(sorted(PARAM_VALUES)), min_size=1, max_size=2, unique=True))
        columns.append([draw(PARAM_VALUES[draw(st.sampled_from(kinds))]) for _ in shape.configs])
    shape.params, shape.normalize = tuple(names), None
    shape.configs = [tuple(col[c] for col in columns) for c in range(len(shape.configs))]
    return shape


def _same(got: Any, want: Any) -> bool:
    """A cell as pandas reads it against the value it stands for (ints beside nulls read as floats)."""
    if want is None:
        return got is None or (isinstance(got, float) and math.isnan(got))
    if isinstance(want, float) and math.isnan(want):
        return isinstance(got, float) and math.isnan(got)
    if isinstance(want, bool) or isinstance(got, bool) or isinstance(want, str):
        return type(got) is type(want) and got == want
    return isinstance(got, int | float) and float(got) == float(want)


def _check_params(frame: pd.DataFrame, path: Path, res: nsightx.ProfileResults) -> None:
    configs, schema = res.data.plan.configs, pq.read_schema(path)
    for j, column in enumerate(param_columns(res.data.plan.params)):
        want = [configs[c][j] for c in frame["config"]]
        got = frame[column].astype(object).tolist()
        typed = {type(cfg[j]) for cfg in configs if cfg[j] is not None}
        if len(typed) > 1 and bool in typed:
            assert str(schema.field(column).type) == "string", column  # a flag never becomes a number
        if str(schema.field(column).type) == "string" and typed - {str}:
            want = [json.dumps(v) for v in want]  # a column Arrow cannot type is JSON text
            assert got == want, (column, got, want)
        else:
            assert all(_same(g, w) for g, w in zip(got, want, strict=True)), (column, got, want)


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(param_shapes())
def test_pandas_reads_the_per_run_frame_from_the_file(tmp_path_factory: Any, shape: Shape) -> None:
    res = build(shape)
    path = res.save(tmp_path_factory.mktemp("r") / "r.parquet")
    frame, runs = pd.read_parquet(path), res.runs_dataframe()
    assert list(frame.columns) == [*FIXED, *param_columns(shape.params)]
    assert pq.read_table(path).num_rows == len(frame) == len(runs)
    for low, up in FIXED.items():
        got, want = frame[low].astype(object).tolist(), runs[up].astype(object).tolist()
        assert all(g == w or (pd.isna(g) and pd.isna(w)) for g, w in zip(got, want, strict=True)), (low, got, want)
    _check_params(frame, path, res)
    back = nsightx.load(path)
    pd.testing.assert_frame_equal(back.runs_dataframe(), runs)
    pd.testing.assert_frame_equal(back.to_dataframe(), res.to_dataframe())


def _two_configs(params: tuple[str, ...], configs: list[tuple[Any, ...]]) -> nsightx.ProfileResults:
    shape = Shape(configs, params, runs=1, annotations=("gemm",), metrics=(TIME,), combine=False, derive=False)
    shape.regions = {("gemm", c, 0): [{TIME: 1.0 + c}] for c in range(len(configs))}
    return build(shape)


def test_a_parameter_prefixed_for_a_clash_keeps_the_column_of_a_parameter_of_that_name(tmp_path: Path) -> None:
    res = _two_configs(("param_value", "value"), [(1, 2), (3, 4)])
    frame = pd.read_parquet(res.save(tmp_path / "r.parquet"))
    assert frame["param_value"].tolist() == [1, 3]  # was [2, 4]: ``value`` overwrote it, and 1, 3 were lost
    assert frame["param_param_value"].tolist() == [2, 4]
    assert frame["value"].tolist() == [1.0, 2.0]


def test_a_bool_parameter_beside_a_float_is_not_read_as_a_number(tmp_path: Path) -> None:
    for configs in ([(0.5,), (False,)], [(False,), (0.5,)]):
        res = _two_configs(("n",), configs)
        frame = pd.read_parquet(res.save(tmp_path / "r.parquet"))
        assert frame["n"].tolist() == [json.dumps(v) for (v,) in configs]  # [0.5, False] was [0.5, 0.0]
