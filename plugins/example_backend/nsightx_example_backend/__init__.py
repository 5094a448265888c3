"""nsightx-example-backend: a complete backend, shipped as its own distribution, written only against nsightx.ext.

``backend="cputime"`` measures the CPU time the whole process spends inside each annotated region
(``time.process_time_ns``: user plus system time of every thread), as the metric ``cpu__process_time.sum`` in
nanoseconds. Next to host wall time it tells a region that computes from one that waits (on I/O, a lock, a GPU
it synchronises with). It is the pattern a real backend follows, with each part of the contract spelt out:

- :class:`CpuTimeBackend` declares its name, a one-line description and its :class:`~nsightx.ext.Capabilities`;
  its ``availability()`` classmethod never raises; ``validate(plan)`` rejects options it cannot honour;
  ``session(plan)`` opens one :class:`CpuTimeSession` for the whole call.
- :class:`CpuTimeSession` implements the :class:`~nsightx.ext.Session` steps the run loop calls: ``start_run``,
  ``region_enter`` and ``region_exit`` (cheap: they sit on the measured path), ``finish_run``, and, because it
  is *deferred* by default, ``collect_runs``; ``environment()`` says where it measured.
- A region that raised (and was swallowed by ``ignore_failures``) gets no :class:`~nsightx.ext.Record`: the core
  reports its values as NaN with ``Kernel="failed"``. It still gets its region attribute.

``backend_options={"cputime_collect": "run"}`` hands each run's records back from ``finish_run`` instead of
in batches (the two give the same result).

It does not take part in ``backend="auto"`` (``Capabilities.auto`` stays ``False``, its default): a user names
it with ``backend="cputime"`` or ``nsightx.activate("cputime")``.
"""

from __future__ import annotations

import platform
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Literal

from nsightx.ext import (
    Availability,
    Backend,
    BackendOptions,
    BackendRegistrar,
    Capabilities,
    Plan,
    Record,
    RegionId,
    RunOutput,
    Scalar,
    Session,
    hookimpl,
)

__version__ = "0.1.0"

METRIC = "cpu__process_time.sum"
"""CPU time of the process (all threads, user + system) between the region's open and close, ns."""

WALL_ATTRIBUTE = "wall_ns"
"""Region attribute: host wall time of the region, ns (recorded for failed regions too)."""


class CpuTimeOptions(BackendOptions):
    """The ``backend_options`` this backend accepts: one field per key, with its one default.

    :meth:`~nsightx.ext.BackendOptions.parse` refuses an unknown key (listing these, with the first sentence of
    each docstring) and a value the field does not accept, as a ``ConfigError`` naming key and value.
    """

    cputime_collect: Literal["batch", "run"] = "batch"
    """'batch' (default): hand records back when the run loop collects (a deferred session); 'run': at the end of
    every run."""


_Key = tuple[int, int]
"""(config, run)."""


