"""The ``cupti`` backend class: capabilities, availability, option checks, and the session it opens."""

from __future__ import annotations

import functools
import importlib.util
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated, Literal

from pydantic import BeforeValidator

from nsightx.ext import (
    Availability,
    Backend,
    BackendOptions,
    BackendUnavailableError,
    ByteCount,
    Capabilities,
    ConfigError,
    Plan,
    Session,
)
from nsightx_cupti._attribution import METRIC
from nsightx_cupti._drain import DEFAULT_DRAIN, DrainMode

BUFFER_MINIMUM = 4 * 1024
"""The smallest CUPTI activity buffer ``buffer_bytes`` accepts (a buffer must hold a few kernel records)."""


def _check_buffer_bytes(value: object) -> int | None:
    if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < BUFFER_MINIMUM):
        raise ValueError(f"must be an int of at least {BUFFER_MINIMUM} bytes")
    return value


BufferBytes = Annotated[int | None, BeforeValidator(_check_buffer_bytes)]
"""``buffer_bytes``: ``None`` (the default for the drain mode) or an int of at least :data:`BUFFER_MINIMUM`."""


class CuptiOptions(BackendOptions):
    """The ``backend_options`` of the cupti backend, each with its one default."""

    buffer_bytes: BufferBytes = None
    """Size of each CUPTI activity buffer in bytes, at least 4096 (default 8 KiB while draining, else 256 KiB)."""
    flush_bytes: ByteCount = None
    """Size of the L2 flush buffer in bytes (default and minimum: twice the L2 size)."""
    api_tracing: Literal["always", "region", "learn"] = "always"
    """'always' (default): API records for the whole session, minus APIs seen to launch nothing; 'region': only
    while a region is open (switched on and off around each region); 'learn': as 'always', but a launch API
    that the last collection saw launching a kernel per region or more outside every region is recorded only
    while a region is open (its outside kernels then leave no launch record to decode)."""
    api_filter: Literal["learn", "off"] = "learn"
    """'learn' (default): switch off APIs seen to launch nothing; 'off': record every API call."""
    cupti_flush: Literal["forced", "plain"] = "forced"
    """'forced' (default); 'plain' is for overhead studies and may lose kernels."""
    cupti_collect: Literal["batch", "run"] = "batch"
    """'batch' (default): collect CUPTI's records every 64 runs, at config ends a second or more after the last
    collection, and at the end; 'run': after every run."""
    cupti_drain: DrainMode = DEFAULT_DRAIN
    """When completed CUPTI buffers are decoded before the forced flush after the wait for the device: 'off'
    (default): never (everything is decoded after the wait); 'wait': by a helper thread during the wait; 'end':
    once just before it; 'config': also at each config start. See nsightx_cupti._drain."""
    cupti_decode: Literal["ctypes", "cupti-python"] = "ctypes"
    """How delivered activity buffers are read: 'ctypes' (default): straight from libcupti at the records'
    offsets (nsightx_cupti._raw; falls back to cupti-python where it cannot be set up, and the result's
    CuptiDecoder says which ran); 'cupti-python': through cupti-python's record objects."""
    flush_at: Literal["region", "run"] = "region"
    """'region' (default): flush L2 just before each region opens (inputs written by the function are cold, as
    under ncu); 'run': once before the function runs."""


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
