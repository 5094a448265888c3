"""Reading raw ``raw_data-*.jsonl`` files: the runs a sweep had finished, even if it never returned.

A raw file is what is left after an exception, Ctrl-C or SIGKILL. Its first line is a :class:`RawHeader` (the
plan: function, parameter names, config values, ...) and every further line one finished run. :func:`load_raw`
turns such a file into a :class:`~nsightx.ProfileResults` of the completed runs, with the parameter columns
filled. The file format is read by :mod:`nsightx._results.sink` (next to its writer; :func:`read_runs`, :func:`read_raw`
and :func:`looks_raw` are re-exported here) and the result is built by
:func:`nsightx._results.profileresults.results_from_raw`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from nsightx._results.profileresults import ProfileResults, results_from_raw
from nsightx._results.schema import RawHeader
from nsightx._results.sink import looks_raw, read_raw, read_runs

__all__ = ["RawHeader", "load_raw", "looks_raw", "read_raw", "read_runs"]


def load_raw(
    path: str | Path,
    *,
    combine_kernel_metrics: Callable[[float, float], float] | None = None,
    derive_metric: Callable[..., Any] | None = None,
) -> ProfileResults:
    """Load the completed runs of a raw ``raw_data-*.jsonl`` file as a :class:`~nsightx.ProfileResults`.

    This is how to get at the data of a sweep that was stopped (an exception, Ctrl-C, SIGKILL): the raw file
    holds every run that finished, and its header names the function, its parameters and the config values,
    so the DataFrame has the parameter columns. :func:`nsightx.load` calls this for a raw file.

    Functions are not stored in the file: give ``combine_kernel_metrics`` again when a region launched several
    kernels, and ``derive_metric`` to add the derived metric.

    Args:
        path: The raw file (``<output_prefix>raw_data-<function>-<n>.jsonl``).
        combine_kernel_metrics: Reducer for regions with several kernels, as given to ``analyze.kernel``.
        derive_metric: Derive function, as given to ``analyze.kernel``.

    Returns:
        The completed runs; ``environment`` holds ``Host``, ``raw_data`` (the path) and ``sweep``.

    Raises:
        ResultSchemaError: the file has no header (written by an older nsightx or a backend's worker), was
            written by a newer nsightx, or has a damaged line before the last one (named by number).
        KernelCountError: a region launched several kernels and no ``combine_kernel_metrics`` was given.
    """
    return results_from_raw(path, combine_kernel_metrics=combine_kernel_metrics, derive_metric=derive_metric)
