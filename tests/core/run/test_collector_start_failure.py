"""A collector whose ``start(ctx)`` raised is not asked for values in that call (docs/plugins.md).

It could not start (its sampler, library or device handle), so a value read from it would be a silent wrong
answer and asking it before every run would cost each run for nothing. Its column stays, None for every run (as a
``collect`` that raised leaves it), it is not stopped, and one warning says so. The next call starts it again.
Real host backend, real run loop.
"""

from __future__ import annotations

import warnings
from typing import Any

import pytest

import nsightx
from nsightx import CollectionScope

SILENT = nsightx.VerbosityLevel.SILENT
CONFIGS = [(3,), (5,)]


@pytest.fixture
def no_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    """A plugin host without default sets, so only the collectors under test add columns."""
    from nsightx._pluginhost import plugins as _plugins

    host = _plugins.PluginHost(_plugins.LoaderSettings(autoload=False, blocked=("nvml",))).load()
    monkeypatch.setattr(_plugins, "_default", host)


class Flaky:
    """A collector whose ``start`` raises while ``fail`` is set; it records every call made to it."""

    def __init__(self, name: str, scope: CollectionScope, columns: tuple[str, ...] = ()) -> None:
        self.name, self.scope, self.fail, self.events = name, scope, True, []
        if columns:
            self.columns = columns

    def start(self, ctx: Any) -> None:
        self.events.append("start")
        if self.fail:
            raise OSError("sampler could not open the device")

    def stop(self) -> None:
        self.events.append("stop")

    def collect(self, ctx: Any) -> Any:
        self.events.append("collect")
        return {c: 7 for c in self.columns} if hasattr(self, "columns") else 7


def sweep(collectors: list[Any]) -> Any:
    @nsightx.analyze.kernel(
        configs=CONFIGS,
        runs=3,
        warmup=1,
        backend="host",
        verbosity=SILENT,
        info_collectors=collectors,
        thermal_mode="off",
    )
    def work(n: int) -> None:
        with nsightx.annotate("a"):
            sum(range(n))

    return work()


@pytest.mark.parametrize("scope", [CollectionScope.RUN, CollectionScope.CONFIG, CollectionScope.ONCE])
def test_a_collector_whose_start_raised_is_not_asked_and_its_column_is_none(no_defaults: None, scope: Any) -> None:
    flaky, fine = Flaky("flaky", scope), Flaky("fine", scope)
    fine.fail = False
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        raw = sweep([flaky, fine]).runs_dataframe()
    assert flaky.events == ["start"], "neither collected nor stopped"
    assert fine.events[0] == "start" and fine.events[-1] == "stop" and "collect" in fine.events
    assert raw["flaky"].isna().all() and len(raw) == len(CONFIGS) * 3
    assert (raw["fine"] == 7).all()
    said = [str(w.message) for w in caught if "'flaky'" in str(w.message)]
    assert len(said) == 1, said
    assert "in start()" in said[0] and "OSError" in said[0] and "not asked" in said[0], said[0]


def test_its_declared_columns_are_none_and_the_next_call_starts_it_again(no_defaults: None) -> None:
    flaky = Flaky("flaky", CollectionScope.RUN, columns=("SampleA", "SampleB"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        raw = sweep([flaky]).runs_dataframe()
    assert raw["SampleA"].isna().all() and raw["SampleB"].isna().all()
    assert flaky.events == ["start"]
    flaky.fail = False
    raw = sweep([flaky]).runs_dataframe()
    assert (raw["SampleA"] == 7).all() and (raw["SampleB"] == 7).all()
    assert flaky.events[1] == "start" and flaky.events[-1] == "stop"
