"""A measured call that returns a coroutine or a generator is refused at its first call (docs/api.md).

Calling such a function does none of its work, so what would be timed is the creation of a coroutine object:
microseconds that look like a real measurement. A lambda or plain function hides it from any check before the
call (``inspect.iscoroutinefunction`` is False for it); the object it returns is a sure sign. The error comes from
the first call, nothing is measured, and the object is closed so Python adds no "never awaited" warning. Real host
backend, real run loop.
"""

from __future__ import annotations

import asyncio
import gc
import warnings
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest

import nsightx
from nsightx import ConfigError

SILENT = nsightx.VerbosityLevel.SILENT
started: list[str] = []


async def fetch(n: int = 3) -> int:
    started.append("fetch")
    await asyncio.sleep(0)
    return n


def numbers(n: int = 3) -> Iterator[int]:
    started.append("numbers")
    yield from range(n)


async def stream(n: int = 3) -> AsyncIterator[int]:
    started.append("stream")
    yield n


LAZY: dict[str, Callable[[], Any]] = {
    "coroutine": lambda: fetch(),
    "generator": lambda: numbers(),
    "async generator": lambda: stream(),
}


def _refused(call: Callable[[], Any], kind: str) -> None:
    """``call`` raises the ConfigError naming ``kind``, and no warning (no "never awaited") is left behind."""
    started.clear()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(ConfigError, match=f"returned a {kind} .*none of its work") as refused:
            call()
        del refused  # the traceback holds the frames; free them so a leaked coroutine would warn now
        gc.collect()
    assert started == [], "the lazy object's body never ran"
    assert not [str(w.message) for w in caught], [str(w.message) for w in caught]


@pytest.mark.parametrize("kind", list(LAZY))
def test_measure_refuses_a_lambda_that_returns_a_lazy_object(kind: str) -> None:
    _refused(lambda: nsightx.measure(LAZY[kind], runs=3, backend="host"), kind)


@pytest.mark.parametrize("kind", list(LAZY))
def test_a_decorated_function_that_returns_a_lazy_object_is_refused(kind: str) -> None:
    make = LAZY[kind]

    @nsightx.analyze.kernel(configs=[(1,), (2,)], runs=3, backend="host", verbosity=SILENT)
    def work(n: int) -> Any:
        with nsightx.annotate("region"):
            return make()

    _refused(work, kind)


def test_an_async_def_decorated_directly_is_refused() -> None:
    @nsightx.analyze.kernel(configs=[(1,)], runs=2, backend="host", verbosity=SILENT)
    async def work(n: int) -> None:
        with nsightx.annotate("region"):
            started.append("work")

    _refused(work, "coroutine")


def test_measure_still_ignores_an_ordinary_value() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = nsightx.measure(lambda: [1, 2, 3], runs=3, backend="host")
    assert result.to_dataframe()["NumRuns"].tolist() == [3]
