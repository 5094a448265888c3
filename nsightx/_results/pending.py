"""A loaded result whose Python objects are not built yet: what a Parquet file said, checked, and how to build it.

A Parquet result is read and checked as columns (:mod:`nsightx._results.parquetread`); turning a million values,
records and region executions into Python objects costs about as much again as the rest of loading together.
:class:`~nsightx.ProfileResults` keeps a :class:`PendingData` and builds its ``ResultData`` the first time
something reads ``.data`` (the DataFrame, the records, compare, a re-save); what a loaded result is asked first
(its repr, completeness, backend, environment) is answered from here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from nsightx._results.integrity import Completeness
    from nsightx._results.records import Scalar
    from nsightx._results.schema import PlanInfo, ResultData


@dataclass(frozen=True, eq=False)
class PendingData:
    """A checked result file, before its objects are built."""

    plan: PlanInfo
    """What was asked."""
    environment: Mapping[str, Scalar]
    """Where it was measured."""
    n_values: int
    """Number of per-run values."""
    completeness: Completeness
    """How many of the planned runs it holds."""
    build: Callable[[], ResultData]
    """Builds the ``ResultData`` (once; the caller keeps it)."""
