"""Handing the memory a large read freed back to the C library's system (glibc only; issue 35)."""

from __future__ import annotations

import os
import sys

import pytest

from nsightx._results import memtrim


def _glibc() -> bool:
    try:
        return sys.platform.startswith("linux") and bool(os.confstr("CS_GNU_LIBC_VERSION"))
    except (ValueError, OSError):
        return False


def test_a_trim_runs_after_a_large_read_only():
    assert memtrim.release_freed(memtrim.TRIM_ROWS - 1) is False
    assert memtrim.release_freed(memtrim.TRIM_ROWS) is _glibc()


@pytest.mark.skipif(not _glibc(), reason="malloc_trim is glibc's")
def test_the_trim_returns_freed_pages_to_the_system():
    import numpy as np

    def rss_kb() -> int:
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("VmRSS"))

    # Many small blocks (under glibc's mmap threshold) in the heap, then freed: glibc keeps them resident.
    blocks = [np.ones(4096) for _ in range(8000)]  # 32 KiB each, 256 MB... no: 8000 x 32 KiB = 250 MiB
    del blocks[::2]
    keep = blocks  # every other block stays, so the freed ones are holes the heap top cannot shrink past
    before = rss_kb()
    assert memtrim.release_freed(memtrim.TRIM_ROWS)
    assert rss_kb() < before - 50_000  # most of the ~125 MiB of holes went back
    del keep


def test_elsewhere_nothing_is_called(monkeypatch: pytest.MonkeyPatch):
    memtrim._malloc_trim.cache_clear()
    monkeypatch.setattr(sys, "platform", "darwin")
    try:
        assert memtrim._malloc_trim() is None
        assert memtrim.release_freed(10**9) is False
    finally:
        memtrim._malloc_trim.cache_clear()
