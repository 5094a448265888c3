"""Choosing the backend: "auto" takes only backends that opt in, cheapest first."""

from __future__ import annotations

import pytest

import nsightx
from nsightx import BackendUnavailableError
from nsightx._host.plugins import LoaderSettings, PluginHost
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
    from nsightx._cli.doctor import report
    from nsightx.cli import main

    nsightx.register_plugin(cheap_plugin(auto=False), name="cheap")
    assert main(["backends"]) == 0
    rows = {line.split()[0]: line.split()[1:5] for line in capsys.readouterr().out.splitlines()[2:]}
    assert rows["cheap"] == ["1", "no", "available", "cheap"]
    assert rows["host"] == ["50", "yes", "available", "host"]
    assert rows["cupti"][:2] == ["10", "yes"] and rows["ncu"][:2] == ["100", "yes"]
    assert "(not in 'auto': name it, backend='cheap')" in report(plugin_host)
