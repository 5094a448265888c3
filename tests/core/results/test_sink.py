"""The raw-file sink as a sweep uses it: what it prepares before the first measured run."""

from __future__ import annotations

import nsightx
from nsightx._results import sink as _sink


def test_run_serialiser_is_built_before_the_first_run(plugin_host, tmp_path):
    """Built at the first write (after measured run 0), it made the next run of a 13 us region take 40 us.

    Issue 38: the demo's n=64 row showed 79-91% RSD from that one run, only with ``output_prefix`` set. Whether
    the serialiser exists when each run starts is what decides it, so that is what is checked (not a timing).
    """
    _sink._run_adapter.cache_clear()
    built: list[int] = []

    @nsightx.analyze.kernel(
        configs=[1], runs=3, warmup=1, backend="host", verbosity=0, output_prefix=str(tmp_path) + "/"
    )
    def f(n):
        built.append(_sink._run_adapter.cache_info().currsize)
        with nsightx.annotate("a"):
            pass

    f()
    assert built == [1, 1, 1, 1], "warm-up and every measured run start with the serialiser built"
