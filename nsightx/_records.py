"""Typed records that backends produce and the result stores.

A backend turns what it observed into :class:`Record` objects, one per (annotation, config, run, kernel,
metric). Identity, never position, ties a record to its region: a run may launch a different number of kernels
than the next (cuBLAS split-K, autotuning), and each record still lands on the right row.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from nsightx._model import Frozen

Scalar = float | int | str | bool | None
"""A value a collector or a run attribute may hold."""


class RegionId(NamedTuple):
    """Identity of one execution of one annotated region.

    A named tuple rather than a model: one is made each time a region opens, on the measured path.
    """

    annotation: str
    """The name given to :func:`nsightx.annotate`."""
    config: int
    """Index of the config in the plan (0-based)."""
    run: int
    """Index of the measured run within the config (0-based; warm-up runs are negative and never stored)."""

    @classmethod
    def model_construct(cls, **fields: Any) -> RegionId:
        """Build from keyword fields (kept so code written against the model form keeps working)."""
        return cls(**fields)


class Record(Frozen):
    """One measured value: a metric of one kernel (or of the whole region) in one run."""

    annotation: str
    """Annotation name."""
    config: int
    """Config index."""
    run: int
    """Run index."""
    kernel: str
    """Kernel name; ``"region"`` for a whole-region metric (host or events time), ``"range"`` under range replay."""
    metric: str
    """Metric name, as the backend names it (ncu names for GPU counters)."""
    value: float
    """The value; NaN for a failed region."""
    unit: str | None = None
    """Unit of ``value`` (``"ns"``, ``"byte"``, ...); ``None`` when unknown."""
    seq: int = 0
    """Order of the kernel within the region (0 for the first kernel launched), to keep several kernels apart."""


class RegionRun(Frozen):
    """What the run loop and the backend know about one execution of a region, besides its metric values."""

    annotation: str
    """Annotation name."""
    config: int
    """Config index."""
    run: int
    """Run index."""
    host_ns: int
    """Host wall time between the region's open and close, in nanoseconds (monotonic clock)."""
    failed: bool = False
    """True when the region raised and ``ignore_failures`` swallowed it; its values are NaN."""
    attributes: Mapping[str, Scalar] = {}
    """Backend measurements about this execution (e.g. ``kernel_count``, ``device_ns``, ``launch_bound``)."""


class CollectorValue(Frozen):
    """One value returned by an info collector."""

    name: str
    """Column name."""
    scope: str
    """The collector's scope (``once``, ``config``, ``run``, ``annotation``)."""
    config: int | None = None
    """Config index, for config, run and annotation scopes."""
    run: int | None = None
    """Run index, for run and annotation scopes."""
    annotation: str | None = None
    """Annotation name, for the annotation scope."""
    value: Scalar = None
    """The value; ``None`` when the collector raised."""


class RunRecords(Frozen):
    """Everything measured in one run of the user's function (one config, one run index)."""

    config: int
    """Config index."""
    run: int
    """Run index."""
    records: tuple[Record, ...] = ()
    """Metric values."""
    regions: tuple[RegionRun, ...] = ()
    """One entry per region executed in this run."""
    collectors: tuple[CollectorValue, ...] = ()
    """Collector values gathered for this run (RUN and ANNOTATION scopes)."""
