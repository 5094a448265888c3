"""How a profiled function travels to another process: by reference when it can be imported there, else by value.

Every path that measures outside the caller's process ships the function the same way: a backend's child
(:mod:`nsightx._remote.payload`, the ncu worker's plan), the ``parallel_devices`` pool and the tasks of an
``executor=`` sweep.

cloudpickle already sends a function of an importable module by reference (the worker imports the module, so
its module-level state, an NVML handle, a lock, an open file, is rebuilt there) and a function of ``__main__``
or a notebook by value (its code with the globals it uses). Two gaps are closed here:

* A decorated function is not what its module's attribute holds (that is the ``ProfiledFunction`` wrapper), so
  cloudpickle would send it by value, with its globals. :func:`dumps` recognises a function reachable from its
  module attribute through ``__wrapped__`` and sends the path instead.
* When a value cannot be pickled, :func:`dump_checked` finds which one (a global the function uses, a closure
  variable, a config argument, following helper functions sent by value) and raises :class:`UnpicklableError`
  naming it, its type and the ways out, before anything starts.
* Objects of the kinds in :mod:`nsightx._remote.reducers` go through their reducer: a ``@triton.jit`` kernel is
  rebuilt in the worker from its function; a tensor, array or model larger than ``MAX_VALUE_BYTES`` is refused
  (the error says how large it is); a package adds its own kinds with ``nsightx.ext.register_reducer``.

cloudpickle is imported only when something is pickled.
"""

from __future__ import annotations

import contextlib
import dis
import functools
import importlib
import io
import os
import sys
import types
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nsightx._errors import MeasurementError
from nsightx._remote.reducers import ValueTooLargeError, human_bytes, reducer_for

MAX_UNWRAP = 8
"""Most ``__wrapped__`` links followed from a module attribute to the function it wraps."""

_NSIGHTX_DIR = str(Path(__file__).resolve().parent) + os.sep
"""Functions whose code lives here are nsightx's own wrappers: diagnostics look through them."""


class UnpicklableError(MeasurementError):
    """A value the profiled function needs cannot be sent to its worker (raised before the worker starts).

    Attributes:
        what: Which value, e.g. ``"global `lock`"`` or ``"config 1 argument `x`"``.
        type_name: Its type.
    """

    def __init__(self, message: str, *, what: str = "", type_name: str = "") -> None:
        super().__init__(message)
        self.what = what
        self.type_name = type_name


@dataclass(frozen=True)
class Destination:
    """Where a payload goes, in the words of the error raised when it cannot go there."""

    name: str
    """E.g. ``"the ncu worker"``; the message reads ``cannot send f to <name>``."""
    in_process: str
    """The last way out: how to measure without pickling, e.g. ``"measure in process with backend='cupti'"``."""
    collectors_stay: bool = True
    """Whether info collectors run in the caller's process (then an info collector is a way out)."""


def type_name(value: object) -> str:
    """``_thread.lock``, ``torch.Tensor``, ``int``: the type of ``value`` as a user would look it up."""
    kind = type(value)
    if any(base.__module__ == "_ctypes" for base in kind.__mro__[1:]):  # made on the fly, "module" misleads
        return f"ctypes.{kind.__qualname__}"
    return kind.__qualname__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"


def findable(top: str) -> bool:
    """Whether a fresh interpreter with this one's path would find the top-level module ``top``."""
    for finder in sys.meta_path:
        find = getattr(finder, "find_spec", None)
        if find is None:
            continue
        try:
            if find(top, None) is not None:
                return True
        except Exception:  # a broken finder says nothing about the others
            continue
    return False


def reference(fn: types.FunctionType) -> tuple[str, str, int] | None:
    """``(module, qualname, unwraps)`` when the worker can import ``fn``, else ``None`` (it goes by value).

    ``unwraps`` counts the ``__wrapped__`` links from the module attribute to ``fn`` (1 for a function
    decorated with ``@nsightx.analyze.kernel``).
    """
    module_name = getattr(fn, "__module__", None)
    qualname = getattr(fn, "__qualname__", "")
    if not module_name or module_name == "__main__" or "<locals>" in qualname or "<lambda>" in qualname:
        return None
    module = sys.modules.get(module_name)
    if module is None or getattr(module, "__spec__", None) is None or not findable(module_name.split(".")[0]):
        return None
    obj = lookup(module, qualname)
    if obj is _MISSING:
        return None
    for depth in range(MAX_UNWRAP + 1):
        if obj is fn:
            return module_name, qualname, depth
        obj = getattr(obj, "__wrapped__", None)
        if obj is None:
            return None
    return None


def load_reference(module: str, qualname: str, unwraps: int) -> Callable[..., Any]:
    """Import ``module`` and follow ``qualname`` and ``unwraps`` ``__wrapped__`` links (runs in the worker)."""
    obj: Any = importlib.import_module(module)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    for _ in range(unwraps):
        obj = obj.__wrapped__
    return obj


