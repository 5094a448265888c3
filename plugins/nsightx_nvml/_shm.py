"""One device's latest NVML sample in a small shared file: written by the sampler process, read by the sweep.

Why a file in shared memory and not a queue: the reader is the thread that launches the user's kernels, and it
must pay nothing but a few memory reads for a value. The writer publishes under a sequence lock (the sequence
number is odd while it writes), so a reader never sees half a sample and never waits for the writer.

Layout (little-endian, :data:`SIZE` bytes): see :data:`_HEADER` and :data:`_VALUES`. Numbers the device does not
report are NaN; the clock-event reasons are a bitmask with a "valid" flag.
"""

from __future__ import annotations

import functools
import math
import mmap
import os
import struct
import tempfile
from collections.abc import Callable, Mapping

from nsightx.columns import (
    CLOCK_EVENT_REASONS,
    GPU_POWER,
    GPU_TEMPERATURE,
    MEASURED_MEM_CLOCK,
    MEASURED_SM_CLOCK,
)
from nsightx_nvml._fields import Value
from nsightx_nvml._lib import reason_names

SIZE = 512
_HEADER = struct.Struct("<QqqQQQQ")  # seq, taken_ns, demand_ns, stop, samples, parks, child pid
_VALUES = struct.Struct("<ddddQQ")  # sm MHz, mem MHz, temperature C, power W, reasons mask, reasons valid
_ERROR = struct.Struct("<Q256s")  # length, text of the last failed read
_V_OFF = _HEADER.size
_E_OFF = _V_OFF + _VALUES.size
_DEMAND_OFF, _STOP_OFF, _PID_OFF = 16, 24, 48
_INT_FIELDS = (MEASURED_SM_CLOCK, MEASURED_MEM_CLOCK, GPU_TEMPERATURE)
_I64 = struct.Struct("<q")
_U64 = struct.Struct("<Q")
"""Compiled once: the reader writes the demand time and reads the sequence number before every run."""


def _num(value: Value) -> float:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else math.nan


def _back(x: float, integer: bool) -> Value:
    if math.isnan(x):
        return None
    return int(x) if integer else x


class SharedSample:
    """The shared file, mapped; both sides use one of these.

    Args:
        path: The file (made by :meth:`create`).
    """

    def __init__(self, path: str) -> None:
        self.path = path
        fd = os.open(path, os.O_RDWR)
        try:
            self._map = mmap.mmap(fd, SIZE)
        finally:
            os.close(fd)
        self.seq_field: Callable[[], tuple[int]] = functools.partial(_U64.unpack_from, self._map, 0)
        """:meth:`seq` as a one-field tuple, without a Python frame: what the RUN collector reads before most runs
        (``seq_field()[0]``, issue 35)."""

    @classmethod
    def create(cls) -> SharedSample:
        """A new, zeroed file in ``/dev/shm`` (else the temporary folder), readable by this user only."""
        folder = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None
        fd, path = tempfile.mkstemp(prefix="nsightx-nvml-", suffix=".shm", dir=folder)
        try:
            os.ftruncate(fd, SIZE)
        finally:
            os.close(fd)
        return cls(path)

    def unlink(self) -> None:
        """Remove the file (mappings stay valid); harmless when it is gone."""
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass

    # writer side (the sampler process)
    def publish(self, taken_ns: int, values: Mapping[str, Value]) -> None:
        """Publish one sample (``ClockEventReasons`` as the raw bitmask, ``None`` when it could not be read)."""
        reason_mask = values.get(CLOCK_EVENT_REASONS)
        seq, _, _, _, samples, _, _ = _HEADER.unpack_from(self._map, 0)
        struct.pack_into("<Q", self._map, 0, seq + 1)  # odd: writing
        _VALUES.pack_into(
            self._map,
            _V_OFF,
            _num(values.get(MEASURED_SM_CLOCK)),
            _num(values.get(MEASURED_MEM_CLOCK)),
            _num(values.get(GPU_TEMPERATURE)),
            _num(values.get(GPU_POWER)),
            reason_mask if isinstance(reason_mask, int) else 0,
            int(isinstance(reason_mask, int)),
        )
        struct.pack_into("<q", self._map, 8, taken_ns)
        struct.pack_into("<Q", self._map, 32, samples + 1)
        struct.pack_into("<Q", self._map, 0, seq + 2)  # even: done

    def set_error(self, text: str) -> None:
        """Record why the last read failed."""
        data = text.encode("utf-8", "replace")[:256]
        _ERROR.pack_into(self._map, _E_OFF, len(data), data)

    def count_park(self) -> None:
        """Count one park of the sampler (for tests and the benchmark)."""
        parks = struct.unpack_from("<Q", self._map, 40)[0]
        struct.pack_into("<Q", self._map, 40, parks + 1)

    def set_pid(self, pid: int) -> None:
        """Say which process writes (0 when it has ended)."""
        struct.pack_into("<Q", self._map, _PID_OFF, pid)

    # reader side (the sweep)
    def demand(self, now_ns: int) -> None:
        """A run starts now: keep sampling."""
        _I64.pack_into(self._map, _DEMAND_OFF, now_ns)

    def demand_seq(self, now_ns: int) -> int:
        """A run starts now: keep sampling; and the sequence number (see :meth:`seq`), in one call before a run."""
        m = self._map
        _I64.pack_into(m, _DEMAND_OFF, now_ns)
        value: int = _U64.unpack_from(m, 0)[0]
        return value

    def demand_ns(self) -> int:
        """When a run last started."""
        value: int = struct.unpack_from("<q", self._map, _DEMAND_OFF)[0]
        return value

    def request_stop(self) -> None:
        """Ask the writer to end."""
        struct.pack_into("<Q", self._map, _STOP_OFF, 1)

    def stop_requested(self) -> bool:
        """Whether the reader asked the writer to end."""
        return bool(struct.unpack_from("<Q", self._map, _STOP_OFF)[0])

    def counters(self) -> tuple[int, int, int]:
        """(samples, parks, writer pid)."""
        _, _, _, _, samples, parks, pid = _HEADER.unpack_from(self._map, 0)
        return samples, parks, pid

    def error(self) -> str | None:
        """The last failed read's text, if any."""
        n, data = _ERROR.unpack_from(self._map, _E_OFF)
        return data[:n].decode("utf-8", "replace") if n else None

    def seq(self) -> int:
        """The sequence number: it changes with every sample published (odd while one is written)."""
        value: int = _U64.unpack_from(self._map, 0)[0]
        return value

    def snapshot(self) -> tuple[int, int, dict[str, Value]] | None:
        """(sequence, taken_ns, values) of the latest complete sample; ``None`` before the first."""
        for _ in range(100):
            seq, taken, _, _, samples, _, _ = _HEADER.unpack_from(self._map, 0)
            if seq & 1:
                continue
            sm, mem, temp, power, mask, valid = _VALUES.unpack_from(self._map, _V_OFF)
            if struct.unpack_from("<Q", self._map, 0)[0] != seq:
                continue
            if samples == 0:
                return None
            values: dict[str, Value] = {
                MEASURED_SM_CLOCK: _back(sm, True),
                MEASURED_MEM_CLOCK: _back(mem, True),
                GPU_TEMPERATURE: _back(temp, True),
                GPU_POWER: _back(power, False),
                CLOCK_EVENT_REASONS: reason_names(mask) if valid else None,
            }
            return seq, taken, values
        return None

    def close(self) -> None:
        """Unmap."""
        self._map.close()
