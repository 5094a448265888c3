"""The host backend: a monotonic nanosecond clock around each annotated region.

For CPU code and for machines without a GPU (CI). It measures host wall time, so its metric is
``host__time_duration.sum``: it never claims to be a GPU metric. GPU work launched asynchronously inside a
region is *not* waited for; use a GPU backend to time kernels.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

from nsightx.ext import (
    Availability,
    Backend,
    Capabilities,
    NoOptions,
    Plan,
    RecordRow,
    RegionId,
    RunOutput,
    Scalar,
    Session,
    cpu_model,
    hookimpl,
)

METRIC = "host__time_duration.sum"
"""Host wall time of the region, in nanoseconds."""


class HostSession(Session):
    """Times each region with ``time.perf_counter_ns``.

    One region is open at a time (the run loop refuses a region opened inside another), so the session, driven
    through :meth:`region_enter` and :meth:`region_exit` (by a caller other than the run loop), keeps one start
    time, not one per region: a dictionary's store and pop cost ~0.1 us a region. A closing region's
    record is made at once, as a row (:attr:`~nsightx.ext.RunOutput.record_rows`), after its clock was read.
    A region that failed gets no record, as on every backend (docs/api.md, the backend contract): the core shows
    its values as NaN with ``Kernel="failed"`` from the region's own entry, so a host time there would only be
    a wrong value in ``records`` and in the saved files.
    """

    host_timed = True
    """The run loop's run state times each region and hands the time over (:meth:`region_timed`): the regions are
    timed by one pair of clock reads, not two, and the region methods below are not called (issue 35)."""

    timed_records = ("region", METRIC, "ns")
    """Each region that did not fail has one record, its time (:meth:`region_timed`'s row), so the run loop may
    keep the times itself and call neither :meth:`region_timed` nor :meth:`finish_run` for a run that is the user's
    call alone (issue 35)."""

    def __init__(self) -> None:
        self._start = 0
        self._rows: list[RecordRow] = []

    def region_timed(self, name: str, config: int, run: int, ns: int, failed: bool) -> None:
        """Record a region the run state timed: the same row :meth:`region_exit` makes (none for a failed one)."""
        if not failed:
            self._rows.append((name, config, run, "region", METRIC, float(ns), "ns", 0))

    def region_enter(self, region: RegionId) -> None:
        """Note the start time (the last thing before the user's code runs)."""
        self._start = time.perf_counter_ns()

    def region_exit(self, region: RegionId, failed: bool) -> None:
        """Record the elapsed time (the first thing after the user's code returns); a failed region: no record."""
        ns = time.perf_counter_ns() - self._start
        if not failed:
            self._rows.append((region[0], region[1], region[2], "region", METRIC, float(ns), "ns", 0))

    def finish_run(self, config: int, run: int) -> RunOutput:
        """Hand this run's records back (off the measured regions, but between two runs of the sweep).

        As record rows, the fields of each :class:`Record` in a tuple: a record object is made of one only when
        something asks for the run's records (issue 35).
        """
        rows, self._rows = self._rows, []
        return RunOutput([], {}, rows)

    def environment(self) -> Mapping[str, Scalar]:
        """The CPU stands where a GPU name would: its model name (``/proc/cpuinfo``), not merely ``x86_64``."""
        return {"GPU": None, "CPU": cpu_model()}


class HostBackend(Backend):
    """Host wall time of each region (``host__time_duration.sum``, ns)."""

    name = "host"
    description = "host monotonic clock around each region (CPU code; machines without a GPU)"
    capabilities = Capabilities(
        metrics=frozenset({METRIC}),
        default_metrics=(METRIC,),
        cache_control=frozenset({"none"}),
        clock_control=frozenset({"none"}),
        replay_modes=frozenset({"kernel"}),
        needs_gpu=False,
        per_device=False,
        cost=50,
        auto=True,
    )

    @classmethod
    def availability(cls) -> Availability:
        """Always available."""
        return Availability(available=True, reason="host clock (time.perf_counter_ns)")

    def validate(self, plan: Plan) -> None:
        """Reject every ``backend_options`` key: the host clock has no options, and a typo must not pass silently.

        Raises:
            ConfigError: any key in ``backend_options``.
        """
        NoOptions.parse(plan.backend_options, self.name)

    @contextmanager
    def session(self, plan: Plan) -> Iterator[Session]:
        """A fresh host session."""
        yield HostSession()


@hookimpl
def nsightx_register_backends(register: object) -> None:
    """Register the host backend."""
    register(HostBackend)  # type: ignore[operator]
