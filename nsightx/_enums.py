"""Closed vocabularies shared by the API, the spec and the result schema."""

from __future__ import annotations

import enum


class VerbosityLevel(enum.IntEnum):
    """How much nsightx prints while it measures (same values as nsight-python)."""

    SILENT = 0
    """Print nothing."""
    INFO = 3
    """A progress bar on long sweeps and a one-line summary per function."""
    DEBUG = 4
    """Also the backend's own commands and logs."""


class CollectionScope(str, enum.Enum):
    """When an info collector is called."""

    ONCE = "once"
    """Once per profiled call, before the first config."""
    CONFIG = "config"
    """Once per config, before its first run."""
    RUN = "run"
    """Before every measured run."""
    ANNOTATION = "annotation"
    """Each time an annotated region opens."""


class Tool(str, enum.Enum):
    """Names of the first-party backends, usable with :func:`nsightx.activate` and ``backend=``.

    Any registered backend name is accepted where a ``Tool`` is, so third-party backends need no member here.
    """

    AUTO = "auto"
    """The cheapest available backend that can deliver what the decorator asks."""
    HOST = "host"
    """A monotonic host clock around each region, for CPU code and machines without a GPU."""
    EVENTS = "events"
    """A pair of CUDA events around each region: the region's span on the current stream."""
    CUPTI = "cupti"
    """CUPTI Activity records: exact per-kernel GPU durations, in process."""
    NCU = "ncu"
    """Nsight Compute in a worker process: any hardware counter, kernel replay, cache and clock control."""


CACHE_CONTROL = ("all", "none")
CLOCK_CONTROL = ("none", "base")
REPLAY_MODES = ("kernel", "range", "application")
THERMAL_MODES = ("auto", "manual", "off")
