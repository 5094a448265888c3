"""The few-rows paths of a small result's columns give what the general paths give (issue 35, the after phase).

A call of a few configs and runs reads its columns through Python loops over lists (``store.SMALL``): a column of
one string is made without a dictionary call per item (``_small_text``), and a run of one region hands its
attributes over without a generator (``rowgather._extend_attributes``); a deferred session's few record rows are
read in one transposition (``rowgather._output_columns``). Each is checked here against the numpy path (the
one large results take) on every recorded fixture and on rows hypothesis makes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import nsightx
from nsightx._results import rowgather, store
from nsightx._results.records import Record
from nsightx._results.rowparts import parts_from_rows
from nsightx._results.store import Encoder, RecordColumns, RunParts, Text

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
RESULTS = sorted(
    [*FIXTURES.glob("frames/*.result.json"), *FIXTURES.glob("gpu-results/*.parquet")], key=lambda p: p.name
)


def _columns(obj: Any) -> dict[str, Any]:
    """Every field of a columns dataclass as plain data (a Text as its codes, their type and its names)."""
    out: dict[str, Any] = {}
    for name, value in vars(obj).items():
        if isinstance(value, Text):
            out[name] = (str(value.codes.dtype), value.codes.tolist(), list(value.names))
        elif isinstance(value, np.ndarray):
            out[name] = (str(value.dtype), [repr(x) for x in value.tolist()])
        else:
            out[name] = value
    return out


def _same(got: RunParts, want: RunParts) -> None:
    for part in ("runs", "records", "regions", "collectors"):
        assert _columns(getattr(got, part)) == _columns(getattr(want, part)), part


def _loop_rows(runs: Any) -> list[tuple[Any, ...]]:
    """The runs as the run loop hands them to the sink: compact rows (records as objects, values as tuples)."""
    rows = []
    for run in runs:
        regions = tuple((g.annotation, g.host_ns, g.failed) for g in run.regions)
        attributes = {g.annotation: g.attributes for g in run.regions if g.attributes}
        values = tuple((v.name, v.scope, v.config, v.run, v.annotation, v.value) for v in run.collectors)
        rows.append((run.config, run.run, tuple(run.records), regions, attributes, values))
    return rows


@pytest.mark.filterwarnings("ignore:.*planned runs")  # empty.result.json holds none of its runs
@pytest.mark.parametrize("path", RESULTS, ids=lambda p: p.name)
def test_small_columns_of_a_fixture_are_the_numpy_columns(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    runs = nsightx.load(path).data.runs
    rows = _loop_rows(runs)
    small = parts_from_rows(rows)
    _same(small, RunParts.of(list(runs)))
    monkeypatch.setattr(store, "SMALL", -1)  # every column through the Encoder (the path of large results)
    _same(small, parts_from_rows(rows))


NAMES = st.sampled_from(["work", "gemm", "a", None, "é", ""])


@settings(max_examples=200, deadline=None)
@given(st.lists(NAMES, max_size=40) | st.lists(NAMES, min_size=1, max_size=1).map(lambda one: one * 30))
def test_small_text_is_the_encoder_text(items: list[str | None]) -> None:
    small = store._small_text(iter(items))
    enc = Encoder()
    codes = enc.encode(iter(items), len(items))
    assert small.names == enc.values
    assert small.codes.dtype == store.code_type(len(enc.values))
    assert small.codes.tolist() == codes.tolist()


def _reference_attributes(rows: list[Any]) -> list[Any] | None:
    """What ``_attributes`` gave before its one-region path: per region, its attributes or ``{}``."""
    out: list[Any] = []
    for row in rows:
        if type(row[4]) is list:
            out.extend(row[4])
        else:
            out.extend(row[4].get(name) or {} for name, _, _ in row[3])
    return out if any(out) else None


_REGION = st.tuples(st.sampled_from(["a", "b", "c"]), st.integers(0, 99), st.booleans())
_ATTRS = st.dictionaries(st.sampled_from(["a", "b", "c"]), st.dictionaries(st.sampled_from(["x", "y"]), st.integers()))
_ROW = st.tuples(st.lists(_REGION, max_size=3), _ATTRS, st.booleans()).map(
    lambda t: (0, 0, (), tuple(t[0]), [t[1].get(g[0], {}) for g in t[0]] if t[2] else t[1], ())
)


@settings(max_examples=200, deadline=None)
@given(st.lists(_ROW, max_size=12))
def test_region_attributes_are_those_of_every_region(rows: list[Any]) -> None:
    assert parts_from_rows(rows).regions.attributes == _reference_attributes(rows)


_RECORD = st.tuples(
    st.sampled_from(["a", "b"]),
    st.integers(0, 3),
    st.integers(0, 5),
    st.sampled_from(["k1", "k2"]),
    st.sampled_from(["m", "n"]),
    st.floats(allow_nan=False),
    st.sampled_from(["ns", None]),
    st.integers(0, 2),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.tuples(_RECORD, st.booleans()), max_size=4), max_size=10))
def test_record_columns_of_rows_objects_or_both_are_those_of_the_objects(runs: list[list[Any]]) -> None:
    """Records as tuples (the host session), as ``Record`` objects (GPU backends) or mixed: the same columns."""
    rows = [(0, i, tuple(Record(*r) if obj else r for r, obj in run), (), {}, ()) for i, run in enumerate(runs)]
    objects = [Record(*r) for run in runs for r, _ in run]
    assert _columns(parts_from_rows(rows).records) == _columns(RecordColumns.of(objects))


def _gathered_columns(records: list[Any]) -> RecordColumns:
    """The records' columns through a fresh ``Gather``'s lists, field by field (what ``with_outputs`` did)."""
    gather = rowgather.Gather(collectors=False)
    gather._add_records(records)
    return gather._record_columns()


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(_RECORD, st.booleans()), max_size=12)
    | st.lists(_RECORD, min_size=1, max_size=3).map(lambda few: [(r, False) for r in few] * 200),
    st.sampled_from([None, 7, 9]),
)
def test_output_columns_are_those_of_a_gather(records: list[Any], odd: int | None) -> None:
    """``with_outputs``' records columns, read in one transposition, are the gathered ones: rows, objects, mixed,
    more than ``SMALL``; a row of another length raises or is read as a gather reads it."""
    items: list[Any] = [Record(*r) if obj else r for r, obj in records]
    if odd is not None and items:
        items[-1] = (*records[-1][0], "extra")[:odd]
    try:
        want = _columns(_gathered_columns(list(items)))
    except IndexError:  # a row too short for a gather
        with pytest.raises(IndexError):
            rowgather._output_columns(items)
        return
    assert _columns(rowgather._output_columns(items)) == want
