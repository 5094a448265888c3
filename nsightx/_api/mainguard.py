"""``parallel_devices`` in a script without an ``if __name__ == "__main__":`` guard gets one clear error.

Parallel workers are spawned processes: each one starts by importing the script that started the parent (as
``__mp_main__``) so that it can find the function it measures. Without the guard, that import runs the script's
top level again, which calls the profiled function again, which tries to start workers of its own:
multiprocessing then prints a "bootstrapping phase" traceback per worker, and the script's side effects run once
more per worker.

:func:`check_parent` looks before any worker starts: when the top-level statement of the script that led to the
call is not under an ``if __name__ ...`` test, it raises a :class:`ConfigError` saying to add the guard.
:func:`check_child` catches what the parent cannot see (a call made from a thread, a script whose source cannot
be read): in a worker still importing the script it prints the same advice on one line and ends the worker, whose
death the parent then reports.
"""

from __future__ import annotations

import ast
import multiprocessing
import os
import sys
import tokenize
from types import FrameType, ModuleType

from nsightx._errors import ConfigError

GUARD_ADVICE = (
    "parallel_devices starts one process per device and each one imports your script, so an unguarded top level "
    'runs again in every worker: put the code that runs the sweep under `if __name__ == "__main__":`'
)
"""The remedy, shared by the parent's error and the worker's message."""


def check_child(function_name: str) -> None:
    """In a spawned worker still importing the main script, print the guard advice and end the worker.

    ``multiprocessing`` marks a process that is still receiving its start-up state with ``_inheriting`` (its own
    "bootstrapping phase" check reads the same flag). Exiting here, rather than raising, keeps the worker from
    printing a traceback, and from running the rest of the script's top level.

    Args:
        function_name: The profiled function, for the message.
    """
    if not getattr(multiprocessing.current_process(), "_inheriting", False):
        return
    print(
        f"nsightx: a parallel_devices worker, importing the main script, called {function_name} again; {GUARD_ADVICE}",
        file=sys.stderr,
        flush=True,
    )
    os._exit(1)


def check_parent(function_name: str) -> None:
    """Refuse to start workers when the script's top level would call ``function_name`` again in each of them.

    Args:
        function_name: The profiled function, for the message.

    Raises:
        ConfigError: the call comes from a top-level statement of the main script that is not under an
            ``if __name__ ...`` test.
    """
    main = sys.modules.get("__main__")
    path = _rerun_path(main)
    if main is None or path is None:
        return
    line = _top_level_line(main, sys._getframe(1))
    if line is None or _guarded(path, line) is not False:
        return
    raise ConfigError(
        f"{function_name} uses parallel_devices but is called from the top level of {path} (line {line}), not "
        f'under `if __name__ == "__main__":`; {GUARD_ADVICE}'
    )


def _rerun_path(main: ModuleType | None) -> str | None:
    """The file a spawned worker runs again as ``__mp_main__``, or None when spawn runs nothing again.

    Mirrors ``multiprocessing.spawn``: ``python -m pkg`` (a ``__main__`` module) and interactive sessions are not
    run again; ``python script.py`` and ``python -m pkg.mod`` are.
    """
    if main is None:
        return None
    name = getattr(getattr(main, "__spec__", None), "name", None)
    if name is not None and (name == "__main__" or name.endswith(".__main__")):
        return None
    path = getattr(main, "__file__", None)
    if not isinstance(path, str) or not os.path.isfile(path):
        return None
    return path


def _top_level_line(main: ModuleType, frame: FrameType | None) -> int | None:
    """The line of the main script's top level that the current call came from (None: not from there)."""
    line = None
    while frame is not None:
        if frame.f_globals is main.__dict__ and frame.f_code.co_name == "<module>":
            line = frame.f_lineno
        frame = frame.f_back
    return line


def _guarded(path: str, line: int) -> bool | None:
    """Whether the top-level statement holding ``line`` is an ``if`` testing ``__name__`` (None: unknown)."""
    try:
        with tokenize.open(path) as fh:
            tree = ast.parse(fh.read(), filename=path)
    except (OSError, SyntaxError, ValueError):
        return None
    for stmt in tree.body:
        end = getattr(stmt, "end_lineno", None) or stmt.lineno
        if stmt.lineno <= line <= end:
            return isinstance(stmt, ast.If) and any(
                isinstance(node, ast.Name) and node.id == "__name__" for node in ast.walk(stmt.test)
            )
    return None
