"""The thermal guard: before every run, pause while the profiled GPU is too close to its slowdown temperature.

``thermal_mode`` (decorator option) chooses the policy:

* ``"off"``: no guard.
* ``"manual"``: when the headroom (slowdown temperature minus GPU temperature) is at or below
  ``thermal_wait`` °C, sleep until it is back to ``thermal_cont`` °C; if that takes longer than
  ``thermal_timeout`` seconds, raise :class:`~nsightx.CoolingTimeoutError`.
* ``"auto"`` (default): the same pause, but the band adapts instead of failing. When pauses come fewer than
  :data:`CLOSE_PAUSE_RUNS` runs apart, ``thermal_cont`` rises by :data:`ADAPT_STEP_C` (up to
  :data:`CONT_MAX_C`) so each pause buys more runs. When a pause times out, ``thermal_cont`` drops by the same
  step and is never raised that high again; if the idle GPU could not even get above ``thermal_wait``,
  ``thermal_wait`` drops to :data:`ADAPT_STEP_C` below the headroom reached, so the sweep goes on (with a
  warning) instead of waiting a full timeout before every run.

The guard reads temperatures from a :class:`TemperatureSource`, handed in with the plan's
:class:`ThermalSettings`. Nothing here knows NVML or the plugin host: a plugin offers a source through the
``nsightx_temperature_source`` hook (the first-party ``nvml`` plugin does), the API layer asks the host for it
when it builds the plan (:func:`nsightx._spec.makeplan.temperature_source`), and tests pass a source built on a
scripted NVML double. Every measured run then carries a ``ThermalPauseS`` value: the seconds
spent cooling before it (warm-up runs' pauses are added to the next measured run).
"""

from __future__ import annotations

import functools
import math
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from nsightx._enums import CollectionScope, VerbosityLevel
from nsightx._errors import CoolingTimeoutError
from nsightx._results.rows import CollectorRow

DEFAULT_WAIT_C = 10
"""Headroom (°C) at or below which a run waits, when ``thermal_wait`` is not given."""
DEFAULT_CONT_C = 20
"""Headroom (°C) a paused run waits for, when ``thermal_cont`` is not given."""
DEFAULT_TIMEOUT_S = 180
"""Longest single pause (s), when ``thermal_timeout`` is not given."""
ADAPT_STEP_C = 3
"""How far ``auto`` moves ``thermal_cont`` at a time."""
CONT_MAX_C = 50
"""``auto`` never raises ``thermal_cont`` above this."""
CLOSE_PAUSE_RUNS = 5
"""In ``auto``, a pause that comes fewer than this many runs after the previous one widens the band."""
POLL_S = 1.0
"""Seconds between temperature reads while paused."""

RECHECK_S = 0.05
"""While the last read left more than :data:`RECHECK_MARGIN_C` above ``wait``, runs starting within this many
seconds of it are not read again: temperature moves about a degree per second under load, and a read before
every run cost ~10 us of a host-bound run's launch time on the H200."""

RECHECK_MARGIN_C = 5.0
"""Degrees of headroom above ``wait`` that let the guard skip reads for :data:`RECHECK_S`."""
PAUSE_COLUMN = "ThermalPauseS"
"""RUN-scope column: seconds paused for cooling before the run."""
_RUN = CollectionScope.RUN.value

_MONOTONIC = time.monotonic
"""The guard's default clock, as this module found it (tests replace the module's ``time``)."""
_clock_info = time.get_clock_info


@functools.cache
def _run_clock_is_monotonic() -> bool:
    """Whether ``time.perf_counter_ns`` (the run loop's clock) and ``time.monotonic`` read the same clock.

    They do on Linux (both ``clock_gettime(CLOCK_MONOTONIC)``) and macOS; where they do not (Windows before
    Python 3.13), the guard reads ``monotonic`` itself rather than take the run loop's read for one.
    """
    return bool(_clock_info("perf_counter").implementation == _clock_info("monotonic").implementation)


@dataclass(frozen=True)
class ThermalReading:
    """One temperature read of the watched device."""

    temperature_c: float
    """Current GPU temperature."""
    slowdown_c: float
    """Temperature at which the GPU starts slowing its clocks down."""
    device: str = ""
    """Label for messages (e.g. ``"GPU 0 NVIDIA H200"``)."""

    @property
    def headroom_c(self) -> float:
        """Degrees left before the slowdown temperature (negative when above it)."""
        return self.slowdown_c - self.temperature_c


