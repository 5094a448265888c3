"""Turning ``configs`` into argument tuples for the user's function, with nsight-python's rules.

Configs are sequences of positional values (a scalar is accepted for a function with one parameter);
trailing parameters with defaults may be left out and are padded; keyword-only parameters are filled in
declaration order after the positional ones; ``*args``/``**kwargs`` stay empty.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Collection, Iterable, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Any

from nsightx._errors import ConfigError, ConfigTypeError

_EMPTY = inspect.Parameter.empty


@dataclass(frozen=True)
class FunctionShape:
    """The parameters a config fills."""

    names: tuple[str, ...]
    """Positional then keyword-only parameter names."""
    n_positional: int
    """How many of ``names`` are passed positionally."""
    defaults: tuple[Any, ...]
    """Default for each name (``inspect.Parameter.empty`` when required)."""

    @property
    def required(self) -> int:
        """Number of leading parameters a config must give (up to the last one without a default)."""
        last = 0
        for i, d in enumerate(self.defaults):
            if d is _EMPTY:
                last = i + 1
        return last


def shape_of(fn: Callable[..., Any]) -> FunctionShape:
    """Inspect ``fn``'s signature."""
    sig = inspect.signature(fn)
    pos = [p for p in sig.parameters.values() if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    kw = [p for p in sig.parameters.values() if p.kind is p.KEYWORD_ONLY]
    params = pos + kw
    return FunctionShape(tuple(p.name for p in params), len(pos), tuple(p.default for p in params))


def normalize(shape: FunctionShape, configs: Iterable[Any], function: str = "function") -> tuple[tuple[Any, ...], ...]:
    """Return each config as a full argument tuple, or raise a ConfigError naming the problem.

    Messages start with nsight-python's sentence for the same problem (see docs/compat.md).

    Args:
        shape: The function's parameters.
        configs: The configs as given (a collection or a generator).
        function: The function's name, for messages.
    """
    if isinstance(configs, str | bytes):
        raise ConfigTypeError(f"configs must be an iterable of configs, got the str {configs!r}")
    _check_container(configs)
    lazy = not isinstance(configs, Collection)  # a generator: nsight-python words the fit check differently
    try:
        items = list(configs)
    except TypeError:
        raise ConfigTypeError(f"configs must be an iterable of configs, got {type(configs).__name__}") from None
    if not items:
        raise ConfigError("configs cannot be empty; give at least one config, e.g. configs=[(1024,)]")
    n = len(shape.names)
    rows: list[tuple[Any, ...]] = []
    for item in items:
        if isinstance(item, tuple | list):
            rows.append(tuple(item))
        elif n == 1:
            rows.append((item,))
        else:
            raise ConfigError(
                f"config {item!r} is a single value but {_fname(shape)} takes {n} parameters; "
                f"give each config as a tuple of positional values{_method_hint(shape)}"
            )
    lengths = sorted({len(r) for r in rows})
    if len(lengths) > 1:
        found = [len(r) for r in rows]
        odd = next(i for i, length in enumerate(found) if length != found[0])
        raise ConfigError(
            f"All configs must have the same number of arguments. Found lengths: {found}. Config {odd} is the "
            f"first to differ from config 0; trailing parameters with defaults may be left out, of every config alike"
        )
    k = lengths[0]
    if not shape.required <= k <= n:
        expects = str(n) if shape.required == n else f"between {shape.required} and {n}"
        names = ", ".join(shape.names)
        first = (
            f"Function '{function}' does not support the input configuration"
            if lazy
            else f"Configs have {k} arguments, but function expects {expects}"
        )
        counts = f"each config gives {k} value(s) and {function}({names}) takes {expects}" if lazy else ""
        raise ConfigError(  # nsight-python's sentence for a list already has the counts: only the signature is new
            f"{first}: {counts or f'{function}({names})'}; give one value per parameter (trailing parameters with "
            f"defaults may be left out){_method_hint(shape)}"
        )
    _check_text(rows)
    return tuple(r + shape.defaults[k:] for r in rows)


def _check_text(rows: list[tuple[Any, ...]]) -> None:
    """Refuse a str parameter the result files cannot hold (a lone surrogate, e.g. from ``surrogateescape``).

    Accepted, it would fail every write after every run was measured.
    """
    for i, row in enumerate(rows):
        for value in row:
            if isinstance(value, str) and not value.isascii():
                try:
                    value.encode("utf-8")
                except UnicodeEncodeError as e:
                    raise ConfigError(
                        f"config {i} has the str {value!r}, which holds {value[e.start : e.end]!r} at position "
                        f"{e.start}: not valid text (a lone surrogate), so the result files cannot hold it; give "
                        "valid characters (e.g. the bytes' hex)"
                    ) from None


def _check_container(configs: object) -> None:
    """Reject containers whose iteration would silently give the wrong configs.

    A dict iterates over its keys only (``{'a': 1}`` would run with ``n='a'``), a set has no order (rows and
    raw files would come in an arbitrary one), and ``bytearray``/``memoryview`` iterate over byte values.

    Raises:
        ConfigTypeError: ``configs`` is a mapping, a set, a bytearray or a memoryview.
    """
    if isinstance(configs, Mapping):
        raise ConfigTypeError(
            f"configs must be a list of configs, got a {type(configs).__name__} {_short(configs)}: iterating it "
            "would give its keys only; write configs=[(1024,), (2048,)], or list(d.items()) to sweep key/value pairs"
        )
    if isinstance(configs, AbstractSet):
        raise ConfigTypeError(
            f"configs must be a list of configs, got a {type(configs).__name__} {_short(configs)}, which has no "
            "order; write configs=sorted(...) or a list, so that configs run (and are numbered) in a known order"
        )
    if isinstance(configs, bytearray | memoryview):
        raise ConfigTypeError(
            f"configs must be a list of configs, got a {type(configs).__name__}; write configs=[...] of tuples"
        )


def _short(value: object, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _method_hint(shape: FunctionShape) -> str:
    """A hint for a decorated method: ``obj.method()`` passes no ``self`` to a profiled function.

    A profiled function is not bound to an instance (nsight-python's is not either), so a method's ``self``
    is one more parameter that the configs would have to fill; the configs' count error alone sends the user
    looking for a mistake in the values.
    """
    if not shape.names or shape.names[0] not in ("self", "cls"):
        return ""
    first = shape.names[0]
    return (
        f". Its first parameter is {first!r}: analyze.kernel does not bind methods (obj.method() passes no "
        f"{first}), so decorate a function that calls the method instead, e.g. @nsightx.analyze.kernel(...) "
        "def run(n): obj.method(n)"
    )


def _fname(shape: FunctionShape) -> str:
    return f"the function ({', '.join(shape.names)})"


def make_caller(fn: Callable[..., Any], shape: FunctionShape) -> Callable[..., Any]:
    """A callable taking the full argument tuple positionally, passing keyword-only ones by name."""
    if shape.n_positional == len(shape.names):
        return fn
    npos = shape.n_positional
    kwnames = shape.names[npos:]

    def call(*args: Any) -> Any:
        return fn(*args[:npos], **dict(zip(kwnames, args[npos:], strict=True)))

    call.__name__ = getattr(fn, "__name__", "call")
    call.__qualname__ = getattr(fn, "__qualname__", call.__name__)
    call.__module__ = getattr(fn, "__module__", __name__)
    return call
