"""The plan's trip to the ncu worker: functions by reference when they can be imported there, else by value.

The mechanics are nsightx's one way of shipping a profiled function to another process
(``nsightx.ext.travel``, shared with ``parallel_devices`` and ``executor=`` sweeps): a decorated function of an
importable module travels as its import path, a function of ``__main__`` or a notebook by value, and a value
that cannot be pickled is named in an :class:`UnpicklableError` before ncu starts. This module adds what is the
ncu worker's own: the words of its errors, and a warning naming the largest parts of a payload over
:data:`LARGE_PAYLOAD_BYTES`.
"""

from __future__ import annotations

import types
import warnings

from nsightx.ext import Plan, travel

UnpicklableError = travel.UnpicklableError
dumps = travel.dumps
load_reference = travel.load_reference
reference = travel.reference
travels_by_reference = travel.travels_by_reference
type_name = travel.type_name

__all__ = [
    "LARGE_PAYLOAD_BYTES",
    "UnpicklableError",
    "dump_plan",
    "dumps",
    "load_reference",
    "reference",
    "travels_by_reference",
    "type_name",
]

LARGE_PAYLOAD_BYTES = 64 * 1024 * 1024
"""A pickled plan larger than this gets a warning naming its largest parts (they are copied on every call)."""

NCU_WORKER = travel.Destination(
    "the ncu worker", "measure in process with backend='cupti' or 'events', which need no pickling"
)
"""How the errors name the ncu worker, and the way out that avoids it."""


def dump_plan(plan: Plan) -> bytes:
    """Pickle the worker's plan, with a named error for a value that cannot travel and a warning for a big one.

    A function of a module the worker cannot import (loaded from a file outside the path) travels by value.

    Raises:
        UnpicklableError: A value the function uses, or a config argument, cannot be pickled.
    """
    data = travel.dump_checked(
        plan,
        function=plan.function,
        name=plan.function_name,
        configs=plan.configs,
        params=plan.params,
        destination=NCU_WORKER,
    )
    if len(data) > LARGE_PAYLOAD_BYTES:
        warnings.warn(_size_message(plan, len(data)), RuntimeWarning, stacklevel=4)
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
            sizes.append((f"{label} ({type_name(value)})", len(dumps(value))))
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


def _size_message(plan: Plan, total: int) -> str:
    big = [f"{label} is {_human(size)}" for label, size in _sizes(plan)[:3] if size >= total // 10]
    parts = "; ".join(big) or "no single global or config argument dominates"
    return (
        f"the plan sent to the ncu worker for {plan.function_name} is {_human(total)} when pickled: {parts}. "
        "It is copied into the worker on every call (GPU tensors captured by value travel through host "
        "memory). Create large data inside the function, or in an importable module (the function then "
        "travels by reference and the module builds its own copy)."
    )
