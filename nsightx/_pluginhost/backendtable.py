"""The plugin host's table of backends: each a class, or where its class is to be imported from when first used.

A backend's module (its session, options model, child-process machinery) can cost tens of milliseconds to
import, and a call names one backend: registering the first-party backends by reference
(:meth:`~nsightx._pluginhost.registrars.BackendRegistrar.deferred`) means a fresh process imports only the
backend it uses (issue 35, first19). The table is a mapping of name to class: looking a name up imports its
class; asking whether a name is registered, or listing the names, imports nothing.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, ItemsView, Iterator, MutableMapping, ValuesView
from dataclasses import dataclass

from nsightx._errors import PluginError
from nsightx._run.backend import Backend


@dataclass(frozen=True)
class DeferredBackend:
    """A backend registered by name: its class is ``attribute`` of ``module``, imported on first use.

    ``cost`` is the class's ``capabilities.cost``, declared so that "auto" can try backends cheapest first
    without importing the ones after the first that fits; the class is checked to have it.
    """

    name: str
    module: str
    attribute: str
    cost: int

    @classmethod
    def parse(cls, name: str, target: str, cost: int) -> DeferredBackend:
        """Split ``"package.module:Class"``.

        Raises:
            PluginError: ``name`` is empty, ``target`` is not of the form ``module:attribute`` or ``cost`` is not
                an int.
        """
        module, sep, attribute = str(target).partition(":")
        if not (isinstance(name, str) and name) or not (sep and module and attribute):
            raise PluginError(
                f"deferred backend {name!r}: target {target!r} is not 'module:Class' (e.g. "
                "'my_plugin._backend:MyBackend'); pass a non-empty name and such a target"
            )
        if not isinstance(cost, int) or isinstance(cost, bool):
            raise PluginError(f"deferred backend {name!r}: cost {cost!r} is not an int; pass its capabilities.cost")
        return cls(name, module, attribute, cost)

    def load(self) -> type[Backend]:
        """Import and check the class.

        Raises:
            PluginError: the import fails, or what it names is not a Backend subclass of this name.
        """
        try:
            obj = getattr(importlib.import_module(self.module), self.attribute)
        except Exception as e:
            raise PluginError(f"backend {self.name!r}: importing {self.module}:{self.attribute} failed: {e!r}") from e
        if not (isinstance(obj, type) and issubclass(obj, Backend)):
            raise PluginError(f"backend {self.name!r}: {self.module}:{self.attribute} is not a Backend subclass")
        if getattr(obj, "name", None) != self.name:
            raise PluginError(
                f"backend {self.name!r}: {self.module}:{self.attribute} is named {getattr(obj, 'name', None)!r}; "
                "register it under its class's name"
            )
        if obj.capabilities.cost != self.cost:
            raise PluginError(
                f"backend {self.name!r}: registered with cost={self.cost}, but its class's capabilities.cost is "
                f"{obj.capabilities.cost}; register it with the class's cost"
            )
        return obj


Entry = type[Backend] | DeferredBackend


class BackendTable(MutableMapping[str, type[Backend]]):
    """Backend name -> class, importing a deferred class the first time its name is looked up.

    A deferred class that fails to import is dropped from the table, and ``on_failure(name, error)`` is told
    (the host records and warns, as for a plugin that fails to load); the lookup then raises ``KeyError``, so
    iterating over :meth:`items` skips it.
    """

    def __init__(self, on_failure: Callable[[str, PluginError], None] | None = None) -> None:
        self._entries: dict[str, Entry] = {}
        self._on_failure = on_failure

    def entry(self, name: str) -> Entry:
        """The class or deferred reference of ``name``, importing nothing (``KeyError`` if absent)."""
        return self._entries[name]

    def by_cost(self) -> list[str]:
        """The names, cheapest first (registration order among equals), importing nothing."""
        entries = self._entries
        return sorted(entries, key=lambda n: _cost(entries[n]))

    def __getitem__(self, name: str) -> type[Backend]:
        entry = self._entries[name]
        if not isinstance(entry, DeferredBackend):
            return entry
        try:
            cls = entry.load()
        except PluginError as e:
            if self._entries.get(name) is entry:
                del self._entries[name]
            if self._on_failure is not None:
                self._on_failure(name, e)
            raise KeyError(name) from e
        if self._entries.get(name) is entry:
            self._entries[name] = cls
        return cls

    def __setitem__(self, name: str, value: Entry) -> None:
        self._entries[name] = value

    def __delitem__(self, name: str) -> None:
        del self._entries[name]

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._entries))

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __repr__(self) -> str:
        return f"BackendTable({self._entries!r})"

    def items(self) -> ItemsView[str, type[Backend]]:
        """(name, class) of each backend, importing deferred ones; one that fails to import is left out."""
        return _Items(self)

    def values(self) -> ValuesView[type[Backend]]:
        """Each backend's class, importing deferred ones; one that fails to import is left out."""
        return _Values(self)


def _cost(entry: Entry) -> int:
    return entry.cost if isinstance(entry, DeferredBackend) else entry.capabilities.cost


class _Items(ItemsView[str, type[Backend]]):
    def __init__(self, table: BackendTable) -> None:
        super().__init__(table)
        self._table = table

    def __iter__(self) -> Iterator[tuple[str, type[Backend]]]:
        for name in list(self._table):
            try:
                yield name, self._table[name]
            except KeyError:
                continue


class _Values(ValuesView[type[Backend]]):
    def __init__(self, table: BackendTable) -> None:
        super().__init__(table)
        self._table = table

    def __iter__(self) -> Iterator[type[Backend]]:
        for _, cls in _Items(self._table):
            yield cls
