"""The exception hierarchy.

Every error nsightx raises derives from :class:`NsightxError`, and also from the builtin that matches its
meaning, so ``except ValueError`` in user code keeps working. nsight-python's names (``ProfilerException``,
``ThermalControlError``, ``MetricErrorType``, ...) are here too; :mod:`nsightx.exceptions` gathers them under
that library's module name.
"""

from __future__ import annotations

import enum
import errno as _errno
from collections.abc import Sequence
from typing import Any


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


class NestedCallError(NsightxError, RuntimeError):
    """A profiled function was called while a profiled call was in progress in the same thread.

    Raised before the inner call does any work: a profiled call inside a profiled call (or a recursive profiled
    function) would measure a whole sweep per call of the outer body and lose the outer call's regions. The
    outer call then fails with it, as with any exception of its function.

    Attributes:
        outer: Name of the profiled function whose call is in progress.
        inner: Name of the profiled function called inside it.
    """

    def __init__(self, *, outer: str, inner: str) -> None:
        same = " (a recursive profiled function)" if outer == inner else ""
        super().__init__(
            f"{inner} is decorated with @nsightx.analyze.kernel and was called inside the profiled call of "
            f"{outer}{same}; profiled calls do not nest, so nothing of {inner}'s call ran. Inside {outer}, call "
            f"the undecorated function instead: {inner}.__wrapped__(...) (the function @analyze.kernel was given), "
            "and annotate its work with nsightx.annotate so that it is measured as part of "
            f"{outer}'s runs"
        )
        self.outer = outer
        self.inner = inner


class NsightxWarning(Warning):
    """Root of the warning categories nsightx defines itself (filter them all with ``NsightxWarning``)."""


class ConcurrentCallWarning(NsightxWarning, RuntimeWarning):
    """Profiled calls were measured one after the other: one profiled call runs at a time per process.

    Given once per process when a call from one thread waits for another thread's call, and once when
    ``executor=`` is a ``ThreadPoolExecutor`` (its tasks measure in this process, in turn). Filter it
    (``warnings.filterwarnings("ignore", category=nsightx.ConcurrentCallWarning)``) where that is expected; the
    calls are measured one after the other either way.
    """


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
    """A plugin could not be loaded, registered a name that is already taken, or broke the backend contract.

    The last: a backend's ``environment()`` that returned no mapping of str keys to scalars (raised after the
    call's runs were written: the stop line says where they are).
    """

    def __init__(self, message: str, *, plugin: str | None = None) -> None:
        super().__init__(message)
        self.plugin = plugin


class OutputError(NsightxError, OSError):
    """A file of the call could not be written: a full disk, a lost network mount, a write refused by the system.

    Raised during a sweep when a finished run cannot be appended to the raw file: the file then holds every run
    written before, each once, and no half line (``saved`` counts them; ``nsightx.load(raw)`` reads them), and
    nothing more is written to it. Raised after a finished sweep when its result JSON or CSVs cannot be
    written: ``results`` then holds the finished result, which is not lost. It is an ``OSError`` too, with the
    system's ``errno``; the ``OSError`` that caused it is chained (``__cause__``).

    Attributes:
        path: The file that could not be written.
        raw: The call's raw file, where its finished runs are (``None`` when there is none).
        saved: How many measured runs the raw file holds.
        results: The finished sweep's :class:`~nsightx.ProfileResults` when only its final files failed, else
            ``None``.
    """

    def __init__(
        self,
        message: str,
        *,
        path: str = "",
        errno: int | None = None,
        raw: str | None = None,
        saved: int = 0,
        results: object = None,
    ) -> None:
        super().__init__(message)
        self.errno = errno  # set after the message: OSError's own str() would replace the message otherwise
        self.path = path
        self.raw = raw
        self.saved = saved
        self.results: Any = results

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickle with ``errno`` too (it is not in ``__dict__``), so the error travels from a worker process whole."""
        return (type(self), self.args, {**self.__dict__, "errno": self.errno})


def did_you_mean(name: object, known: Sequence[str]) -> str:
    """``"did you mean 'host'?"`` for a misspelt name, or ``""`` when nothing in ``known`` is close.

    A name that differs only in case or surrounding spaces (``'Host'``, ``'ncu '``) is matched first; then
    :func:`difflib.get_close_matches` (at most two, similarity 0.6 or more). difflib is imported here, only
    when a message is being made.
    """
    if not isinstance(name, str):
        return ""
    folded = {k.lower(): k for k in known}
    exact = folded.get(name.strip().lower())
    if exact is not None:
        return f"did you mean {exact!r}?"
    import difflib

    near = difflib.get_close_matches(name.strip().lower(), list(folded), n=2, cutoff=0.6)
    return f"did you mean {' or '.join(repr(folded[n]) for n in near)}?" if near else ""


def os_error_text(error: OSError) -> str:
    """The system's text of ``error`` and its errno's name, as messages show it.

    Example:
        >>> import errno, os
        >>> os_error_text(OSError(errno.ENOSPC, os.strerror(errno.ENOSPC)))
        'No space left on device (ENOSPC)'
    """
    text = error.strerror or str(error) or type(error).__name__
    name = _errno.errorcode.get(error.errno) if error.errno is not None else None
    return f"{text} ({name})" if name else text


class ResultSchemaError(NsightxError, ValueError):
    """A saved result could not be read: unknown schema version or a damaged file."""


class IncompleteResultWarning(NsightxWarning, RuntimeWarning):
    """A result holds fewer runs, or fewer measured values, than its plan asked for.

    Raised by :func:`nsightx.load` for a sweep that was stopped or a config that failed: the result still loads;
    ``ProfileResults.completeness`` says how many runs it holds of how many were planned. Raised once by a call
    whose backend never handed some measured runs back (a deferred session's collection left them out): they are
    kept with no value, and the result's ``environment["UnreturnedRuns"]`` says how many.
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