@functools.cache
def _pickler_class() -> type:
    import cloudpickle

    class _Pickler(cloudpickle.Pickler):
        """cloudpickle, plus by-reference for decorated functions of importable modules and the registered reducers."""

        def reducer_override(self, obj: Any) -> Any:
            if isinstance(obj, types.FunctionType):
                ref = reference(obj)
                if ref is not None and ref[2] > 0:
                    return load_reference, ref
            else:
                reduce = reducer_for(obj)
                if reduce is not None:
                    reduced = reduce(obj)
                    if reduced is not NotImplemented:
                        return reduced
            return super().reducer_override(obj)

    return _Pickler


def dumps(obj: object) -> bytes:
    """Pickle ``obj`` as the worker will receive it (read it back there with ``pickle.loads``)."""
    import cloudpickle

    buffer = io.BytesIO()
    _pickler_class()(buffer, protocol=cloudpickle.DEFAULT_PROTOCOL).dump(obj)
    return buffer.getvalue()


def travels_by_reference(fn: Callable[..., Any]) -> bool:
    """Whether ``fn`` reaches the worker as an import path (its module's state is rebuilt there)."""
    return isinstance(fn, types.FunctionType) and reference(fn) is not None


@contextlib.contextmanager
def by_value_if_unimportable(function: Callable[..., Any]) -> Iterator[None]:
    """Send the module of ``function`` by value for the block when the worker could not import it.

    A module loaded from a file outside the path (``importlib.util.spec_from_file_location``) has a spec but no
    finder would find it again in a fresh interpreter.
    """
    import cloudpickle

    module = sys.modules.get(getattr(function, "__module__", "") or "")
    by_value = (
        module is not None
        and module.__name__ != "__main__"
        and getattr(module, "__spec__", None) is not None
        and not findable(module.__name__.split(".")[0])
    )
    if by_value:
        cloudpickle.register_pickle_by_value(module)
    try:
        yield
    finally:
        if by_value:
            cloudpickle.unregister_pickle_by_value(module)


def dump_checked(
    obj: object,
    *,
    function: Callable[..., Any],
    name: str,
    configs: Sequence[tuple[Any, ...]],
    params: Sequence[str],
    destination: Destination,
) -> bytes:
    """Pickle ``obj`` (which holds ``function`` and ``configs``) with a named error for a value that cannot go.

    Raises:
        UnpicklableError: A value the function uses, or a config argument, cannot be pickled.
    """
    with by_value_if_unimportable(function):
        try:
            return dumps(obj)
        except Exception as e:
            raise diagnose(function, name, configs, params, destination, e) from e


@dataclass(frozen=True)
class Part:
    """One value inside the plan, with the words that name it."""

    label: str
    """E.g. ``"global `lock`"``."""
    value: object


def _global_names(code: types.CodeType) -> Iterator[str]:
    for ins in dis.get_instructions(code):
        if ins.opname in ("LOAD_GLOBAL", "STORE_GLOBAL", "DELETE_GLOBAL", "LOAD_NAME"):
            yield str(ins.argval)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _global_names(const)


def function_parts(fn: types.FunctionType) -> Iterator[Part]:
    """What cloudpickle sends with ``fn`` by value: closure variables, the globals it uses, its defaults."""
    code = fn.__code__
    for name, cell in zip(code.co_freevars, fn.__closure__ or (), strict=False):
        try:
            yield Part(f"closure variable `{name}`", cell.cell_contents)
        except ValueError:  # an empty cell
            continue
    seen: set[str] = set()
    for name in _global_names(code):
        if name not in seen and name in fn.__globals__:
            seen.add(name)
            yield Part(f"global `{name}`", fn.__globals__[name])
    for i, default in enumerate(fn.__defaults__ or ()):
        yield Part(f"default value #{i + 1}", default)
    for name, default in (fn.__kwdefaults__ or {}).items():
        yield Part(f"default of `{name}`", default)


def by_value(obj: object) -> bool:
    """A function cloudpickle sends with its code (not a module attribute the worker imports)."""
    if not isinstance(obj, types.FunctionType) or reference(obj) is not None:
        return False
    module = sys.modules.get(obj.__module__ or "")
    qualname = obj.__qualname__
    if module is None or obj.__module__ == "__main__" or "<locals>" in qualname or "<lambda>" in qualname:
        return True
    return lookup(module, qualname) is not obj


def own(fn: types.FunctionType) -> bool:
    """Whether ``fn`` is one of nsightx's own functions (a wrapper around the user's)."""
    return fn.__code__.co_filename.startswith(_NSIGHTX_DIR)


