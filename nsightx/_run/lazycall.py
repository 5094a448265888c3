"""Refuse a measured call that only created a coroutine or a generator: none of its work was measured.

``nsightx.measure(lambda: main())`` with an ``async def main``, or ``@analyze.kernel`` on a function that returns
``fetch(n)`` of an async ``fetch``, times how long Python takes to create a coroutine object: microseconds that
look like a real, very fast measurement (a silent wrong answer). A call of ``fn`` that returns a coroutine, a
generator or an async generator is a sure sign, so the run loop (and ``measure``) stops at the first such call
with a :class:`~nsightx.ConfigError` saying how to measure the work instead. The object is closed first, so that
Python does not add a "coroutine ... was never awaited" warning to the error.
"""

from __future__ import annotations

import inspect

from nsightx._errors import ConfigError

_FIX = {
    "coroutine": "run it to completion inside the call, e.g. lambda: asyncio.run(main())",
    "generator": "consume it inside the call, e.g. lambda: list(gen())",
    "async generator": "consume it inside the call, e.g. lambda: asyncio.run(drain(agen())) with an async drain",
}
"""How to measure the work of each kind of lazy object."""


def lazy_kind(result: object) -> str | None:
    """What lazy object ``result`` is: ``"coroutine"``, ``"generator"``, ``"async generator"``, or None."""
    if inspect.iscoroutine(result):
        return "coroutine"
    if inspect.isgenerator(result):
        return "generator"
    if inspect.isasyncgen(result):
        return "async generator"
    return None


def refuse_lazy(function: str, result: object) -> None:
    """Raise when the measured call of ``function`` returned a coroutine or generator (closed first); else nothing.

    Raises:
        ConfigError: ``result`` is a coroutine, generator or async generator: the call did none of its work.
    """
    kind = lazy_kind(result)
    if kind is None:
        return
    close = getattr(result, "close", None)  # a coroutine or generator; an async generator's aclose() needs a loop
    if kind != "async generator" and callable(close):
        close()
    raise ConfigError(
        f"the measured call of {function} returned a {kind} ({getattr(result, '__qualname__', type(result).__name__)}) "
        f"without running it, so only the {kind}'s creation would be timed, none of its work; {_FIX[kind]}"
    )
