"""Measured runs a deferred session never handed back: told once per call, and kept in the result's environment.

A deferred session (:attr:`~nsightx._run.backend.Session.deferred`) hands a run's output back only when it is
collected. A run it leaves out is written with what its ``finish_run`` returned, for such a session nothing: the
run is kept with no value, its regions have no row in the frames and ``NumRuns`` counts it out. Nothing in the
numbers shows that, so the run loop counts such runs, warns once at the end of the call (how many, of which
configs, which backend) and the result's environment says how many (:data:`ENVIRONMENT_KEY`). The built-in
deferred sessions (events, cupti) hand back every run they finished.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from nsightx._errors import IncompleteResultWarning
from nsightx._warn import warn

ENVIRONMENT_KEY = "UnreturnedRuns"
"""The result's environment key that holds how many measured runs the backend's session never handed back (only
present when some were not)."""


def describe(backend: str, keys: Sequence[tuple[int, int]], measured: int) -> str:
    """The warning's text for the (config, run) ``keys`` of ``backend``'s runs left out, of ``measured`` runs.

    Example:
        >>> describe("naive", [(0, 1), (2, 0), (0, 3)], 12)
        "backend 'naive' never handed back 3 of 12 measured run(s) (config 0: 2, config 2: 1); they are kept with no value: their regions have no row in the frames and NumRuns counts them out (the result's environment says UnreturnedRuns=3)"
    """  # noqa: E501 - a doctest's expected output is one line
    per_config = Counter(config for config, _ in keys)
    configs = ", ".join(f"config {config}: {n}" for config, n in sorted(per_config.items()))
    return (
        f"backend {backend!r} never handed back {len(keys)} of {measured} measured run(s) ({configs}); they are "
        "kept with no value: their regions have no row in the frames and NumRuns counts them out (the result's "
        f"environment says {ENVIRONMENT_KEY}={len(keys)})"
    )


def warn_unreturned(backend: str, keys: Sequence[tuple[int, int]], measured: int) -> None:
    """Warn, as an :class:`~nsightx.IncompleteResultWarning` at the user's line, that ``keys`` came back empty."""
    warn(describe(backend, keys, measured), IncompleteResultWarning)
