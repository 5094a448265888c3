"""nsightx_ncu: the Nsight Compute backend, a first-party nsightx plugin.

Registers :class:`~nsightx_ncu._backend.NcuBackend` under the name ``"ncu"``. Importing this module imports no
GPU library and starts no process; ncu is looked for only when the backend's availability is asked.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from nsightx.ext import hookimpl

if TYPE_CHECKING:
    from nsightx.ext import BackendRegistrar

__all__ = ["nsightx_register_backends"]


@hookimpl
def nsightx_register_backends(register: BackendRegistrar) -> None:
    """Register :class:`~nsightx_ncu._backend.NcuBackend`, imported only when ``ncu`` is looked up.

    ``cost`` is the class's ``capabilities.cost`` (checked on import), so that "auto" can order the backends
    without importing them.
    """
    register.deferred("ncu", "nsightx_ncu._backend:NcuBackend", cost=100)
