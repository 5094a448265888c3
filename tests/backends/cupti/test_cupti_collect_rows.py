"""The cupti session's collection hands its records over as record rows (issue 35): the same records, attributes
and errors as the :class:`Record` path, on every captured fixture and on made-up batches."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any

import _paths
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from nsightx_cupti._attribution import (
    METRIC,
    ActivityBatch,
    ApiActivity,
    KernelActivity,
    RegionWindow,
    attribute,
    batch_from_json,
    group_windows,
    incomplete,
    region_attributes,
    to_run_output,
    to_run_outputs,
)
from nsightx_cupti._names import kernel_base_name
from nsightx_cupti._session import CuptiSession

from nsightx._errors import MeasurementError
from nsightx.ext import new_record

ROOT = _paths.FIXTURES / "cupti"
ALL = sorted([*ROOT.glob("*.json"), *(ROOT / "api_always").glob("*.json")])


class Replay:
    """Hands one batch back from ``collect`` (CUPTI's flush is the library boundary)."""

    def __init__(self, batch: ActivityBatch) -> None:
        self.batch = batch
        self.api_tracing = "region"

    def collect(self) -> ActivityBatch:
        return self.batch


class NoDevice:
    def synchronize(self) -> None:
        pass


def _as_runs(windows: list[RegionWindow], runs: int) -> list[RegionWindow]:
    """The fixture's windows spread over ``runs`` runs of config 0 (same external ids: the same kernels)."""
    return [dataclasses.replace(w, run=i % runs) for i, w in enumerate(windows)]


@pytest.mark.parametrize("path", ALL, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_rows_are_the_records_on_every_fixture(path: Path) -> None:
    batch, windows, _ = batch_from_json(path.read_text(encoding="utf-8"))
    attribution = attribute(batch, windows)
    by_run = {(0, 0): windows, (0, 1): []}
    as_records = to_run_outputs(attribution, by_run)
    as_rows = to_run_outputs(attribution, by_run, rows=True)
    assert as_rows.keys() == as_records.keys()
    for key, out in as_records.items():
        rows = as_rows[key]
        assert rows.records == [] and [new_record(*r) for r in rows.record_rows] == out.records
        assert rows.region_attributes == out.region_attributes
    assert as_records[(0, 0)].records == to_run_output(attribution, windows).records


@pytest.mark.parametrize("path", ALL, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_the_session_collects_rows_equal_to_the_attributed_records(path: Path) -> None:
    batch, windows, _ = batch_from_json(path.read_text(encoding="utf-8"))
    windows = _as_runs(windows, 2)
    session = CuptiSession(Replay(batch), NoDevice(), deferred=True)  # type: ignore[arg-type]
    session._windows = list(windows)
    session._finished = [(0, 0), (0, 1), (0, 2)]  # run 2 opened no region: an empty output
    outputs = session.collect_runs()
    expected = to_run_outputs(attribute(batch, windows), {(0, r): [w for w in windows if w.run == r] for r in range(3)})
    for key, out in expected.items():
        got = outputs[key]
        assert [new_record(*r) for r in got.record_rows] == out.records
        assert got.region_attributes == out.region_attributes


def test_an_incomplete_kernel_is_still_an_error_naming_it() -> None:
    batch, windows, _ = batch_from_json((ROOT / "splitk_512.json").read_text(encoding="utf-8"))
    attribution = attribute(batch, windows)
    (mine,) = attribution.by_region.values()
    bad = mine[1].kernel
    batch.kernels[batch.kernels.index(bad)] = broken = bad._replace(end=bad.start - 1)
    assert incomplete(attribute(batch, windows), batch) == broken
    session = CuptiSession(Replay(batch), NoDevice(), deferred=True)  # type: ignore[arg-type]
    session._windows, session._finished = list(windows), [(0, 1)]
    with pytest.raises(MeasurementError, match=r"incomplete record for kernel .*end=\d+\)"):
        session.collect_runs()


def test_an_incomplete_kernel_outside_every_region_is_no_error() -> None:
    batch, windows, _ = batch_from_json((ROOT / "splitk_512.json").read_text(encoding="utf-8"))
    attribution = attribute(batch, windows)
    placed = {a.kernel for ks in attribution.by_region.values() for a in ks}
    outside = next(k for k in batch.kernels if k not in placed)
    batch.kernels[batch.kernels.index(outside)] = outside._replace(start=0)
    assert incomplete(attribute(batch, windows), batch) is None


kernels = st.lists(
    st.tuples(st.integers(1, 6), st.integers(1, 50), st.integers(0, 3), st.integers(1, 3)),
    max_size=12,
)


@settings(max_examples=200, deadline=None)
@given(kernels)
def test_each_region_is_in_launch_order_and_incomplete_finds_the_first_bad_one(
    spec: list[tuple[int, int, int, int]],
) -> None:
    """Made-up batches (regions 1-3 by external id, correlation ids and starts that tie): each region's kernels in
    the order a stable sort by (correlation id, start, graph node) gives; the check finds the first broken one."""
    batch = ActivityBatch()
    for i, (corr, start, node, region) in enumerate(spec):
        end = start + 5 if i % 5 else start - 1  # every fifth kernel's record is incomplete
        batch.kernels.append(KernelActivity(f"k{i}", start, end, corr, graph_node_id=node))
        batch.externals[corr] = batch.externals.get(corr, region)
    windows = [RegionWindow(r, f"r{r}", 0, 0, 10 * r, 10 * r + 5) for r in (1, 2, 3)]
    attribution = attribute(batch, windows)
    for placed in attribution.by_region.values():
        order = [a.kernel for a in placed]
        assert order == sorted(order, key=lambda k: (k.correlation_id, k.start, k.graph_node_id))
    broken = [a.kernel for ks in attribution.by_region.values() for a in ks if a.kernel.end < a.kernel.start]
    assert incomplete(attribution, batch) == (broken[0] if broken else None)


@pytest.mark.parametrize("path", ALL, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_attribute_says_whether_the_kernels_it_placed_are_whole(path: Path) -> None:
    """``Attribution.whole`` spares :func:`incomplete` its scan; an attribution that does not say still gets it."""
    batch, windows, _ = batch_from_json(path.read_text(encoding="utf-8"))
    attribution = attribute(batch, windows)
    assert attribution.whole is True and incomplete(attribution, batch) is None
    placed = [a.kernel for ks in attribution.by_region.values() for a in ks]
    outside = [k for k in batch.kernels if k not in set(placed)]
    for k in outside:  # incomplete records outside every region: still whole
        batch.kernels[batch.kernels.index(k)] = k._replace(start=0)
    assert attribute(batch, windows).whole is True
    bad = placed[-1]
    batch.kernels[batch.kernels.index(bad)] = broken = bad._replace(end=bad.start - 1)
    attribution = attribute(batch, windows)
    assert attribution.whole is False and incomplete(attribution, batch) == broken
    assert incomplete(dataclasses.replace(attribution, whole=None), batch) == broken


regions = st.lists(
    st.tuples(
        st.integers(0, 3),  # kernels in the region
        st.integers(-1, 40),  # the first kernel's start (0 or less: an incomplete record)
        st.integers(-3, 60),  # its duration (negative: an incomplete record)
        st.booleans(),  # launched by another thread (the window rule)
        st.integers(0, 2),  # graph id
        st.booleans(),  # the region failed
        st.booleans(),  # its kernels on two streams
    ),
    min_size=1,
    max_size=4,
)


def _reference_rows(attribution: Any, windows: list[RegionWindow]) -> list[tuple[Any, ...]]:
    """One record row per kernel of each region that did not fail, in its order: its duration, NaN if incomplete."""
    out = []
    for w in windows:
        for seq, (k, _) in enumerate(attribution.by_region.get(w.external_id, ()) if not w.failed else ()):
            value = float(k.end - k.start) if k.end >= k.start > 0 else math.nan
            out.append((w.annotation, w.config, w.run, kernel_base_name(k.name), METRIC, value, "ns", seq))
    return out


@settings(max_examples=300, deadline=None)
@given(regions, st.booleans())
def test_outputs_of_one_and_two_kernel_regions_are_those_of_region_attributes(
    spec: list[tuple[int, int, int, bool, int, bool, bool]], want: bool
) -> None:
    """The one- and two-kernel regions read inline give the attributes :func:`region_attributes` gives (same keys,
    order, values and types) and the records of one per kernel in its order, whatever the rule, graph, streams,
    failure or record (a kernel's duration, NaN for an incomplete one)."""
    batch, windows, corr = ActivityBatch(), [], 1
    for i, (count, start, duration, other, graph, failed, streams) in enumerate(spec):
        ext, enter = i + 1, 1000 * (i + 1)
        windows.append(RegionWindow(ext, f"r{i % 3}", 0, i // 3, enter, enter + 50, 1, failed))
        for j in range(count):
            s = enter + start + 10 * j if start > 0 else start
            stream = 7 + j % 2 if streams else 7
            batch.kernels.append(KernelActivity(f"_Z1kv{j}", s, s + duration - 3 * j, corr, stream, graph_id=graph))
            batch.apis[corr] = ApiActivity(corr, enter + 1, enter + 2)
            if not other:
                batch.externals[corr] = ext
            corr += 1
    attribution = attribute(batch, windows)
    metrics = (METRIC,) if want else ("other",)
    got = to_run_outputs(attribution, {"run": windows}, metrics, rows=True)["run"]
    attributes: dict[str, dict[str, object]] = {}
    for w in windows:
        attributes[w.annotation] = region_attributes(w, attribution.by_region[w.external_id])
    assert repr(got.region_attributes) == repr(attributes)  # repr: the keys' order and bool against int count
    expected = _reference_rows(attribution, windows) if want else []
    assert repr(got.record_rows) == repr(expected)  # repr: NaN equals NaN, float against int
    objects = to_run_outputs(attribution, {"run": windows}, metrics)["run"].records
    assert repr(objects) == repr([new_record(*r) for r in expected])


@pytest.mark.parametrize("path", ALL, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_windows_grouped_before_the_wait_attribute_as_those_grouped_after(path: Path) -> None:
    """The session groups its windows before the GPU wait (group_windows): the same attribution and groups."""
    batch, windows, _ = batch_from_json(path.read_text(encoding="utf-8"))
    windows = _as_runs(windows, 2)
    grouped = group_windows(windows, [(0, 0), (0, 1), (0, 2)])
    assert grouped.count == len(windows)
    assert grouped.by_run == {(0, r): [w for w in windows if w.run == r] for r in range(3)}
    ahead = attribute(batch, windows, ahead=grouped)
    assert ahead.by_region is grouped.by_region
    assert repr(ahead) == repr(attribute(batch, windows))
    for count_outside in (False, True):
        again = attribute(batch, windows, count_outside=count_outside, ahead=group_windows(windows, []))
        assert repr(again) == repr(attribute(batch, windows, count_outside=count_outside))


class LateRegion(Replay):
    """A region closes on another thread while the session waits (its window comes after the windows were grouped)."""

    def __init__(self, batch: ActivityBatch, session: list[CuptiSession], late: RegionWindow) -> None:
        super().__init__(batch)
        self.session, self.late = session, late

    def collect(self) -> ActivityBatch:
        self.session[0]._windows.append(self.late)
        return self.batch


def test_a_window_added_during_the_wait_is_collected_as_before() -> None:
    batch, windows, _ = batch_from_json((ROOT / "two_regions.json").read_text(encoding="utf-8"))
    windows = _as_runs(windows, 2)
    *early, late = windows
    holder: list[CuptiSession] = []
    session = CuptiSession(LateRegion(batch, holder, late), NoDevice(), deferred=True)  # type: ignore[arg-type]
    holder.append(session)
    session._windows, session._finished = list(early), [(0, 0), (0, 1)]
    outputs = session.collect_runs()
    expected = to_run_outputs(attribute(batch, windows), {(0, r): [w for w in windows if w.run == r] for r in (0, 1)})
    assert outputs.keys() == expected.keys()
    for key, out in expected.items():
        assert [new_record(*r) for r in outputs[key].record_rows] == out.records
        assert outputs[key].region_attributes == out.region_attributes
    assert session._windows == []