def _fails(value: object) -> Exception | None:
    try:
        dumps(value)
    except Exception as e:
        return e
    return None


def _find(value: object, label: str, trail: tuple[str, ...]) -> tuple[tuple[str, ...], object, Exception] | None:
    """The innermost value under ``value`` that cannot be pickled: (trail of labels, the value, its error)."""
    error = _fails(value)
    if error is None:
        return None
    if by_value(value) and len(trail) < 6:
        assert isinstance(value, types.FunctionType)
        mine = own(value)  # nsightx's wrapper around the user's function: look through it
        inner = trail if mine else (*trail, label)
        for part in function_parts(value):
            part_label = label if mine and isinstance(part.value, types.FunctionType) else part.label
            found = _find(part.value, part_label, inner)
            if found is not None:
                return found
    return (*trail, label), value, error


def _origin(fn: object) -> str:
    qualname = getattr(fn, "__qualname__", "")
    if getattr(fn, "__module__", None) == "__main__":
        return "is defined in __main__ (a script or a notebook), so it travels by value with the globals it uses"
    if "<locals>" in qualname:
        return "is defined inside another function, so it travels by value with its closure and the globals it uses"
    return "cannot be imported by the worker, so it travels by value with the globals it uses"


def _state_error(
    function: Callable[..., Any], name: str, found: tuple[tuple[str, ...], object, Exception], to: Destination
) -> UnpicklableError:
    trail, value, inner = found
    what = trail[-1]
    where = " used by ".join(reversed(trail[1:-1])) if len(trail) > 2 else ""
    via = f" (through {where})" if where else ""
    kind = type_name(value)
    state = what.split("`")[1] if "`" in what else "it"
    problem = _problem(kind, inner)
    collector = (
        "(3) if it only reads something about the run (a device handle, a clock), make that an info collector: "
        "collectors run in this process and are never pickled; (4) or "
        if to.collectors_stay
        else "(3) or "
    )
    return UnpicklableError(
        f"cannot send {name} to {to.name}: {what}{via}, {problem}. {name} {_origin(function)}. Ways out: "
        f"(1) create `{state}` "
        f"inside {name} (it runs in the worker process, so what it makes there is the worker's own); (2) move "
        f"{name} and `{state}` into an importable module: {name} then travels by reference and the worker "
        f"imports the module, rebuilding its state; {collector}{to.in_process}.",
        what=what,
        type_name=kind,
    )


def _problem(kind: str, error: Exception) -> str:
    """``a <kind>, cannot be pickled (...)``, or, for one too large to go by value, how large it is."""
    if isinstance(error, ValueTooLargeError):
        holds = f"a {kind} of" if error.kind == kind else f"a {kind} holding a {error.kind} of"
        return (
            f"{holds} {human_bytes(error.size)}, is too large to travel by value (the limit is "
            f"{human_bytes(error.limit)}: it would be copied into the worker on every call; "
            f"nsightx.ext.register_reducer({error.key!r}, lambda obj: NotImplemented) lifts it)"
        )
    return f"a {kind}, cannot be pickled ({type(error).__name__}: {error})"


def diagnose(
    function: Callable[..., Any],
    name: str,
    configs: Sequence[tuple[Any, ...]],
    params: Sequence[str],
    to: Destination,
    error: Exception,
) -> UnpicklableError:
    """The error that names what could not be pickled: a value ``function`` uses, else a config argument."""
    found = _find(function, f"function `{name}`", ())
    if found is not None and len(found[0]) > 1:
        return _state_error(function, name, found, to)
    for ci, config in enumerate(configs):
        for ai, arg in enumerate(config):
            inner_error = _fails(arg)
            if inner_error is not None:
                param = params[ai] if ai < len(params) else f"#{ai + 1}"
                what = f"config {ci} argument `{param}`"
                return UnpicklableError(
                    f"cannot send {name} to {to.name}: {what}, {_problem(type_name(arg), inner_error)}. Configs "
                    "travel to the worker by value. Pass "
                    "what the worker can rebuild it from (sizes, dtypes, names, paths) and build the object inside "
                    f"{name}; or {to.in_process}.",
                    what=what,
                    type_name=type_name(arg),
                )
    return UnpicklableError(
        f"cannot send {name} to {to.name}: {type(error).__name__}: {error}. The function, the globals it "
        "uses and its configs must be picklable by cloudpickle; define the function in an importable module (it "
        "then travels by reference) or create the state inside it."
    )


_MISSING = object()


def lookup(module: types.ModuleType, qualname: str) -> Any:
    """The object at ``module.<qualname>`` (dotted for methods and nested classes), or a sentinel when absent."""
    obj: Any = module
    try:
        for part in qualname.split("."):
            obj = getattr(obj, part)
    except AttributeError:
        return _MISSING
    return obj
