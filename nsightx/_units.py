"""Units a person reads: a value shown in the prefix of its unit under which it is at least 1 (``140.6 MFLOP/s``).

A result keeps its values in the unit the backend or ``derive_metric`` gave them (durations in ns, a rate in
whatever ``derive_metric`` returned, ``TFLOP/s`` in the demo). The table, the notebook view, ``nsightx compare``
and the plots show each in the largest prefix of the same unit family under which its magnitude is at least 1:
``2.068e+04 ns`` is ``20.68 us`` and ``0.0001406 TFLOP/s`` is ``140.6 MFLOP/s``. Only the display changes.

Families: durations (``ns``, ``us``, ``ms``, ``s``; ncu's ``nsecond``, ``usecond``, ``msecond``, ``second``) and
the decimal SI prefixes (k, M, G, T, P; ncu's upper-case ``K`` too) of ``FLOP``, ``FLOP/s``, bytes (``B``,
``byte``, ``bytes``, shown as ``B``), bytes per second (``B/s``, ``byte/s``, ``byte/second``, shown as ``B/s``)
and ``Hz``. Any other unit is shown as it is. This module imports nothing of nsightx: the results, reports and
plots all use it.
"""

from __future__ import annotations

import math
import re

TIME_UNITS: tuple[tuple[float, str], ...] = ((1e9, "s"), (1e6, "ms"), (1e3, "us"), (1.0, "ns"))
"""Factors from nanoseconds to each display unit, largest first."""

_TIME_INPUT = {
    "ns": 1.0,
    "nsecond": 1.0,
    "us": 1e3,
    "usecond": 1e3,
    "ms": 1e6,
    "msecond": 1e6,
    "s": 1e9,
    "second": 1e9,
}
"""Nanoseconds in one of each duration unit a result may hold."""

_PREFIXES: tuple[tuple[float, str], ...] = ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (1.0, ""))
"""Decimal SI prefixes, largest first."""

_PREFIX_INPUT = {"": 1.0, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15}

_PREFIXED = re.compile(r"^(?P<prefix>[kKMGTP]?)(?P<base>FLOP/s|FLOP|B/s|byte/s|bytes/s|byte/second|B|bytes|byte|Hz)$")
"""A unit of a prefixed family: a prefix (or none), then its base."""

_SHOWN_BASE = {
    "FLOP/s": "FLOP/s",
    "FLOP": "FLOP",
    "B/s": "B/s",
    "byte/s": "B/s",
    "bytes/s": "B/s",
    "byte/second": "B/s",
    "B": "B",
    "byte": "B",
    "bytes": "B",
    "Hz": "Hz",
}
"""How each base is written once a value is shown with a prefix."""


def scale(value: float, unit: str | None) -> tuple[float, str | None]:
    """The factor to divide ``value`` by, and the unit to show the quotient in.

    The unit is the largest of its family under which ``|value|`` is at least 1 (the smallest, for 0): a duration
    in ns, us, ms or s; a rate or a count with a decimal prefix. A unit outside these families, a missing unit and
    a value that is not finite keep their unit (factor 1).

    Example:
        >>> scale(2.068e4, "ns")
        (1000.0, 'us')
        >>> scale(0.0001406, "TFLOP/s")
        (1e-06, 'MFLOP/s')
    """
    if unit is None or not math.isfinite(value):
        return 1.0, unit
    in_ns = _TIME_INPUT.get(unit)
    if in_ns is not None:
        factor, shown = _largest(abs(value) * in_ns, TIME_UNITS)
        return factor / in_ns, shown
    match = _PREFIXED.match(unit)
    if match is None:
        return 1.0, unit
    given = _PREFIX_INPUT[match["prefix"]]
    factor, prefix = _largest(abs(value) * given, _PREFIXES)
    return factor / given, prefix + _SHOWN_BASE[match["base"]]


def nanoseconds_in(unit: str) -> float | None:
    """Nanoseconds in one ``unit`` of the duration family (``us`` -> 1000), ``None`` for a unit of no duration.

    For code that computes with a value (the roofline): a unit outside the family is not guessed.
    """
    return _TIME_INPUT.get(unit)


def prefix_factor(unit: str, shown_base: str) -> float | None:
    """The factor of ``unit``'s decimal prefix when its family is shown as ``shown_base``; ``None`` otherwise.

    ``shown_base`` is how the family is written once shown (``B``, ``B/s``, ``FLOP``, ``FLOP/s``, ``Hz``): every
    spelling of it counts, ncu's included. A unit of another family, or with a prefix this module does not know
    (``mbyte``: milli, not mega), gives ``None``, so that code that computes with a value does not guess.

    Example:
        >>> prefix_factor("Mbyte", "B"), prefix_factor("kB", "B"), prefix_factor("MB/s", "B")
        (1000000.0, 1000.0, None)
    """
    match = _PREFIXED.match(unit)
    if match is None or _SHOWN_BASE[match["base"]] != shown_base:
        return None
    return _PREFIX_INPUT[match["prefix"]]


def _largest(magnitude: float, steps: tuple[tuple[float, str], ...]) -> tuple[float, str]:
    """The first (largest) step whose factor ``magnitude`` reaches; the last one when it reaches none."""
    return next(((f, u) for f, u in steps if magnitude >= f), steps[-1])


def number(value: float) -> str:
    """Four significant digits, never an exponent (``431700``, ``0.00001235``), ``-`` for a missing or infinite value.

    A person reads ``4.317e+05`` wrongly or not at all; a wide interval end or a tiny spread is shown in full.
    """
    if not math.isfinite(value):
        return "-"
    size = abs(value)
    if size == 0.0 or 1e-3 <= size < 9999.5:  # from 9999.5 on, four digits round to 1e+04
        return f"{value:.4g}"
    if size >= 9999.5:
        return f"{value:.0f}"
    exponent = int(f"{size:.3e}".partition("e")[2])  # after rounding: 9.99999e-06 shows as 1.000e-05
    return f"{value:.{3 - exponent}f}"


def with_unit(text: str, unit: str | None) -> str:
    """``text`` followed by ``unit`` when there is one."""
    return f"{text} {unit}" if unit else text


def readable(value: float, unit: str | None) -> str:
    """``value`` in its readable unit (:func:`scale`), four significant digits: ``20.68 us``, ``140.6 MFLOP/s``."""
    if not math.isfinite(value):
        return "-"
    factor, shown = scale(value, unit)
    return with_unit(number(value / factor), shown)
