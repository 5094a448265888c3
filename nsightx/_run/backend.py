"""The backend contract: what a measuring tool must provide to plug into nsightx.

The core never names a backend. Backends are classes registered through the ``nsightx_register_backends``
hook; the core asks each one for its :class:`Capabilities` and :meth:`Backend.availability`. An in-process
backend only implements :meth:`Backend.session`; the run stage drives it through the shared run loop
(:func:`nsightx._run.loop.execute`). A backend that measures elsewhere (the ncu worker) overrides
:meth:`Backend.execute` and still feeds the same :class:`~nsightx._results.records.RunRecords` into the sink.
"""

from __future__ import annotations

import abc
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from types import NoneType, UnionType
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Self, Union, get_args, get_origin

from pydantic import BeforeValidator, ConfigDict, PlainValidator, ValidationError, WrapValidator
from pydantic.fields import FieldInfo

from nsightx._errors import ConfigError, ConfigTypeError
from nsightx._model import Frozen
from nsightx._results.records import Record, RegionId, Scalar
from nsightx._results.rows import RecordRow

if TYPE_CHECKING:
    from nsightx._results.sink import Sink
    from nsightx._run.plan import Plan


class Capabilities(Frozen):
    """What a backend can deliver; "auto" compares these with what the decorator asks."""

    metrics: frozenset[str] | None
    """Metric names it can measure; ``None`` means any name its tool accepts (ncu)."""
    default_metrics: tuple[str, ...]
    """Its natural time metric(s), used when the decorator leaves ``metrics`` unset."""
    cache_control: frozenset[str] = frozenset({"none"})
    """Accepted ``cache_control`` values; the first of ("all", "none") it accepts is its default."""
    clock_control: frozenset[str] = frozenset({"none"})
    """Accepted ``clock_control`` values."""
    replay_modes: frozenset[str] = frozenset({"kernel"})
    """Accepted ``replay_mode`` values."""
    needs_gpu: bool = True
    """Whether it measures GPU work (False only for the host clock)."""
    per_device: bool = True
    """Whether it can measure on a chosen CUDA device (``device=``, ``parallel_devices=``)."""
    cost: int = 100
    """Relative overhead per measured run; "auto" tries the backends that take part in it, lowest cost first.

    The first-party scale: 10 ``cupti`` (traces kernels in process), 20 ``events`` (a CUDA event pair per
    region), 50 ``host`` (the host clock, CPU time only: what "auto" falls back to without a GPU), 100 ``ncu`` (a
    worker process under Nsight Compute, kernel replay). Ties go to the backend registered first.
    """
    auto: bool = False
    """Whether ``backend="auto"`` may choose it. Off unless a backend opts in (the first-party ones do), so a
    third-party backend with a low ``cost`` is used when named, never silently in place of the first-party ones."""


class Availability(Frozen):
    """Whether a backend can run here, and if not, why and how to fix it."""

    available: bool
    """True when the backend can run in this process."""
    reason: str = ""
    """What is missing (or what was found, when available)."""
    remedy: str = ""
    """What the user can do about it."""
    version: str | None = None
    """Version of the underlying tool, when known."""


@dataclass
class RunOutput:
    """What a session hands back at the end of one run of the user's function."""

    records: list[Record] = field(default_factory=list)
    """Metric values, one per (region, kernel, metric)."""
    region_attributes: dict[str, dict[str, Scalar]] = field(default_factory=dict)
    """Extra per-region measurements keyed by annotation name (e.g. ``device_ns``, ``kernel_count``)."""
    record_rows: Sequence[RecordRow] = ()
    """More metric values, each as a plain tuple of a :class:`Record`'s fields in their declared order.

    For a backend that would rather not build an object per value between two runs (the host backend): the run
    loop hands the tuples to the sink as they are, after :attr:`records`, and a :class:`Record` is made of each
    only when something asks for the run's records (issue 35: ~0.5 us a run beside an empty region).
    """