class TemperatureSource(Protocol):
    """Where the guard gets temperatures from (offered by a plugin through ``nsightx_temperature_source``).

    A source may also have ``read_at(now_ns)``: the same read, told the run's start on the host clock
    (``time.perf_counter_ns``), which the guard then hands it instead of the source reading the clock itself
    (the nvml source checks its sample's freshness against it).
    """

    def read(self) -> ThermalReading:
        """Read the watched device now. May raise; the guard then warns once and stops guarding."""
        ...


@dataclass(frozen=True)
class ThermalSettings:
    """Thermal guard options, as given to the decorator, and the temperature source resolved for them."""

    mode: str = "auto"
    """``thermal_mode``: ``"auto"``, ``"manual"`` or ``"off"``."""
    wait: int | None = None
    """``thermal_wait``: headroom (°C) at or below which a run waits."""
    cont: int | None = None
    """``thermal_cont``: headroom (°C) a paused run waits for."""
    timeout: int | None = None
    """``thermal_timeout``: longest single pause (s)."""
    device: int | None = None
    """``thermal_device``: the device watched (``None``: the measured one)."""
    source: TemperatureSource | None = field(default=None, compare=False)
    """Where the guard reads temperatures (resolved by the API layer from the plugin host); ``None``: unguarded."""


class GuardedPlan(Protocol):
    """What :func:`make_guard` reads of a plan (a :class:`~nsightx._run.plan.Plan` has all of it)."""

    @property
    def thermal(self) -> ThermalSettings:
        """Mode, band and temperature source."""
        ...

    @property
    def needs_gpu(self) -> bool:
        """False for plans that measure no GPU (never guarded)."""
        ...

    @property
    def verbosity(self) -> VerbosityLevel:
        """From INFO on, pauses are logged to stderr."""
        ...


class Guard(Protocol):
    """What the run loop calls around each run."""

    def before_run(self, now_ns: int | None = None) -> bool:
        """Pause if the device is too hot to measure reliably (called before every run, warm-up included).

        Args:
            now_ns: The run's start on the host clock (``time.perf_counter_ns``), read once by the run loop for
                the guard and the RUN collectors; ``None``: the guard reads its clock.

        Returns:
            Whether it paused (the run then starts later than ``now_ns``).
        """
        ...

    def take_values(self, config: int, run: int) -> list[CollectorRow]:
        """RUN-scope values to store with measured run ``run`` of ``config`` (pause time since the last one).

        As :data:`~nsightx._results.rows.CollectorRow` tuples: the run loop hands them on as they are.
        """
        ...


class NoGuard:
    """Guard used when thermal control is off, the backend measures no GPU, or no temperature source exists."""

    def before_run(self, now_ns: int | None = None) -> bool:
        """Do nothing: never paused."""
        return False

    def take_values(self, config: int, run: int) -> list[CollectorRow]:
        """No values: rows carry no ``ThermalPauseS`` column when nothing was guarded."""
        return []


@dataclass(frozen=True)
class Pause:
    """One pause of the guard, for the record and for tests."""

    seconds: float
    """How long it lasted."""
    start_headroom_c: float
    """Headroom when it began."""
    end_headroom_c: float
    """Headroom when it ended."""
    timed_out: bool
    """True when it ended at ``thermal_timeout`` rather than at ``thermal_cont``."""


