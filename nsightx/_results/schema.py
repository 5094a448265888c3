"""The saved result: a versioned, frozen pydantic model that round-trips through JSON."""

from __future__ import annotations

import contextlib
import gc
import json
import math
from collections.abc import Iterator, Mapping
from typing import Any, Literal

from pydantic import (
    ConfigDict,
    SerializerFunctionWrapHandler,
    ValidationError,
    field_validator,
    model_serializer,
    model_validator,
)

from nsightx._errors import ResultSchemaError
from nsightx._model import Frozen
from nsightx._results.nulls import measured_as_null
from nsightx._results.records import RunRecords, Scalar
from nsightx._results.transform import RunValue

SCHEMA_VERSION: int = 2
"""The newest version of the saved result this nsightx reads and writes.

1: every result before joined results; 2: a result joined from two backends (``PlanInfo.metric_backends``, which
an nsightx that reads version 1 refuses as an unknown field). A result is written as the oldest version that holds
it (:func:`written_version`), so a plain result stays readable by those versions, and a joined one gets their
upgrade hint rather than a field error.
"""
RAW_FORMAT: int = 1
"""Version of the raw JSON-lines format (its header line and run lines)."""
RAW_KIND = "nsightx-raw"
"""The ``kind`` of a raw file's header line, which is how :func:`nsightx.load` tells a raw file from a result."""


