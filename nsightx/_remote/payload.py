"""A whole plan's trip to a child process: the function by reference when importable there, else by value.

The mechanics are nsightx's one way of shipping a profiled function to another process (:mod:`travel`, shared
with ``parallel_devices`` and ``executor=`` sweeps): a decorated function of an importable module travels as its
import path, a function of ``__main__`` or a notebook by value, and a value that cannot be pickled is named in an
:class:`~nsightx._remote.travel.UnpicklableError` before the child starts. This module adds what a plan needs on
top: the check of every config argument, and a warning naming the largest parts of a payload over
:data:`LARGE_PAYLOAD_BYTES`.
"""

from __future__ import annotations

import types
import warnings

from nsightx._remote import travel
from nsightx._run.plan import Plan

LARGE_PAYLOAD_BYTES = 64 * 1024 * 1024
"""A pickled plan larger than this gets a warning naming its largest parts (they are copied on every call)."""


def dump_plan(plan: Plan, destination: travel.Destination, *, stacklevel: int = 2) -> bytes:
    """Pickle the child's plan, with a named error for a value that cannot travel and a warning for a big one.

    A function of a module the child cannot import (loaded from a file outside the path) travels by value.

    Args:
        plan: The plan the child runs.
        destination: Where it goes, in the words of the error and the warning.
        stacklevel: Of the large-payload warning, counted from the caller of this function.

    Raises:
        UnpicklableError: A value the function uses, or a config argument, cannot be pickled.
    """
    data = travel.dump_checked(
        plan,
        function=plan.function,
        name=plan.function_name,
        configs=plan.configs,
        params=plan.params,
        destination=destination,
    )
    if len(data) > LARGE_PAYLOAD_BYTES:
        warnings.warn(_size_message(plan, len(data), destination), RuntimeWarning, stacklevel=stacklevel + 1)
    return data


def _sizes(plan: Plan) -> list[tuple[str, int]]:
    parts: list[tuple[str, object]] = []
    fn = plan.function
    if isinstance(fn, types.FunctionType) and travel.by_value(fn):
        for part in travel.function_parts(fn):
            inner = part.value
            if travel.own(fn) and isinstance(inner, types.FunctionType):  # nsightx's wrapper: the user's function
                if travel.by_value(inner):
                    parts += [(p.label, p.value) for p in travel.function_parts(inner)]
            else:
                parts.append((part.label, inner))
    for ci, config in enumerate(plan.configs):
        for ai, arg in enumerate(config):
            param = plan.params[ai] if ai < len(plan.params) else f"#{ai + 1}"
            parts.append((f"config {ci} argument `{param}`", arg))
    sizes = []
    for label, value in parts:
        try:
            sizes.append((f"{label} ({travel.type_name(value)})", len(travel.dumps(value))))
        except Exception:
            continue
    return sorted(sizes, key=lambda s: -s[1])


def _human(n: int) -> str:
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"


def _size_message(plan: Plan, total: int, destination: travel.Destination) -> str:
    big = [f"{label} is {_human(size)}" for label, size in _sizes(plan)[:3] if size >= total // 10]
    parts = "; ".join(big) or "no single global or config argument dominates"
    return (
        f"the plan sent to {destination.name} for {plan.function_name} is {_human(total)} when pickled: {parts}. "
        "It is copied into the child process on every call (GPU tensors captured by value travel through host "
        "memory). Create large data inside the function, or in an importable module (the function then "
        "travels by reference and the module builds its own copy)."
    )
