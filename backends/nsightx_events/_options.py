"""The ``backend_options`` of the events backend: a pydantic model, imported when the backend validates a plan.

Apart from :mod:`nsightx_events._backend` so that "auto" asking the backend's availability (a fresh process's
first call) does not build the model (issue 35, first19).
"""

from __future__ import annotations

from typing import Literal

from nsightx.ext import BackendOptions, ByteCount


class EventsOptions(BackendOptions):
    """The ``backend_options`` of the events backend, each with its one default."""

    flush_bytes: ByteCount = None
    """Size of the L2 flush buffer in bytes (default and minimum: twice the L2 size)."""
    events_collect: Literal["batch", "run"] = "batch"
    """'batch' (default): read the events every 64 runs, at config ends a second or more after the last read, and
    at the end; 'run': wait for and read every run's events as it ends."""
