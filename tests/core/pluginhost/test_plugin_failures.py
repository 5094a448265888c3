"""A bad plugin cannot break nsightx: a real pip-installed broken package, and plugins with bad hooks.

The broken package is built and pip-installed into a folder of its own (no index), then used by a fresh
interpreter, as a user who has it installed would; the plugin host, the CLI and the host backend are real.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import pytest

import nsightx
from nsightx import PluginError
from nsightx._pluginhost.plugins import LoaderSettings, PluginHost, set_default_host

PYPROJECT = """
[build-system]
requires = ["hatchling"]
build-backend = "hatchling.build"

[project]
name = "nsightx-broken-plugin"
version = "0.0.1"

[project.entry-points.nsightx]
broken = "nsightx_broken_plugin"

[tool.hatch.build.targets.wheel]
packages = ["nsightx_broken_plugin"]
"""

SCRIPT = textwrap.dedent("""
    import contextlib, io, json, warnings
    import nsightx
    from nsightx.cli import main

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")

        @nsightx.analyze.kernel(configs=[(1,)], runs=2, warmup=0, backend="host",
                                verbosity=nsightx.VerbosityLevel.SILENT)
        def f(n):
            with nsightx.annotate("a"):
                sum(range(1000))

        rows = len(f().to_dataframe())
    out = {"rows": rows, "warnings": [str(w.message) for w in caught]}
    for command in ("plugins", "doctor"):
        text = io.StringIO()
        with contextlib.redirect_stdout(text):
            try:
                code = main([command])
            except SystemExit as e:
                code = e.code
        out[command] = [code or 0, text.getvalue()]
    print(json.dumps(out))
""")


@pytest.fixture(scope="module")
def broken_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A package whose module raises ImportError at import, pip-installed into its own folder."""
    src = tmp_path_factory.mktemp("broken-src")
    (src / "pyproject.toml").write_text(PYPROJECT)
    pkg = src / "nsightx_broken_plugin"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("raise ImportError('libbroken.so: cannot open shared object file')\n")
    target = tmp_path_factory.mktemp("broken-site")
    cmd = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-compile", "--target", str(target)]
    if importlib.util.find_spec("hatchling") is not None:
        cmd += ["--no-build-isolation", "--no-index"]
    out = subprocess.run([*cmd, str(src)], capture_output=True, text=True, timeout=300, check=False)
    assert out.returncode == 0, out.stderr
    return target


def test_a_broken_installed_plugin_is_listed_and_breaks_nothing(broken_site: Path) -> None:
    env = dict(os.environ)
    for var in ("NSIGHTX_BLOCK_PLUGINS", "NSIGHTX_DISABLE_PLUGIN_AUTOLOAD"):
        env.pop(var, None)
    env["PYTHONPATH"] = os.pathsep.join([str(broken_site), env.get("PYTHONPATH", "")])
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, timeout=300, check=False
    )
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["rows"] == 1  # the host sweep ran
    [warning] = [w for w in result["warnings"] if "broken" in w]
    assert "nsightx-broken-plugin 0.0.1" in warning and "NSIGHTX_BLOCK_PLUGINS=broken" in warning
    code, listing = result["plugins"]
    assert code == 0
    assert "broken (nsightx-broken-plugin 0.0.1): failed to load: ImportError: libbroken.so" in listing
    assert "host (built-in)" in listing
    code, doctor = result["doctor"]
    assert "plugin 'broken' failed to load: ImportError: libbroken.so" in doctor


class _MisspelledArgument:
    @staticmethod
    @nsightx.hookimpl
    def nsightx_register_backends(registrar):  # the hook's argument is `register`
        pass


class _UnknownHook:
    @staticmethod
    @nsightx.hookimpl
    def nsightx_register_backend(register):  # singular: not a hook
        pass


def test_register_plugin_refuses_bad_hooks_and_names_the_plugin() -> None:
    host = PluginHost(LoaderSettings(autoload=False)).load()
    set_default_host(host)
    try:
        with pytest.raises(PluginError, match="mine") as info:
            nsightx.register_plugin(_MisspelledArgument(), name="mine")
        assert "registrar" in str(info.value) and info.value.plugin == "mine"
        with pytest.raises(PluginError, match="'nsightx_register_backend', which is not an nsightx hook"):
            nsightx.register_plugin(_UnknownHook(), name="typo")
        assert host.pm.get_plugin("mine") is None and host.pm.get_plugin("typo") is None
    finally:
        set_default_host(None)


def test_register_plugin_in_process_adds_a_collector_set_and_unregister_removes_it() -> None:
    class Answer:
        @staticmethod
        @nsightx.hookimpl
        def nsightx_register_collectors(register):  # type: ignore[no-untyped-def]
            register("answer", [nsightx.InfoCollector("answer", lambda ctx: 42, "once")])

    set_default_host(PluginHost(LoaderSettings(autoload=False)).load())
    try:
        nsightx.register_plugin(Answer(), name="answer")

        @nsightx.analyze.kernel(
            configs=[(1,)], runs=1, backend="host", info_collectors=["answer"], verbosity=nsightx.VerbosityLevel.SILENT
        )
        def f(n):  # type: ignore[no-untyped-def]
            with nsightx.annotate("a"):
                pass

        assert f().to_dataframe()["answer"].tolist() == [42]
        nsightx.unregister_plugin("answer")
        with pytest.raises(nsightx.ConfigError, match="unknown collector set 'answer'"):
            f()
        with pytest.raises(nsightx.ConfigError, match="no plugin named 'answer'"):
            nsightx.unregister_plugin("answer")
    finally:
        set_default_host(None)


def test_an_entry_point_with_a_bad_hook_is_recorded_and_the_rest_loads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "nsightx_badhook_plugin.py").write_text(
        "import nsightx\n\n@nsightx.hookimpl\ndef nsightx_register_collector(register):\n    pass\n"
    )
    info = tmp_path / "nsightx_badhook_plugin-2.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: nsightx-badhook-plugin\nVersion: 2.0\n")
    (info / "entry_points.txt").write_text("[nsightx]\nbadhook = nsightx_badhook_plugin\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        host = PluginHost(LoaderSettings()).load()
    assert "not an nsightx hook" in host.load_errors["badhook"]
    assert host.pm.get_plugin("badhook") is None and "host" in host.backends
    assert any("badhook" in str(w.message) and "nsightx-badhook-plugin 2.0" in str(w.message) for w in caught)
    sys.modules.pop("nsightx_badhook_plugin", None)
