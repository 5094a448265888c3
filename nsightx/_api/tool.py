"""The active tool: ``activate``/``deactivate``/``get_active_tool``.

Switching is always allowed: in-process backends hold no process-wide state between calls, and the ncu
backend measures in a worker process, so CUPTI, events, host and ncu can follow each other in one script.
"""

from __future__ import annotations

from nsightx._enums import Tool

_active: str | None = None


def activate(tool: Tool | str) -> None:
    """Make ``tool`` (a :class:`Tool` or any registered backend name) the default for decorated calls.

    Raises:
        ConfigError: ``tool`` names no registered backend.
    """
    from nsightx._pluginhost.plugins import default_host

    name = tool.value if isinstance(tool, Tool) else str(tool)
    if name != Tool.AUTO.value:
        default_host().backend(name)  # raises ConfigError for an unknown name
    global _active
    _active = name


def deactivate() -> None:
    """Go back to "auto" backend selection."""
    global _active
    _active = None


def get_active_tool() -> Tool | str | None:
    """The activated tool (a :class:`Tool` for first-party names), or ``None`` when none is active."""
    if _active is None:
        return None
    try:
        return Tool(_active)
    except ValueError:
        return _active


def active_name() -> str | None:
    """The activated backend name, as a plain string."""
    return _active
