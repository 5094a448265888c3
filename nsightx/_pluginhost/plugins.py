"""The plugin host: pluggy finds plugins; typed registries hold what they register.

Built-in backends and collectors are plugins too, listed in :data:`BUILTIN_PLUGINS` by module name and loaded
the same way as a third-party package's entry point, so blocking one works the same for both. Nothing here runs
at import time; the default host is built on first use.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import os
import warnings
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from types import ModuleType
from typing import TYPE_CHECKING

import pluggy

from nsightx._errors import ConfigError, PluginError, did_you_mean
from nsightx._pluginhost import hookspecs as _hookspecs
from nsightx._pluginhost.backendtable import BackendTable, DeferredBackend
from nsightx._pluginhost.registrars import BackendRegistrar, CollectorRegistrar
from nsightx._run.backend import Availability, Backend
from nsightx._run.collectors import CollectorLike

if TYPE_CHECKING:
    from nsightx._run.thermal import TemperatureSource

BUILTIN_PLUGINS: tuple[tuple[str, str], ...] = (
    ("host", "nsightx_host"),
    ("events", "nsightx_events"),
    ("cupti", "nsightx_cupti"),
    ("ncu", "nsightx_ncu"),
    ("nvml", "nsightx_nvml"),
    ("env", "nsightx_env"),
)
"""(plugin name, module) of the first-party plugins; a module that is not installed is skipped."""


_warned: set[tuple[str, str]] = set()
"""(plugin, error) pairs already warned about in this process."""


def _check_known_hooks(pm: pluggy.PluginManager, plugin: object, name: str) -> None:
    """Refuse a plugin with a hook nsightx does not define (``check_pending`` for one plugin, with a hint)."""
    for caller in pm.get_hookcallers(plugin) or []:
        if not caller.has_spec() and any(i.plugin is plugin and not i.optionalhook for i in caller.get_hookimpls()):
            known = sorted(n for n in dir(_hookspecs) if n.startswith("nsightx_"))
            raise PluginError(
                f"plugin {name!r} implements {caller.name!r}, which is not an nsightx hook; the hooks are: "
                + ", ".join(known),
                plugin=name,
            )


def _split(value: str | None) -> tuple[str, ...]:
    return tuple(v.strip() for v in (value or "").split(",") if v.strip())


@dataclass(frozen=True)
class LoaderSettings:
    """How plugins are found. Defaults come from ``NSIGHTX_*`` environment variables via :meth:`from_env`."""

    autoload: bool = True
    """Load plugins from installed entry points (``NSIGHTX_DISABLE_PLUGIN_AUTOLOAD=1`` turns it off)."""
    extra: tuple[str, ...] = ()
    """Extra plugin modules to import (``NSIGHTX_PLUGINS=a,b``)."""
    blocked: tuple[str, ...] = ()
    """Plugin names not to load (``NSIGHTX_BLOCK_PLUGINS=a,b``)."""
    trace: bool = False
    """Print every hook call (``NSIGHTX_TRACE_PLUGINS=1``)."""
    default_collectors: tuple[str, ...] = ()
    """Collector sets used by every profiled call (``NSIGHTX_COLLECTORS=nvml,env``)."""

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> LoaderSettings:
        """Read the settings from ``environ`` (default ``os.environ``)."""
        env = os.environ if environ is None else environ
        return cls(
            autoload=env.get("NSIGHTX_DISABLE_PLUGIN_AUTOLOAD", "") in ("", "0"),
            extra=_split(env.get("NSIGHTX_PLUGINS")),
            blocked=_split(env.get("NSIGHTX_BLOCK_PLUGINS")),
            trace=env.get("NSIGHTX_TRACE_PLUGINS", "") not in ("", "0"),
            default_collectors=_split(env.get("NSIGHTX_COLLECTORS")),
        )


@dataclass
class CollectorSet:
    """A named group of collectors registered by one plugin."""

    name: str
    collectors: list[CollectorLike]
    default: bool
    plugin: str


@dataclass
class PluginHost:
    """A pluggy manager plus the registries its plugins fill. Tests build their own; the API uses one default."""

    settings: LoaderSettings = field(default_factory=LoaderSettings)
    pm: pluggy.PluginManager = field(init=False)
    backends: BackendTable = field(init=False)
    """Name -> backend class; a first-party backend's class is imported when its name is first looked up."""
    backend_plugin: dict[str, str] = field(default_factory=dict)
    collector_sets: dict[str, CollectorSet] = field(default_factory=dict)
    load_errors: dict[str, str] = field(default_factory=dict)
    plugin_source: dict[str, str] = field(default_factory=dict)
    """Distribution name and version of each plugin loaded from an entry point (``NSIGHTX_PLUGINS`` for a module
    named there)."""
    _loaded: bool = False

    def __post_init__(self) -> None:
        self.backends = BackendTable(self._backend_failed)
        self.pm = pluggy.PluginManager(_hookspecs.PROJECT)
        self.pm.add_hookspecs(_hookspecs)
        for name in self.settings.blocked:
            self.pm.set_blocked(name)
        if self.settings.trace:
            self.pm.trace.root.setwriter(print)
            self.pm.enable_tracing()

    def register(self, plugin: object, name: str | None = None) -> None:
        """Register a plugin object or module (and, if already loaded, collect what it registers).

        Raises:
            PluginError: A hook of ``plugin`` has wrong argument names or is not an nsightx hook, or what it
                registers is refused; ``plugin`` is then not registered.
        """
        if name is not None and self.pm.has_plugin(name):
            raise PluginError(f"a plugin named {name!r} is already registered; unregister it first", plugin=name)
        try:
            registered = self.pm.register(plugin, name=name)
            _check_known_hooks(self.pm, plugin, name or self.pm.get_name(plugin) or repr(plugin))
        except pluggy.PluginValidationError as e:
            if self.pm.is_registered(plugin):
                self.pm.unregister(plugin)
            raise PluginError(f"plugin {name or plugin!r}: {e}", plugin=str(name or plugin)) from e
        except PluginError:
            self.pm.unregister(plugin)
            raise
        if registered is not None and self._loaded:
            try:
                self._collect_from([plugin])
            except Exception as e:
                self.unregister(registered)  # with what it registered before the failure
                if isinstance(e, PluginError):
                    raise
                raise PluginError(f"plugin {registered!r} failed while registering: {e!r}", plugin=registered) from e

    def unregister(self, name: str) -> None:
        """Remove the plugin ``name`` and what it registered (backends and collector sets)."""
        plugin = self.pm.get_plugin(name)
        if plugin is None:
            raise ConfigError(f"no plugin named {name!r} is registered; `nsightx plugins` lists them")
        self.pm.unregister(plugin)
        for backend in [b for b, p in self.backend_plugin.items() if p == name]:
            self.backends.pop(backend, None)
            del self.backend_plugin[backend]
        for cs in [n for n, c in self.collector_sets.items() if c.plugin == name]:
            del self.collector_sets[cs]

    def load(self) -> PluginHost:
        """Load built-in, entry-point and ``NSIGHTX_PLUGINS`` plugins once, then fill the registries."""
        if self._loaded:
            return self
        for name, module in BUILTIN_PLUGINS:
            if self.pm.is_blocked(name) or self.pm.has_plugin(name):
                continue
            mod = self._import(name, module, missing_ok=True, source="built-in")
            if mod is not None:
                self.pm.register(mod, name=name)
        if self.settings.autoload:
            self._load_entry_points()
        for module in self.settings.extra:
            if not self.pm.is_blocked(module) and not self.pm.has_plugin(module):
                mod = self._import(module, module, missing_ok=False, source="NSIGHTX_PLUGINS")
                if mod is not None and self._register_checked(mod, module, "NSIGHTX_PLUGINS"):
                    self.plugin_source[module] = "NSIGHTX_PLUGINS"
        self._loaded = True
        for name, plugin in self.pm.list_name_plugin():  # registration order, built-ins first: the first one wins
            if plugin is None:  # a blocked name
                continue
            try:
                self._collect_from([plugin])
            except Exception as e:  # a plugin whose registration fails is dropped, not fatal
                self.unregister(name)
                builtin = any(name == b for b, _ in BUILTIN_PLUGINS)
                self._failed(name, self.plugin_source.get(name, "built-in" if builtin else "registered in process"), e)
        return self

    def _load_entry_points(self) -> None:
        """Load each ``nsightx`` entry point on its own: one that fails is recorded and skipped (as pytest does).

        pluggy's ``load_setuptools_entrypoints`` stops at the first plugin that fails to import, so one broken
        package used to break every call. ``entry_points(group=...)`` reads each distribution's entry points once
        and keeps one distribution of each name (the first on ``sys.path``, the one Python imports).
        """
        for ep in importlib.metadata.entry_points(group=_hookspecs.PROJECT):
            if self.pm.is_blocked(ep.name) or self.pm.has_plugin(ep.name):
                continue
            dist = ep.dist
            source = f"{dist.metadata['Name']} {dist.version}" if dist is not None else f"entry point {ep.value}"
            try:
                plugin = ep.load()
            except Exception as e:
                self._failed(ep.name, source, e)
                continue
            if self._register_checked(plugin, ep.name, source):
                self.plugin_source[ep.name] = source

    def _register_checked(self, plugin: object, name: str, source: str) -> bool:
        """Register ``plugin``; a hook pluggy refuses or does not know makes it a recorded failure instead."""
        try:
            self.pm.register(plugin, name=name)
            _check_known_hooks(self.pm, plugin, name)
        except Exception as e:
            if self.pm.is_registered(plugin):
                self.pm.unregister(plugin)
            self._failed(name, source, e)
            return False
        return True

    def _failed(self, name: str, source: str, error: BaseException) -> None:
        """Record a plugin that could not be loaded, and warn once per process and plugin."""
        text = f"{type(error).__name__}: {error}"
        self.load_errors[name] = text
        self.plugin_source.setdefault(name, source)
        key = (name, text)
        if key in _warned:
            return
        _warned.add(key)
        warnings.warn(
            f"nsightx: plugin {name!r} ({source}) could not be loaded and is skipped: {text}. `nsightx plugins` "
            f"lists it; NSIGHTX_BLOCK_PLUGINS={name} stops loading it.",
            RuntimeWarning,
            stacklevel=4,
        )

    def _import(self, name: str, module: str, *, missing_ok: bool, source: str) -> ModuleType | None:
        try:
            return importlib.import_module(module)
        except ModuleNotFoundError as e:
            if missing_ok and e.name == module:
                return None
            self._failed(name, source, e)
        except Exception as e:  # a broken plugin must not break nsightx; `nsightx plugins` shows it
            self._failed(name, source, e)
        return None

    def _collect_from(self, plugins: Iterable[object]) -> None:
        for plugin in plugins:
            pname = self.pm.get_name(plugin) or repr(plugin)
            for hook, registrar in (
                ("nsightx_register_backends", BackendRegistrar(self._add_backend, pname)),
                ("nsightx_register_collectors", CollectorRegistrar(self._add_collectors, pname)),
            ):
                impl = getattr(plugin, hook, None)
                if impl is None:
                    continue
                caller = self.pm.subset_hook_caller(
                    hook, remove_plugins=[p for p in self.pm.get_plugins() if p is not plugin]
                )
                caller(register=registrar)

    def _backend_failed(self, name: str, error: PluginError) -> None:
        """A deferred backend's class could not be imported: forget it, record and warn as for a failed plugin."""
        plugin = self.backend_plugin.pop(name, name)
        self._failed(plugin, self.plugin_source.get(plugin, "built-in"), error)

    def _add_backend(self, backend: type[Backend] | DeferredBackend, plugin: str) -> None:
        if isinstance(backend, DeferredBackend):
            self._store_backend(backend.name, backend, plugin)
            return
        if not (isinstance(backend, type) and issubclass(backend, Backend)):
            raise PluginError(
                f"plugin {plugin!r} registered {backend!r}, which is not a Backend subclass", plugin=plugin
            )
        name = getattr(backend, "name", None)
        if not isinstance(name, str) or not name:
            raise PluginError(f"plugin {plugin!r}: backend {backend.__name__} has no name", plugin=plugin)
        self._store_backend(name, backend, plugin)

    def _store_backend(self, name: str, backend: type[Backend] | DeferredBackend, plugin: str) -> None:
        if name in self.backends and self.backends.entry(name) != backend:
            raise PluginError(
                f"plugin {plugin!r} registers backend {name!r}, already registered by "
                f"{self.backend_plugin[name]!r}; block one with NSIGHTX_BLOCK_PLUGINS",
                plugin=plugin,
            )
        self.backends[name] = backend
        self.backend_plugin[name] = plugin

    def _add_collectors(self, name: str, collectors: list[CollectorLike], default: bool, plugin: str) -> None:
        if name in self.collector_sets and self.collector_sets[name].plugin != plugin:
            raise PluginError(
                f"plugin {plugin!r} registers collector set {name!r}, already registered by "
                f"{self.collector_sets[name].plugin!r}; block one with NSIGHTX_BLOCK_PLUGINS",
                plugin=plugin,
            )
        self.collector_sets[name] = CollectorSet(name, collectors, default, plugin)

    # --- typed queries -------------------------------------------------------------------------------
    def backend(self, name: str) -> type[Backend]:
        """The backend class registered as ``name``."""
        self.load()
        if name not in self.backends:
            known = ", ".join(sorted(self.backends)) or "none"
            hint = did_you_mean(name, [*self.backends, "auto"])
            hint = f" ({hint})" if hint else ""
            raise ConfigError(f"unknown backend {name!r}{hint}; registered backends: {known}, or 'auto'")
        try:
            return self.backends[name]
        except KeyError as e:  # a deferred class that failed to import (load_errors has it; a warning said so)
            cause = e.__cause__
            raise PluginError(
                f"backend {name!r} could not be loaded ({cause}); fix or reinstall the package that provides it, "
                "or choose another backend (`nsightx plugins` shows the error)",
                plugin=name,
            ) from cause

    def availability(self) -> dict[str, Availability]:
        """Each backend's availability, cheapest first, never raising (imports every deferred backend)."""
        self.load()
        out: dict[str, Availability] = {}
        for name in self.backends.by_cost():
            try:
                cls = self.backends[name]
            except KeyError:  # a deferred class that failed to import: recorded and warned about
                continue
            out[name] = available(cls)
        return out

    def cheapest_first(self) -> Iterator[tuple[str, type[Backend]]]:
        """(name, class) of each backend, cheapest first, importing a deferred class only when it is reached.

        "auto" stops at the first backend that fits and is available, so the costlier ones are never imported.
        """
        self.load()
        for name in self.backends.by_cost():
            try:
                yield name, self.backends[name]
            except KeyError:
                continue

    def collectors(self, name: str) -> list[CollectorLike]:
        """The collectors of set ``name``."""
        self.load()
        try:
            return list(self.collector_sets[name].collectors)
        except KeyError:
            known = ", ".join(sorted(self.collector_sets)) or "none"
            raise ConfigError(f"unknown collector set {name!r}; registered sets: {known}") from None

    def temperature_source(self, device: int | str | None) -> TemperatureSource | None:
        """The first temperature source a plugin offers for ``device`` (``None`` when none does)."""
        self.load()
        source: TemperatureSource | None = self.pm.hook.nsightx_temperature_source(device=device)
        return source

    def default_collectors(self) -> list[CollectorLike]:
        """Collectors every profiled call uses (``default=True`` sets and ``NSIGHTX_COLLECTORS``)."""
        self.load()
        names = [s.name for s in self.collector_sets.values() if s.default]
        names += [n for n in self.settings.default_collectors if n not in names]
        return [c for n in names for c in self.collectors(n)]


