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
    check_byte_option,
    check_option_names,
)
from nsightx_cupti._attribution import METRIC

OPTIONS = {
    "buffer_bytes": "size of each CUPTI activity buffer in bytes (default 256 KiB)",
    "flush_bytes": "size of the L2 flush buffer in bytes (default and minimum: twice the L2 size)",
    "api_tracing": "'always' (default): API records for the whole session, minus APIs seen to launch nothing; "
    "'region': only while a region is open (switched on and off around each region)",
    "api_filter": "'learn' (default): switch off APIs seen to launch nothing; 'off': record every API call",
    "cupti_flush": "'forced' (default); 'plain' is for overhead studies and may lose kernels",
    "cupti_collect": "'batch' (default): collect CUPTI's records every 64 runs, at config ends a second or more "
    "after the last collection, and at the end; 'run': after every run",
    "flush_at": "'region' (default): flush L2 just before each region opens (inputs written by the function "
    "are cold, as under ncu); 'run': once before the function runs",
}
"""``backend_options`` keys this backend accepts."""

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
        check_option_names(plan, OPTIONS, self.name)
        mode = plan.backend_options.get("api_tracing", "always")
        if mode not in ("region", "always"):
            raise ConfigError(f"backend_options['api_tracing']={mode!r} must be 'always' or 'region'")
        for key, allowed in (
            ("cupti_collect", ("batch", "run")),
            ("flush_at", ("region", "run")),
            ("api_filter", ("learn", "off")),
        ):
            if plan.backend_options.get(key, allowed[0]) not in allowed:
                raise ConfigError(
                    f"backend_options[{key!r}]={plan.backend_options[key]!r} must be {' or '.join(map(repr, allowed))}"
                )
        flush = plan.backend_options.get("cupti_flush", "forced")
        if flush not in ("forced", "plain"):
            raise ConfigError(f"backend_options['cupti_flush']={flush!r} must be 'forced' or 'plain'")
        for key in ("buffer_bytes", "flush_bytes"):
            check_byte_option(plan, key)
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
