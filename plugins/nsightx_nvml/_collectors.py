"""The nvml collectors and temperature source, over one process-wide NVML connection.

:class:`Provider` initialises NVML on first use (never at import) and remembers why it could not, so a machine
without nvidia-ml-py or an NVIDIA driver pays one failed attempt and then gets no nvml columns at all.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Mapping
from typing import Any

from nsightx.columns import (
    GPU_TEMPERATURE,
)
from nsightx.ext import CollectContext, CollectionScope, RunValues, Scalar, ThermalReading
from nsightx_nvml import _sampler
from nsightx_nvml._device import CudaDriver, DeviceMap, DeviceNotFound, LibCuda, Resolved
from nsightx_nvml._fields import READ_COLUMNS, SLOW_FIELDS, SLOW_FIELDS_MAX_AGE_S, FieldReader, safe
from nsightx_nvml._lib import Nvml, import_pynvml
from nsightx_nvml._sampler import ChildSpec, Sample

__all__ = ["READ_COLUMNS", "SLOW_FIELDS", "SLOW_FIELDS_MAX_AGE_S"]  # re-exported: defined with the field reader

DEVICE_COLUMNS = ("DriverVersion", "GPUName", "GPUUUID", "PowerLimitW", "ECCEnabled", "SlowdownTempC")
"""ONCE columns: facts about the profiled device."""
AGE_COLUMN = "NvmlSampleAgeMs"
"""RUN column: how long before the run started its NVML values were read, in milliseconds."""
RUN_COLUMNS = (*READ_COLUMNS, AGE_COLUMN)
"""RUN columns: the device's state read just before each measured run, and how long before."""

RUN_READ_MAX_AGE_S = 0.010
"""Without a sampler (``collect`` called outside a sweep the collector was started for, e.g. by a parent-side
proxy), a run that starts within this many seconds of the last direct read of the same device gets that read
again: five NVML queries take ~15 us on an idle H200 but ~200 us while it runs kernels, which is more than a
whole short run."""

STALE_SAMPLE_S = 0.05
"""A run whose latest sample is older than this (the sampler parked while the host waited for a long run) has
its values read at once, on the calling thread: ~0.2 ms on a busy H200, under 0.5% of a run that came so late."""

_perf_counter_ns = time.perf_counter_ns
"""Bound once: what :meth:`RunConditions.collect` reads when its context carries no run start (outside a run loop)."""

TEMPERATURE_MAX_AGE_S = 0.5
"""The thermal guard takes the sampler's temperature when it is at most this old, else reads NVML itself.
Temperature moves by about a degree per second under load; the guard's band is several degrees wide."""


class Provider:
    """Lazily initialised NVML plus the CUDA-to-NVML device map.

    Args:
        load: Returns the ``pynvml`` module (tests return a scripted double).
        cuda: Answers the CUDA driver questions (tests pass a double).
    """

    def __init__(self, load: Callable[[], Any] = import_pynvml, cuda: CudaDriver | None = None) -> None:
        self._load = load
        self._cuda = cuda
        self._map: DeviceMap | None = None
        self.error: str | None = None
        """Why NVML is unavailable (``None`` until tried, or when it works)."""
        self._tried = False

    @property
    def real(self) -> bool:
        """Whether this provider reads the real ``pynvml`` (a sampler process can then read it too)."""
        return self._load is import_pynvml

    def devices(self) -> DeviceMap | None:
        """The device map, or ``None`` if NVML cannot be used here (see :attr:`error`)."""
        if not self._tried:
            self._tried = True
            try:
                nvml = Nvml(self._load())
                nvml.init()
            except ImportError as e:
                self.error = f"nvidia-ml-py is not installed ({e}); pip install 'nsightx[nvml]'"
            except Exception as e:  # NVMLError: no driver, no GPU, no permission
                self.error = f"NVML could not start: {type(e).__name__}: {e}"
            else:
                self._map = DeviceMap(nvml, self._cuda if self._cuda is not None else LibCuda())
        return self._map

    def status(self) -> str:
        """One line for ``nsightx plugins``: usable, or why not."""
        devices = self.devices()
        if devices is None:
            return f"unavailable: {self.error}"
        return f"NVML {devices.nvml.driver_version()} sees {devices.nvml.count()} GPU(s)"


