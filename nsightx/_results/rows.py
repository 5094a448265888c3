"""Runs in compact form: what the run loop hands the sink, made into record objects only when something reads them.

On the host backend beside an empty region, building one :class:`~nsightx._results.records.RunRecords`, one
:class:`~nsightx._results.records.RegionRun` and one :class:`~nsightx._results.records.Record` per run cost ~1.4 us
of a ~8 us run (issue 35). The run loop now hands a :class:`~nsightx._results.sink.RunSink` each finished run as
plain tuples (a :data:`RunRow`), the host backend hands the loop its records as tuples
(``RunOutput.record_rows``), and the objects are made from the rows only when something asks for them
(:func:`runs_from_rows`, all runs in one loop), or never, by a reader that takes the rows' fields as columns.

The objects are made through unfrozen twins of the record types (:func:`_twin`): a class with the very same slots
whose plain ``__init__`` stores the fields; the new object then takes the frozen class (``__class__``
assignment, allowed between classes of one memory layout). The result is the object the constructor makes
(equal, same hash, still frozen), at half the cost of setting each slot through its descriptor (0.26 against
0.53 us a Record, 0.86 through the constructor, on a shared 2-core CI CPU).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any

from nsightx._results.records import CollectorValue, Record, RegionRun, RunRecords, Scalar


def _twin(cls: type) -> type:
    """An unfrozen class with the slots of the frozen, slotted dataclass ``cls``, whose ``__init__`` sets them all.

    Its instances can become ``cls`` instances by ``__class__`` assignment (same base, same slots, so the same
    layout). The ``__init__`` is generated, so that a field added to ``cls`` is never missed.
    """
    names = [f.name for f in dataclasses.fields(cls)]
    body = "".join(f"\n    self.{n} = {n}" for n in names)
    namespace: dict[str, Any] = {}
    exec(f"def __init__(self, {', '.join(names)}):{body}", namespace)  # field names of our own classes
    slots = cls.__dict__["__slots__"]
    twin = type(f"_{cls.__name__}Init", cls.__bases__, {"__slots__": slots, "__init__": namespace["__init__"]})
    probe: Any = object.__new__(twin)
    probe.__class__ = cls  # fails at import when the layouts ever differ
    return twin


_RecordInit = _twin(Record)
_RegionRunInit = _twin(RegionRun)
_RunRecordsInit = _twin(RunRecords)
_CollectorValueInit = _twin(CollectorValue)


RecordRow = tuple[str, int, int, str, str, float, "str | None", int]
"""A :class:`Record`'s fields as a tuple, in declaration order."""

CollectorRow = tuple[str, str, "int | None", "int | None", "str | None", Scalar]
"""A :class:`CollectorValue`'s fields as a tuple, in declaration order: (name, scope, config, run, annotation,
value). The run loop hands each run's collector and thermal-guard values over in this form: on the GPU the nvml
plugin's seven values per run, built as objects, were the largest part of its per-run cost (issue 35)."""

RegionRow = tuple[str, int, bool]
"""(annotation, host_ns, failed) of one region executed in a run (its config and run are the run's)."""

RunRow = tuple[
    int,
    int,
    "tuple[RecordRow | Record, ...] | list[RecordRow | Record]",
    "tuple[RegionRow, ...] | list[RegionRow]",
    "Mapping[str, Mapping[str, Scalar]]",
    "tuple[CollectorRow | CollectorValue, ...]",
]
"""One finished run in compact form: (config, run, records, regions, region attributes, collector values).

``records`` holds :data:`RecordRow` tuples or :class:`Record` objects (from a backend that made them), the
collector values :data:`CollectorRow` tuples or :class:`CollectorValue` objects;
``regions`` one :data:`RegionRow` per region, in closing order; the region attributes are keyed by annotation
(a region without an entry has none). :func:`run_from_row` makes the :class:`RunRecords` it stands for.
"""


def run_from_row(row: RunRow) -> RunRecords:
    """The :class:`RunRecords` that the compact ``row`` stands for (equal to one built field by field)."""
    return runs_from_rows([row])[0]


def runs_from_rows(rows: Iterable[Any]) -> list[RunRecords]:
    """:func:`run_from_row` of each compact run of ``rows`` (a :class:`RunRecords` among them stays as it is).

    ``rows`` may also hold :class:`~nsightx._results.runblock.RunBlock` objects (many runs as columns): each stands
    for the runs of its :meth:`~nsightx._results.runblock.RunBlock.rows`.

    One loop for all runs, with the twins' constructors inlined: ~0.6 us a run of one region and one record.
    """
    record_init, region_init, run_init, value_init = _RecordInit, _RegionRunInit, _RunRecordsInit, _CollectorValueInit
    out: list[RunRecords] = []
    for row in rows:
        if type(row) is not tuple:
            if isinstance(row, RunRecords):
                out.append(row)
            else:  # a RunBlock (nsightx._results.runblock): the rows it stands for
                out += runs_from_rows(row.rows())
            continue
        config, run, record_rows, region_rows, attributes, collectors = row
        records: list[Any] = []
        for x in record_rows:
            if type(x) is tuple:
                x = record_init(*x)
                x.__class__ = Record
            records.append(x)
        regions: list[Any] = []
        for name, host_ns, failed in region_rows:
            g = region_init(name, config, run, host_ns, failed, attributes.get(name) or {})
            g.__class__ = RegionRun
            regions.append(g)
        values: list[Any] = []
        for v in collectors:
            if type(v) is tuple:
                v = value_init(*v)
                v.__class__ = CollectorValue
            values.append(v)
        r = run_init(config, run, tuple(records), tuple(regions), tuple(values))
        r.__class__ = RunRecords
        out.append(r)
    return out
