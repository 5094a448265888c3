"""Argument types of the ``nsightx`` commands: each value is checked as the command line spells it.

A bad value is refused by argparse as ``nsightx <command>: error: argument --runs: ...``, in the command's own
option names, before the command calls the Python API (whose messages name ``runs=``, ``threshold_pct=``, ...).

A number is taken only as it is usually written: ASCII digits, with a sign, a decimal point and an exponent where
a float is meant. Python's ``int()`` and ``float()`` also read ``5_0`` as 50, the Arabic-Indic ``٣`` as 3 and
text padded with spaces, none of which a user typing ``--runs`` means as a number.
"""

from __future__ import annotations

import argparse
import math
import re

_WHOLE = re.compile(r"[0-9]+")
"""A whole number as it is written: ASCII digits only (no sign, underscore, space or other script's digits)."""
_DECIMAL = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
"""A decimal number as it is written: ASCII digits with an optional sign, point and exponent."""


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
    value = int(text) if _WHOLE.fullmatch(text) else 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 1, got {text!r}")
    return value


def _float(text: str) -> float | None:
    """``text`` as a finite float, when it is written as :data:`_DECIMAL` says; else None."""
    if not _DECIMAL.fullmatch(text):
        return None
    value = float(text)
    return value if math.isfinite(value) else None
