"""``nsightx.annotate``: mark a region of the profiled function."""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from types import TracebackType
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

from nsightx._errors import ConfigError, ConfigTypeError
from nsightx._run import context as _context

if TYPE_CHECKING:
    from nsightx._results.records import RegionId

P = ParamSpec("P")
R = TypeVar("R")


class annotate:
    """Mark a region whose work is measured, as a context manager or a decorator.

    Outside a profiled call it does nothing, so the annotated code runs unchanged.

    Args:
        name: Region name; one row per name in the result. Must be unique within one run and not only
            whitespace (kept as written otherwise: ``" a"`` and ``"a"`` are two regions).
        ignore_failures: If True, an exception inside the region is swallowed (with a warning) and the
            region's values for this run become NaN; the run and the sweep go on.

    Example:
        >>> with annotate("matmul"):
        ...     pass
    """

    _state: _context.RunState | None = None
    """The run whose region this object opened, until it closes (a class default: ``__init__`` sets nothing)."""
    _region: RegionId | None = None
    """The key :meth:`RunState.enter <nsightx._run.context.RunState.enter>` returned for that region."""

    def __init__(self, name: str, ignore_failures: bool = False) -> None:
        if not isinstance(name, str) or not name:
            bare = " (used as @annotate without a name? write @nsightx.annotate('name'))" if callable(name) else ""
            raise ConfigTypeError(f"annotate() needs a non-empty str name, got {name!r}{bare}")
        if name.isspace():  # reads as no name in every table and plot; two such regions would look alike
            raise ConfigError(f"annotate() name {name!r} is only whitespace; give the region a visible name")
        if not _is_bool(ignore_failures):  # a truthy "no" or "False" would swallow every exception of the region
            raise ConfigTypeError(
                f"annotate({name!r}) needs ignore_failures=True or False, got {type(ignore_failures).__name__} "
                f"{ignore_failures!r}"
            )
        if not name.isascii():
            _check_utf8(name)
        self.name = name
        self.ignore_failures = ignore_failures

    def __enter__(self) -> annotate:
        state = _context._current  # read directly, not through current(): one call less before every region
        if state is not None:
            self._region = state.enter(self.name)
            self._state = state
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool:
        state = self._state
        if exc is None:  # the common case first: a region that returned
            if state is not None:
                self._state = None
                state.exit(self._region, False)
            return False
        swallow = self.ignore_failures and isinstance(exc, Exception)
        if state is not None:
            self._state = None
            state.exit(self._region, swallow)
        if not swallow:
            return False
        warnings.warn(
            f"region {self.name!r} raised {type(exc).__name__}: {exc}; its values for this run are NaN",
            RuntimeWarning,
            stacklevel=2,
        )
        return True

    def __call__(self, func: Callable[P, R]) -> Callable[P, R]:
        """Use as a decorator: each call of ``func`` is one region."""

        @functools.wraps(func)
        def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
            result: R | None = None
            with annotate(self.name, self.ignore_failures):
                result = func(*args, **kwargs)
            return result  # type: ignore[return-value]  # None only when a failure was swallowed

        return wrapper


class ignore_failures:
    """Swallow any ``Exception`` raised inside the block (meant for warm-up code outside annotations)."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: Any) -> bool:
        return exc is not None and isinstance(exc, Exception)


def _check_utf8(name: str) -> None:
    """Refuse a name the result files cannot hold (a lone surrogate, e.g. from ``surrogateescape``).

    Accepted, it would fail every write after the measurement.
    """
    try:
        name.encode("utf-8")
    except UnicodeEncodeError as e:
        raise ConfigError(
            f"annotate() name {name!r} holds {name[e.start : e.end]!r} at position {e.start}, which is not valid "
            "text (a lone surrogate) and cannot be written to the result files; give a name of valid characters"
        ) from None


def _is_bool(value: object) -> bool:
    """Whether ``value`` is a ``bool`` or a NumPy bool scalar (``np.True_``), never a str or a number."""
    kind = type(value)
    return isinstance(value, bool) or (kind.__module__ == "numpy" and kind.__name__ in ("bool", "bool_"))
