"""A fresh process's first call imports only the backend it uses (issue 35, first19).

The first-party backends register by reference (``register.deferred``); their modules are imported when a name is
looked up, and "auto" stops importing at the first backend that fits and is available. The subprocess tests look
at ``sys.modules`` of a fresh interpreter, the only place an import can be seen not to have happened.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import pytest

import nsightx
from nsightx import ConfigError, PluginError, hookimpl
from nsightx._pluginhost.plugins import LoaderSettings, PluginHost
from nsightx._pluginhost.registrars import BackendRegistrar
from nsightx._spec.options import ProfileSpec
from nsightx._spec.select import choose

IMPLEMENTATIONS = ("nsightx_ncu._backend", "nsightx_cupti._backend", "nsightx_events._backend")
"""Backend implementation modules a registration must not import."""
HEAVY = (*IMPLEMENTATIONS, "nsightx_cupti._options", "nsightx_events._options", "nsightx._remote.call")


def _fresh(code: str) -> dict[str, object]:
    """Run ``code`` (which prints one JSON line last) in a fresh interpreter with this tree first on the path."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("NSIGHTX_")}
    root = Path(nsightx.__file__).resolve().parent.parent  # the tree under test, whichever is imported
    paths = [str(root), str(root / "backends"), str(root / "plugins")]
    env["PYTHONPATH"] = os.pathsep.join([*paths, env.get("PYTHONPATH", "")])
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=env, timeout=300, check=False
    )
    assert out.returncode == 0, out.stderr
    result: dict[str, object] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def test_registering_the_bundled_plugins_imports_no_backend_implementation() -> None:
    result = _fresh("""
        import json, sys
        from nsightx._pluginhost.plugins import default_host
        host = default_host()
        names = sorted(host.backends)
        before = sorted(m for m in sys.modules if m.endswith(("._backend", "._options")) or "._remote." in m)
        host.backend("host")
        after = sorted(m for m in sys.modules if m.endswith(("._backend", "._options")) or "._remote." in m)
        print(json.dumps({"names": names, "before": before, "after": after}))
    """)
    assert {"host", "events", "cupti", "ncu"} <= set(result["names"])  # type: ignore[arg-type]
    loaded = set(result["before"]) | set(result["after"])  # type: ignore[arg-type]
    assert not loaded & set(HEAVY), loaded


def test_auto_call_imports_no_backend_costlier_than_the_one_it_picks() -> None:
    result = _fresh("""
        import json, sys
        import nsightx

        @nsightx.analyze.kernel(configs=[1], runs=2, verbosity=nsightx.VerbosityLevel.SILENT)
        def f(n):
            with nsightx.annotate("a"):
                sum(range(100))

        tool = f().to_dataframe()["Tool"].tolist()
        print(json.dumps({"tool": tool, "ncu": "nsightx_ncu._backend" in sys.modules}))
    """)
    assert result["tool"] in (["host"], ["events"], ["cupti"])  # whichever "auto" finds here
    assert result["ncu"] is False  # the costliest backend (100) is never reached by a call that fits a cheaper one


def test_bundled_deferred_backends_resolve_to_their_classes_with_the_declared_cost() -> None:
    host = PluginHost(LoaderSettings(autoload=False)).load()
    for name in ("events", "cupti", "ncu"):
        entry = host.backends.entry(name)
        cls = host.backend(name)
        assert cls.name == name and cls.capabilities.cost == entry.cost  # type: ignore[union-attr]
    assert list(host.availability()) == host.backends.by_cost()


class _Deferred:
    """A plugin registering a backend by reference to ``target``."""

    def __init__(self, name: str, target: str, cost: int) -> None:
        self.args = (name, target, cost)

    @hookimpl
    def nsightx_register_backends(self, register: BackendRegistrar) -> None:
        name, target, cost = self.args
        register.deferred(name, target, cost=cost)


def _host_with(plugin: _Deferred, name: str, blocked: tuple[str, ...] = ()) -> PluginHost:
    host = PluginHost(LoaderSettings(autoload=False, blocked=blocked)).load()
    host.register(plugin, name=name)
    return host


def test_a_third_party_deferred_backend_is_checked_when_imported() -> None:
    host = _host_with(_Deferred("host2", "nsightx_host:HostBackend", 50), "p2")
    assert host.backends.entry("host2").module == "nsightx_host"  # type: ignore[union-attr]
    with pytest.raises(PluginError, match="is named 'host'"):
        host.backends.entry("host2").load()  # type: ignore[union-attr]


def test_a_third_party_deferred_backend_measures_when_named() -> None:
    host = _host_with(_Deferred("host", "nsightx_host:HostBackend", 50), "lazy-host", blocked=("host",))
    assert host.backend_plugin["host"] == "lazy-host"
    choice = choose(ProfileSpec(backend="host"), host, None)
    assert choice.backend.__name__ == "HostBackend" and host.backends.entry("host") is choice.backend


def test_a_deferred_backend_that_fails_to_import_is_dropped_with_a_warning() -> None:
    host = _host_with(_Deferred("ghost", "nsightx_no_such_module:Ghost", 1), "ghostly")
    assert "ghost" in host.backends
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        avail = host.availability()
    assert "ghost" not in avail and "host" in avail and "ghost" not in host.backends
    assert "ghostly" in host.load_errors and any("nsightx_no_such_module" in str(w.message) for w in caught)
    with pytest.raises(ConfigError, match="unknown backend 'ghost'"):
        host.backend("ghost")


def test_a_deferred_backend_that_fails_to_import_when_named_raises_plugin_error() -> None:
    host = _host_with(_Deferred("ghost", "nsightx_no_such_module:Ghost", 1), "ghostly")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(PluginError, match="backend 'ghost' could not be loaded"):
            choose(ProfileSpec(backend="ghost"), host, None)


def test_a_deferred_backend_with_a_wrong_cost_is_refused_when_imported() -> None:
    host = _host_with(_Deferred("host", "nsightx_host:HostBackend", 7), "cheap-host", blocked=("host",))
    with pytest.raises(PluginError, match="cost=7"):
        host.backends.entry("host").load()  # type: ignore[union-attr]


@pytest.mark.parametrize("target", ["nsightx_host", "nsightx_host:", ":HostBackend"])
def test_a_deferred_backend_target_must_name_module_and_class(target: str) -> None:
    host = PluginHost(LoaderSettings(autoload=False)).load()
    with pytest.raises(PluginError, match="is not 'module:Class'"):
        host.register(_Deferred("x", target, 1), name="bad")
    assert "x" not in host.backends and host.pm.get_plugin("bad") is None
