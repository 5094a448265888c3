"""Argument types of the ``nsightx`` commands: each value is checked as the command line spells it.

A bad value is refused by argparse as ``nsightx <command>: error: argument --runs: ...``, in the command's own
option names, before the command calls the Python API (whose messages name ``runs=``, ``threshold_pct=``, ...).
"""

from __future__ import annotations

import argparse
import math


def runs(text: str) -> int | str:
    """``--runs``: a whole number >= 1, or ``auto``."""
    if text.strip().lower() == "auto":
        return "auto"
    try:
        return count(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 1 or 'auto', got {text!r}") from None


def percent(text: str) -> float:
    """``--threshold``: a percentage >= 0."""
    value = _float(text)
    if value is None or value < 0:
        raise argparse.ArgumentTypeError(f"must be a number >= 0 (percent), got {text!r}")
    return value


def fraction(text: str) -> float:
    """``--alpha``: a significance level strictly between 0 and 1."""
    value = _float(text)
    if value is None or not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"must be a number between 0 and 1 (e.g. 0.05), got {text!r}")
    return value


def count(text: str) -> int:
    """``--history``: a whole number >= 1."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 1, got {text!r}")
    return value


def _float(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None