class Session(abc.ABC):
    """One backend session over a whole plan, driven by the run loop.

    The run loop calls, for each run: :meth:`start_run` (outside any region: cache flush and the like),
    then :meth:`region_enter`/:meth:`region_exit` around each annotated region (from whichever thread opens
    it), then :meth:`finish_run`, which returns the run's records.
    """

    deferred: bool = False
    """True when :meth:`finish_run` returns nothing and the records come later from :meth:`collect_runs`.

    Collecting a GPU tracer's buffers costs far more than a short run (a forced CUPTI flush with its
    synchronisation is ~0.6 ms), and waiting for the GPU stops the host from queueing the next runs, so a deferred
    session collects once for many runs: the run loop calls :meth:`collect_runs` every :data:`COLLECT_EVERY`
    runs, at the end of a config when :data:`COLLECT_SECONDS` have passed since the last collection, at the end
    of the call, when a run fails, and after every run when an adaptive run count needs values.
    """

    host_timed: bool = False
    """True for a session that measures nothing but the host time of each region (the host backend).

    The run state reads the host clock around every region anyway (its regions' ``host_ns``), so for such a
    session it calls neither :meth:`region_enter` nor :meth:`region_exit`: it hands over the time it read, once
    the region closed, through :meth:`region_timed`. That saves two clock reads and two calls a region (issue 35).
    A subclass that overrides :meth:`region_enter` or :meth:`region_exit` must set it back to False.
    """

    timed_records: tuple[str, str, str | None] | None = None
    """For a :attr:`host_timed` session whose records are exactly one per region that did not fail, made of the
    time it is handed: (kernel, metric, unit) of that record (its value the nanoseconds as a float, its ``seq``
    0); else ``None``. A failed region has no record, as on every backend (the core shows NaN, ``Kernel="failed"``).

    Such a session's runs hold nothing the run loop does not know already, so for a run that is the user's call
    alone the loop calls neither :meth:`region_timed` nor :meth:`finish_run`: it keeps the regions' times itself,
    as columns, and the records are made of them when something reads them (issue 35: a row per run and the
    session's output cost a third of such a run on the host backend). The session must not need those calls.
    """

    def region_timed(self, name: str, config: int, run: int, ns: int, failed: bool) -> None:
        """A region of a :attr:`host_timed` session closed: ``ns`` host nanoseconds from its start to its end.

        Called from the thread that closed the region, as :meth:`region_exit` would have been.
        """
        raise NotImplementedError(f"{type(self).__name__} sets host_timed but has no region_timed")

    def collect_runs(self) -> Mapping[tuple[int, int], RunOutput]:
        """For deferred sessions: the outputs of every run finished since the last call, keyed (config, run).

        Warm-up runs (negative run index) may be included; they are discarded.
        """
        return {}

    def completed_runs(self) -> Iterator[tuple[tuple[int, int], RunOutput]]:
        """For deferred sessions: what :meth:`collect_runs` returns, each run handed back as soon as it is complete.

        The run loop collects a deferred session through this method: it writes each run (its row, the sink, the
        raw file) as soon as the run and every run before it came back, while the session still waits for the
        later ones (a GPU session: while the GPU still works through them), rather than all of them after the
        last wait. A session that can read its runs one by one in the order they ran (the events backend)
        overrides it and yields ``((config, run), output)`` pairs, in that order where it can; runs it never yields
        are written with what :meth:`finish_run` returned for them, as runs missing from :meth:`collect_runs`'
        mapping are. An exception raised from it reaches the run loop as one from :meth:`collect_runs` would,
        after the runs already yielded were written.

        The default yields the items of :meth:`collect_runs`, so a session that implements only that one
        (every session written before this method existed) is collected exactly as before.
        """
        yield from self.collect_runs().items()

    def start_run(self, config: int, run: int) -> None:  # noqa: B027 - optional hook
        """Prepare a run (flush caches, reset counters). Called outside any region."""

    @abc.abstractmethod
    def region_enter(self, region: RegionId) -> None:
        """A region opens. Must be cheap: it sits on the measured path."""

    @abc.abstractmethod
    def region_exit(self, region: RegionId, failed: bool) -> None:
        """A region closes; ``failed`` is true when the region raised and the failure was ignored."""

    @abc.abstractmethod
    def finish_run(self, config: int, run: int) -> RunOutput:
        """Return what was measured during the run that just ended."""

    def environment(self) -> Mapping[str, Scalar]:
        """Facts about the device measured (``GPU``, ``ComputeClock``, ``MemoryClock`` in kHz, ...)."""
        return {}