def available(cls: type[Backend]) -> Availability:
    """``cls.availability()``, never raising: a backend whose check raises is reported unavailable.

    So is one whose check returns something other than an :class:`Availability` (a third party's ``True``, a
    string): every caller reads ``.available`` and ``.reason``, and ``nsightx doctor`` must list the others.
    """
    try:
        avail: object = cls.availability()  # a third party may return anything
    except Exception as e:  # availability() must not raise; if it does, report it
        return Availability(available=False, reason=f"availability() raised {e!r}")
    if not isinstance(avail, Availability):
        return Availability(
            available=False,
            reason=f"availability() returned {avail!r}, not an Availability",
            remedy="fix the backend's availability() (nsightx.ext.Availability), or uninstall its package",
        )
    return avail


_default: PluginHost | None = None


def default_host() -> PluginHost:
    """The process-wide host, built (and plugins loaded) on first use."""
    global _default
    if _default is None:
        _default = PluginHost(LoaderSettings.from_env()).load()
    return _default


def set_default_host(host: PluginHost | None) -> None:
    """Replace the process-wide host (tests use a fresh one each)."""
    global _default
    _default = host


def register_plugin(plugin: object, name: str | None = None) -> None:
    """Register ``plugin`` (a module or an object with ``@nsightx.hookimpl`` functions) with the default host.

    For plugins that are not installed as a package: a notebook cell, a test, a script. What it registers
    (backends, collector sets) is usable at once, like an installed plugin's.

    Args:
        plugin: The module or object.
        name: Its name in ``nsightx plugins`` and ``NSIGHTX_BLOCK_PLUGINS`` (default: pluggy's, from the object).

    Raises:
        PluginError: A hook has wrong argument names, is not an nsightx hook, or registers something refused
            (e.g. a backend name already taken); nothing of ``plugin`` stays registered.

    Example:
        >>> import nsightx
        >>> class Answer:
        ...     @staticmethod
        ...     @nsightx.hookimpl
        ...     def nsightx_register_collectors(register):
        ...         register("answer", [])
        >>> register_plugin(Answer(), name="answer"); unregister_plugin("answer")
    """
    default_host().register(plugin, name=name)


def unregister_plugin(name: str) -> None:
    """Remove a plugin from the default host, with the backends and collector sets it registered.

    Raises:
        ConfigError: No plugin of that name is registered.
    """
    default_host().unregister(name)
