"""Readable units against a naive reference from the docstring of ``nsightx._units`` and docs/api.md.

Every unit of the documented families (durations, and FLOP, FLOP/s, bytes, bytes per second and Hz under the
decimal SI prefixes, in each spelling a result may hold) and one outside them, over values of every magnitude and
sign: the shown text, read back, is the same quantity (four significant digits), in the largest unit of the family
under which its magnitude is at least 1, the base written as documented (a rate stays a rate), with no exponent.
The displayed table (``summarize``) shows each row's own mean in its own unit: rows keep their values.
"""

from __future__ import annotations

import math
import os
import re

import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from nsightx._results.summary import summarize
from nsightx._units import number, readable

EXAMPLES = int(os.environ.get("NSIGHTX_REFERENCE_EXAMPLES", "50"))

TIME_NS = {"ns": 1.0, "nsecond": 1.0, "us": 1e3, "usecond": 1e3, "ms": 1e6, "msecond": 1e6, "s": 1e9, "second": 1e9}
SHOWN_TIME = (("s", 1e9), ("ms", 1e6), ("us", 1e3), ("ns", 1.0))
PREFIX = {"": 1.0, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15}
SHOWN_PREFIX = (("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3), ("", 1.0))
BASES = {
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
UNITS = st.one_of(
    st.sampled_from(sorted(TIME_NS)),
    st.builds(lambda p, b: p + b, st.sampled_from(sorted(PREFIX)), st.sampled_from(sorted(BASES))),
    st.sampled_from(["inst", "cycle/nsecond", "%", "Ghz"]),
)
VALUES = st.builds(
    lambda m, e, sign: sign * m * 10.0**e,
    st.floats(1.0, 9.99999),
    st.integers(-12, 19),
    st.sampled_from([1.0, -1.0]),
) | st.sampled_from([0.0, 9999.6, 999.96, 1e4, 0.00099996])


def expected(value: float, unit: str) -> tuple[float, str]:
    """The quantity in the documented display unit: (value in that unit, unit)."""
    if unit in TIME_NS:
        ns = abs(value) * TIME_NS[unit]
        shown, f = next(((u, f) for u, f in SHOWN_TIME if ns >= f), SHOWN_TIME[-1])
        return value * TIME_NS[unit] / f, shown
    m = re.fullmatch(r"([kKMGTP]?)(.*)", unit)
    if m and m[2] in BASES:
        base = abs(value) * PREFIX[m[1]]
        shown, f = next(((u, f) for u, f in SHOWN_PREFIX if base >= f), SHOWN_PREFIX[-1])
        return value * PREFIX[m[1]] / f, shown + BASES[m[2]]
    return value, unit


@settings(max_examples=EXAMPLES * 4, deadline=None)
@given(value=VALUES, unit=UNITS)
def test_readable_is_the_same_quantity_in_the_documented_unit(value: float, unit: str) -> None:
    text = readable(value, unit)
    number, _, shown = text.partition(" ")
    want, want_unit = expected(value, unit)
    assert "e" not in number.lower(), text  # never an exponent
    assert math.isclose(float(number), want, rel_tol=5e-4, abs_tol=0.0), (text, want)
    if abs(want) < 999.95:  # (one that rounds up to 1000 may keep the smaller unit: the docs do not say)
        assert shown == want_unit, (text, want_unit)


@settings(max_examples=EXAMPLES, deadline=None)
@given(rows=st.lists(st.tuples(VALUES, UNITS), min_size=1, max_size=6))
def test_the_displayed_table_shows_each_rows_own_mean(rows: list[tuple[float, str]]) -> None:
    frame = pd.DataFrame(
        {
            "Annotation": [f"a{i}" for i in range(len(rows))],
            "n": list(range(len(rows))),
            "Metric": "m",
            "AvgValue": [v for v, _ in rows],
            "CI95_Lower": [v - abs(v) / 8 for v, _ in rows],
            "CI95_Upper": [v + abs(v) / 8 for v, _ in rows],
            "RelativeStdDevPct": 1.0,
            "NumRuns": 3,
            "StableMeasurement": True,
            "Unit": [u for _, u in rows],
            "Tool": "cupti",
        }
    )
    summary = summarize(frame, ["n"])
    mean, ci = summary.header.index("Mean"), summary.header.index("95% CI")
    for (value, unit), row in zip(rows, summary.rows, strict=True):
        want, _ = expected(value, unit)
        number, _, shown = row.cells[mean].partition(" ")
        assert math.isclose(float(number), want, rel_tol=5e-4), (row.cells, want)
        low, high = (float(x) for x in row.cells[ci].partition("]")[0].strip("[").split(", "))
        f = value / want if want else 1.0
        assert math.isclose(low * f, value - abs(value) / 8, rel_tol=5e-4) and row.cells[ci].endswith(shown)
        assert math.isclose(high * f, value + abs(value) / 8, rel_tol=5e-4)


def test_a_number_that_rounds_to_ten_thousand_has_no_exponent() -> None:
    # Four significant digits of 9999.5 up to 10000 are 1e+04: a unit outside the families showed "1e+04 inst".
    assert number(9999.6) == "10000" and number(-9999.7) == "-10000" and number(9999.4) == "9999"
    assert readable(9999.6, "inst") == "10000 inst"