class PlanInfo(Frozen):
    """What was asked: the parts of the plan that describe the measurement (no callables)."""

    function: str
    """Qualified name of the profiled function."""
    params: tuple[str, ...]
    """Parameter names."""
    configs: tuple[tuple[Any, ...], ...]
    """Config values (JSON-safe: objects that JSON cannot hold are stored as their ``repr``)."""
    runs: int
    """Measured runs per config; under ``runs="auto"`` the most allowed (``max_runs``)."""
    adaptive: bool = False
    """True when ``runs="auto"`` chose each config's run count (see ``NumRuns`` and ``StopReason``)."""
    warmup: int
    metrics: tuple[str, ...]
    backend: str
    cache_control: str
    clock_control: str
    replay_mode: str
    normalize_against: str | None = None
    combine_kernel_metrics: str | None = None
    """Name of the reducer, for the record."""
    derive_metric: str | None = None
    """Name of the derive function, for the record."""
    ignore_kernel_list: tuple[str, ...] = ()
    device: int | str | None = None
    metric_backends: Mapping[str, str] = {}
    """Which backend measured each metric, in a result joined from two backends (``counters=``,
    :func:`nsightx.join_results`): the DataFrame's ``Tool``. Empty: ``backend`` measured every metric."""

    @model_serializer(mode="wrap")
    def _without_empty_sources(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """The plan's fields, without ``metric_backends`` when it is empty (schema 1 has no such field)."""
        out: dict[str, Any] = handler(self)
        if not self.metric_backends:
            out.pop("metric_backends", None)
        return out

    @field_validator("configs", mode="before")
    @classmethod
    def _json_safe(cls, value: Any) -> Any:
        if not isinstance(value, list | tuple) or not all(isinstance(cfg, list | tuple) for cfg in value):
            return value  # not a list of lists: the field's own type check refuses it with a clear message
        return tuple(tuple(_json_safe(v) for v in cfg) for cfg in value)


def _json_safe(value: Any) -> Any:
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    try:
        json.dumps(value)
        return value
    except (TypeError, ValueError):
        return repr(value)


NON_FINITE_AS_TOKENS = ConfigDict(ser_json_inf_nan="constants")
"""How a saved result and a raw run line write a collector value, environment entry or region attribute that is
NaN or infinite: as JSON's ``NaN``, ``Infinity`` and ``-Infinity`` tokens (as Python's ``json`` and the Parquet
file's metadata do), which ``json.loads`` and every nsightx version read back as those floats. Under pydantic's
default (``null``) such a value read back as ``None``, the value of a collector that raised, and an infinity
turned into a missing value (fix20). The root of what is written carries it (pydantic applies it from there, not
from a nested dataclass's own configuration); the measured values are then put back to ``null``, as every version
wrote them (:func:`~nsightx._results.nulls.measured_as_null`)."""


class ResultData(Frozen):
    """Everything a profiled call produced, as stored by ``ProfileResults.save``."""

    model_config = Frozen.model_config | NON_FINITE_AS_TOKENS

    schema_version: Literal[1, 2] = 1
    """Version of this schema; a newer file is refused with an upgrade hint. Written as :func:`written_version`
    whatever it holds here (a result read from a version-1 file and joined is written as version 2)."""
    nsightx_version: str
    """Version of nsightx that measured."""
    created: str
    """ISO 8601 time at which the call finished."""
    plan: PlanInfo
    """What was asked."""
    environment: Mapping[str, Scalar] = {}
    """Where it was measured: ``GPU``, ``Host``, rated clocks, Python and backend versions, artifacts."""
    runs: tuple[RunRecords, ...] = ()
    """Raw per-run records, as the backend produced them."""
    values: tuple[RunValue, ...] = ()
    config_devices: tuple[str, ...] = ()
    """Device (``"<ordinal>:<uuid>"``) that measured each config, when configs were spread over GPUs."""
    config_hosts: tuple[str, ...] = ()
    """Host that measured each config, when configs were spread over workers (``""``: a config that failed)."""
    """Per-run values after ``ignore_kernel_list``, ``combine_kernel_metrics`` and ``derive_metric``."""

    @field_validator("schema_version", mode="before")
    @classmethod
    def _check_version(cls, version: Any) -> Any:
        # A field validator, not a model "before" validator: that would make pydantic build the whole document
        # as Python objects first, doubling the time and memory of nsightx.load.
        # Only a newer version gets the upgrade hint; anything else that is not 1 (0, "1", null) is refused by the
        # field's type, as a damaged file.
        if isinstance(version, int) and not isinstance(version, bool) and version > SCHEMA_VERSION:
            raise ResultSchemaError(
                f"result written by schema v{version}; this nsightx reads schema v1 to "
                f"v{SCHEMA_VERSION}; upgrade nsightx (pip install -U nsightx)"
            )
        return version

    def model_dump_json(self, **kwargs: Any) -> str:
        """The result's JSON, as ``ProfileResults.save`` writes it (see :data:`NON_FINITE_AS_TOKENS`)."""
        return self.json_text(measured_finite=False, **kwargs)

    def json_text(self, *, measured_finite: bool, **kwargs: Any) -> str:
        """The result's JSON; ``measured_finite``: every measured value is known finite (nothing to put back).

        Keyword arguments go to pydantic's ``model_dump_json``.
        """
        text = super().model_dump_json(**kwargs)
        return text if measured_finite else measured_as_null(text)

    @model_serializer(mode="wrap")
    def _oldest_version(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """The result's fields, with the oldest schema version that holds them (:func:`written_version`)."""
        out: dict[str, Any] = handler(self)
        out["schema_version"] = written_version(self.plan)
        return out

    @model_validator(mode="after")
    def _metric_backends_of_older_results(self) -> ResultData:
        """A joined result saved before ``PlanInfo.metric_backends`` kept it in its environment: move it there."""
        cell = self.environment.get(_OLD_SOURCES_KEY)
        if self.plan.metric_backends or not isinstance(cell, str) or not cell:
            return self
        pairs = (item.rsplit("=", 1) for item in cell.split(";") if "=" in item)
        plan = self.plan.model_copy(update={"metric_backends": {m: b for m, b in pairs}})
        return self.model_copy(update={"plan": plan})


def written_version(plan: PlanInfo) -> int:
    """The schema version a result of ``plan`` is saved as: 2 for a joined result, else 1 (see SCHEMA_VERSION)."""
    return 2 if plan.metric_backends else 1


_OLD_SOURCES_KEY = "MetricSources"
"""Where a joined result saved by an earlier nsightx kept ``metric=backend;...`` (its environment)."""


class RawHeader(Frozen):
    """The first line of a raw ``raw_data-*.jsonl`` file: what the sweep was, so its runs can be read alone.

    Every following line is one finished run (:class:`~nsightx.RunRecords` fields plus ``"sweep"``, which
    must equal this header's ``sweep``).
    """

    kind: Literal["nsightx-raw"] = "nsightx-raw"
    """Marks the file as a raw nsightx file (the first key of the first line)."""
    format: int = RAW_FORMAT
    """Version of the raw format; a newer one is refused with an upgrade hint."""
    sweep: str
    """Random id of the call that wrote the file; every run line repeats it."""
    nsightx_version: str
    """Version of nsightx that measured."""
    created: str
    """ISO 8601 time at which the sweep started."""
    host: str | None = None
    """Host name of the machine that measured."""
    plan: PlanInfo
    """What was asked: function name, parameter names, config values (JSON-safe), runs, metrics, backend."""

    @field_validator("format")
    @classmethod
    def _check_format(cls, value: int) -> int:
        if value < 1:
            raise ValueError(f"format {value} is not a raw format version; nsightx writes 1 to {RAW_FORMAT}")
        if value > RAW_FORMAT:
            raise ResultSchemaError(
                f"raw file written in format v{value}; this nsightx reads format v1 to v{RAW_FORMAT}; "
                "upgrade nsightx (pip install -U nsightx)"
            )
        return value


def json_path(loc: tuple[int | str, ...]) -> str:
    """A pydantic error location as a JSON path: ``("runs", 3, "records", 0)`` -> ``runs[3].records[0]``."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def describe_errors(e: ValidationError) -> str:
    """The first problem of a validation error as ``field <JSON path>: <problem>``, plus how many more there are.

    The path is the JSON path of the field (``runs[3].records[0].value``), so a user can find it in the file;
    the problem says what was expected and, unless the field is missing, what was found.
    """
    errors = e.errors(include_url=False)
    first = errors[0]
    where = json_path(tuple(first["loc"]))
    what = str(first["msg"]).removeprefix("Value error, ")
    if first["type"] == "missing":
        what = "missing"
    elif first["type"] != "json_invalid" and "input" in first:
        what += f" (found {first['input']!r:.60})"
    more = f" (and {len(errors) - 1} more problem(s))" if len(errors) > 1 else ""
    return f"field {where!r}: {what}{more}" if where else f"{what}{more}"


def schema_message(e: ValidationError) -> str | None:
    """The message of a :class:`ResultSchemaError` raised inside validation (a version check), if any."""
    for err in e.errors(include_url=False):
        msg = str(err.get("msg", ""))
        if " v" in msg and "upgrade nsightx" in msg:
            return msg.removeprefix("Value error, ")
    return None


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while a whole result is built, then restore its previous state.

    Loading creates hundreds of thousands of container objects and no reference cycles; on Python 3.11 the
    collector would walk all of them again and again as they are made (it took more than half the load time
    in ``98c9cf0:benchmarks/load_result.py``). Reference counting still frees everything as usual.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
