"""The plan: a validated profile spec bound to one call (configs resolved, backend chosen).

``ThermalSettings`` lives with the thermal guard and is re-exported here for the backends that build plans.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nsightx._enums import VerbosityLevel
from nsightx._run.adaptive import AdaptiveRuns
from nsightx._run.collectors import CollectorLike
from nsightx._run.thermal import ThermalSettings

__all__ = ["Plan", "ThermalSettings"]


@dataclass(frozen=True)
class Plan:
    """Everything a backend needs to measure one call of a decorated function.

    Frozen: a backend reads it and never changes it (treat ``backend_options`` and ``configs`` as read-only too).
    Later versions may add fields, always with a default.
    """

    function: Callable[..., Any]
    """The user's function."""
    function_name: str
    """Its qualified name, used in file names and the result."""
    params: tuple[str, ...]
    """Parameter names, in the order configs fill them."""
    configs: tuple[tuple[Any, ...], ...]
    """Each config as a tuple of positional arguments (padded with defaults)."""
    runs: int
    """Measured runs per config."""
    warmup: int
    """Runs done and discarded before the measured ones, per config."""
    metrics: tuple[str, ...]
    """Resolved metric names."""
    backend: str
    """Name of the backend that measures."""
    cache_control: str = "none"
    """Resolved ``cache_control``, one of the backend's ``Capabilities.cache_control``."""
    clock_control: str = "none"
    """Resolved ``clock_control``, one of ``Capabilities.clock_control``."""
    replay_mode: str = "kernel"
    """Resolved ``replay_mode``, one of ``Capabilities.replay_modes``."""
    verbosity: VerbosityLevel = VerbosityLevel.INFO
    """How much to print (``DEBUG``: the backend's own commands and logs too)."""
    output_dir: Path | None = None
    """Where raw records and artifacts go; ``None`` keeps everything in memory."""
    output_tag: str = ""
    """``<function>-<n>`` used in file names."""
    output_stem: str = ""
    """The file-name prefix of ``output_prefix`` (``"exp1_"`` for ``"out/exp1_"``); backends start their files'
    names with it too, so one call's files sort together."""
    device: int | None = None
    """CUDA device ordinal to measure, ``None`` for the current device."""
    collectors: tuple[CollectorLike, ...] = ()
    """The info collectors of the call (the run loop calls them; a backend that runs the loop elsewhere must
    have them answered, as the ncu backend does through proxies)."""
    thermal: ThermalSettings = field(default_factory=ThermalSettings)
    """Thermal guard options (see :func:`~nsightx._run.thermal.make_guard`)."""
    backend_options: Mapping[str, Any] = field(default_factory=dict)
    """Backend-specific options (e.g. ncu ``sets``/``sections``)."""
    normalize_against: str | None = None
    """Checked after the first measured run: the annotation must have appeared."""
    needs_gpu: bool = True
    """Whether the backend measures GPU work (False for the host clock): GPU guards skip CPU plans."""
    stop_rule: AdaptiveRuns | None = None
    """``runs="auto"``: the stopping rule (``runs`` then holds its ``max_runs``); ``None``: exactly ``runs``."""
