"""Collector statistics land on their own config when several rows of a config share its runs.

A derived metric's rows come after all measured rows, so a result's groups (annotation, metric, config) ascend
while every config has two groups that see the same runs. The frame computes each collector statistic once per
class of such groups (``groupshare.shared_groups``); the classes' ids need not ascend. 22b7625 to fd6e7b0 took
them for consecutive rows (``groupstats._even``) and put a config's clocks, power and temperatures on another
config, without a word, from three configs up.
"""

from __future__ import annotations

import numpy as np
import pytest
from _synthetic import HOST_METRIC, host_plan
from hypothesis import given, settings
from hypothesis import strategies as st

from nsightx._results.groupstats import moments
from nsightx._results.profileresults import build_results
from nsightx._results.records import CollectorValue, Record, RegionRun, RunRecords


def doubled(t: float, n: int) -> tuple[float, str]:
    """A derived metric (its rows are appended after the measured ones)."""
    return 2.0 * t, "ns"


def power(config: int, run: int) -> float:
    """A RUN collector value that tells its config and run apart."""
    return 100.0 * (config + 1) + run


def _result(configs: int, runs: int, derive: bool) -> object:
    measured = []
    for c in range(configs):
        for r in range(runs):
            value = 50.0 + c + r
            record = Record(
                annotation="a", config=c, run=r, kernel="k", metric=HOST_METRIC, value=value, seq=0, unit="ns"
            )
            collector = CollectorValue(name="PowerW", scope="run", config=c, run=r, value=power(c, r))
            region = RegionRun(annotation="a", config=c, run=r, host_ns=1000)
            measured.append(RunRecords(config=c, run=r, records=(record,), regions=(region,), collectors=(collector,)))
    plan = host_plan([(c,) for c in range(configs)], runs, derive_metric="doubled" if derive else None)
    return build_results(
        plan, measured, {"GPU": "x"}, derive_metric=doubled if derive else None, created="2026-12-06T00:00:00+00:00"
    )


def _check(frame: object, runs: int) -> None:
    for _, row in frame.iterrows():  # type: ignore[attr-defined]
        values = [power(row["n"], r) for r in range(runs)]
        assert row["PowerW_Avg"] == sum(values) / runs, (row["Metric"], row["n"])
        assert row["PowerW_Min"] == min(values)
        assert row["PowerW_Max"] == max(values)


@pytest.mark.parametrize("configs", [2, 3, 4, 7])
def test_a_derived_metrics_sweep_keeps_each_configs_collector_statistics(configs: int) -> None:
    frame = _result(configs, 4, derive=True).to_dataframe()  # type: ignore[attr-defined]
    assert len(frame) == 2 * configs
    _check(frame, 4)


@settings(max_examples=40, deadline=None)
@given(configs=st.integers(1, 8), runs=st.integers(1, 6), derive=st.booleans())
def test_collector_statistics_follow_their_config(configs: int, runs: int, derive: bool) -> None:
    _check(_result(configs, runs, derive).to_dataframe(), runs)  # type: ignore[attr-defined]


def test_moments_of_groups_whose_ids_do_not_ascend() -> None:
    values = np.array([[5.0], [6.0], [1.0], [2.0]])
    got = moments(values, np.array([1, 1, 0, 0]), 2, ascending=True)  # the groups' kind, not the ids' order
    assert got.mean[:, 0].tolist() == [1.5, 5.5]
    assert got.minimum[:, 0].tolist() == [1.0, 5.0]
    assert got.maximum[:, 0].tolist() == [2.0, 6.0]
