"""Draining CUPTI's completed activity buffers while the GPU still works (``backend_options={"cupti_drain": ...}``).

A deferred session collects once for many runs: the host queues them ahead of the GPU, waits for the device,
and only then flushes CUPTI and decodes every record. On issue 13's matmul sweep the wait is ~32 ms and
everything after it, ~0.8 ms of flush and decode among it, adds to the call's wall time.

CUPTI's non-forced flush (``cuptiActivityFlushAll(0)``) delivers only the buffers whose records are all
complete, and leaves the rest where they are. So a non-forced flush made while the GPU still runs the last
runs decodes the earlier runs' buffers off the critical path, and the flush after the wait only has the tail.
No record can be lost or doubled by it: delivered records join the same pending batch the flush after the wait
adds to, and attribution runs once, on everything, after the wait (that flush stays: the tracer's ``collect``).

How much a drain takes off depends on the buffers: the records of a run sit in the buffer being filled when it
was launched, and a buffer comes out only once its last record is complete. With one big buffer (256 KiB holds
a whole sweep's ~17 KiB of records) nothing comes out before the end; smaller buffers (:data:`DRAIN_BUFFER_BYTES`,
the default when draining) fill and complete one after another.

Only the non-forced flush may run before the wait: a *forced* flush made while the GPU still works hands over the
record of every kernel launched so far, complete or not, and CUPTI never delivers the incomplete ones again. On the
H100 (session 23, ``benchmarks/cupti_midwait_probe.py``, the matmul sweep) a forced flush after the first run's
CUDA event delivered all 99 kernels launched, 41 of them without an end, and 21 of the 55 matmuls had no time at
the end of the call (``benchmarks/results/logs/2026-12-06/midwait-s23.log``). So a cupti session cannot take its
runs one by one during the wait as the events backend does.

Modes (:data:`DRAIN_MODES`):

``off``     no drain: the flush after the wait delivers everything. The default since session 8: on the
            H200 a non-forced flush made during the wait blocks until the GPU completes its buffers, so the
            final buffer still comes out after the wait, and in four H200 calls of ``backend_overhead.py`` the
            whole call was as fast or faster without the helper thread (matmul sweep, inputs allocated once /
            ``torch.randn`` per run, mean of the calls' paired ratios to bare: off 1.028 / 1.037, wait 1.035 /
            1.046, end 1.028 / 1.041; ``98c9cf0:benchmarks/results/2026-12-04-s8-backend-overhead-{a,b,c,e}.json``).
``end``     one non-forced flush just before the wait.
``config``  one at the start of every config while runs are pending, and one just before the wait.
``period``  CUPTI's own worker thread delivers every full buffer whose records are all complete, every
            :data:`FLUSH_PERIOD_MS` (``cuptiActivityFlushPeriod``), so full buffers are decoded on that thread while
            the GPU works, with no flush call of ours before the one after the wait. Not the default: on the
            H100 (session 22, ``call_phases.py``, the matmul sweep, eight processes over three calls) it moved the
            whole call by -0.007 to +0.002 against ``off``, within the calls' noise. With 8 KiB buffers it decoded
            about 40% of the records during the wait but lengthened the host's launch phase by 1.3-1.8 ms (CUPTI's
            thread takes the GIL); with 32 KiB buffers the sweep's ~17 KiB of records never fill one, so nothing
            came out before the flush after the wait (``benchmarks/results/logs/2026-12-06/phases-s22*.log``).
``wait``    (the default in sessions 5-7) a helper thread flushes (non-forced) every :data:`WAIT_PERIOD_S`
            while the calling thread waits
            for the device (the wait is a ctypes call, which releases the GIL), so buffers come out as the GPU
            completes them; no drain runs after the wait has returned, so none overlaps the flush after it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Literal

DrainMode = Literal["off", "end", "config", "wait", "period"]
"""When a deferred session delivers completed CUPTI buffers before its flush after the wait."""

DRAIN_MODES: tuple[DrainMode, ...] = ("off", "end", "config", "wait", "period")
"""Every :data:`DrainMode`."""

DEFAULT_DRAIN: DrainMode = "off"
"""The mode a session uses when ``cupti_drain`` is not given."""

DRAIN_BUFFER_BYTES = 8 * 1024
"""Activity buffer size when draining and ``buffer_bytes`` is not given: ~25 kernel launches' records (a kernel
record, its launch record and its external-correlation record take ~320 bytes), so a sweep's records span
several buffers that complete one after another."""

FLUSH_PERIOD_MS = 1
"""``period``: how often CUPTI's worker thread looks for completed full buffers, ms (its API's unit)."""

WAIT_PERIOD_S = 0.0005
"""Pause between two drains of the ``wait`` helper thread, s."""


def wait_draining(wait: Callable[[], None], drain: Callable[[], None], period_s: float = WAIT_PERIOD_S) -> None:
    """Call ``wait()`` on this thread while a helper thread calls ``drain()`` every ``period_s`` until it returns.

    The helper drains at once, then after every pause. When ``wait`` returns or raises, this waits for a drain
    in flight to finish and returns; the helper makes no drain after that (it sees the stop under the same lock)
    and ends on its own, so the caller's flush never overlaps a drain and does not wait for the thread's exit.
    ``drain`` must not raise (a failed drain only loses its head start; the flush after the wait still delivers
    everything).

    Args:
        wait: Blocks until the device is idle (releases the GIL while it blocks).
        drain: Delivers the completed buffers (a non-forced flush).
        period_s: Pause between two drains.
    """
    done = threading.Event()
    busy = threading.Lock()

    def loop() -> None:
        while True:
            with busy:
                if done.is_set():
                    return
                drain()
            if done.wait(period_s):
                return

    threading.Thread(target=loop, name="nsightx-cupti-drain", daemon=True).start()
    try:
        wait()
    finally:
        done.set()
        with busy:  # a drain in flight finishes first; none starts after this
            pass
