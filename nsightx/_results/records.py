"""Typed records that backends produce and the result stores.

A backend turns what it observed into :class:`Record` objects, one per (annotation, config, run, kernel,
metric). Identity, never position, ties a record to its region: a run may launch a different number of kernels
than the next (cuBLAS split-K, autotuning), and each record still lands on the right row.

The four record types are frozen, slotted dataclasses rather than pydantic models: a result holds hundreds of
thousands of them, and a pydantic model instance carries a ``__dict__`` and a ``__pydantic_fields_set__`` set
(about 1 kB each) where a slotted dataclass needs about 100 bytes; loading a saved result of 10,000 runs took
4.5x the time and 3.5x the memory of ``json.load`` with models (``98c9cf0:benchmarks/load_result.py``). pydantic still
validates them wherever data comes in from outside (a result or raw file, through the ``ResultData`` model or a
``TypeAdapter``), with the same rules as before (unknown fields are errors), and still writes them to JSON.
Building one in Python code does not validate its fields. The ``model_*`` methods that code written against
the model form uses are kept (:class:`Lean`), as :class:`RegionId` keeps ``model_construct``.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple, Self, TypeVar

from pydantic import ConfigDict, TypeAdapter

from nsightx._results.nulls import measured_as_null

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

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


_ADAPTERS: dict[type, TypeAdapter[Any]] = {}


def _adapter(cls: type) -> TypeAdapter[Any]:
    """The (cached) TypeAdapter that validates and serialises ``cls``."""
    adapter = _ADAPTERS.get(cls)
    if adapter is None:
        adapter = _ADAPTERS[cls] = TypeAdapter(cls)
    return adapter


class Lean:
    """The pydantic-model methods kept on the record dataclasses (validation and JSON through a TypeAdapter)."""

    __slots__ = ()
    __pydantic_config__: ClassVar[ConfigDict] = ConfigDict(extra="forbid", ser_json_inf_nan="constants")
    """Unknown fields are errors; no docstring parsing (see :mod:`nsightx._model`). A float field that is NaN or
    infinite is written as JSON's ``NaN``/``Infinity``/``-Infinity`` token: pydantic's default (``null``) turned a
    measured infinity into a missing value (files21); :func:`~nsightx._results.nulls.measured_as_null` then writes a
    measured NaN as ``null``, as every nsightx version has."""

    @classmethod
    def model_validate(cls, obj: object) -> Self:
        """Validate ``obj`` (a mapping or an instance) into this type; raises pydantic's ``ValidationError``."""
        result: Self = _adapter(cls).validate_python(obj)
        return result

    @classmethod
    def model_validate_json(cls, data: str | bytes) -> Self:
        """Validate a JSON document into this type."""
        result: Self = _adapter(cls).validate_json(data)
        return result

    @classmethod
    def model_construct(cls, **fields: Any) -> Self:
        """Build from keyword fields without validation (what the constructor does too)."""
        return cls(**fields)

    def model_copy(self, *, update: Mapping[str, Any] | None = None) -> Self:
        """A copy with the fields in ``update`` replaced."""
        return dataclasses.replace(self, **(update or {}))  # type: ignore[type-var]

    def model_dump(self) -> dict[str, Any]:
        """The fields as plain Python values (nested records as dicts)."""
        result: dict[str, Any] = _adapter(type(self)).dump_python(self)
        return result

    def model_dump_json(self) -> str:
        """The record as compact JSON, as it is stored (a measured NaN as ``null``, an infinity as a token)."""
        return measured_as_null(_adapter(type(self)).dump_json(self).decode())


@dataclasses.dataclass(frozen=True, slots=True)
class Record(Lean):
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
    """The value; NaN where the backend could not read it (a counter ncu did not report). A failed region has no
    record: the frames show its values as NaN, ``Kernel="failed"``, from its :class:`RegionRun`."""
    unit: str | None = None
    """Unit of ``value`` (``"ns"``, ``"byte"``, ...); ``None`` when unknown."""
    seq: int = 0
    """Order of the kernel within the region (0 for the first kernel launched), to keep several kernels apart."""


