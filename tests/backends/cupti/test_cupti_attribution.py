"""Attribution and conversion, on synthetic activity and on activity captured on the H200 (tests/fixtures/cupti)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import _paths
import pytest
from nsightx_cupti._attribution import (
    METRIC,
    ActivityBatch,
    ApiActivity,
    Attributed,
    Attribution,
    KernelActivity,
    RegionWindow,
    attribute,
    batch_from_json,
    batch_to_json,
    filter_batch,
    region_attributes,
    to_run_output,
)

FIXTURES = _paths.FIXTURES / "cupti"


def _k(name: str, corr: int, start: int, end: int, **kw: int) -> KernelActivity:
    return KernelActivity(name, start, end, corr, **kw)


def _w(ext: int, name: str, enter: int, exit_: int, failed: bool = False) -> RegionWindow:
    return RegionWindow(ext, name, 0, 0, enter, exit_, 1, failed)


def test_external_id_wins_and_kernels_outside_are_not_counted() -> None:
    batch = ActivityBatch(
        kernels=[_k("setup", 1, 10, 20), _k("b", 3, 40, 45), _k("a", 2, 30, 38), _k("after", 4, 60, 61)],
        apis={i: ApiActivity(i, start, start + 1) for i, start in ((1, 5), (2, 25), (3, 26), (4, 55))},
        externals={2: 7, 3: 7},
    )
    att = attribute(batch, [_w(7, "r", 24, 27)])
    assert [a.kernel.name for a in att.by_region[7]] == ["a", "b"]  # launch order, not delivery order
    assert {a.rule for a in att.by_region[7]} == {"external"}
    assert att.outside == 2
    out = to_run_output(att, [_w(7, "r", 24, 27)])
    assert [(r.kernel, r.value, r.seq, r.unit, r.metric) for r in out.records] == [
        ("a", 8.0, 0, "ns", METRIC),
        ("b", 5.0, 1, "ns", METRIC),
    ]
    attrs = out.region_attributes["r"]
    assert attrs["kernel_count"] == 2 and attrs["device_ns"] == 13 and attrs["span_ns"] == 15
    assert attrs["launch_ns"] == 3 and attrs["launch_bound"] is False


def test_other_thread_launch_inside_the_window_belongs_to_the_region() -> None:
    batch = ActivityBatch(
        kernels=[_k("mine", 2, 30, 40), _k("theirs", 3, 41, 50), _k("late", 4, 51, 52)],
        apis={
            2: ApiActivity(2, 21, 22, thread_id=1),
            3: ApiActivity(3, 23, 24, thread_id=2),
            4: ApiActivity(4, 31, 32, thread_id=2),
        },
        externals={2: 5},
    )
    att = attribute(batch, [_w(5, "r", 20, 30)])
    assert [(a.kernel.name, a.rule) for a in att.by_region[5]] == [("mine", "external"), ("theirs", "window")]
    assert att.outside == 1
    assert to_run_output(att, [_w(5, "r", 20, 30)]).region_attributes["r"]["other_thread_kernels"] == 1


def test_stale_external_id_falls_back_to_the_window_rule() -> None:
    batch = ActivityBatch(kernels=[_k("k", 9, 100, 110)], apis={9: ApiActivity(9, 60, 61)}, externals={9: 1})
    assert [a.rule for a in attribute(batch, [_w(2, "r", 50, 70)]).by_region[2]] == ["window"]
    assert attribute(batch, [_w(2, "r", 80, 90)]).outside == 1


def test_kernel_without_any_launch_record_is_reported_untraced() -> None:
    batch = ActivityBatch(kernels=[_k("ghost", 11, 5, 6)])
    att = attribute(batch, [_w(1, "r", 0, 10)])
    assert att.by_region[1] == [] and [k.name for k in att.untraced] == ["ghost"]


def test_failed_region_gives_no_records_but_keeps_attributes() -> None:
    batch = ActivityBatch(kernels=[_k("k", 2, 30, 40)], apis={2: ApiActivity(2, 21, 22)}, externals={2: 3})
    windows = [_w(3, "r", 20, 25, failed=True)]
    out = to_run_output(attribute(batch, windows), windows)
    assert out.records == [] and out.region_attributes["r"]["kernel_count"] == 1


def test_two_regions_and_incomplete_timestamps() -> None:
    batch = ActivityBatch(
        kernels=[_k("x", 1, 0, 0), _k("y", 2, 20, 30)],
        apis={1: ApiActivity(1, 1, 2), 2: ApiActivity(2, 11, 12)},
        externals={1: 1, 2: 2},
    )
    windows = [_w(1, "first", 0, 5), _w(2, "second", 10, 15)]
    out = to_run_output(attribute(batch, windows), windows)
    assert math.isnan(out.records[0].value) and out.records[0].annotation == "first"
    assert out.records[1].annotation == "second" and out.records[1].value == 10.0


def test_region_attributes_of_no_one_and_two_kernels() -> None:
    w = _w(1, "r", 0, 100)
    keys = "kernel_count device_ns span_ns launch_ns launch_bound streams graph_kernels other_thread_kernels".split()
    assert region_attributes(w, []) == dict(zip(keys, (0, 0, 0, 100, False, 0, 0, 0), strict=True))
    one = [Attributed(_k("a", 1, 10, 60, graph_id=3), "window")]
    assert region_attributes(w, one) == dict(zip(keys, (1, 50, 50, 100, True, 1, 1, 1), strict=True))
    two = [Attributed(_k("a", 1, 10, 60), "external"), Attributed(_k("b", 2, 70, 180, stream_id=2), "window")]
    assert region_attributes(w, two) == dict(zip(keys, (2, 160, 170, 100, False, 2, 0, 1), strict=True))
    types = [[type(v) for v in region_attributes(w, ks).values()] for ks in (one, two)]
    assert types[0] == types[1]


def test_json_round_trip_and_filter() -> None:
    batch = ActivityBatch(
        kernels=[_k("k", 2, 30, 40, graph_id=4)],
        apis={2: ApiActivity(2, 21, 22), 8: ApiActivity(8, 1, 2)},
        externals={2: 3, 8: 3},
    )
    windows = [_w(3, "r", 20, 25)]
    small = filter_batch(batch, [2])
    again, w2, meta = batch_from_json(batch_to_json(small, windows, {"scenario": "t"}))
    assert again.kernels == small.kernels and again.apis == small.apis and again.externals == small.externals
    assert w2 == windows and meta == {"scenario": "t"}
    with pytest.raises(ValueError, match="schema"):
        batch_from_json(json.dumps({"schema": 99}))


# --- activity captured on the H200 ---------------------------------------------------------------------------
# tests/fixtures/cupti/*.json: the default mode, launch APIs traced only while a region is open, so kernels
# outside regions have no launch record at all. api_always/: APIs traced for the whole session.

MODES = [pytest.param(FIXTURES, id="api_region"), pytest.param(FIXTURES / "api_always", id="api_always")]


def _fixture(folder: Path, name: str) -> tuple[ActivityBatch, list[RegionWindow], dict[str, object]]:
    return batch_from_json((folder / f"{name}.json").read_text(encoding="utf-8"))


def _regions(folder: Path, name: str) -> dict[str, list[tuple[str, str]]]:
    batch, windows, _ = _fixture(folder, name)
    att = attribute(batch, windows)
    return {w.annotation: [(a.kernel.name, a.rule) for a in att.by_region[w.external_id]] for w in windows}


def _not_counted(att: Attribution) -> int:
    return att.outside + len(att.untraced)


@pytest.mark.parametrize("folder", MODES)
def test_fixture_split_k_512_has_two_kernels_and_excludes_randn(folder: Path) -> None:
    batch, windows, meta = _fixture(folder, "splitk_512")
    att = attribute(batch, windows)
    (w,) = windows
    kernels = att.by_region[w.external_id]
    assert len(kernels) == 2 and {a.rule for a in kernels} == {"external"}
    assert _not_counted(att) == 2  # the two randn kernels drawn before the region
    out = to_run_output(att, windows)
    assert [r.seq for r in out.records] == [0, 1]
    assert all(0 < r.value < 1e6 for r in out.records)
    assert out.region_attributes["matmul"]["kernel_count"] == 2
    assert "split_k" in out.records[1].kernel
    assert meta["GPU"] and "H200" in str(meta["GPU"])


@pytest.mark.parametrize("folder", MODES)
def test_fixture_graph_replay_attributes_every_graph_node(folder: Path) -> None:
    batch, windows, _ = _fixture(folder, "graph_replay")
    att = attribute(batch, windows)
    (w,) = windows
    kernels = [a.kernel for a in att.by_region[w.external_id]]
    assert len(kernels) == 3
    assert all(k.graph_id for k in kernels) and len({k.correlation_id for k in kernels}) == 1
    assert to_run_output(att, windows).region_attributes["replay"]["graph_kernels"] == 3
    assert _not_counted(att) == 1  # x.normal_() before the replay


@pytest.mark.parametrize("folder", MODES)
def test_fixture_second_stream(folder: Path) -> None:
    batch, windows, _ = _fixture(folder, "side_stream")
    att = attribute(batch, windows)
    (w,) = windows
    assert len(att.by_region[w.external_id]) == 2
    assert to_run_output(att, windows).region_attributes["streams"]["streams"] == 2


@pytest.mark.parametrize("folder", MODES)
def test_fixture_other_thread_uses_the_window_rule(folder: Path) -> None:
    rules = sorted(rule for _, rule in _regions(folder, "other_thread")["threaded"])
    assert rules == ["external", "window"]


@pytest.mark.parametrize("folder", MODES)
def test_fixture_two_regions_count_only_their_own_kernel(folder: Path) -> None:
    got = _regions(folder, "two_regions")
    assert len(got["first"]) == 1 and len(got["second"]) == 1
    batch, windows, _ = _fixture(folder, "two_regions")
    assert _not_counted(attribute(batch, windows)) == 3  # rand before, add between, neg after


@pytest.mark.parametrize("folder", MODES)
def test_fixture_kernel_names_become_base_names(folder: Path) -> None:
    batch, windows, _ = _fixture(folder, "two_regions")
    names = {r.kernel for r in to_run_output(attribute(batch, windows), windows).records}
    assert names == {"vectorized_elementwise_kernel"}
