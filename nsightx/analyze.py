"""``nsightx.analyze``: the profiling decorators (``kernel``, ``plot``) and ``ignore_failures``."""

from __future__ import annotations

from nsightx._api.kernel import ProfiledFunction, kernel
from nsightx._api.plotting import plot
from nsightx._run.annotate import ignore_failures

__all__ = ["ProfiledFunction", "ignore_failures", "kernel", "plot"]
