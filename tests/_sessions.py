"""Session and temperature-source doubles shared by the run-loop tests (real host session underneath)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from nsightx_host import HostBackend, HostSession

import nsightx
from nsightx._run.backend import RunOutput, Session
from nsightx._run.thermal import ThermalReading
from nsightx.ext import Availability, Backend, Capabilities


class Cool:
    """A temperature source far from slowdown: the thermal guard never pauses."""

    def read(self) -> ThermalReading:
        return ThermalReading(temperature_c=40.0, slowdown_c=89.0)


class DeferredHost(HostSession):
    """The host session, made deferred as the events and cupti sessions are: it hands runs back only when
    collected, and its regions go through ``region_enter``/``region_exit`` (no run block), as a GPU session's do."""

    deferred = True
    host_timed = False
    timed_records = None

    def __init__(self) -> None:
        super().__init__()
        self.done: dict[tuple[int, int], RunOutput] = {}
        self.collects = 0

    def finish_run(self, config: int, run: int) -> RunOutput:
        self.done[(config, run)] = super().finish_run(config, run)
        return RunOutput()

    def collect_runs(self) -> dict[tuple[int, int], RunOutput]:
        self.collects += 1
        done, self.done = self.done, {}
        return done


class DeferredHostTimed(HostSession):
    """The host session, made deferred but still timing its regions itself (one run block a run, as the host
    backend does): its runs' outputs come back only when the loop collects them."""

    deferred = True

    def __init__(self) -> None:
        super().__init__()
        self.done: dict[tuple[int, int], RunOutput] = {}

    def finish_run(self, config: int, run: int) -> RunOutput:
        self.done[(config, run)] = super().finish_run(config, run)
        return RunOutput()

    def collect_runs(self) -> dict[tuple[int, int], RunOutput]:
        done, self.done = self.done, {}
        return done


class DeferredHostBackend(HostBackend):
    """The host backend with a :class:`DeferredHostTimed` session, registered as ``deferredhost``."""

    name = "deferredhost"

    @contextmanager
    def session(self, plan: Any) -> Iterator[Session]:
        yield DeferredHostTimed()


class DeferredPlugin:
    """Registers :class:`DeferredHostBackend` (``register_plugin(DeferredPlugin(), name="deferred")``)."""

    @nsightx.hookimpl
    def nsightx_register_backends(self, register: Any) -> None:
        register(DeferredHostBackend)


def session_backend(name: str, metric: str, make_session: Callable[[], Session]) -> type[Backend]:
    """A CPU backend ``name`` of the one ``metric``, always available, measuring with a new ``make_session()``.

    The test doubles of a backend's session contract (a deferred session that drops runs, one whose environment
    is wrong, ...) are registered through it, so each test writes only the session it is about.
    """

    class SessionBackend(Backend):
        capabilities = Capabilities(metrics=frozenset({metric}), default_metrics=(metric,), needs_gpu=False)

        @classmethod
        def availability(cls) -> Availability:
            return Availability(available=True)

        @contextmanager
        def session(self, plan: Any) -> Iterator[Session]:
            yield make_session()

    SessionBackend.name = name
    return SessionBackend
