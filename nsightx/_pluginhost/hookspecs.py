"""Hook specifications: the only ways a plugin talks to nsightx.

Plugins implement these with ``@nsightx.hookimpl`` in a module named by an entry point of the group
``nsightx``. Hooks take keyword arguments, so later versions can add arguments without breaking plugins.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pluggy

if TYPE_CHECKING:
    from nsightx._pluginhost.registrars import BackendRegistrar, CollectorRegistrar
    from nsightx._run.thermal import TemperatureSource

PROJECT = "nsightx"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


@hookspec
def nsightx_register_backends(register: BackendRegistrar) -> None:
    """Register backend classes by calling ``register(BackendClass)``.

    Called once per plugin host, when nsightx first needs to know its backends (the first profiled call,
    ``nsightx backends``, ``nsightx doctor``). Do not import heavy or GPU libraries here: a backend says whether
    it can run through ``availability()``. ``register.deferred(name, "module:Class", cost=...)`` registers a
    backend whose class is imported only when it is used. The return value is ignored.
    """


@hookspec
def nsightx_register_collectors(register: CollectorRegistrar) -> None:
    """Register named collector sets by calling ``register(name, [collector, ...], default=False)``.

    Called once per plugin host, when nsightx first resolves ``info_collectors``. A set is used when the
    decorator lists its name in ``info_collectors`` (``info_collectors=["nvml"]``), when it is named in the
    ``NSIGHTX_COLLECTORS`` environment variable, or always if registered with ``default=True``.
    The return value is ignored.
    """


@hookspec(firstresult=True)
def nsightx_temperature_source(device: int | str | None) -> TemperatureSource | None:
    """Return a :class:`~nsightx._run.thermal.TemperatureSource` watching ``device``, or ``None`` if this plugin can't.

    Called once per profiled call that measures a GPU with ``thermal_mode`` ``"auto"`` or ``"manual"``, before
    the first run. ``device`` is the CUDA ordinal as the process numbers devices (after
    ``CUDA_VISIBLE_DEVICES``), a device UUID string, or ``None`` for the current device, which the source
    should look up again at every read. The first non-``None`` result is used; with none, the runs are not
    paused and nsightx warns once.
    """
