"""The ``backend_options`` of the cupti backend: read by the backend's checks and by the session it opens.

A module of its own so that both :mod:`nsightx_cupti._backend` and :mod:`nsightx_cupti._session` import it, and
neither imports the other back.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BeforeValidator

from nsightx.ext import BackendOptions, ByteCount
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
    cupti_flush: Literal["complete", "forced", "plain"] = "complete"
    """How records are flushed after the wait for the device: 'complete' (default): CUPTI's default flush, then a
    forced one only while CUPTI still holds a buffer; 'forced': always forced (makes the next call's first launch
    slower); 'plain': for overhead studies, may lose kernels."""
    cupti_collect: Literal["batch", "run"] = "batch"
    """'batch' (default): collect CUPTI's records every 64 runs, at config ends a second or more after the last
    collection, and at the end; 'run': after every run."""
    cupti_drain: DrainMode = DEFAULT_DRAIN
    """When completed CUPTI buffers are decoded before the forced flush after the wait for the device: 'off'
    (default): never (everything is decoded after the wait); 'wait': by a helper thread during the wait; 'end':
    once just before it; 'config': also at each config start; 'period': by CUPTI's own worker thread, which hands
    over completed full buffers every millisecond. See nsightx_cupti._drain."""
    cupti_decode: Literal["ctypes", "cupti-python"] = "ctypes"
    """How delivered activity buffers are read: 'ctypes' (default): straight from libcupti at the records'
    offsets (nsightx_cupti._raw; falls back to cupti-python where it cannot be set up, and the result's
    CuptiDecoder says which ran); 'cupti-python': through cupti-python's record objects."""
    flush_at: Literal["region", "run"] = "region"
    """'region' (default): flush L2 just before each region opens (inputs written by the function are cold, as
    under ncu); 'run': once before the function runs."""
