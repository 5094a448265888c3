"""The fast builders of the record types build exactly what their constructors build."""

from __future__ import annotations

import dataclasses
import inspect
import re
from collections.abc import Callable
from typing import Any

import pytest

from nsightx._results.records import (
    CollectorValue,
    Record,
    RegionRun,
    RunRecords,
    fast_builder,
    new_collector_value,
    new_record,
    new_region_run,
    new_run_records,
)
from nsightx._results.transform import RunValue, new_run_value

REC = Record("work", 1, 2, "gemm", "gpu__time_duration.sum", 3.5, "ns", 1)
REG = RegionRun("work", 1, 2, 99, True, {"kernel_count": 2})
COL = CollectorValue("GPUClockMHz", "run", 1, 2, None, 1980.0)
CASES: list[tuple[Callable[..., Any], Any]] = [
    (new_record, REC),
    (new_region_run, REG),
    (new_collector_value, COL),
    (new_run_records, RunRecords(1, 2, (REC,), (REG,), (COL,))),
    (new_run_value, RunValue("work", 1, 2, "gpu__time_duration.sum", 3.5, "ns", "gemm")),
]


@pytest.mark.parametrize(("build", "made"), CASES, ids=[b.__name__ for b, _ in CASES])
def test_a_builder_takes_every_field_in_order_and_builds_an_equal_frozen_object(
    build: Callable[..., Any], made: Any
) -> None:
    fields = [f.name for f in dataclasses.fields(made)]
    assert list(inspect.signature(build).parameters) == fields  # a new field must be added to the builder too
    built = build(*(getattr(made, f) for f in fields))
    assert type(built) is type(made)
    assert built == made
    if type(made) in (Record, CollectorValue, RunValue):  # the others hold a dict (a region's attributes)
        assert hash(built) == hash(made)
    with pytest.raises(dataclasses.FrozenInstanceError):
        built.config = 7


def test_a_built_record_round_trips_through_json_like_a_constructed_one() -> None:
    built = new_record("work", 0, 0, "k", "m", 1.0, None, 0)
    assert Record.model_validate_json(built.model_dump_json()) == built


def test_one_helper_writes_every_builder() -> None:
    """The five builders come from fast_builder, not hand-written copies: a new record type gets one for free."""

    @dataclasses.dataclass(frozen=True, slots=True)
    class PairOfThings:
        left: int
        right: str = ""

    build = fast_builder(PairOfThings)
    assert build.__name__ == "new_pair_of_things" and build.__module__ == PairOfThings.__module__
    assert list(inspect.signature(build).parameters) == ["left", "right"]
    assert build(1, "x") == PairOfThings(1, "x") and type(build(1, "x")) is PairOfThings
    for built, made in CASES:
        fields = ", ".join(f.name for f in dataclasses.fields(made))
        assert (built.__doc__ or "").startswith(f"``{type(made).__name__}({fields})``, built faster (")
        assert built.__name__ == "new_" + "_".join(w.lower() for w in re.findall("[A-Z][a-z]*", type(made).__name__))


def test_fast_builder_refuses_a_field_its_source_could_shadow() -> None:
    @dataclasses.dataclass(frozen=True, slots=True)
    class Shadowing:
        _obj: int

    with pytest.raises(TypeError, match="_obj"):
        fast_builder(Shadowing)