_provider: Provider | None = None


def provider() -> Provider:
    """The process-wide provider (created on first use)."""
    global _provider
    if _provider is None:
        _provider = Provider()
    return _provider


_warned: set[str] = set()


def _unmatched(error: DeviceNotFound, columns: tuple[str, ...]) -> dict[str, Scalar]:
    """Empty values for ``columns``, with one warning per process and reason saying why."""
    if str(error) not in _warned:
        _warned.add(str(error))
        warnings.warn(
            f"nvml: cannot tell which GPU is being profiled ({error}); its columns are empty",
            RuntimeWarning,
            stacklevel=3,
        )
    return dict.fromkeys(columns)


class DeviceInfo:
    """ONCE: driver version, GPU name and UUID, enforced power limit, ECC state, slowdown temperature."""

    name = "nvml.device"
    scope = CollectionScope.ONCE
    columns = DEVICE_COLUMNS

    def __init__(self) -> None:
        self._fixed: dict[tuple[int, str], tuple[DeviceMap, dict[str, Scalar]]] = {}

    def collect(self, ctx: CollectContext) -> Mapping[str, Scalar]:
        """The device facts, or no columns when NVML is unavailable."""
        devices = provider().devices()
        if devices is None:
            return {}
        nvml = devices.nvml
        try:
            dev = devices.resolve(ctx.device)
        except DeviceNotFound as e:
            return _unmatched(e, DEVICE_COLUMNS)
        skip: set[str] = set()
        key = (id(devices), dev.label)
        cached = self._fixed.get(key)
        fixed = cached[1] if cached is not None and cached[0] is devices else None
        if fixed is None:  # facts that do not change while the driver is loaded (ECC needs a reboot)
            fixed = {
                "DriverVersion": nvml.driver_version(),
                "GPUName": safe(nvml, skip, "name", nvml.name, dev.handle),
                "GPUUUID": safe(nvml, skip, "uuid", nvml.uuid, dev.handle),
                "ECCEnabled": safe(nvml, skip, "ecc", nvml.ecc_enabled, dev.sensors),
                "SlowdownTempC": safe(nvml, skip, "slowdown", nvml.slowdown_c, dev.sensors),
            }
            self._fixed[key] = (devices, fixed)
        out = dict(fixed)
        out["PowerLimitW"] = safe(nvml, skip, "limit", nvml.power_limit_w, dev.sensors)  # an admin may change it
        return {k: out[k] for k in DEVICE_COLUMNS}

    def availability(self) -> str:
        """Whether NVML works here (shown by ``nsightx plugins``)."""
        return provider().status()


