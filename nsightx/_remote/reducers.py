"""How objects that pickle cannot send as they are travel to a worker: a registry of reducers.

A function of ``__main__`` or a notebook travels by value with the globals it uses (:mod:`nsightx._remote.travel`).
Some of those globals are objects pickle refuses or should not copy:

* A Triton kernel (``@triton.jit`` at module level) holds locks and compiled-kernel caches; it is rebuilt in the
  worker from its Python function, with the same decorator arguments (:func:`reduce_triton_jit`).
* A tensor or a model travels by value only when it is small (:data:`MAX_VALUE_BYTES`); a larger one would be
  copied into the worker on every call, so it is refused with :class:`ValueTooLargeError`, which names its size.

A third-party package registers its own kinds with :func:`register_reducer` (``nsightx.ext.register_reducer``).
An object is matched by its type or any base class, named either by the class itself or by its qualified name
(``"triton.runtime.jit.JITFunction"``, which never imports triton: only an object already of that type matches),
or by a predicate. The newest registration that matches wins, so a package can replace a built-in rule.
"""

from __future__ import annotations

import inspect
import linecache
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from nsightx._errors import ConfigTypeError, NsightxError

Reduce = Callable[[Any], Any]
"""Gets the object; returns what ``__reduce__`` would (``(rebuild, args)``, ...), or ``NotImplemented`` to let
cloudpickle pickle it as usual. It may raise (e.g. :class:`ValueTooLargeError`) to refuse the object."""

Kind = type | str | Callable[[object], bool]
"""What a reducer applies to: a class (and its subclasses), the qualified name of one, or a predicate."""

MAX_VALUE_BYTES = 64 * 1024 * 1024
"""The largest tensor, array or model (its parameters and buffers) that travels by value."""


class ValueTooLargeError(NsightxError, ValueError):
    """A tensor, array or model is larger than :data:`MAX_VALUE_BYTES`; raised while pickling it.

    The pickling error that names the global or config argument holding it (``UnpicklableError``) says how large
    it is and what to do instead.

    Attributes:
        kind: The type of the large object, e.g. ``torch.Tensor``.
        size: Its size in bytes.
        limit: The limit it is over.
        key: The registration that refused it (``register_reducer(key, lambda obj: NotImplemented)`` lifts it).
    """

    def __init__(self, kind: str, size: int, limit: int, key: str = "") -> None:
        super().__init__(f"a {kind} of {human_bytes(size)} is larger than the {human_bytes(limit)} sent by value")
        self.kind = kind
        self.size = size
        self.limit = limit
        self.key = key or kind

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickle with the constructor's arguments (it takes no message)."""
        return (type(self), (self.kind, self.size, self.limit, self.key))


def human_bytes(n: int) -> str:
    """``n`` bytes in the largest unit that keeps it at 1 or more, e.g. ``64.0 MiB``."""
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{n} B" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"


@dataclass(frozen=True)
class _Entry:
    kind: Kind
    reduce: Reduce


_entries: list[_Entry] = []
"""Every registration, oldest first (searched newest first)."""
_by_type: dict[type, Reduce | None] = {}
"""Per type, the reducer its class or name registrations give (predicates are asked per object)."""
_predicates = 0
"""How many registrations are predicates: while none is, an object's type decides, from :data:`_by_type`."""
_generation = 0
"""Counts registrations and removals, so that a lookup racing with one never caches a stale answer."""
_lock = threading.Lock()


