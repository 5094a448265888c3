"""Text for ``nsightx plugins``: each plugin, its distribution and version, its hooks and registrations."""

from __future__ import annotations

from nsightx._plugins import PluginHost


def describe(host: PluginHost) -> str:
    """One block per loaded plugin."""
    host.load()
    dists = {id(plugin): dist for plugin, dist in host.pm.list_plugin_distinfo()}
    lines = []
    for name, plugin in host.pm.list_name_plugin():
        if plugin is None:
            continue
        dist = dists.get(id(plugin))
        source = f"{dist.project_name} {dist.version}" if dist is not None else "built-in"
        hooks = sorted(h.name for h in host.pm.get_hookcallers(plugin) or [])
        backends = sorted(n for n, p in host.backend_plugin.items() if p == name)
        sets = sorted(s.name for s in host.collector_sets.values() if s.plugin == name)
        lines.append(f"{name} ({source})")
        lines.append(f"  hooks: {', '.join(hooks) or '-'}")
        if backends:
            lines.append(f"  backends: {', '.join(backends)}")
        for s in sets:
            cs = host.collector_sets[s]
            cols = ", ".join(f"{c.name} [{c.scope.value}]" for c in cs.collectors)
            lines.append(f"  collectors {s}{' (default)' if cs.default else ''}: {cols}")
    for name, err in host.load_errors.items():
        lines.append(f"{name}: failed to load: {err}")
    return "\n".join(lines) if lines else "no plugins loaded"
