"""The ``cupti`` backend class: capabilities, availability, option checks, and the session it opens."""

from __future__ import annotations

import functools
import importlib.util
from collections.abc import Iterator
from contextlib import contextmanager

from nsightx.ext import (
    Availability,
    Backend,
    BackendUnavailableError,
    Capabilities,
    ConfigError,
    Plan,
    Session,
)
from nsightx_cupti._names import METRIC

INSTALL = "pip install 'nsightx[cupti]'  (cupti-python >= 13.0)"


@functools.cache
def _probe() -> Availability:
    if importlib.util.find_spec("cupti") is None:
        return Availability(available=False, reason="cupti-python is not installed", remedy=INSTALL)
    from nsightx_cupti import _driver

    try:
        count = _driver.device_count()
    except OSError as e:
        return Availability(
            available=False,
            reason=f"no NVIDIA driver: {e}",
            remedy="install the NVIDIA driver, or use backend='host' on a machine without a GPU",
        )
    except _driver.DriverError as e:
        return Availability(
            available=False, reason=f"CUDA driver unusable: {e}", remedy="check CUDA_VISIBLE_DEVICES and `nvidia-smi`"
        )
    if count == 0:
        return Availability(
            available=False, reason="no CUDA device visible", remedy="check CUDA_VISIBLE_DEVICES and `nvidia-smi`"
        )
    from nsightx_cupti._tracer import cupti_module, cupti_python_version, loaded_libcupti

    try:
        cupti_module().get_timestamp()  # loads libcupti
    except Exception as e:
        return Availability(
            available=False,
            reason=f"libcupti could not be loaded by cupti-python: {type(e).__name__}: {e}",
            remedy="install a CUDA toolkit or the nvidia-cuda-cupti wheel matching your driver (torch with CUDA "
            "ships one), or put libcupti on LD_LIBRARY_PATH",
        )
    version = cupti_python_version()
    lib = loaded_libcupti() or "libcupti"
    return Availability(
        available=True, reason=f"cupti-python {version} using {lib}; {count} CUDA device(s)", version=version
    )


class CuptiBackend(Backend):
    """Exact per-kernel GPU durations from CUPTI Activity records, in process.

    Each kernel launched inside a region (any stream, a CUDA graph replay, another thread) becomes one record of
    ``gpu__time_duration.sum`` in ns. ``cache_control="all"`` flushes L2 before every run; clocks are never
    locked (use ncu for ``clock_control="base"``).
    """

    name = "cupti"
    description = "CUPTI Activity: exact per-kernel GPU time in process (gpu__time_duration.sum)"
    capabilities = Capabilities(
        metrics=frozenset({METRIC}),
        default_metrics=(METRIC,),
        cache_control=frozenset({"all", "none"}),
        clock_control=frozenset({"none"}),
        replay_modes=frozenset({"kernel"}),
        needs_gpu=True,
        cost=10,
        auto=True,
    )

    @classmethod
    def availability(cls) -> Availability:
        """Whether cupti-python, libcupti, the driver and a device are all present. Never raises."""
        try:
            return _probe()
        except Exception as e:  # the contract: never raise
            return Availability(available=False, reason=f"probe failed: {type(e).__name__}: {e}")

    def validate(self, plan: Plan) -> None:
        """Reject ``backend_options`` this backend does not know, and values it cannot honour.

        Raises:
            ConfigError: an unknown key or a bad value.
        """
        from nsightx_cupti._options import CuptiOptions  # a pydantic model: built only when cupti is used

        CuptiOptions.parse(plan.backend_options, self.name)
        wrong = [m for m in plan.metrics if m != METRIC]
        if wrong:
            raise ConfigError(
                f"the cupti backend measures only {METRIC!r}, not {wrong}; use backend='ncu' for hardware counters"
            )

    @contextmanager
    def session(self, plan: Plan) -> Iterator[Session]:
        """Start CUPTI, prepare the device, and stop CUPTI again when the plan is done.

        Raises:
            BackendUnavailableError: cupti-python, libcupti, the driver or a device is missing.
        """
        avail = self.availability()
        if not avail.available:
            raise BackendUnavailableError(
                f"backend 'cupti' is not available: {avail.reason}. {avail.remedy}", backend=self.name
            )
        from nsightx_cupti._session import open_session

        with open_session(plan) as session:
            yield session
