"""Decorator options against the docs where a hunt found them to differ (docs/api.md's option table)."""

from __future__ import annotations

import pytest

import nsightx
from nsightx import ConfigTypeError


@pytest.mark.parametrize("kind", [set, frozenset])
def test_metrics_given_as_a_set_is_refused_naming_it(kind: type) -> None:
    # A set's order follows the string hash, which changes per process (PYTHONHASHSEED): derive_metric, which
    # takes the metric values in metrics' order, got them in a different order from one run of a script to the
    # next, silently. api.md: metrics is a *list* of names.
    with pytest.raises(ConfigTypeError, match=r"metrics must be a list of str, got a (frozen)?set") as info:
        nsightx.analyze.kernel(
            configs=[(1,)], backend="ncu", metrics=kind({"dram__bytes.sum", "gpu__time_duration.sum"})
        )(lambda n: None)
    assert "['dram__bytes.sum', 'gpu__time_duration.sum']" in str(info.value)  # the value, named
    assert "no order" in str(info.value)
