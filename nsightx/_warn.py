"""Warnings that point at the user's line: the first frame outside nsightx, however deep the warning is raised.

A fixed ``stacklevel`` is right for one call path only: the same reader reached through ``nsightx.load`` and
``nsightx.load_raw`` is at different depths, and the wrong one prints a private module's file and source line
beside the message. :func:`warn` counts the frames instead.
"""

from __future__ import annotations

import sys
import warnings

_OURS = ("nsightx", "nsightx_")
"""Module names that are nsightx's own: the package and its first-party backends and plugins."""


def _ours(module: str) -> bool:
    return module == _OURS[0] or module.startswith(f"{_OURS[0]}.") or module.startswith(_OURS[1])


def user_stacklevel() -> int:
    """The ``stacklevel`` that names the caller's caller's first frame outside nsightx (1 when there is none)."""
    frame = sys._getframe(1)  # the function asking (e.g. warn below)
    level = 1
    while frame is not None and _ours(str(frame.f_globals.get("__name__", ""))):
        frame = frame.f_back  # type: ignore[assignment]
        level += 1
    return level


def warn(message: str, category: type[Warning]) -> None:
    """Issue ``message`` as ``category`` at the first frame of the call stack that is not nsightx's."""
    warnings.warn(message, category, stacklevel=user_stacklevel())
