"""nsightx-example-plugin: one info collector, shipped as its own distribution.

Adds the collector set ``hostload`` with one RUN-scope collector, ``HostLoad1m``: the host's 1-minute load
average read just before each measured run. A busy host (another job, a compile in the background) delays
launches and shows up as spread in host-side timings; this column lets you see it.

Use it by name: ``@nsightx.analyze.kernel(info_collectors=["hostload"])``, or for every call with
``NSIGHTX_COLLECTORS=hostload``.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import nsightx

if TYPE_CHECKING:
    from nsightx import CollectContext
    from nsightx.ext import CollectorRegistrar

__version__ = "0.1.0"


def host_load(ctx: CollectContext) -> float | None:
    """The 1-minute load average, or ``None`` where the OS has none (Windows).

    Args:
        ctx: Where the run loop is (config, run, device, ...); this collector does not need it.

    Returns:
        The load average.
    """
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return None


@nsightx.hookimpl
def nsightx_register_collectors(register: CollectorRegistrar) -> None:
    """Register the ``hostload`` set; ``default=False`` means users opt in by naming it."""
    register("hostload", [nsightx.InfoCollector("HostLoad1m", host_load, "run")], default=False)