class RunConditions:
    """RUN: SM and memory clocks, temperature, power and clock-event reasons, as the run starts, and their age.

    During a profiled call the run loop calls :meth:`start` first, which starts (or joins) the background
    sampler of the profiled device (:mod:`nsightx_nvml._sampler`), and :meth:`stop` at the end. :meth:`collect`,
    called just before each run, then makes no NVML call: it tells the sampler a run starts and copies the
    latest sample, which was read before the run started, adding ``NvmlSampleAgeMs``, how long before (at most
    about one sampling period plus the length of one sample, ~5.2 ms on a busy H200, while runs keep starting;
    a run that starts after the sampler parked, :data:`STALE_SAMPLE_S` after the last sample, gets a read made
    for it). The :data:`SLOW_FIELDS` may be up to :data:`SLOW_FIELDS_MAX_AGE_S` older than the sample. Called
    without :meth:`start` (e.g. by a proxy that asks for one value at a time), it reads NVML directly, sharing a
    read with runs that start less than :data:`RUN_READ_MAX_AGE_S` later. Either way it returns a read-only
    mapping of scalars (a :class:`~nsightx.ext.RunValues` after a sample: the sample's values and the age).

    A field the device does not support is ``None``, and is not asked again.
    """

    name = "nvml.run"
    scope = CollectionScope.RUN
    columns = RUN_COLUMNS
    reads_run_fields = False
    """:meth:`collect` reads only ``ctx.device`` and ``ctx.run_start_ns``: the run loop may hand it one context per
    config."""

    def __init__(self) -> None:
        self._fields = FieldReader()
        self._last: dict[tuple[int, str], tuple[DeviceMap, Sample]] = {}
        self._leases: list[tuple[int, str]] = []
        self._sweep: dict[int | str | None, tuple[int, str]] = {}
        self._samplers: dict[int | str | None, _sampler.Sampler | _sampler.ProcessSampler] = {}
        """The sampler each started device's runs read (what ``_sampler.current`` of its key returns meanwhile:
        the lease :meth:`start` took keeps it), so that :meth:`collect` looks it up in one step."""
        self._children: dict[tuple[int, str], ChildSpec] = {}

    def start(self, ctx: CollectContext) -> bool:
        """A profiled call starts: start the sampler of ``ctx.device``.

        Returns:
            ``False`` when NVML is unavailable here: :meth:`collect` would return no column for any run, so the run
            loop does not ask it (this costs a host-bound sweep nothing per run). ``True`` otherwise, also when the
            device cannot be matched: :meth:`collect` then warns once and fills the columns with ``None``.
        """
        devices = provider().devices()
        if devices is None:
            return False
        try:
            dev = devices.resolve(ctx.device)
        except DeviceNotFound:
            return True  # collect() warns, once
        key = (id(devices), dev.label)
        nvml = devices.nvml
        child = None  # a double of NVML lives only in this process: a thread samples it
        if provider().real:
            child = self._children.get(key)
            if child is None:  # a device's UUID is fixed: asked once, not at every call (an NVML query)
                child = self._children[key] = ChildSpec(nvml.uuid(dev.sensors))
        sampler = _sampler.acquire(key, lambda: self.read(nvml, dev), child=child)
        self._leases.append(key)
        self._sweep[ctx.device] = key
        self._samplers[ctx.device] = sampler
        return True

    def stop(self) -> None:
        """The profiled call ended: leave the sampler its :meth:`start` joined (its last user stops it).

        Calls of one collector may overlap (two threads profiling at once), so each stop undoes one start.
        """
        if not self._leases:
            return
        key = self._leases.pop()
        if key not in self._leases:
            self._sweep = {d: k for d, k in self._sweep.items() if k != key}
            self._samplers = {d: s for d, s in self._samplers.items() if d in self._sweep}
        _sampler.release(key)

    def collect(self, ctx: CollectContext) -> Mapping[str, Scalar]:
        """The readings the run starts with, or no columns when NVML is unavailable.

        Before every run of a started call this is a dictionary look-up, a write and a read of the
        shared sample (:meth:`~nsightx_nvml._sampler.ProcessSampler.demand_latest`: the same sample object while
        no new one came) and a :class:`~nsightx.ext.RunValues` of the sample's values, not copied, and their age
        (the run loop converts a sample's values once for all its runs). Whether the sampler still runs (for a
        process, a ``waitpid``) is asked only once its latest sample is stale, which is also how a sampler that
        died is noticed.

        The run's start (``ctx.run_start_ns``, read once by the run loop for the thermal guard and every RUN
        collector) is the time of the demand and the time the sample's age is taken at; a context without it
        (outside a run loop) has the clock read here.
        """
        now = ctx.run_start_ns
        if now is None:
            now = _perf_counter_ns()
        sampler = self._samplers.get(ctx.device)
        if sampler is None:
            return self._direct(ctx, now)
        sample = sampler.demand_latest(now)
        if sample is not None:
            # The sample's own mapping, not a copy (a sample is never changed once published), and the run's
            # age: the run loop makes the rows when it writes the run. The age is Sample.age_ms, without the call
            # and in integers (0.2 us less than round() a run): ns to the nearest us, then ms. That is the same
            # float as round(ns / 1e6, 3) but for a tie (round takes the float's side of it) and a negative age
            # (-0.0): those go through _late_answer, as a stale sample does.
            ns = now - sample.taken_ns
            if 0 <= ns <= STALE_SAMPLE_S * 1e9 and ns % 1000 != 500:  # nearly every run
                return RunValues(sample.values, AGE_COLUMN, (ns + 500) // 1000 / 1000)
        return self._late_answer(ctx, sampler, sample, now)

    def run_reader(self, ctx: CollectContext) -> Callable[[int | None], Mapping[str, Scalar]] | None:
        """What :meth:`collect` answers for the runs of ``ctx``'s config, as a callable of the run's start alone.

        The run loop asks once per config and then calls the answer before every run (see
        :class:`~nsightx.ext.CollectorLike`): no context is written, and the sampler, the stale limit
        and the late path are looked up here once, not per run (issue 35: ~0.3 us of a run on a 2-core VM). The
        callable answers exactly as :meth:`collect` with ``ctx`` whose ``run_start_ns`` is its argument.
        ``None`` when no sampler was started for ``ctx.device`` (NVML unavailable, an unmatched device, or outside
        a call): the loop then calls :meth:`collect`, which reads NVML directly or fills the columns with ``None``.
        """
        sampler = self._samplers.get(ctx.device)
        if sampler is None:
            return None
        demand_latest, late, stale_ns = sampler.demand_latest, self._late_answer, STALE_SAMPLE_S * 1e9
        clock, age_column, run_values = _perf_counter_ns, AGE_COLUMN, RunValues

        def answer(now: int | None) -> Mapping[str, Scalar]:
            if now is None:
                now = clock()
            sample = demand_latest(now)
            if sample is not None:  # what collect does, see there
                ns = now - sample.taken_ns
                if 0 <= ns <= stale_ns and ns % 1000 != 500:
                    return run_values(sample.values, age_column, (ns + 500) // 1000 / 1000)
            return late(ctx, sampler, sample, now)

        return answer

    def _late_answer(
        self, ctx: CollectContext, sampler: _sampler.Sampler | _sampler.ProcessSampler, sample: Sample | None, now: int
    ) -> Mapping[str, Scalar]:
        """:meth:`collect`'s answer when the sample is missing, stale, or its age is not plainly rounded."""
        if sample is None or now - sample.taken_ns > STALE_SAMPLE_S * 1e9:
            if not sampler.running:  # it does not sample (its process ended, or no period): read here
                return self._direct(ctx, now)
            sample = sampler.sample() or sample  # parked during a long wait: read now, before the run
            now = time.perf_counter_ns()
            if sample is None:
                return dict.fromkeys(RUN_COLUMNS)
        ns = now - sample.taken_ns
        age = (ns + 500) // 1000 / 1000 if ns >= 0 and ns % 1000 != 500 else round(ns / 1e6, 3)
        return RunValues(sample.values, AGE_COLUMN, age)

    def _direct(self, ctx: CollectContext, now: int) -> Mapping[str, Scalar]:
        """Read NVML on the calling thread (no sampler runs for this device)."""
        devices = provider().devices()
        if devices is None:
            return {}
        try:
            dev = devices.resolve(ctx.device)
        except DeviceNotFound as e:
            return _unmatched(e, RUN_COLUMNS)
        key = (id(devices), dev.label)
        last = self._last.get(key)
        if last is None or last[0] is not devices or (now - last[1].taken_ns) / 1e9 >= RUN_READ_MAX_AGE_S:
            last = (devices, Sample(now, self.read(devices.nvml, dev)))
            self._last[key] = last
        values = dict(last[1].values)
        values[AGE_COLUMN] = last[1].age_ms(now)
        return values

    def read(self, nvml: Nvml, dev: Resolved) -> dict[str, Scalar]:
        """Read the five values from ``dev`` (directly; the sampler process reads the same way).

        The SM clock and the clock-event reasons are queried every time; the :data:`SLOW_FIELDS` only when the
        last query of them is :data:`SLOW_FIELDS_MAX_AGE_S` old.
        """
        return self._fields.read(nvml, dev.sensors, dev.label)

    def availability(self) -> str:
        """Whether NVML works here (shown by ``nsightx plugins``)."""
        return provider().status()


RESOLVE_RECHECK_S = 1.0
"""The thermal source keeps a device it could only guess (CUDA not up yet) for this long before asking again."""


class NvmlTemperatureSource:
    """The thermal guard's source: temperature and slowdown threshold of the watched device.

    A source lives for one profiled call. It matches its device once (see :meth:`_resolve`) and takes the
    temperature from the sample the call's RUN collector copies before each run (:meth:`_temperature`), so a read
    before a run makes no NVML query, no CUDA driver call and no system call.

    Args:
        device: CUDA ordinal, UUID, or ``None`` for the current device.
        source: The provider to read through (default: the process-wide one).
    """

    def __init__(self, device: int | str | None, source: Provider | None = None) -> None:
        self.device = device
        self._provider = source
        self._slowdown: dict[str, int] = {}
        self._resolved: dict[int, Resolved] = {}
        self._guessed: tuple[int, Resolved, float] | None = None

    def read(self) -> ThermalReading:
        """Read now.

        Raises:
            RuntimeError: NVML is unavailable.
            DeviceNotFound: the device cannot be matched.
        """
        return self.read_at(None)

    def read_at(self, now_ns: int | None) -> ThermalReading:
        """:meth:`read`, the sample's freshness taken at ``now_ns`` (``time.perf_counter_ns``; ``None``: now).

        The thermal guard hands it the run's start, which the run loop read once for the guard and the RUN
        collectors: the read before a run then reads no clock here.
        """
        p = self._provider or provider()
        devices = p.devices()
        if devices is None:
            raise RuntimeError(p.error)
        dev = self._resolved.get(id(devices)) or self._resolve(devices)
        key = dev.label
        slowdown = self._slowdown.get(key)
        if slowdown is None:
            slowdown = self._slowdown[key] = devices.nvml.slowdown_c(dev.sensors)
        temperature = self._temperature(devices, dev, now_ns)
        return ThermalReading(temperature_c=temperature, slowdown_c=slowdown, device=key)

    def _resolve(self, devices: DeviceMap) -> Resolved:
        """Match the watched device: once for the call when the match is exact, else at most once a second.

        Why once is right: a call profiles one device from its first run to its last, and a match through the
        CUDA driver (by UUID) is exact, so it is kept for the source's life. Before CUDA is up (the user's first
        kernel starts it) the device can only be guessed from ``CUDA_VISIBLE_DEVICES`` (see
        :mod:`nsightx_nvml._device`), which costs NVML and CUDA driver calls that CUPTI traces; a guess is kept
        for :data:`RESOLVE_RECHECK_S` and then asked again, until CUDA answers exactly.
        """
        now = time.monotonic()
        guessed = self._guessed
        if guessed is not None and guessed[0] == id(devices) and now - guessed[2] < RESOLVE_RECHECK_S:
            return guessed[1]
        dev = devices.resolve(self.device)
        if dev.how == "uuid":  # exact: kept for good
            self._resolved[id(devices)] = dev
            self._guessed = None
        else:
            self._guessed = (id(devices), dev, now)
        return dev

    def _temperature(self, devices: DeviceMap, dev: Resolved, now_ns: int | None = None) -> float:
        """The call's sampler's temperature of ``dev`` when it is fresh enough, else a direct NVML read.

        Freshness alone decides, not whether the sampler still runs (for a process, a ``waitpid`` per read): a
        sampler that ended or parked publishes nothing newer, so its sample goes stale within
        :data:`TEMPERATURE_MAX_AGE_S` and the device is read directly from then on. A sampler no call uses any
        more is not asked at all. ``now_ns``: when the run starts (``None``: the clock is read).
        """
        sampler = _sampler.current((id(devices), dev.label))
        sample = sampler.latest() if sampler is not None else None
        if sample is not None:
            value = sample.values.get(GPU_TEMPERATURE)
            now = time.perf_counter_ns() if now_ns is None else now_ns
            fresh = now - sample.taken_ns <= TEMPERATURE_MAX_AGE_S * 1e9
            if fresh and isinstance(value, int | float):
                return float(value)
        return float(devices.nvml.temperature_c(dev.sensors))
