"""Which runs were throttled, read from the clock and reasons columns of a block of runs (issue 35).

The frame's throttling verdict reads each run's last SM clock and clock-event reasons. Read from the clock items one
at a time it cost ~1 us a run of the frame on a 2-core VM (``frame_stages.py --per-run``, session 27). Where the
call's runs form a block with one clock and one reasons value a run
(:class:`~nsightx._results.collectorblock.ClockBlock`), :func:`block_verdicts` reads the two columns with numpy:
each distinct reasons text once, the clocks as one float array. It gives what the loop gives, and declines
(``(False, None)``) values the loop would read one by one to read alike: a clock that is not an int, a float or
None (a bool, a numpy scalar), a reasons value that is not text, an int too large for a float.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from itertools import compress
from typing import Any

import numpy as np

from nsightx._results.collectorblock import ClockBlock

_PLAIN_CLOCKS = frozenset({int, float, type(None)})
_TEXT = frozenset({str})


def block_verdicts(
    block: ClockBlock,
    clocks: dict[tuple[Any, Any], float] | None,
    read_reasons: Callable[[str], tuple[bool, bool]],
    drop_fraction: float,
) -> tuple[bool, dict[tuple[Any, Any], bool] | None]:
    """(True, each run's verdict) as the clock-item loop gives it, or (False, None) where it declines.

    Args:
        block: The runs' keys and their clock and reasons values (one of each a run, every key once).
        clocks: When given, filled as the loop fills it: each run's finite clock, runs whose reasons say
            ``gpu_idle`` left out.
        read_reasons: A reasons text -> (says ``gpu_idle``, names a throttling reason).
        drop_fraction: A run whose clock is under this fraction of the median clock is throttled.
    """
    keys, values, reasons = block
    if not keys:
        return True, None
    if not _PLAIN_CLOCKS.issuperset(map(type, values)) or not _TEXT.issuperset(map(type, reasons)):
        return False, None
    try:
        clock = np.array(values, dtype=np.float64)  # None -> NaN: no clock, as the loop reads it
    except OverflowError:
        return False, None
    read = {text: read_reasons(text) for text in dict.fromkeys(reasons)}
    idle = np.fromiter((read[text][0] for text in reasons), np.bool_, len(reasons))
    named = np.fromiter((read[text][1] for text in reasons), np.bool_, len(reasons))
    clock[idle] = np.nan  # a run whose reasons say gpu_idle has no clock
    has = np.isfinite(clock)
    if clocks is not None:
        clocks.update(zip(compress(keys, has.tolist()), clock[has].tolist(), strict=True))
    if not has.any():  # no clock to compare with: the reasons alone
        return True, dict(zip(keys, named.tolist(), strict=True))
    limit = drop_fraction * statistics.median(clock[has].tolist())
    with np.errstate(invalid="ignore"):
        low = has & (clock < limit)
    return True, dict(zip(keys, (named | low).tolist(), strict=True))
