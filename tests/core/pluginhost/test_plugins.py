"""Plugin host: discovery through a real installed entry point, registries, errors, hook meta-tests."""

from __future__ import annotations

import importlib
import sys
import textwrap

import pytest

import nsightx
from nsightx import ConfigError, PluginError
from nsightx._pluginhost import hookspecs as _hookspecs
from nsightx._pluginhost.plugins import LoaderSettings, PluginHost, set_default_host

PLUGIN_SOURCE = textwrap.dedent('''
    """A third-party nsightx plugin, installed as its own distribution."""
    import contextlib
    import time

    import nsightx
    from nsightx._run.backend import Availability, Backend, Capabilities, RunOutput, Session
    from nsightx._results.records import Record


    class TicksSession(Session):
        def __init__(self):
            self.records = []
            self.start = 0

        def region_enter(self, region):
            self.start = time.process_time_ns()

        def region_exit(self, region, failed):
            self.records.append(Record(annotation=region.annotation, config=region.config, run=region.run,
                                       kernel="region", metric="cpu_ticks", value=float(
                                           time.process_time_ns() - self.start), unit="ns"))

        def finish_run(self, config, run):
            out, self.records = self.records, []
            return RunOutput(records=out)


    class TicksBackend(Backend):
        name = "ticks"
        description = "process CPU time"
        capabilities = Capabilities(metrics=frozenset({"cpu_ticks"}), default_metrics=("cpu_ticks",),
                                    needs_gpu=False, cost=70)

        @classmethod
        def availability(cls):
            return Availability(available=True, reason="always")

        @contextlib.contextmanager
        def session(self, plan):
            yield TicksSession()


    @nsightx.hookimpl
    def nsightx_register_backends(register):
        register(TicksBackend)


    @nsightx.hookimpl
    def nsightx_register_collectors(register):
        register("answer", [nsightx.InfoCollector("answer", lambda ctx: 42, "once")])
''')


