"""The one check of ``normalize_against``: the baseline annotation must be among the annotations measured.

It runs where the annotations are first known (the run loop's first run, the first-run check of a call whose
backend measures elsewhere) and again when a DataFrame divides by the baseline (a loaded result was not checked
when measured). One function, one message, so that all three say the same.
"""

from __future__ import annotations

from collections.abc import Iterable

from nsightx._errors import ConfigError


def check_baseline(baseline: str | None, seen: Iterable[str], function: str, where: str) -> None:
    """Raise when ``baseline`` (``normalize_against``) is not among the annotations ``seen``.

    Args:
        baseline: The ``normalize_against`` annotation; ``None`` checks nothing.
        seen: The annotations measured.
        function: The profiled function's name, for the message.
        where: What ``seen`` is, for the message (``"its first run opened"``, ``"the result holds"``).

    Raises:
        ConfigError: the baseline is not among them; the message lists those that are.
    """
    names = set(seen)
    if baseline is None or baseline in names:
        return
    shown = ", ".join(sorted(names)) or "none"
    raise ConfigError(
        f"Annotation '{baseline}' not found in data. normalize_against={baseline!r} names no annotation of "
        f"{function}; {where}: {shown}; give normalize_against one of those annotation names"
    )
