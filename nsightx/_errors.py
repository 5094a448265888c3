"""The exception hierarchy.

Every error nsightx raises derives from :class:`NsightxError`, and also from the builtin that matches its
meaning, so ``except ValueError`` in user code keeps working. ``ProfilerException`` is an alias kept for code
written against nsight-python.
"""

from __future__ import annotations


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

    def __init__(self, message: str, *, function: str = "", config: int | None = None,
                 returned: object = None) -> None:
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


class CoolingTimeoutError(NsightxError, RuntimeError):
    """The GPU did not cool down within ``thermal_timeout`` under ``thermal_mode="manual"``."""