COLLECT_EVERY = 64
"""A deferred session is collected at least this often (runs), bounding what a hard crash could lose."""

COLLECT_SECONDS = 1.0
"""A deferred session is also collected at the end of a config once this much time has passed since the last
collection: a short sweep is collected once, a long one about every second (its raw file grows as it goes)."""


class Backend(abc.ABC):
    """A way of measuring annotated regions. Subclass, set the class variables, register via the hook."""

    name: ClassVar[str]
    """Registered name, used by ``backend=`` and ``activate``."""
    description: ClassVar[str] = ""
    """One line saying what it measures."""
    capabilities: ClassVar[Capabilities]
    """What it can deliver."""

    @classmethod
    @abc.abstractmethod
    def availability(cls) -> Availability:
        """Say whether this backend can run here. Must never raise and must stay cheap."""

    def validate(self, plan: Plan) -> None:  # noqa: B027 - optional hook
        """Reject options this backend cannot honour beyond what :attr:`capabilities` says. Raise ConfigError."""

    def session(self, plan: Plan) -> AbstractContextManager[Session]:
        """Open an in-process session for ``plan``. Backends that override :meth:`execute` need not."""
        raise NotImplementedError(f"backend {self.name!r} does not run in process")

    def execute(self, plan: Plan, sink: Sink) -> Mapping[str, Scalar]:
        """Measure every run of ``plan`` elsewhere, writing each run's records to ``sink`` as it completes.

        Only a backend that does not measure in this process overrides this (the ncu worker). Every other backend
        implements :meth:`session` only: the run stage (:func:`nsightx._run.loop.execute`) then drives that
        session through the shared run loop itself, so this contract does not depend on the run loop.

        Returns:
            The environment the backend measured in (GPU name, clocks, ...).
        """
        raise NotImplementedError(
            f"backend {self.name!r} measures in process: the core drives its session() through the shared run loop"
        )

    @classmethod
    def measures_elsewhere(cls) -> bool:
        """Whether this backend overrides :meth:`execute` (and so measures outside the shared run loop)."""
        return cls.execute is not Backend.execute


class BackendOptions(Frozen):
    """Base of a backend's ``backend_options`` model: one pydantic field per key, with its default and docstring.

    Subclass it with one field per option (the attribute docstring's first sentence is what an error message
    says the key means) and call :meth:`parse` on ``plan.backend_options`` in :meth:`Backend.validate` and
    wherever the backend reads an option: every key then has one default and one check. A bad key or value
    raises :class:`~nsightx.ConfigError` naming the key, the value and what is accepted; pydantic's
    ``ValidationError`` never reaches the user.

    A field typed ``bool``, ``int`` or ``float`` (or a union of them, with or without ``None``) takes only a value
    of that type, as the decorator's own options do: pydantic's lax mode would read ``True`` as the number 1,
    ``"yes"`` or ``1`` as True and ``"5"`` as 5, and a user who wrote one of those did not mean it. Such a value
    raises :class:`~nsightx.ConfigTypeError`. Other fields keep pydantic's checks (a list for a tuple field, a
    value of a ``Literal``).

    Example:
        >>> from typing import Literal
        >>> class EchoOptions(BackendOptions):
        ...     echo_level: Literal["low", "high"] = "low"
        >>> EchoOptions.parse({"echo_level": "high"}, "echo").echo_level
        'high'
    """

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)  # the message's meanings

    @classmethod
    def parse(cls, options: Mapping[Any, Any] | None, backend: str) -> Self:
        """Validate ``options`` (a plan's ``backend_options``) for the backend named ``backend``.

        Raises:
            ConfigError: an unknown key, or a value the field does not accept.
            ConfigTypeError: a bool, int or float field given a value of another type (``"yes"``, ``1`` for a bool;
                ``True``, ``"5"`` for a number).
        """
        data = dict(options or {})
        unknown = sorted(set(data) - set(cls.model_fields), key=str)
        if unknown:
            raise ConfigError(cls._unknown_message(unknown, backend))
        cls._check_scalars(data, backend)
        try:
            return cls.model_validate(data)
        except ValidationError as e:
            err = e.errors(include_url=False)[0]
            key = str(err["loc"][0]) if err["loc"] else "backend_options"
            raise ConfigError(
                f"backend_options[{key!r}]={data.get(key)!r} {_problem(err['msg'])} (the {backend} backend)"
            ) from e

    @classmethod
    def _check_scalars(cls, data: Mapping[Any, Any], backend: str) -> None:
        """Refuse a value of another type for a bool, int or float field (pydantic's lax mode would convert it)."""
        for key, field_info in cls.model_fields.items():
            accepted = _scalar_problem(field_info, data[key]) if key in data else None
            if accepted:
                value = data[key]
                raise ConfigTypeError(
                    f"backend_options[{key!r}] must be {accepted}, got {type(value).__name__} {value!r} "
                    f"(the {backend} backend): a value of another type is not converted"
                )

    @classmethod
    def _unknown_message(cls, unknown: list[Any], backend: str) -> str:
        if not cls.model_fields:
            return (
                f"backend_options {unknown} are not understood by the {backend} backend, which takes "
                "no backend_options; remove them (or choose the backend they were written for)"
            )
        meanings = "; ".join(f"{k}: {(f.description or '').split(chr(10))[0]}" for k, f in cls.model_fields.items())
        return (
            f"backend_options {unknown} are not understood by the {backend} backend; accepted keys: "
            f"{', '.join(cls.model_fields)} ({meanings})"
        )


