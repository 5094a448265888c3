"""A decorated call on a deferred backend that hands its runs back one by one gives the result a mapping one gives.

The run loop writes such a backend's runs while it still waits for later ones, and gathers the result's columns of
finished configs then (their fields into lists, ``rowgather.Gather``); a backend whose ``collect_runs`` returns a
mapping (every third-party backend written before ``completed_runs``) is collected as before. Both backends here
measure the same deterministic values, so the frames, the records and the saved result must be equal.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from _sessions import session_backend

import nsightx
from nsightx._results import rowparts
from nsightx._run import context
from nsightx.ext import RegionId, RunOutput, Session, new_record

METRIC = "sim__span"


class MappingSession(Session):
    """Deferred; each region's value made of its config and run; handed back as a mapping only."""

    deferred = True

    def __init__(self) -> None:
        self.closed: list[tuple[RegionId, bool]] = []
        self.finished: list[tuple[int, int]] = []

    def region_enter(self, region: RegionId) -> None:
        pass

    def region_exit(self, region: RegionId, failed: bool) -> None:
        self.closed.append((region, failed))

    def finish_run(self, config: int, run: int) -> RunOutput:
        self.finished.append((config, run))
        return RunOutput()

    def _read(self) -> Iterator[tuple[tuple[int, int], RunOutput]]:
        finished, self.finished = self.finished, []
        closed, self.closed = self.closed, []
        outputs = {key: RunOutput() for key in finished}
        for region, failed in closed:
            out = outputs.setdefault((region.config, region.run), RunOutput())
            value = 100.0 * (region.config + 1) + region.run % 7
            out.region_attributes[region.annotation] = {"span_ns": int(value)}
            if not failed:
                out.records.append(
                    new_record(region.annotation, region.config, region.run, "k", METRIC, value, "ns", 0)
                )
        yield from outputs.items()

    def collect_runs(self) -> dict[tuple[int, int], RunOutput]:
        return dict(self._read())


class IncrementalSession(MappingSession):
    def completed_runs(self) -> Iterator[tuple[tuple[int, int], RunOutput]]:
        return self._read()


class Plugin:
    @nsightx.hookimpl
    def nsightx_register_backends(self, register: Any) -> None:
        register(session_backend("sim_mapping", METRIC, MappingSession))
        register(session_backend("sim_incremental", METRIC, IncrementalSession))


def _call(backend: str, folder: Path) -> Any:
    calls = {"n": 0}

    @nsightx.analyze.kernel(
        configs=[(n,) for n in (1, 2, 3)],
        runs=70,
        warmup=1,
        backend=backend,
        output_prefix=str(folder) + "/",
        verbosity=nsightx.VerbosityLevel.SILENT,
    )
    def sweep(n: int) -> None:
        calls["n"] += 1
        with nsightx.annotate("a"):
            pass
        with nsightx.annotate("b", ignore_failures=True):
            if calls["n"] % 13 == 0:
                raise ValueError("ignored")

    return sweep()


def test_an_incremental_backend_gives_the_result_a_mapping_backend_gives(
    plugin_host: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pieces: list[int] = []
    add = rowparts.PartsAhead.add

    def counted(self: rowparts.PartsAhead, items: Any) -> None:
        add(self, items)
        pieces.append(self.upto)

    monkeypatch.setattr(rowparts.PartsAhead, "add", counted)
    nsightx.register_plugin(Plugin(), name="sim_overlap")
    try:
        results = []
        for backend in ("sim_mapping", "sim_incremental"):
            monkeypatch.setattr(context, "_clock", itertools.count(0, 1000).__next__)  # the same host times
            results.append(_call(backend, tmp_path / backend))
    finally:
        nsightx.unregister_plugin("sim_overlap")
    mapped, incremental = results
    assert max(pieces) >= 1  # the incremental call's runs were gathered during its waits

    def frame(result: Any, runs: bool) -> pd.DataFrame:
        df = result.runs_dataframe() if runs else result.to_dataframe()
        return df.replace("sim_incremental", "sim_mapping")  # the backend's name is the one difference

    pd.testing.assert_frame_equal(frame(incremental, False), frame(mapped, False))
    pd.testing.assert_frame_equal(frame(incremental, True), frame(mapped, True))
    assert [r.model_dump() for r in incremental.records] == [r.model_dump() for r in mapped.records]
    assert [(r.config, r.run) for r in incremental.data.runs] == [(r.config, r.run) for r in mapped.data.runs]
    assert [r.records for r in incremental.data.runs] == [r.records for r in mapped.data.runs]
