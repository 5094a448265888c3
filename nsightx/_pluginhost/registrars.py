"""The two callables a plugin's registration hooks receive: one adds backend classes, one adds collector sets.

They live apart from the plugin host so that the hook specifications (:mod:`nsightx._pluginhost.hookspecs`) can name
their types without importing the host, which loads the specifications: each registrar holds only the function
that stores what it is given, not the host itself.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from nsightx._pluginhost.backendtable import DeferredBackend
from nsightx._run.backend import Backend
from nsightx._run.collectors import CollectorLike, as_collector

AddBackend = Callable[[type[Backend] | DeferredBackend, str], None]
"""Stores a backend class (or where to import it from) registered by the plugin named by the second argument."""
AddCollectors = Callable[[str, list[CollectorLike], bool, str], None]
"""Stores a collector set: its name, its collectors, whether every call uses it, and the plugin's name."""


class BackendRegistrar:
    """Passed to ``nsightx_register_backends``; call it with a :class:`Backend` subclass."""

    def __init__(self, add: AddBackend, plugin: str) -> None:
        self._add, self._plugin = add, plugin

    def __call__(self, backend: type[Backend]) -> None:
        """Register ``backend`` under ``backend.name``."""
        self._add(backend, self._plugin)

    def deferred(self, name: str, target: str, *, cost: int) -> None:
        """Register backend ``name`` whose class is imported from ``target`` (``"module:Class"``) when first used.

        For a backend whose module is costly to import: a process that never uses it (another backend named,
        ``nsightx plugins``) never imports it. ``"auto"``
        imports it to ask its availability only when every cheaper backend that fits is unavailable; ``nsightx
        backends`` and ``nsightx doctor`` import it. The class's ``name`` must be ``name`` and its
        ``capabilities.cost`` must be ``cost`` (checked when it is imported).

        Raises:
            PluginError: ``target`` is not ``"module:Class"``, or ``cost`` is not an int.
        """
        self._add(DeferredBackend.parse(name, target, cost), self._plugin)


class CollectorRegistrar:
    """Passed to ``nsightx_register_collectors``; call it with a set name and its collectors."""

    def __init__(self, add: AddCollectors, plugin: str) -> None:
        self._add, self._plugin = add, plugin

    def __call__(self, name: str, collectors: Sequence[object], *, default: bool = False) -> None:
        """Register collector set ``name``; with ``default=True`` every profiled call uses it."""
        self._add(name, [as_collector(c) for c in collectors], default, self._plugin)
