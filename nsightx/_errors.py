"""The exception hierarchy.

Every error nsightx raises derives from :class:`NsightxError`, and also from the builtin that matches its
meaning, so ``except ValueError`` in user code keeps working. nsight-python's names (``ProfilerException``,
``ThermalControlError``, ``MetricErrorType``, ...) are here too; :mod:`nsightx.exceptions` gathers them under
that library's module name.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence


class NsightxError(Exception):
    """Root of every nsightx error."""


ProfilerException = NsightxError
"""Alias for :class:`NsightxError`, the name nsight-python uses for its own errors."""


class ConfigError(NsightxError, ValueError):
    """An option or a config has a value nsightx does not accept. Raised before any measurement."""


class ConfigTypeError(NsightxError, TypeError):
    """An option has the wrong type (for example a bare ``str`` where a list of metrics is expected)."""


class AnnotationError(NsightxError, ValueError):
    """An annotation was misused: nested, reused within one run, or opened outside a profiled call."""


class BackendUnavailableError(NsightxError, RuntimeError):
    """The chosen backend cannot run on this machine; the message says what is missing and how to fix it."""

    def __init__(self, message: str, *, backend: str | None = None) -> None:
        super().__init__(message)
        self.backend = backend


class MeasurementError(NsightxError, RuntimeError):
    """A measurement could not be completed or attributed (dropped records, a worker that failed, ...)."""


class CounterPermissionError(MeasurementError):
    """The backend may not read the GPU's performance counters: the driver reserves them for administrators.

    Under ``backend="auto"`` with only a time metric asked, nsightx then measures with another GPU backend
    that needs no counters (with a warning); otherwise the message says how to get the permission.
    """

    def __init__(self, message: str, *, backend: str | None = None) -> None:
        super().__init__(message)
        self.backend = backend


class KernelCountError(MeasurementError):
    """An annotation launched more than one kernel and no ``combine_kernel_metrics`` was given."""


class TransformError(NsightxError, TypeError):
    """``derive_metric`` or ``combine_kernel_metrics`` returned something that is not a metric value.

    Checked on the first measured run, so a broken transform costs one run, not the sweep. ``function`` names
    the callable, ``config`` is the config index (``None`` when unknown) and ``returned`` what it gave back.
    """

    def __init__(self, message: str, *, function: str = "", config: int | None = None, returned: object = None) -> None:
        super().__init__(message)
        self.function = function
        self.config = config
        self.returned = returned


class CompareError(NsightxError, ValueError):
    """Two results have no row that could be compared: different functions, annotations, configs or metrics.

    ``nsightx compare`` exits with status 2 on it, so that a CI gate never passes on nothing.
    """


class PluginError(NsightxError, RuntimeError):
    """A plugin could not be loaded, or registered a name that is already taken."""

    def __init__(self, message: str, *, plugin: str | None = None) -> None:
        super().__init__(message)
        self.plugin = plugin


class ResultSchemaError(NsightxError, ValueError):
    """A saved result could not be read: unknown schema version or a damaged file."""


class NsightxWarning(Warning):
    """Root of the warning categories nsightx defines itself (filter them all with ``NsightxWarning``)."""


class IncompleteResultWarning(NsightxWarning, RuntimeWarning):
    """A loaded result holds fewer runs than its plan asked for (a sweep that was stopped, a config that failed).

    The result still loads; ``ProfileResults.completeness`` says how many runs it holds of how many were planned.
    """


class ThermalControlError(NsightxError, RuntimeError):
    """Thermal control cannot go on safely (nsight-python's base class of :class:`CoolingTimeoutError`)."""


class CoolingTimeoutError(ThermalControlError):
    """The GPU did not cool down within ``thermal_timeout`` under ``thermal_mode="manual"``."""


class MetricErrorType(enum.Enum):
    """Why a metric name was refused (nsight-python's enum, with its values)."""

    INVALID = "Invalid"
    """The name is not a metric the installed ncu knows for this GPU."""
    UNSUPPORTED = "Unsupported"
    """The name is valid but the chosen backend cannot collect it."""


def metrics_error_message(metrics: Sequence[str] | str, error_type: MetricErrorType) -> str:
    """nsight-python's two sentences about refused metric names, which nsightx's metric errors start with.

    Args:
        metrics: The refused names (a list is shown as a Python list, as nsight-python shows it).
        error_type: Invalid or unsupported.

    Returns:
        ``Invalid value ['x'] for 'metrics' parameter for nsight.analyze.kernel().``, a line break, then
        ``Please refer ncu --query-metrics for list of supported metrics.`` (with the given type and names).

    Example:
        >>> metrics_error_message(["x"], MetricErrorType.INVALID).splitlines()[0]
        "Invalid value ['x'] for 'metrics' parameter for nsight.analyze.kernel()."
    """
    shown = metrics if isinstance(metrics, str) else list(metrics)
    return (
        f"{error_type.value} value {shown} for 'metrics' parameter for nsight.analyze.kernel().\n"
        "Please refer ncu --query-metrics for list of supported metrics."
    )


class UnknownMetricError(ConfigError):
    """Metric names the installed ncu does not know for this GPU; raised before anything runs.

    Attributes:
        metrics: The unknown names, in the order given.
        suggestions: For each unknown name, the closest names ncu knows (possibly none).
        error_type: Always :attr:`MetricErrorType.INVALID`.
    """

    def __init__(self, message: str, *, metrics: Sequence[str], suggestions: dict[str, list[str]]) -> None:
        super().__init__(message)
        self.metrics = tuple(metrics)
        self.suggestions = suggestions
        self.error_type = MetricErrorType.INVALID
