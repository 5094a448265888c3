"""nsight-python's ``nsight.exceptions`` names, for code written against it (``import nsightx as nsight``).

Each name is nsightx's own type with the same meaning:

- ``ProfilerException`` is :class:`~nsightx.NsightxError`, the root of every nsightx error (nsight-python raises
  it for most failures; nsightx raises a subclass such as ``ConfigError`` or ``MeasurementError``, so
  ``except ProfilerException`` catches what it caught there, and more).
- ``NCUNotAvailableError`` is :class:`~nsightx.BackendUnavailableError`, raised when the chosen backend (ncu
  among them) cannot run on this machine. Unlike nsight-python's, it is also a ``ProfilerException``.
- ``ThermalControlError`` and its subclass ``CoolingTimeoutError``: the GPU did not cool down in time.
- ``MetricErrorType`` and ``get_metrics_error_message``: the kinds of refused metric names and the sentence
  nsight-python uses for them, which nsightx's metric errors start with.

Example:
    >>> import nsightx as nsight
    >>> issubclass(nsight.exceptions.CoolingTimeoutError, nsight.exceptions.ProfilerException)
    True
"""

from __future__ import annotations

from nsightx._errors import (
    BackendUnavailableError,
    CoolingTimeoutError,
    MetricErrorType,
    NsightxError,
    ThermalControlError,
    UnknownMetricError,
    metrics_error_message,
)

ProfilerException = NsightxError
"""nsight-python's root error: nsightx's :class:`~nsightx.NsightxError`."""

NCUNotAvailableError = BackendUnavailableError
"""nsight-python's "ncu is not there" error: nsightx's :class:`~nsightx.BackendUnavailableError`."""

get_metrics_error_message = metrics_error_message
"""nsight-python's helper of the same name: ``(metrics, error_type) -> str``."""

__all__ = [
    "CoolingTimeoutError",
    "MetricErrorType",
    "NCUNotAvailableError",
    "ProfilerException",
    "ThermalControlError",
    "UnknownMetricError",
    "get_metrics_error_message",
]