@dataclasses.dataclass(frozen=True, slots=True)
class RegionRun(Lean):
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
    attributes: Mapping[str, Scalar] = dataclasses.field(default_factory=dict)
    """Backend measurements about this execution (e.g. ``kernel_count``, ``device_ns``, ``launch_bound``)."""


@dataclasses.dataclass(frozen=True, slots=True)
class CollectorValue(Lean):
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


@dataclasses.dataclass(frozen=True, slots=True)
class RunRecords(Lean):
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


# --- fast builders ------------------------------------------------------------------------------------------
# The dataclass constructor of a frozen class sets each field through ``object.__setattr__`` (~0.12 us a field).
# After a deferred session's wait for the GPU, every kernel, region and run of the call becomes one of these
# objects on the measured path, so the backends and the run loop build them through the slots' own descriptors
# instead: the same object (equal, same hash, still frozen), ~0.4 us cheaper each
# (98c9cf0:benchmarks/cupti_host_path.py).
# :func:`fast_builder` writes each builder; it takes every field positionally, in declaration order, and
# tests/core/results/test_records_fast.py checks that each builds what the constructor builds.

T = TypeVar("T", bound="DataclassInstance")


def slot_setters(cls: type) -> tuple[Any, ...]:
    """The ``__set__`` of each field's slot descriptor of the slotted dataclass ``cls``, in field order."""
    return tuple(getattr(cls, f.name).__set__ for f in dataclasses.fields(cls))


def fast_builder(cls: type[T]) -> Callable[..., T]:
    """A function ``new_<class name in snake case>(field, ...)`` that builds the frozen slotted dataclass ``cls``.

    It takes every field positionally, in declaration order, and sets each through its slot's descriptor. The
    calls are written out one per field in generated source, as ``dataclasses`` writes an ``__init__``: a loop
    over the setters would spend most of the time the builder exists to save.
    """
    names = [f.name for f in dataclasses.fields(cls)]
    if any(n.startswith("_") for n in names):
        raise TypeError(f"fast_builder: {cls.__name__} has a field starting with '_' ({names}); rename it")
    fn = "new_" + re.sub(r"(?<!^)(?=[A-Z])", "_", cls.__name__).lower()
    body = "".join(f"    _s{i}(_obj, {n})\n" for i, n in enumerate(names))
    scope: dict[str, Any] = {"_new": object.__new__, "_cls": cls}
    scope.update((f"_s{i}", put) for i, put in enumerate(slot_setters(cls)))
    exec(f"def {fn}({', '.join(names)}):\n    _obj = _new(_cls)\n{body}    return _obj\n", scope)
    build: Callable[..., T] = scope[fn]
    build.__module__ = cls.__module__
    build.__doc__ = f"``{cls.__name__}({', '.join(names)})``, built faster (:func:`{__name__}.fast_builder`)."
    return build


new_record: Callable[[str, int, int, str, str, float, str | None, int], Record] = fast_builder(Record)
"""``Record(annotation, config, run, kernel, metric, value, unit, seq)``, built faster (see above)."""
new_region_run: Callable[[str, int, int, int, bool, Mapping[str, Scalar]], RegionRun] = fast_builder(RegionRun)
"""``RegionRun(annotation, config, run, host_ns, failed, attributes)``, built faster (see above)."""
new_collector_value: Callable[[str, str, int | None, int | None, str | None, Scalar], CollectorValue] = fast_builder(
    CollectorValue
)
"""``CollectorValue(name, scope, config, run, annotation, value)``, built faster (see above)."""
new_run_records: Callable[
    [int, int, tuple[Record, ...], tuple[RegionRun, ...], tuple[CollectorValue, ...]], RunRecords
] = fast_builder(RunRecords)
"""``RunRecords(config, run, records, regions, collectors)``, built faster (see above)."""
