"""The backend contract: what a measuring tool must provide to plug into nsightx.

The core never names a backend. Backends are classes registered through the ``nsightx_register_backends``
hook; the core asks each one for its :class:`Capabilities` and :meth:`Backend.availability`, and drives the
chosen one through :meth:`Backend.execute`. An in-process backend only implements :meth:`Backend.session`
and inherits ``execute``, which runs the shared run loop. A backend that measures elsewhere (the ncu worker)
overrides ``execute`` and still feeds the same :class:`~nsightx._records.RunRecords` into the sink.
"""

from __future__ import annotations

import abc
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar

from nsightx._errors import ConfigError
from nsightx._model import Frozen
from nsightx._records import Record, RegionId, Scalar

if TYPE_CHECKING:
    from nsightx._plan import Plan
    from nsightx._sink import Sink


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
    """Relative overhead; "auto" prefers the lowest cost among the backends that fit."""


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

    def collect_runs(self) -> Mapping[tuple[int, int], RunOutput]:
        """For deferred sessions: the outputs of every run finished since the last call, keyed (config, run).

        Warm-up runs (negative run index) may be included; they are discarded.
        """
        return {}

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
        """Measure every run of ``plan``, writing each run's records to ``sink`` as it completes.

        Returns the environment the backend measured in (GPU name, clocks, ...).
        """
        from nsightx._device import use_device
        from nsightx._runloop import run_loop

        with use_device(plan.device), self.session(plan) as session:
            run_loop(plan, session, sink)
            return dict(session.environment())


def check_option_names(plan: Plan, accepted: Mapping[str, str], backend: str) -> None:
    """Reject ``backend_options`` keys not in ``accepted`` (key -> one-line meaning), naming every accepted key.

    Raises:
        ConfigError: an unknown key.
    """
    unknown = sorted(set(plan.backend_options) - set(accepted), key=str)
    if unknown:
        if not accepted:
            raise ConfigError(
                f"backend_options {unknown} are not understood by the {backend} backend, which takes "
                "no backend_options; remove them (or choose the backend they were written for)"
            )
        listed = "; ".join(f"{k}: {v}" for k, v in accepted.items())
        raise ConfigError(f"backend_options {unknown} are not understood by the {backend} backend; it accepts {listed}")


def check_byte_option(plan: Plan, key: str, minimum: int = 1 << 16) -> None:
    """Reject ``backend_options[key]`` unless it is absent or an int of at least ``minimum`` bytes.

    Raises:
        ConfigError: a value of another type, or too small.
    """
    value = plan.backend_options.get(key)
    if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < minimum):
        raise ConfigError(f"backend_options[{key!r}]={value!r} must be an int of at least {minimum} bytes")


def first_supported(preferred: Sequence[str], accepted: frozenset[str]) -> str:
    """Return the first of ``preferred`` that ``accepted`` contains (how defaults resolve per backend)."""
    for value in preferred:
        if value in accepted:
            return value
    return sorted(accepted)[0]
