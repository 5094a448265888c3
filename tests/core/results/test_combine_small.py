"""``combine_small`` (a small result's combine, from Python lists) makes what the vectorised ``combine_arrays`` makes.

Issue 35: the after phase of a small GPU call spent most of its build in ``combine_columns``' numpy calls. The
list path must give the very same columns (names, codes and their dtypes, values bit for bit), on every recorded
result and on made-up runs (hypothesis), and the same errors; a result built either way is the same result.
"""

from __future__ import annotations

import operator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import nsightx
from nsightx._results import combinecols
from nsightx._results.combinecols import combine_arrays
from nsightx._results.combinesmall import combine_small, region_blocks
from nsightx._results.profileresults import build_results
from nsightx._results.records import Record, RegionRun, RunRecords
from nsightx._results.rowparts import parts_from_rows
from nsightx._results.store import RunParts, ValueColumns

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
RESULTS = sorted(
    [
        *(FIXTURES / "gpu-results").glob("*.parquet"),
        *(FIXTURES / "frames").glob("*.result.json"),
        *(FIXTURES / "results").glob("*/result.json"),
    ]
)


def _exact(columns: ValueColumns | None) -> Any:
    """Every field of ``columns`` as plain data, dtypes and float bits included."""
    if columns is None:
        return None
    out: dict[str, Any] = {}
    for name, value in vars(columns).items():
        if hasattr(value, "codes"):
            out[name] = (list(value.names), str(value.codes.dtype), value.codes.tolist())
        else:
            out[name] = (str(value.dtype), value.tobytes())
    return out


def _outcome(fn: Any, *args: Any) -> Any:
    """What ``fn(*args)`` returns as plain data, or the type and message of what it raises."""
    try:
        return _exact(fn(*args))
    except Exception as e:
        return ("raised", type(e).__name__, str(e))


def _both(parts: RunParts, metrics: tuple[str, ...], ignored: set[str], combine: Any) -> tuple[Any, Any]:
    return _outcome(combine_small, parts, metrics, ignored, combine), _outcome(
        combine_arrays, parts, metrics, ignored, combine
    )


def _loop_rows(runs: Any) -> list[Any]:
    """The runs as the run loop hands them over (compact rows; see benchmarks/after_phase.py)."""
    rows = []
    for run in runs:
        regions = tuple((g.annotation, g.host_ns, g.failed) for g in run.regions)
        attributes = {g.annotation: g.attributes for g in run.regions if g.attributes}
        values = tuple((v.name, v.scope, v.config, v.run, v.annotation, v.value) for v in run.collectors)
        rows.append((run.config, run.run, tuple(run.records), regions, attributes, values))
    return rows


@pytest.mark.filterwarnings("ignore::nsightx.IncompleteResultWarning")  # empty.result.json holds no run
@pytest.mark.parametrize("path", RESULTS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_the_list_path_combines_every_recorded_result_as_the_vectorised_one(path: Path) -> None:
    data = nsightx.load(path).data
    metrics = tuple(data.plan.metrics)
    kernels = sorted({r.kernel for run in data.runs for r in run.records})
    checked = 0
    for parts in (RunParts.of(data.runs), parts_from_rows(_loop_rows(data.runs))):
        for ignored in (set(data.plan.ignore_kernel_list), set(kernels[:1])):
            for combine in (operator.add, max, None):
                small, arrays = _both(parts, metrics, ignored, combine)
                assert small == arrays, (path.name, sorted(ignored), combine)
                checked += small is not None
    assert checked or not data.runs


def test_a_sweep_built_through_either_path_is_the_same_result(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    saved = nsightx.load(FIXTURES / "gpu-results" / "sweep-cupti.parquet").data
    configs = [tuple(c) for c in saved.plan.configs]

    def build() -> Any:
        return build_results(
            saved.plan, saved.runs, saved.environment, combine=operator.add, configs=configs, created=saved.created
        )

    small = build()
    monkeypatch.setattr(combinecols, "SMALL_COMBINE", -1)  # every size through the vectorised path
    arrays = build()
    assert small.to_dataframe().equals(arrays.to_dataframe())
    assert small.runs_dataframe().equals(arrays.runs_dataframe())
    assert small.records == arrays.records
    assert small.data == arrays.data
    small.save(tmp_path / "small.json")
    arrays.save(tmp_path / "arrays.json")
    assert (tmp_path / "small.json").read_bytes() == (tmp_path / "arrays.json").read_bytes()


NAMES = st.sampled_from(["a", "b", "c"])
KERNELS = st.sampled_from(["k1", "k2", "k3|x"])
METRICS = ["t", "m", "z"]
VALUES = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True, width=64), st.integers(-5, 5).map(float), st.just(-0.0)
)
UNITS = st.sampled_from(["ns", "us", None])
RECORD = st.tuples(NAMES, KERNELS, st.sampled_from(METRICS), VALUES, UNITS, st.integers(0, 3))
RUN = st.tuples(
    st.integers(0, 2),
    st.integers(0, 2),
    st.lists(RECORD, max_size=5),
    st.lists(st.tuples(NAMES, st.booleans()), max_size=3),
)


