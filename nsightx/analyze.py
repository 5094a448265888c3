"""``nsightx.analyze``: the profiling decorators (``kernel``, ``plot``) and ``ignore_failures``."""

from __future__ import annotations

from nsightx._annotate import ignore_failures
from nsightx._kernel import ProfiledFunction, kernel
from nsightx._plot_api import plot

__all__ = ["ProfiledFunction", "ignore_failures", "kernel", "plot"]