_SCALARS: dict[frozenset[type], str] = {
    frozenset({bool}): "True or False",
    frozenset({int}): "an int (not a bool)",
    frozenset({float}): "a number (int or float, not a bool)",
    frozenset({int, float}): "a number (int or float, not a bool)",
}
"""What a bool/int/float field accepts, by the set of its types (``None`` aside), as the message words it."""


def _scalar_problem(field_info: FieldInfo, value: object) -> str | None:
    """What a field accepts, when ``value`` is not of the field's bool/int/float type; else None.

    Only fields whose types (``None`` aside) are all in :data:`_SCALARS`' keys are checked here; the rest are
    left to pydantic, and so is a field with a validator of its own that sees the raw value first
    (:data:`ByteCount`'s, which refuses a bool itself). ``None`` is left to pydantic too (it refuses it where the
    field is not optional).
    """
    if any(isinstance(m, BeforeValidator | PlainValidator | WrapValidator) for m in field_info.metadata):
        return None
    annotation = field_info.annotation
    union = get_origin(annotation) in (Union, UnionType)
    kinds = frozenset(t for t in (get_args(annotation) if union else (annotation,)) if t is not NoneType)
    accepted = _SCALARS.get(kinds)
    if accepted is None or value is None:
        return None
    if isinstance(value, bool):
        fits = bool in kinds
    elif isinstance(value, int):
        fits = int in kinds or float in kinds
    else:
        fits = isinstance(value, float) and float in kinds
    if fits:
        return None
    return accepted + (" or None" if union and NoneType in get_args(annotation) else "")


def _problem(message: str) -> str:
    """Pydantic's message for a bad value, as the rest of ours read (``must be 'a' or 'b'``)."""
    for prefix in ("Value error, ", "Input should be "):
        if message.startswith(prefix):
            message = message[len(prefix) :]
            if prefix == "Input should be ":
                message = "must be " + message
    return message


BYTES_MINIMUM = 1 << 16
"""The smallest buffer a byte-count option accepts."""


def _check_bytes(value: object) -> int | None:
    if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < BYTES_MINIMUM):
        raise ValueError(f"must be an int of at least {BYTES_MINIMUM} bytes")
    return value


ByteCount = Annotated[int | None, BeforeValidator(_check_bytes)]
"""A buffer size option: ``None`` (the backend's default) or an int of at least :data:`BYTES_MINIMUM` bytes."""


class NoOptions(BackendOptions):
    """The options of a backend that takes none (every key is refused)."""


def first_supported(preferred: Sequence[str], accepted: frozenset[str]) -> str:
    """Return the first of ``preferred`` that ``accepted`` contains (how defaults resolve per backend)."""
    for value in preferred:
        if value in accepted:
            return value
    return sorted(accepted)[0]