class CpuTimeSession(Session):
    """Reads the process CPU clock when a region opens and closes; turns the spans into records off the path.

    Args:
        deferred: True (``cputime_collect="batch"``): ``finish_run`` returns nothing and the records come from
            ``collect_runs``, which the run loop calls every :data:`~nsightx.ext.COLLECT_EVERY` runs, at config
            ends, at the end of the call, when a run fails and after each run under ``runs="auto"``. A GPU
            backend defers because reading its device costs more than a short run; this one only shows how.
    """

    def __init__(self, *, deferred: bool = True) -> None:
        self.deferred = deferred
        self._open: dict[tuple[str, int, int], tuple[int, int]] = {}
        self._spans: dict[_Key, list[tuple[RegionId, bool, int, int]]] = {}
        self._finished: list[_Key] = []
        self._lock = threading.Lock()  # regions may open and close on other threads than the run loop's

    def start_run(self, config: int, run: int) -> None:
        """Called before every run (warm-up runs have a negative ``run``), outside any region.

        A GPU backend flushes caches here; this one starts the run's list of spans.
        """
        with self._lock:
            self._spans.setdefault((config, run), [])

    def region_enter(self, region: RegionId) -> None:
        """Read both clocks, the last thing before the user's code runs."""
        self._open[region] = (time.process_time_ns(), time.perf_counter_ns())

    def region_exit(self, region: RegionId, failed: bool) -> None:
        """Read both clocks, the first thing after the user's code; ``failed``: the region raised."""
        cpu, wall = time.process_time_ns(), time.perf_counter_ns()
        cpu0, wall0 = self._open.pop(region)
        with self._lock:
            self._spans.setdefault((region.config, region.run), []).append((region, failed, cpu - cpu0, wall - wall0))

    def finish_run(self, config: int, run: int) -> RunOutput:
        """The run's records, or (deferred) an empty output and a note that the run is ready to collect."""
        if self.deferred:
            self._finished.append((config, run))
            return RunOutput()
        return self._output((config, run))

    def collect_runs(self) -> dict[_Key, RunOutput]:
        """Deferred only: the outputs of every run finished since the last call, keyed (config, run)."""
        finished, self._finished = self._finished, []
        return {key: self._output(key) for key in finished}

    def _output(self, key: _Key) -> RunOutput:
        with self._lock:
            spans = self._spans.pop(key, [])
        output = RunOutput()
        for region, failed, cpu_ns, wall_ns in spans:
            output.region_attributes[region.annotation] = {WALL_ATTRIBUTE: wall_ns}
            if failed:
                continue  # no record: the core shows a failed region's values as NaN, Kernel "failed"
            output.records.append(
                Record(
                    annotation=region.annotation,
                    config=region.config,
                    run=region.run,
                    kernel="region",  # a whole-region value, not one kernel's
                    metric=METRIC,
                    value=float(cpu_ns),
                    unit="ns",
                )
            )
        return output

    def environment(self) -> Mapping[str, Scalar]:
        """Where it measured: no GPU; the CPU and the clock's resolution take its place."""
        info = time.get_clock_info("process_time")
        return {"GPU": None, "CPU": platform.processor() or platform.machine(), "CpuClockResolutionS": info.resolution}


class CpuTimeBackend(Backend):
    """Process CPU time inside each region (``cpu__process_time.sum``, ns)."""

    name = "cputime"
    description = "process CPU time inside each region (example backend from nsightx-example-backend)"
    capabilities = Capabilities(
        metrics=frozenset({METRIC}),  # None would mean "any name its tool accepts" (ncu)
        default_metrics=(METRIC,),  # used when the decorator sets no metrics
        cache_control=frozenset({"none"}),  # no cache to flush: "none" is then also the default
        clock_control=frozenset({"none"}),
        replay_modes=frozenset({"kernel"}),
        needs_gpu=False,  # no thermal guard, no GPU collectors' device checks
        per_device=False,  # device= and parallel_devices= are refused
        cost=1000,  # where it would stand on the cost scale (cupti 10 ... ncu 100) if it took part in "auto"
        auto=False,  # the default, spelt out: "auto" never picks it; a user names it
    )

    @classmethod
    def availability(cls) -> Availability:
        """Whether the process CPU clock works here. Never raises and stays cheap (nsightx may ask often)."""
        try:
            time.process_time_ns()
            info = time.get_clock_info("process_time")
        except Exception as e:  # availability() must answer, not raise
            return Availability(available=False, reason=f"no process CPU clock: {e}", remedy="use backend='host'")
        return Availability(available=True, reason=f"process_time ({info.implementation}, {info.resolution:g} s)")

    def validate(self, plan: Plan) -> None:
        """Reject what :attr:`capabilities` cannot express: unknown ``backend_options`` keys and values.

        Raises:
            ConfigError: an unknown key or a value other than ``'batch'`` or ``'run'``.
        """
        CpuTimeOptions.parse(plan.backend_options, self.name)

    @contextmanager
    def session(self, plan: Plan) -> Iterator[Session]:
        """One session for the whole call; release anything it holds after the ``yield`` (nothing here)."""
        options = CpuTimeOptions.parse(plan.backend_options, self.name)
        yield CpuTimeSession(deferred=options.cputime_collect == "batch")


@hookimpl
def nsightx_register_backends(register: BackendRegistrar) -> None:
    """Register :class:`CpuTimeBackend` (called once per plugin host; import nothing heavy here)."""
    register(CpuTimeBackend)
