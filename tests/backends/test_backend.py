"""The backend contract's shared option check: every first-party backend refuses backend_options it does not know."""

from __future__ import annotations

import pytest

import nsightx
from nsightx import ConfigError
from nsightx._run.plan import Plan, ThermalSettings

BACKENDS = ("host", "events", "cupti", "ncu")


def _plan(backend: str, options: dict[object, object]) -> Plan:
    return Plan(
        function=lambda: None,
        function_name="f",
        params=(),
        configs=((),),
        runs=1,
        warmup=0,
        metrics=("gpu__time_duration.sum",) if backend != "host" else ("host__time_duration.sum",),
        backend=backend,
        thermal=ThermalSettings(mode="off"),
        backend_options=options,
    )


@pytest.mark.parametrize("name", BACKENDS)
def test_every_backend_refuses_an_unknown_option_key(plugin_host, name):
    cls = plugin_host.backends[name]
    with pytest.raises(ConfigError, match="no_such_option"):
        cls().validate(_plan(name, {"no_such_option": 1}))


def test_host_backend_says_it_takes_no_options(plugin_host):
    with pytest.raises(ConfigError, match=r"\[1, 'b'\] are not understood by the host backend, which takes no"):
        plugin_host.backends["host"]().validate(_plan("host", {"b": 1, 1: 2}))


def test_unknown_host_option_fails_before_the_function_runs(plugin_host, tmp_path):
    calls = []

    @nsightx.analyze.kernel(
        configs=[1],
        runs=1,
        backend="host",
        backend_options={"cache_flush": True},
        verbosity=nsightx.VerbosityLevel.SILENT,
    )
    def work(n):
        calls.append(n)
        with nsightx.annotate("a"):
            pass

    with pytest.raises(ConfigError, match="cache_flush"):
        work()
    assert calls == []