@pytest.fixture
def installed_plugin(tmp_path, monkeypatch):
    """A real distribution on sys.path: a module plus a .dist-info with an `nsightx` entry point."""
    (tmp_path / "nsightx_ticks_plugin.py").write_text(PLUGIN_SOURCE)
    info = tmp_path / "nsightx_ticks_plugin-1.2.3.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: nsightx-ticks-plugin\nVersion: 1.2.3\n")
    (info / "entry_points.txt").write_text("[nsightx]\nticks = nsightx_ticks_plugin\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    yield "ticks"
    sys.modules.pop("nsightx_ticks_plugin", None)


def test_entry_point_plugin_adds_backend_and_collector(installed_plugin):
    host = PluginHost(LoaderSettings()).load()
    assert "ticks" in host.backends and host.backend_plugin["ticks"] == "ticks"
    assert [c.name for c in host.collectors("answer")] == ["answer"]
    set_default_host(host)
    try:

        @nsightx.analyze.kernel(
            configs=[(1,)], runs=2, backend="ticks", info_collectors=["answer"], verbosity=nsightx.VerbosityLevel.SILENT
        )
        def f(n):
            with nsightx.annotate("a"):
                sum(range(1000))

        df = f().to_dataframe()
    finally:
        set_default_host(None)
    assert df["Metric"].tolist() == ["cpu_ticks"] and df["Tool"].tolist() == ["ticks"]
    assert df["answer"].tolist() == [42]


def test_plugins_listing_names_distribution(installed_plugin):
    from nsightx._pluginhost.listing import describe

    text = describe(PluginHost(LoaderSettings()).load())
    assert "ticks (nsightx-ticks-plugin 1.2.3)" in text and "backends: ticks" in text


def test_autoload_off_and_blocking(installed_plugin):
    assert "ticks" not in PluginHost(LoaderSettings(autoload=False)).load().backends
    assert "ticks" not in PluginHost(LoaderSettings(blocked=("ticks",))).load().backends
    assert "host" not in PluginHost(LoaderSettings(blocked=("host",))).load().backends


def test_settings_from_environment():
    s = LoaderSettings.from_env(
        {
            "NSIGHTX_DISABLE_PLUGIN_AUTOLOAD": "1",
            "NSIGHTX_PLUGINS": "a, b",
            "NSIGHTX_BLOCK_PLUGINS": "c",
            "NSIGHTX_COLLECTORS": "nvml",
        }
    )
    assert (s.autoload, s.extra, s.blocked, s.default_collectors) == (False, ("a", "b"), ("c",), ("nvml",))


class _Dupe:
    @staticmethod
    @nsightx.hookimpl
    def nsightx_register_backends(register):
        from nsightx_host import HostBackend

        class Other(HostBackend):
            pass

        register(Other)


def test_duplicate_backend_name_is_plugin_error():
    host = PluginHost(LoaderSettings(autoload=False)).load()
    with pytest.raises(PluginError, match="already registered by 'host'") as info:
        host.register(_Dupe(), name="dupe")
    assert info.value.plugin == "dupe"


def test_not_a_backend_is_plugin_error():
    class Bad:
        @staticmethod
        @nsightx.hookimpl
        def nsightx_register_backends(register):
            register(object)

    host = PluginHost(LoaderSettings(autoload=False)).load()
    with pytest.raises(PluginError, match="not a Backend subclass"):
        host.register(Bad(), name="bad")


def test_unknown_collector_set_is_config_error():
    with pytest.raises(ConfigError, match="unknown collector set 'nope'"):
        PluginHost(LoaderSettings(autoload=False)).load().collectors("nope")


@pytest.fixture
def fresh_warnings(monkeypatch):
    """As in a fresh process: no plugin failure warned about yet."""
    from nsightx._pluginhost import plugins as _plugins

    monkeypatch.setattr(_plugins, "_warned", set())


def test_broken_plugin_module_is_reported_not_raised(fresh_warnings):
    with pytest.warns(RuntimeWarning, match=r"'no_such_module_xyz' \(NSIGHTX_PLUGINS\) could not be loaded"):
        host = PluginHost(LoaderSettings(autoload=False, extra=("no_such_module_xyz",))).load()
    assert "no_such_module_xyz" in host.load_errors


def _good_then_refused(raise_with: object) -> object:
    from nsightx_host import HostBackend

    class Good(HostBackend):
        name = "good-one"

    class Half:
        @staticmethod
        @nsightx.hookimpl
        def nsightx_register_backends(register):
            register(Good)
            if isinstance(raise_with, Exception):
                raise raise_with
            register(raise_with)

    return Half()


def test_failed_registration_in_process_leaves_nothing_behind():
    host = PluginHost(LoaderSettings(autoload=False)).load()
    with pytest.raises(PluginError, match="not a Backend subclass"):
        host.register(_good_then_refused(object), name="half")
    assert "good-one" not in host.backends and host.pm.get_plugin("half") is None


def test_raising_hook_in_process_is_plugin_error_from_its_error():
    host = PluginHost(LoaderSettings(autoload=False)).load()
    with pytest.raises(PluginError, match="plugin 'half' failed while registering: KeyError") as info:
        host.register(_good_then_refused(KeyError("no config file")), name="half")
    assert isinstance(info.value.__cause__, KeyError) and info.value.plugin == "half"
    assert "good-one" not in host.backends


def test_raising_hook_at_load_is_recorded_and_undone(fresh_warnings):
    host = PluginHost(LoaderSettings(autoload=False))
    host.register(_good_then_refused(KeyError("no config file")), name="half")
    with pytest.warns(RuntimeWarning, match="'half'"):
        host.load()
    assert host.load_errors["half"].startswith("KeyError") and "good-one" not in host.backends
    assert "host" in host.backends


def test_taken_name_in_process_is_plugin_error():
    host = PluginHost(LoaderSettings(autoload=False)).load()
    with pytest.raises(PluginError, match="a plugin named 'host' is already registered") as info:
        host.register(_Dupe(), name="host")
    assert info.value.plugin == "host"


def test_unknown_hook_marked_optional_is_allowed():
    class Later:
        @staticmethod
        @nsightx.hookimpl(optionalhook=True)
        def nsightx_hook_of_a_later_version(register):
            pass

    host = PluginHost(LoaderSettings(autoload=False)).load()
    host.register(Later(), name="later")
    assert host.pm.get_plugin("later") is not None


# --- hook meta-tests: every hook has a docstring saying when it is called, and a test below ---------------
HOOKS = sorted(n for n in dir(_hookspecs) if n.startswith("nsightx_"))


def test_every_hook_is_documented_and_tested():
    for name in HOOKS:
        doc = getattr(_hookspecs, name).__doc__ or ""
        assert "Called" in doc, f"{name} docstring must say when it is called"
        assert f"test_hook_{name}" in globals(), f"missing test_hook_{name}"


def test_hook_nsightx_register_backends():
    host = PluginHost(LoaderSettings(autoload=False)).load()
    assert host.backends["host"].__name__ == "HostBackend" and host.backend_plugin["host"] == "host"


def test_hook_nsightx_register_collectors():
    class P:
        @staticmethod
        @nsightx.hookimpl
        def nsightx_register_collectors(register):
            register("mine", [("val", lambda: 1, "once")], default=True)

    host = PluginHost(LoaderSettings(autoload=False, blocked=("nvml",))).load()  # nvml is on by default
    host.register(P(), name="p")
    assert [c.name for c in host.default_collectors()] == ["val"]


def test_hook_nsightx_temperature_source():
    from nsightx._run.thermal import ThermalReading

    class P:
        @staticmethod
        @nsightx.hookimpl
        def nsightx_temperature_source(device):
            return None if device == 1 else ThermalReading(40, 89, f"dev{device}")

    host = PluginHost(LoaderSettings(autoload=False, blocked=("nvml",))).load()  # only P answers
    host.register(P(), name="p")
    assert host.temperature_source(0) == ThermalReading(40, 89, "dev0")
    assert host.temperature_source(1) is None