def register_reducer(kind: Kind, reduce: Reduce) -> None:
    """Make objects of ``kind`` travel to workers through ``reduce`` (newest registration first).

    Args:
        kind: A class (its subclasses match too); the qualified name of a class, ``"module.QualName"`` (an
            object matches when its class or a base has that name, so the module is never imported to check);
            or a predicate ``(object) -> bool``.
        reduce: Gets a matching object and returns what its ``__reduce__`` would, ``(rebuild, args)``, where
            ``rebuild`` can be imported in the worker; or ``NotImplemented`` to pickle it as usual. It may raise
            to refuse the object; the error then names the value that holds it.

    Raises:
        ConfigTypeError: ``kind`` is none of the three, or ``reduce`` is not callable.

    Example:
        >>> import threading
        >>> class Counter:
        ...     def __init__(self, start=0):
        ...         self.value, self.lock = start, threading.Lock()
        >>> register_reducer(Counter, lambda c: (Counter, (c.value,)))
    """
    if isinstance(kind, str):
        if "." not in kind.strip(".") or kind != kind.strip():
            raise ConfigTypeError(
                f"register_reducer: {kind!r} is not a qualified class name; write 'module.QualName', e.g. "
                "'triton.runtime.jit.JITFunction'"
            )
    elif not isinstance(kind, type) and not callable(kind):
        raise ConfigTypeError(
            f"register_reducer: kind must be a class, a qualified class name or a predicate, got {kind!r}"
        )
    if not callable(reduce):
        raise ConfigTypeError(f"register_reducer: reduce must be callable (object -> reduce tuple), got {reduce!r}")
    global _predicates, _generation
    with _lock:
        _entries.append(_Entry(kind, reduce))
        _by_type.clear()
        _generation += 1
        if not isinstance(kind, type | str):
            _predicates += 1


def unregister_reducer(kind: Kind, reduce: Reduce) -> None:
    """Remove the newest registration of exactly ``(kind, reduce)``; nothing if there is none."""
    global _predicates, _generation
    with _lock:
        for i in range(len(_entries) - 1, -1, -1):
            if _entries[i].kind == kind and _entries[i].reduce == reduce:
                del _entries[i]
                _by_type.clear()
                _generation += 1
                if not isinstance(kind, type | str):
                    _predicates -= 1
                return


def _names(cls: type) -> set[str]:
    return {f"{c.__module__}.{c.__qualname__}" for c in cls.__mro__}


def _matches(kind: Kind, obj: object, cls: type, names: set[str]) -> bool:
    if isinstance(kind, type):
        return kind in cls.__mro__
    if isinstance(kind, str):
        return kind in names
    try:
        return bool(kind(obj))
    except Exception:  # a predicate that cannot tell says no
        return False


def reducer_for(obj: object) -> Reduce | None:
    """The reducer of the newest registration matching ``obj``, or ``None`` (cloudpickle pickles it as usual)."""
    cls = type(obj)
    if not _predicates:
        try:
            return _by_type[cls]
        except KeyError:
            pass
    generation = _generation
    names = _names(cls)
    found: Reduce | None = None
    for entry in reversed(list(_entries)):
        if _matches(entry.kind, obj, cls, names):
            found = entry.reduce
            break
    if not _predicates:
        with _lock:
            if generation == _generation:  # no registration changed the answer meanwhile
                _by_type[cls] = found
    return found


# --- the built-in kinds ----------------------------------------------------------------------------------------

_JIT_OPTIONS = (
    ("version", "version"),
    ("do_not_specialize", "do_not_specialize"),
    ("do_not_specialize_on_alignment", "do_not_specialize_on_alignment"),
    ("debug", "debug"),
    ("noinline", "noinline"),
    ("_repr", "repr"),
    ("launch_metadata", "launch_metadata"),
)
"""``triton.jit``'s keyword arguments, each with the attribute of the kernel object that keeps it."""


def reduce_triton_jit(kernel: Any) -> Any:
    """Send a ``@triton.jit`` kernel as its Python function, its decorator arguments and its source lines.

    The kernel object holds locks and compiled-kernel caches, which cannot be pickled; the worker rebuilds it with
    ``triton.jit`` (:func:`rebuild_triton_jit`) and compiles it there on first launch.
    """
    fn = kernel.fn
    options = {}
    for attribute, keyword in _JIT_OPTIONS:
        value = getattr(kernel, attribute, None)
        if value is not None and value != []:
            options[keyword] = value
    return rebuild_triton_jit, (fn, options, _source(kernel, fn))


def _source(kernel: Any, fn: Any) -> tuple[str, int, list[str]]:
    """(file, first line, lines) of the kernel's source, which ``triton.jit`` reads again in the worker."""
    filename = getattr(getattr(fn, "__code__", None), "co_filename", "")
    lines, first = getattr(kernel, "raw_src", None), getattr(kernel, "starting_line_number", None)
    if not isinstance(lines, list) or not isinstance(first, int):
        try:
            lines, first = inspect.getsourcelines(fn)
        except (OSError, TypeError):
            lines, first = [], 0
    return filename, first, list(lines)


