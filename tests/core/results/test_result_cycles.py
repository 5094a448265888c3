"""A result and what it builds are freed by reference counting, not left to the cyclic garbage collector.

Each ``to_dataframe()`` once left its table, columns and collector tables in a reference cycle (the table's
cached region view held the table): thousands of objects per call that only a collection could free (~2,060 a
200-run call of a 16 KiB op on the H100, session 27). Here every use a user makes of a result (frames, the
per-run frame, records, save, load) must leave no object of nsightx's in a cycle.
"""

from __future__ import annotations

import gc
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

import nsightx
from nsightx._results.table import table_of


@pytest.fixture
def collector_off() -> Iterator[None]:
    """No automatic collection during the test (what it finds is then only what the test's objects left)."""
    was = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        if was:
            gc.enable()


def _cyclic_garbage() -> Counter[str]:
    """The objects only a collection can free now, by type (module.name), freed by this call."""
    gc.set_debug(gc.DEBUG_SAVEALL)
    gc.collect()
    found = Counter(f"{type(o).__module__}.{type(o).__qualname__}" for o in gc.garbage)
    gc.set_debug(0)
    gc.garbage.clear()
    gc.collect()
    return found


def _call() -> nsightx.ProfileResults:
    @nsightx.analyze.kernel(configs=[(1,), (2,)], runs=30, backend="host", verbosity=nsightx.VerbosityLevel.SILENT)
    def timed(n: int) -> None:
        with nsightx.annotate("work"):
            sum(range(n))

    return timed()


def _ours(found: Counter[str]) -> dict[str, int]:
    return {name: n for name, n in found.items() if name.startswith("nsightx")}


def _use(result: nsightx.ProfileResults, path: Path) -> None:
    """What a user does with a result: frames (the second is the cached one), records, save, load."""
    result.to_dataframe()
    result.to_dataframe()
    result.runs_dataframe()
    _ = result.records
    result.save(path)
    loaded = nsightx.load(path)
    loaded.to_dataframe()
    loaded.runs_dataframe()


@pytest.mark.usefixtures("collector_off")
def test_a_result_and_its_frames_leave_no_cycle(tmp_path: Path) -> None:
    _use(_call(), tmp_path / "warm.parquet")  # the first use in a process makes classes and imports: cycles of theirs
    _cyclic_garbage()
    _use(_call(), tmp_path / "r.parquet")
    found = _cyclic_garbage()
    assert _ours(found) == {}
    assert sum(found.values()) < 50, found.most_common(10)  # pyarrow's file metadata is a small cycle of its own


@pytest.mark.usefixtures("collector_off")
def test_the_region_view_does_not_hold_its_table() -> None:
    """The view is cached on the table: a reference back made the cycle (the check fails if it comes back)."""
    warm = table_of(_call().data).regions.annotation  # the first call in a process makes classes and imports
    assert warm.size == 60
    _cyclic_garbage()
    result = _call()
    table = table_of(result.data)
    view = table.regions
    assert view.annotation.tolist() == [0] * view.n
    del result, table, view
    assert _ours(_cyclic_garbage()) == {}
