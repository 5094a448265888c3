"""Text for ``nsightx plugins``: each plugin, where it comes from, its hooks and what it registers.

A collector object may carry two optional attributes that the listing shows: ``columns`` (the column names its
mapping result fills) and ``availability()`` (one line: usable here, or why not). Neither is required.
"""

from __future__ import annotations

from nsightx._pluginhost.plugins import BUILTIN_PLUGINS, PluginHost
from nsightx._run.collectors import CollectorLike
from nsightx._version import __version__

_BUILTIN = frozenset(name for name, _ in BUILTIN_PLUGINS)
"""The first-party plugins: only these are listed as ``built-in`` (a plugin registered in process was too)."""


def _columns(c: CollectorLike) -> str:
    cols = getattr(c, "columns", None)
    if isinstance(cols, tuple | list) and cols:
        return ": " + ", ".join(str(x) for x in cols)
    return ""


def _status(collectors: list[CollectorLike]) -> list[str]:
    seen: list[str] = []
    for c in collectors:
        check = getattr(c, "availability", None)
        if not callable(check):
            continue
        try:
            line = str(check())
        except Exception as e:  # a listing must never fail because a plugin does
            line = f"availability() raised {type(e).__name__}: {e}"
        if line not in seen:
            seen.append(line)
    return seen


def describe(host: PluginHost) -> str:
    """One block per loaded plugin: source and version, hooks, backends, collector sets with their columns."""
    host.load()
    lines = []
    for name, plugin in host.pm.list_name_plugin():
        if plugin is None:
            continue
        dist = host.plugin_source.get(name)
        builtin = dist is None and name in _BUILTIN
        source = dist if dist is not None else "built-in" if builtin else "registered in process"
        hooks = sorted(h.name for h in host.pm.get_hookcallers(plugin) or [])
        backends = sorted(n for n, p in host.backend_plugin.items() if p == name)
        sets = [s for s in host.collector_sets.values() if s.plugin == name]
        lines.append(f"{name} ({source})" + (f" nsightx {__version__}" if builtin else ""))
        lines.append(f"  hooks: {', '.join(hooks) or '-'}")
        if backends:
            lines.append(f"  backends: {', '.join(backends)}")
        for cs in sets:
            how = "on by default" if cs.default else f"enabled by name: info_collectors=[{cs.name!r}]"
            lines.append(f"  collectors {cs.name} ({how}):")
            for c in cs.collectors:
                lines.append(f"    {c.name} [{c.scope.value}]{_columns(c)}")
            for status in _status(cs.collectors):
                lines.append(f"    status: {status}")
    for name, err in host.load_errors.items():
        lines.append(f"{name} ({host.plugin_source.get(name, 'not loaded')}): failed to load: {err}")
    return "\n".join(lines) if lines else "no plugins loaded"
