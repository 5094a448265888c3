"""Handing the memory a large read freed back to the system (glibc's ``malloc_trim``), where that is glibc.

glibc keeps what a process frees for its own later use: the pages Arrow decodes while a result is read and the
temporary arrays of the checks stay resident after they are freed, about 13 MB at a million records (issue 35:
the load plus ``to_dataframe()`` must stay under twice the columns). ``malloc_trim(0)`` returns the free pages
of every arena; it takes about a millisecond at that size, so it runs only after reads of many rows. Other C
libraries (musl, macOS, Windows) have no such call and hand memory back their own way: nothing is done there.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable

TRIM_ROWS = 1 << 17
"""Rows from which a read is followed by a trim (below, what it could free is a few MB at most)."""


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    """The C library's ``malloc_trim`` where that library is glibc, else ``None`` (looked up once)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        if not os.confstr("CS_GNU_LIBC_VERSION"):  # glibc answers "glibc 2.x"; musl has no such name
            return None
        import ctypes

        trim = ctypes.CDLL(None).malloc_trim
    except (ValueError, OSError, AttributeError):
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim


def release_freed(rows: int) -> bool:
    """Return the freed memory the C library keeps to the system, after work over ``rows`` rows.

    Returns:
        Whether a trim ran (glibc, and at least :data:`TRIM_ROWS` rows).
    """
    trim = _malloc_trim() if rows >= TRIM_ROWS else None
    if trim is None:
        return False
    trim(0)
    return True
