"""nsightx_events: the CUDA-events backend (``backend="events"``, ``nsightx.activate(nsightx.Tool.EVENTS)``).

torch is imported only when a session opens (or by ``availability()`` when torch is already imported).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from nsightx.ext import hookimpl

if TYPE_CHECKING:
    from nsightx.ext import BackendRegistrar

__all__ = ["nsightx_register_backends"]


@hookimpl
def nsightx_register_backends(register: BackendRegistrar) -> None:
    """Register :class:`~nsightx_events._backend.EventsBackend`, imported only when ``events`` is looked up.

    ``cost`` is the class's ``capabilities.cost`` (checked on import), so that "auto" can order the backends
    without importing them.
    """
    register.deferred("events", "nsightx_events._backend:EventsBackend", cost=20)
