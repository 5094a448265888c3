"""The events backend without a GPU: registration, metric name, availability and options."""

from __future__ import annotations

import importlib.util
import sys
from typing import Any

import pytest
from nsightx_events import _backend
from nsightx_events._backend import METRIC, EventsBackend

from nsightx._errors import ConfigError
from nsightx._run.plan import Plan


def test_registered_with_a_span_metric(plugin_host: Any) -> None:
    cls = plugin_host.backend("events")
    assert cls is EventsBackend
    assert cls.capabilities.default_metrics == (METRIC,)
    assert "span" in METRIC and "kernel" not in METRIC and METRIC != "gpu__time_duration.sum"
    assert cls.capabilities.cost == 20 and cls.capabilities.cache_control == {"all", "none"}


def test_auto_prefers_cupti_over_events(plugin_host: Any) -> None:
    assert plugin_host.backend("cupti").capabilities.cost < EventsBackend.capabilities.cost


def test_availability_without_torch(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "torch" else real(name, *a))
    _backend._probe.cache_clear()
    try:
        avail = EventsBackend.availability()
    finally:
        _backend._probe.cache_clear()
    assert not avail.available and "torch" in avail.reason


def test_availability_does_not_import_torch(monkeypatch: pytest.MonkeyPatch) -> None:
    if "torch" in sys.modules:
        pytest.skip("torch already imported in this process")
    _backend._probe.cache_clear()
    try:
        EventsBackend.availability()
    finally:
        _backend._probe.cache_clear()
    assert "torch" not in sys.modules


def _plan(**kw: Any) -> Plan:
    base: dict[str, Any] = dict(
        function=lambda: None,
        function_name="f",
        params=(),
        configs=((),),
        runs=1,
        warmup=0,
        metrics=(METRIC,),
        backend="events",
    )
    base.update(kw)
    return Plan(**base)


def test_validate() -> None:
    EventsBackend().validate(_plan(backend_options={"flush_bytes": 1 << 27}))
    with pytest.raises(ConfigError, match="not understood"):
        EventsBackend().validate(_plan(backend_options={"buffer_bytes": 1 << 20}))
    with pytest.raises(ConfigError, match="span on its stream"):
        EventsBackend().validate(_plan(metrics=("gpu__time_duration.sum",)))


def test_validate_events_collect() -> None:
    for ok in ("batch", "run"):
        EventsBackend().validate(_plan(backend_options={"events_collect": ok}))
    with pytest.raises(ConfigError, match=r"events_collect.*'batch' or 'run'"):
        EventsBackend().validate(_plan(backend_options={"events_collect": "never"}))
