"""Choosing the backend: "auto" takes only backends that opt in, cheapest first."""

from __future__ import annotations

import pytest

import nsightx
from nsightx import BackendUnavailableError
from nsightx._pluginhost.plugins import LoaderSettings, PluginHost
from nsightx._spec.options import ProfileSpec
from nsightx._spec.select import choose


def cheap_plugin(auto: bool) -> object:
    """A third-party plugin whose backend (the host clock under another name) claims cost 1."""
    from nsightx_host import HostBackend

    class CheapBackend(HostBackend):
        name = "cheap"
        capabilities = HostBackend.capabilities.model_copy(update={"cost": 1, "auto": auto})

    class Cheap:
        @staticmethod
        @nsightx.hookimpl
        def nsightx_register_backends(register):
            register(CheapBackend)

    return Cheap


def plain_sweep() -> list[str]:
    @nsightx.analyze.kernel(configs=[(1,)], runs=2, verbosity=nsightx.VerbosityLevel.SILENT, thermal_mode="off")
    def f(n):
        with nsightx.annotate("a"):
            sum(range(100))

    return f().to_dataframe()["Tool"].tolist()


def test_first_party_backends_take_part_in_auto(plugin_host):
    assert all(cls.capabilities.auto for cls in plugin_host.backends.values())
    costs = {name: cls.capabilities.cost for name, cls in plugin_host.backends.items()}
    assert costs == {"cupti": 10, "events": 20, "host": 50, "ncu": 100}  # the scale docs/plugins.md describes


def test_a_cheap_third_party_backend_without_opt_in_is_not_chosen_by_auto(plugin_host):
    nsightx.register_plugin(cheap_plugin(auto=False), name="cheap")
    assert plain_sweep() == ["host"]


def test_a_cheap_third_party_backend_that_opts_in_is_chosen_by_auto(plugin_host):
    nsightx.register_plugin(cheap_plugin(auto=True), name="cheap")
    assert plain_sweep() == ["cheap"]


def test_a_backend_out_of_auto_is_still_used_when_named(plugin_host):
    nsightx.register_plugin(cheap_plugin(auto=False), name="cheap")
    assert choose(ProfileSpec(backend="cheap"), plugin_host, None).backend.name == "cheap"


def test_auto_says_which_backends_take_no_part():
    host = PluginHost(LoaderSettings(autoload=False, blocked=("host", "cupti", "events", "ncu"))).load()
    host.register(cheap_plugin(auto=False), name="cheap")
    with pytest.raises(BackendUnavailableError, match=r"cheap: takes no part in 'auto' \(name it: backend='cheap'\)"):
        choose(ProfileSpec(), host, None)


def test_backends_command_shows_cost_auto_and_availability(plugin_host, capsys):
    from nsightx._commands.doctor import report
    from nsightx.cli import main

    nsightx.register_plugin(cheap_plugin(auto=False), name="cheap")
    assert main(["backends"]) == 0
    rows = {line.split()[0]: line.split()[1:5] for line in capsys.readouterr().out.splitlines()[2:]}
    assert rows["cheap"] == ["1", "no", "available", "cheap"]
    assert rows["host"] == ["50", "yes", "available", "host"]
    assert rows["cupti"][:2] == ["10", "yes"] and rows["ncu"][:2] == ["100", "yes"]
    assert "(not in 'auto': name it, backend='cheap')" in report(plugin_host)


def no_ncu(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    """Make sure no Nsight Compute is found, on a machine that has one too."""
    from nsightx_ncu import _backend

    monkeypatch.setenv("NSIGHTX_NCU", str(tmp_path / "no-ncu"))
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    monkeypatch.setattr(_backend._locate, "STANDARD_GLOBS", ())


def test_counters_without_ncu_say_what_was_asked_who_could_and_what_to_install(plugin_host, monkeypatch, tmp_path):
    """Issue 38: the 26 counter names were listed once per backend (a wall of text), after the times were measured."""
    no_ncu(monkeypatch, tmp_path)
    ran = []

    @nsightx.analyze.kernel(
        configs=[1], runs=2, counters=nsightx.ROOFLINE_METRICS, verbosity=nsightx.VerbosityLevel.SILENT
    )
    def f(n):
        ran.append(n)
        with nsightx.annotate("a"):
            sum(range(10))

    with pytest.raises(BackendUnavailableError) as info:
        f()
    assert ran == [], "refused before the times were measured"
    message = str(info.value)
    lines = message.splitlines()
    assert lines[0] == (
        "no available backend can deliver counters=[gpu__time_duration.sum, dram__bytes.sum, "
        f"dram__bytes.sum.peak_sustained and {len(nsightx.ROOFLINE_METRICS) - 3} more]:"
    )
    assert [line.split()[0] for line in lines[1:-1]] == ["ncu:", "cupti:", "events:", "host:"]
    assert lines[1].startswith("  ncu: could, but is not available here: no usable Nsight Compute (ncu) found")
    assert lines[1].endswith("install Nsight Compute, put ncu on PATH or set NSIGHTX_NCU")
    assert lines[4] == "  host: measures only [host__time_duration.sum]"
    assert "sm__" not in message, "only the first three counters are named (the others are sm__ ones)"
    assert len(message) < 600


def test_a_named_backend_that_cannot_deliver_lists_a_few_metrics(plugin_host):
    spec = ProfileSpec(backend="host", metrics=tuple(nsightx.ROOFLINE_METRICS))
    with pytest.raises(nsightx.ConfigError) as info:
        choose(spec, plugin_host, None)
    message = str(info.value)
    assert message.startswith("backend 'host' cannot deliver metrics [gpu__time_duration.sum, dram__bytes.sum, ")
    assert "more] (it measures only [host__time_duration.sum]). Backends that can: ncu" in message
    assert len(message) < 300