def rebuild_triton_jit(fn: Any, options: dict[str, Any], source: tuple[str, int, list[str]]) -> Any:
    """Rebuild a Triton kernel in the worker: ``triton.jit(fn, **options)``.

    ``triton.jit`` reads the function's source through its code's file name. cloudpickle names the file of every
    function it sends by value ``<dynamic-code>``, so the function gets its own file name back first; and a kernel
    defined in a notebook cell has no file the worker could read, so its lines (sent along) are put in the
    worker's line cache under the cell's name. Options this triton's ``jit`` does not take are left out.
    """
    filename, first, lines = source
    code = getattr(fn, "__code__", None)
    if filename and code is not None and code.co_filename != filename:
        fn.__code__ = code.replace(co_filename=filename)
    if lines and filename and not os.path.exists(filename):
        _remember_lines(filename, first, lines)
    from triton import jit

    accepted = inspect.signature(jit).parameters
    return jit(fn, **{k: v for k, v in options.items() if k in accepted})


def _remember_lines(filename: str, first: int, lines: list[str]) -> None:
    """Put ``lines`` at line ``first`` of ``filename`` in the line cache, next to lines put there before.

    Only for a file that does not exist: an entry without a modification time, as IPython makes for its cells (the
    cache never checks such an entry against a file). Two kernels of one cell each put their own lines.
    """
    entry = linecache.cache.get(filename)
    if entry is not None and (len(entry) != 4 or entry[1] is not None):
        return  # an entry the line cache keeps for a file: not one of ours
    text = list(entry[2]) if entry is not None else []
    start = max(first - 1, 0)
    text += ["\n"] * (start + len(lines) - len(text))
    text[start : start + len(lines)] = lines
    linecache.cache[filename] = (sum(map(len, text)), None, text, filename)


def _limited(key: str, size: Callable[[Any], int]) -> Reduce:
    """A reducer that lets an object of at most :data:`MAX_VALUE_BYTES` be pickled as usual and refuses a larger one.

    Args:
        key: The qualified name it is registered under (the error says how to lift the limit with it).
        size: The object's size in bytes.
    """

    def reduce(obj: Any) -> Any:
        n = size(obj)
        if n > MAX_VALUE_BYTES:
            cls = type(obj)
            raise ValueTooLargeError(f"{cls.__module__}.{cls.__qualname__}", n, MAX_VALUE_BYTES, key)
        return NotImplemented

    return reduce


def _tensor_bytes(t: Any) -> int:
    """Bytes pickling a torch tensor writes: its whole storage (a view sends the storage it views)."""
    try:
        return int(t.untyped_storage().nbytes())
    except Exception:
        return int(t.element_size() * t.nelement())


def _module_bytes(m: Any) -> int:
    """Bytes of a torch module's parameters and buffers, each storage counted once."""
    seen: dict[int, int] = {}
    for t in (*m.parameters(), *m.buffers()):
        try:
            key = int(t.untyped_storage().data_ptr())
        except Exception:
            key = id(t)
        seen[key] = max(seen.get(key, 0), _tensor_bytes(t))
    return sum(seen.values())


def _array_bytes(a: Any) -> int:
    return int(a.nbytes)


BUILTIN: tuple[tuple[str, Reduce], ...] = (
    ("triton.runtime.jit.JITFunction", reduce_triton_jit),
    ("triton.runtime.interpreter.InterpretedFunction", reduce_triton_jit),
    ("torch.Tensor", _limited("torch.Tensor", _tensor_bytes)),
    ("torch.nn.modules.module.Module", _limited("torch.nn.modules.module.Module", _module_bytes)),
    ("numpy.ndarray", _limited("numpy.ndarray", _array_bytes)),
)
"""The kinds nsightx knows, by qualified name (nothing is imported to match them)."""

for _kind, _reduce in BUILTIN:
    register_reducer(_kind, _reduce)