@dataclass
class ThermalGuard:
    """Pauses before a run while the headroom to the slowdown temperature is at or below ``wait``.

    Args:
        source: Where temperatures come from.
        mode: ``"auto"`` adapts the band; ``"manual"`` raises :class:`CoolingTimeoutError` on timeout.
        wait: Headroom (°C) at or below which a run waits.
        cont: Headroom (°C) a paused run waits for.
        timeout: Longest single pause (s).
        clock: Monotonic clock in seconds; ``None``: ``time.monotonic`` (tests pass a fake clock). With the
            default, a run's start handed to :meth:`before_run` stands for a read of it where ``monotonic`` and
            ``perf_counter`` are one clock (CLOCK_MONOTONIC on Linux, see :func:`_run_clock_is_monotonic`).
        sleep: How to wait; ``None``: ``time.sleep`` (tests advance their fake clock instead).
        poll: Seconds between reads while paused.
        log: Called with a one-line message when a pause begins, ends or the band changes (``None``: quiet).

    Example:
        >>> class Cool:
        ...     def read(self):
        ...         return ThermalReading(temperature_c=40, slowdown_c=89)
        >>> guard = ThermalGuard(Cool())
        >>> guard.before_run(); guard.pauses
        []
    """

    source: TemperatureSource
    mode: str = "auto"
    wait: float = DEFAULT_WAIT_C
    cont: float = DEFAULT_CONT_C
    timeout: float = DEFAULT_TIMEOUT_S
    clock: Callable[[], float] | None = None
    sleep: Callable[[float], None] | None = None
    poll: float = POLL_S
    log: Callable[[str], None] | None = None
    pauses: list[Pause] = field(default_factory=list)
    """Every pause so far."""
    _pending_s: float = 0.0
    _runs_since_pause: int | None = None
    _cont_ceiling: float = CONT_MAX_C
    _broken: bool = False
    _cool_until: float | None = None
    _takes_ns: bool = False
    """Whether a run's start in ns (``time.perf_counter_ns``) is a read of :attr:`clock` (the default clock)."""
    _read_at: Callable[[int], ThermalReading] | None = None
    """The source's ``read_at``, when it has one (see :class:`TemperatureSource`)."""

    def __post_init__(self) -> None:
        if self.clock is None:
            self.clock = time.monotonic
        self._takes_ns = self.clock is _MONOTONIC and _run_clock_is_monotonic()
        self._read_at = getattr(self.source, "read_at", None)
        if self.sleep is None:
            self.sleep = time.sleep

    def before_run(self, now_ns: int | None = None) -> bool:
        """Read the temperature; if the headroom is at or below ``wait``, pause (see the module docstring).

        A run that starts within :data:`RECHECK_S` of a read that left a wide margin is not read again.
        ``now_ns`` (the run's start on ``time.perf_counter_ns``, read by the run loop) stands for a read of the
        guard's clock when that is the default one, and is handed to a source that takes it (``read_at``);
        ``None``: both read the clock themselves. Returns whether it paused.
        """
        if self._runs_since_pause is not None:
            self._runs_since_pause += 1
        now = now_ns / 1e9 if now_ns is not None and self._takes_ns else (self.clock or time.monotonic)()
        if self._cool_until is not None and now < self._cool_until:
            return False
        reading = self._read(now_ns)
        if reading is None or reading.headroom_c > self.wait:
            wide = reading is not None and reading.headroom_c > self.wait + RECHECK_MARGIN_C
            self._cool_until = now + RECHECK_S if wide else None
            return False
        self._cool_until = None
        self._pause(reading)
        return True

    def take_values(self, config: int, run: int) -> list[CollectorRow]:
        """The seconds paused since the previous measured run, as a ``ThermalPauseS`` RUN row (a plain tuple)."""
        pending = self._pending_s
        if not pending:  # nearly every run: no pause since the last one
            return [(PAUSE_COLUMN, _RUN, config, run, None, 0.0)]
        self._pending_s = 0.0
        return [(PAUSE_COLUMN, _RUN, config, run, None, round(pending, 3))]

    def _read(self, now_ns: int | None = None) -> ThermalReading | None:
        if self._broken:
            return None
        try:
            read_at = self._read_at
            return self.source.read() if read_at is None or now_ns is None else read_at(now_ns)
        except Exception as e:  # a monitoring failure must not cost the measurement
            self._broken = True
            warnings.warn(
                f"thermal guard: reading the temperature failed ({type(e).__name__}: {e}); "
                "runs are no longer paused for cooling in this call",
                RuntimeWarning,
                stacklevel=4,
            )
            return None

    def _pause(self, first: ThermalReading) -> None:
        if self.mode == "auto" and self._runs_since_pause is not None and self._runs_since_pause < CLOSE_PAUSE_RUNS:
            self._widen()
        clock, sleep = self.clock or time.monotonic, self.sleep or time.sleep
        start = clock()
        reading: ThermalReading | None = first
        last = first
        timed_out = False
        self._say(
            f"{first.device or 'GPU'} at {first.temperature_c:g} °C, {first.headroom_c:g} °C below slowdown; "
            f"pausing until {self.cont:g} °C of headroom (at most {self.timeout:g} s)"
        )
        while reading is not None and reading.headroom_c < self.cont:
            last = reading
            elapsed = clock() - start
            if elapsed >= self.timeout:
                timed_out = True
                break
            sleep(min(self.poll, self.timeout - elapsed))
            reading = self._read()
        if reading is not None:
            last = reading
        seconds = clock() - start
        self._pending_s += seconds
        self.pauses.append(
            Pause(
                seconds=seconds, start_headroom_c=first.headroom_c, end_headroom_c=last.headroom_c, timed_out=timed_out
            )
        )
        self._runs_since_pause = 0
        if timed_out:
            self._on_timeout(last, seconds)
        else:
            self._say(f"resumed after {seconds:.1f} s at {last.headroom_c:g} °C of headroom")

    def _widen(self) -> None:
        new = min(self.cont + ADAPT_STEP_C, self._cont_ceiling)
        if new > self.cont:
            self._say(f"pauses are close together; thermal_cont {self.cont:g} -> {new:g} °C")
            self.cont = new

    def _on_timeout(self, reading: ThermalReading, seconds: float) -> None:
        if self.mode == "manual":
            raise CoolingTimeoutError(
                f"Timeout after {self.timeout:g}s. Cannot reach thermal_cont={self.cont:g}°C (current thermal "
                f"headroom: {reading.headroom_c:g}°C). "
                f"{reading.device or 'the GPU'} did not cool to {self.cont:g} °C of headroom within "
                f"thermal_timeout={self.timeout:g} s: it is at {reading.temperature_c:g} °C, "
                f"{reading.headroom_c:g} °C below its slowdown temperature {reading.slowdown_c:g} °C; raise "
                "thermal_timeout, lower thermal_cont/thermal_wait, or use thermal_mode='auto' to adapt"
            )
        old_wait, old_cont = self.wait, self.cont
        self._cont_ceiling = max(self.cont - ADAPT_STEP_C, self.wait + 1)
        self.cont = self._cont_ceiling
        if reading.headroom_c <= self.wait:
            self.wait = math.floor(reading.headroom_c) - ADAPT_STEP_C  # a margin for sensor jitter
            self.cont = max(self.cont, self.wait + 1)
        message = (
            f"thermal_mode='auto': {reading.device or 'the GPU'} stayed at {reading.headroom_c:g} °C of "
            f"headroom after {seconds:.0f} s of cooling; thermal_cont {old_cont:g} -> {self.cont:g} °C"
        )
        if self.wait != old_wait:
            message += f", thermal_wait {old_wait:g} -> {self.wait:g} °C (runs now go on close to slowdown)"
        warnings.warn(message, RuntimeWarning, stacklevel=4)
        self._say(message)

    def _say(self, message: str) -> None:
        if self.log is not None:
            self.log(f"nsightx: thermal: {message}")


