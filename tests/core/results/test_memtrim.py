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

    # Small blocks (under glibc's mmap threshold, so in the heap): 4000 x 32 KiB = 125 MiB. Every other one is
    # freed: holes between the kept ones, which glibc keeps resident (the heap's top cannot shrink past them).
    blocks = [np.ones(4096) for _ in range(4000)]
    del blocks[::2]
    before = rss_kb()
    assert memtrim.release_freed(memtrim.TRIM_ROWS)
    assert rss_kb() < before - 25_000  # most of the ~62 MiB of holes went back
    assert len(blocks) == 2000


def test_elsewhere_nothing_is_called(monkeypatch: pytest.MonkeyPatch):
    memtrim._malloc_trim.cache_clear()
    monkeypatch.setattr(sys, "platform", "darwin")
    try:
        assert memtrim._malloc_trim() is None
        assert memtrim.release_freed(10**9) is False
    finally:
        memtrim._malloc_trim.cache_clear()
