"""``nsightx._units.number``: four significant digits, also where rounding reaches the next power of ten."""

from __future__ import annotations

import pytest

from nsightx._units import number


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (9.999999473684238e-06, "0.00001000"),  # was 0.000010000: five digits, the exponent taken before rounding
        (9.99995e-05, "0.0001000"),
        (0.000999996, "0.001000"),
        (-9.99999e-07, "-0.000001000"),
        (0.000123456, "0.0001235"),
        (1e-05, "0.00001000"),
    ],
)
def test_a_small_value_shows_four_significant_digits(value, shown):
    assert number(value) == shown
