"""nsightx_cupti: the CUPTI Activity backend (``backend="cupti"``, ``nsightx.activate(nsightx.Tool.CUPTI)``).

Importing this module registers nothing heavy: cupti-python and the CUDA driver are loaded only when the backend
checks its availability or opens a session.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from nsightx.ext import hookimpl

if TYPE_CHECKING:
    from nsightx.ext import BackendRegistrar

__all__ = ["nsightx_register_backends", "release_flush_buffers"]


def release_flush_buffers() -> None:
    """Free the L2 flush buffers the backend keeps between sessions (twice the L2 size on each device used).

    A no-op when no CUPTI session ran in this process. The next session allocates its buffer again (~0.2 ms).
    """
    import sys

    session = sys.modules.get("nsightx_cupti._session")
    if session is not None:
        session.release_flush_buffers()


@hookimpl
def nsightx_register_backends(register: BackendRegistrar) -> None:
    """Register :class:`~nsightx_cupti._backend.CuptiBackend`, imported only when ``cupti`` is looked up.

    ``cost`` is the class's ``capabilities.cost`` (checked on import), so that "auto" can order the backends
    without importing them.
    """
    register.deferred("cupti", "nsightx_cupti._backend:CuptiBackend", cost=10)
