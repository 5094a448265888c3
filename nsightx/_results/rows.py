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
from collections.abc import Iterable, Iterator, Mapping
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

_SCALAR_TYPES = (int, float, str)  # bool is an int
"""A tuple, not ``int | float | str``: ``isinstance`` with a union expression builds the union at every call
(0.48 against 0.11 us on a CI CPU), and :func:`to_scalar` runs for collector values of every run."""

PLAIN_TYPES = frozenset({int, float, str, bool, type(None)})
"""Types :func:`to_scalar` returns unchanged: a value of one of them is taken without the call."""


def to_scalar(value: object) -> Scalar:
    """A collector's value as the result schema takes it (the ncu backend's parent-side collectors use it too).

    Scalars stay as they are; numpy scalars and 0-d tensors become the Python value their ``item()`` gives (an
    integer stays an int, exactly, and a bool a bool: ``float()`` made ``np.int64(2**53 + 1)`` another number and
    ``np.bool_(True)`` the number 1.0); other numbers become float, anything else its str.
    """
    if value is None or isinstance(value, _SCALAR_TYPES):
        return value
    plain = item_scalar(value)
    if plain is not None:
        return plain
    try:
        return float(value)  # type: ignore[arg-type]  # numpy scalars, 0-d tensors
    except (TypeError, ValueError):
        return str(value)


def item_scalar(value: object) -> int | float | str | None:
    """The scalar ``value.item()`` gives (a numpy scalar, a 0-d tensor: exactly, a bool a bool); else None.

    None also where there is no ``item()``, or it raised (a tensor of several values, an ``item()`` that wants
    arguments), or gave no scalar. :func:`to_scalar` (collector values) and the backend environment's check
    (:mod:`nsightx._run.environment`) both read numpy scalars through it.
    """
    item = getattr(value, "item", None)
    if not callable(item):
        return None
    try:
        plain = item()
    except Exception:
        return None
    return plain if isinstance(plain, _SCALAR_TYPES) else None


class RunValues(Mapping[str, Scalar]):
    """A RUN collector's answer kept as it is: values ``shared`` by many runs (not copied) and ``name`` = ``value``.

    Why: the nvml RUN collector's answer before each run is the latest sample of a background sampler, the same
    five values for every run until a new sample is published, and the sample's age, the one value that differs.
    Made into six rows per run, it cost microseconds a run (issue 35). The run loop keeps the answer itself in the
    run's compact row (:data:`RunRow`) and the readers expand it: :func:`runs_from_rows` into the values of the
    run (config and run are the run's, scope ``run``, no annotation), the result's columns per distinct shared
    mapping (:mod:`nsightx._results.sharedcolumns`). ``shared`` must not change once returned.

    As a mapping it holds the keys of ``shared`` in their order, then ``name`` (whose value is ``value``, also
    when ``shared`` has that key as well): a caller that does not know it (a proxy asking for one value at a
    time) reads it as the plain mapping it stands for, and its rows are those of that mapping.

    Args:
        shared: Values many answers may share (the same object for every run that has them).
        name: The key of this answer's own value.
        value: This answer's own value.

    Example:
        >>> sample = {"Temperature": 41, "Clock": 1980}
        >>> dict(RunValues(sample, "AgeMs", 0.25))
        {'Temperature': 41, 'Clock': 1980, 'AgeMs': 0.25}
    """

    __slots__ = ("name", "shared", "value")

    def __init__(self, shared: Mapping[str, Scalar], name: str, value: Scalar) -> None:
        self.shared = shared
        self.name = name
        self.value = value

    def __getitem__(self, key: str) -> Scalar:
        if key == self.name:
            return self.value
        return self.shared[key]

    def __iter__(self) -> Iterator[str]:
        name = self.name
        yield from (k for k in self.shared if k != name)
        yield name

    def __len__(self) -> int:
        return len(self.shared) + (self.name not in self.shared)

    def __repr__(self) -> str:
        return f"RunValues({dict(self)!r})"


SharedRows = tuple["tuple[str, ...]", "tuple[Scalar, ...]"]
"""The names and scalars of a :class:`RunValues`' shared mapping, its own name left out (see :func:`shared_rows`)."""

_last_shared: tuple[Any, str, SharedRows] = (None, "", ((), ()))
"""(shared mapping, own name, its rows) of the last :func:`shared_rows` conversion, replaced as a whole (one
read sees one conversion, also with two threads). The mapping stays referenced, so no other takes its identity."""


def shared_rows(values: RunValues) -> SharedRows:
    """The names and scalars of ``values.shared`` without ``values.name``: converted once per shared mapping.

    The runs that share a mapping (the nvml sampler's latest sample) share its conversion: a run converts nothing
    until a new mapping comes.
    """
    global _last_shared
    shared, name = values.shared, values.name
    last = _last_shared
    if last[0] is shared and last[1] == name:
        return last[2]
    plain = PLAIN_TYPES
    keys = tuple(k if type(k) is str else str(k) for k in shared if k != name)
    scalars = tuple(v if type(v) in plain else to_scalar(v) for k, v in shared.items() if k != name)
    _last_shared = (shared, name, (keys, scalars))
    return keys, scalars


def own_scalar(values: RunValues) -> Scalar:
    """The own value of ``values`` as a scalar."""
    value = values.value
    return value if type(value) in PLAIN_TYPES else to_scalar(value)


RUN_SCOPE = "run"
"""The scope of the values a :class:`RunValues` of a run stands for (``CollectionScope.RUN``)."""


def values_rows(
    values: RunValues, config: int | None, run: int | None, scope: str = RUN_SCOPE, annotation: str | None = None
) -> list[CollectorRow]:
    """The collector rows ``values`` stands for, in its order: the shared ones, then its own."""
    keys, scalars = shared_rows(values)
    out = [(k, scope, config, run, annotation, v) for k, v in zip(keys, scalars, strict=True)]
    out.append((values.name, scope, config, run, annotation, own_scalar(values)))
    return out


RunRow = tuple[
    int,
    int,
    "tuple[RecordRow | Record, ...] | list[RecordRow | Record]",
    "tuple[RegionRow, ...] | list[RegionRow]",
    "Mapping[str, Mapping[str, Scalar]]",
    "tuple[CollectorRow | CollectorValue | RunValues, ...]",
]
"""One finished run in compact form: (config, run, records, regions, region attributes, collector values).

``records`` holds :data:`RecordRow` tuples or :class:`Record` objects (from a backend that made them), the
collector values :data:`CollectorRow` tuples, :class:`CollectorValue` objects or :class:`RunValues` answers
(each the RUN-scope values of this run it stands for, see :func:`values_rows`);
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
            elif type(v) is RunValues:  # the values it stands for
                for x in values_rows(v, config, run):
                    x = value_init(*x)
                    x.__class__ = CollectorValue
                    values.append(x)
                continue
            values.append(v)
        r = run_init(config, run, tuple(records), tuple(regions), tuple(values))
        r.__class__ = RunRecords
        out.append(r)
    return out
