"""A failed region has no record on the host backend, as on every backend (fix20, found by hunt20b).

docs/api.md (the backend contract) and docs/plugins.md: a region that raised and whose exception
``ignore_failures`` swallowed gets no ``Record``; the core shows its values as NaN with ``Kernel="failed"``. The
events, cupti and ncu backends skip such a region; the host backend wrote one holding the region's host time, by
each of its three paths: :meth:`HostSession.region_timed` (the run loop's timed regions), :meth:`region_exit`
(a caller driving the session itself), and the run block (:class:`~nsightx._results.runblock.RunBlock`, from
``BLOCK_MIN_RUNS`` runs of a config). That time reached ``records``, the raw file and the saved files, while the
frames showed NaN. These tests run the smallest program that shows it through each path.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import pytest
from nsightx_host import HostSession

import nsightx
from nsightx._results.records import RegionId
from nsightx._run import loop

SILENT = nsightx.VerbosityLevel.SILENT


def call(runs: int, folder: Path | None) -> Any:
    """``runs`` runs of one config: region ``a`` passes, region ``b`` raises inside ``ignore_failures``.

    ``folder``: where the raw file goes; ``None``: no raw file (the runs are kept in memory, 130 of them in a
    run block).
    """
    prefix = None if folder is None else f"{folder}/"

    @nsightx.analyze.kernel(configs=[1], runs=runs, warmup=0, backend="host", verbosity=SILENT, output_prefix=prefix)
    def f(x: int) -> None:
        with nsightx.annotate("a"):
            pass
        with nsightx.annotate("b", ignore_failures=True):
            raise ValueError("swallowed")

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # the swallowed failure's warning
        return f()


def keys(result: Any) -> list[tuple[str, int, int]]:
    """(annotation, config, run) of every record of ``result``."""
    return [(r.annotation, r.config, r.run) for r in result.records]


@pytest.mark.parametrize(("runs", "raw"), [(1, True), (130, True), (130, False)], ids=["one", "raw", "run-block"])
def test_a_failed_host_region_has_no_record_in_memory_nor_in_any_file(runs: int, raw: bool, tmp_path: Path) -> None:
    result = call(runs, tmp_path / "out" if raw else None)
    want = [("a", 0, r) for r in range(runs)]
    assert keys(result) == want
    assert [[x.annotation for x in run.records] for run in result.data.runs] == [["a"]] * runs
    files = sorted((tmp_path / "out").glob("raw_data-*.jsonl"))
    assert len(files) == raw
    for ext in ("json", "parquet"):
        result.save(tmp_path / f"saved.{ext}")
    for path in (*files, tmp_path / "saved.json", tmp_path / "saved.parquet"):
        assert keys(nsightx.load(path)) == want, path.name
    # the frames are as before: b is NaN, failed, no run counted
    frame = result.to_dataframe().set_index("Annotation")
    assert frame.loc["b", "Kernel"] == "failed" and frame.loc["b", "NumRuns"] == 0
    assert frame["AvgValue"].isna().tolist() == [False, True]
    assert frame.loc["a", "NumRuns"] == runs
    runs_frame = result.runs_dataframe()
    failed = runs_frame[runs_frame["Annotation"] == "b"]
    assert len(failed) == runs and failed["Value"].isna().all() and (failed["Kernel"] == "failed").all()


def test_a_run_block_whose_runs_fail_now_and_then_counts_the_records_of_each_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The block's columns (``RunBlock.parts``) and its rows (``RunBlock.rows``) agree when some runs' b failed."""
    monkeypatch.setattr(loop, "BLOCK_MIN_RUNS", 1)
    seen = [0]

    @nsightx.analyze.kernel(configs=[1], runs=9, warmup=0, backend="host", verbosity=SILENT)
    def f(x: int) -> None:
        seen[0] += 1
        with nsightx.annotate("b", ignore_failures=True):
            if seen[0] % 3 == 0:
                raise ValueError("swallowed")
        with nsightx.annotate("a"):
            pass

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        result = f()
    want = [(name, 0, r) for r in range(9) for name in (("a",) if r % 3 == 2 else ("b", "a"))]
    assert keys(result) == want
    assert [len(run.records) for run in result.data.runs] == [1 if r % 3 == 2 else 2 for r in range(9)]
    result.save(tmp_path / "saved.parquet")
    assert keys(nsightx.load(tmp_path / "saved.parquet")) == want
    assert result.to_dataframe().set_index("Annotation")["NumRuns"].to_dict() == {"b": 6, "a": 9}


def test_a_host_session_driven_by_region_exit_makes_no_record_of_a_failed_region() -> None:
    session = HostSession()
    for name, failed in (("a", False), ("b", True)):
        session.region_enter(RegionId(name, 0, 0))
        session.region_exit(RegionId(name, 0, 0), failed)
    session.region_timed("c", 0, 0, 5, False)
    session.region_timed("d", 0, 0, 5, True)
    rows = session.finish_run(0, 0).record_rows
    assert [row[0] for row in rows] == ["a", "c"]