def _print(message: str) -> None:
    print(message, file=sys.stderr)


def make_guard(plan: GuardedPlan, source: TemperatureSource | None = None, **options: object) -> Guard:
    """Build the guard for ``plan``.

    Args:
        plan: The plan; ``plan.thermal`` gives the mode, the band and the temperature source.
        source: Temperature source to use instead of ``plan.thermal.source``.
        **options: Passed to :class:`ThermalGuard` (``clock``, ``sleep``, ``poll``, ``log``).

    Returns:
        :class:`NoGuard` for ``thermal_mode="off"``, for plans that measure no GPU (the host backend), or when
        the plan has no temperature source; else a :class:`ThermalGuard`.
    """
    settings = plan.thermal
    source = source if source is not None else settings.source
    if settings.mode == "off" or not plan.needs_gpu or source is None:
        return NoGuard()
    options.setdefault("log", _print if plan.verbosity >= VerbosityLevel.INFO else None)
    return ThermalGuard(source, **_band(settings), **options)  # type: ignore[arg-type]


def _band(settings: ThermalSettings) -> dict[str, object]:
    return {
        "mode": settings.mode,
        "wait": settings.wait if settings.wait is not None else DEFAULT_WAIT_C,
        "cont": settings.cont if settings.cont is not None else DEFAULT_CONT_C,
        "timeout": settings.timeout if settings.timeout is not None else DEFAULT_TIMEOUT_S,
    }