def _runs(made: list[Any]) -> list[RunRecords]:
    out = []
    for config, run, records, regions in made:
        recs = tuple(Record(a, config, run, k, m, v, u, s) for a, k, m, v, u, s in records)
        regs = tuple(RegionRun(a, config, run, 5, failed) for a, failed in regions)
        out.append(RunRecords(config, run, recs, regs))
    return out


def _failing(a: float, b: float) -> float:
    if a > 2:
        raise ValueError("too big")
    return a + b


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    made=st.lists(RUN, max_size=8),
    metrics=st.permutations(METRICS).flatmap(lambda p: st.integers(1, 3).map(lambda n: tuple(p[:n]))),
    ignored=st.sets(st.sampled_from(["k1", "k2", "k3|x"]), max_size=2),
    combine=st.sampled_from([operator.add, max, None, _failing, lambda a, b: "many"]),
)
def test_the_list_path_combines_made_up_runs_as_the_vectorised_one(
    made: list[Any], metrics: tuple[str, ...], ignored: set[str], combine: Any
) -> None:
    runs = _runs(made)
    for parts in (RunParts.of(runs), parts_from_rows(runs)):
        small, arrays = _both(parts, metrics, ignored, combine)
        assert small == arrays


def test_a_small_result_takes_the_list_path_and_a_large_one_the_arrays(monkeypatch: pytest.MonkeyPatch) -> None:
    taken: list[str] = []
    monkeypatch.setattr(combinecols, "combine_small", lambda *a: taken.append("small"))
    monkeypatch.setattr(combinecols, "combine_arrays", lambda *a: taken.append("arrays"))

    def runs(n: int) -> RunParts:
        record, region = Record("a", 0, 0, "k", "t", 1.0, "ns", 0), RegionRun("a", 0, 0, 5, False)
        return RunParts.of([RunRecords(0, 0, (record,), (region,)) for _ in range(n)])

    combinecols.combine_columns(runs(3), ("t",), (), None)
    combinecols.combine_columns(runs(300), ("t",), (), None)
    assert taken == ["small", "arrays"]


BLOCK = st.tuples(st.lists(st.tuples(KERNELS, VALUES, UNITS, st.integers(0, 3)), min_size=1, max_size=3), st.booleans())
"""One region execution and its records of one metric: (kernel, value, unit, seq) each; whether it failed."""


def _block_runs(made: list[Any], swap: bool) -> list[RunRecords]:
    """Runs whose records come region by region (cupti's shape); ``swap``: the last run's blocks swapped."""
    out = []
    for i, blocks in enumerate(made):
        config, run = divmod(i, 3)
        names = [f"r{j}" for j in range(len(blocks))]
        if swap and i == len(made) - 1:
            names = names[::-1]
        recs = tuple(
            Record(name, config, run, k, "t", v, u, s)
            for name, (records, _) in zip(names, blocks, strict=True)
            for k, v, u, s in records
        )
        regs = tuple(RegionRun(f"r{j}", config, run, 5, failed) for j, (_, failed) in enumerate(blocks))
        out.append(RunRecords(config, run, recs, regs))
    return out


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    made=st.lists(st.lists(BLOCK, min_size=1, max_size=3), min_size=1, max_size=6),
    swap=st.booleans(),
    metrics=st.sampled_from([("t",), ("m", "t"), ("m",)]),
    ignored=st.sets(st.sampled_from(["k1", "k2", "k3|x"]), max_size=1),
    combine=st.sampled_from([operator.add, max, None, _failing, lambda a, b: "many"]),
)
def test_records_in_blocks_per_region_combine_as_the_vectorised_path(
    made: list[Any], swap: bool, metrics: tuple[str, ...], ignored: set[str], combine: Any
) -> None:
    """The records of a GPU backend come region by region (several kernels in some): combine_small folds each
    block (region_blocks) where the shape allows it, and makes what the vectorised path makes, shape or not."""
    runs = _block_runs(made, swap)
    for parts in (RunParts.of(runs), parts_from_rows(runs)):
        small, arrays = _both(parts, metrics, ignored, combine)
        assert small == arrays
    used = {r.kernel for run in runs for r in run.records}
    shaped = not ignored & used and not any(failed for blocks in made for _, failed in blocks)
    shaped = shaped and not (swap and len(made[-1]) > 1)
    assert (region_blocks(RunParts.of(runs), ignored) is not None) == shaped


def test_the_sweep_is_combined_block_by_block() -> None:
    """cupti's sweep (one config of two kernels a region) takes the block path, with the vectorised columns."""
    data = nsightx.load(FIXTURES / "gpu-results" / "sweep-cupti.parquet").data
    parts = parts_from_rows(_loop_rows(data.runs))
    starts = region_blocks(parts, set())
    assert starts is not None and len(starts) == parts.regions.n < parts.records.n
    small, arrays = _both(parts, tuple(data.plan.metrics), set(), operator.add)
    assert small == arrays
