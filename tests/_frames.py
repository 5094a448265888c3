"""A DataFrame as JSON text that keeps every column's name, order, dtype and exact value, and back.

Used by ``tests/core/results/test_dataframe_equal.py`` and by ``tests/fixtures/frames/generate.py`` (which writes
the expected frames with the code of an earlier commit). Floats are written with ``repr`` (exact round trip; ``NaN``,
``Infinity`` and ``-0.0`` kept), so two frames are identical exactly when their texts are. Object cells keep
their Python type (``1`` and ``1.0`` and ``True`` differ; ``None`` and ``NaN`` differ).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd


def _cell(v: Any) -> Any:
    if v is None or isinstance(v, bool | int | float | str):
        return v
    if v is pd.NA:
        return {"NA": True}
    if isinstance(v, np.generic):
        return {"np": type(v).__name__, "v": v.item()}
    if isinstance(v, list | tuple):
        return {"seq": type(v).__name__, "v": [_cell(x) for x in v]}
    if isinstance(v, dict):
        return {"dict": [[_cell(k), _cell(x)] for k, x in v.items()]}
    return {"repr": repr(v)}


def encode(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """Each column as ``{"name", "dtype", "values"}``, in order."""
    return [
        {"name": str(name), "dtype": str(frame.dtypes.iloc[i]), "values": [_cell(v) for v in frame.iloc[:, i].tolist()]}
        for i, name in enumerate(frame.columns)
    ]


def dumps(doc: Any) -> str:
    """The canonical text of an encoded document (what the fixtures store and the test compares)."""
    return json.dumps(doc, sort_keys=True, allow_nan=True, separators=(",", ":")) + "\n"


def _value(v: Any) -> Any:
    if isinstance(v, dict):
        if "NA" in v:
            return pd.NA
        if "np" in v:
            return getattr(np, v["np"])(v["v"])
        if "seq" in v:
            items = [_value(x) for x in v["v"]]
            return tuple(items) if v["seq"] == "tuple" else items
        if "dict" in v:
            return {_value(k): _value(x) for k, x in v["dict"]}
    return v


def decode(columns: list[dict[str, Any]]) -> pd.DataFrame:
    """The frame an encoded document describes (for readable failure messages from ``assert_frame_equal``)."""
    data: dict[str, Any] = {}
    for col in columns:
        values = [_value(v) for v in col["values"]]
        dtype = col["dtype"]
        if dtype == "object":
            arr = np.empty(len(values), dtype=object)
            for i, v in enumerate(values):
                arr[i] = v
            data[col["name"]] = pd.Series(arr, dtype=object)
        elif dtype == "boolean":
            data[col["name"]] = pd.array([None if v is pd.NA else v for v in values], dtype="boolean")
        else:
            data[col["name"]] = pd.Series(values, dtype=dtype)
    return pd.DataFrame(data)


def dump_result(data: Any) -> str:
    """A result as JSON with its NaN and infinite values kept (``ProfileResults.save`` writes them as ``null``)."""
    return json.dumps(data.model_dump(), allow_nan=True, separators=(",", ":")) + "\n"


def load_result(path: Path) -> Any:
    """A result written by :func:`dump_result`, validated by the result schema of the code under test."""
    from nsightx._results.schema import ResultData

    return ResultData.model_validate(json.loads(path.read_text(encoding="utf-8")))
