"""The plan's trip to the ncu worker: functions by reference when they can be imported there, else by value.

cloudpickle already sends a function of an importable module by reference (the worker imports the module, so
its module-level state, an NVML handle, a lock, an open file, is rebuilt there) and a function of ``__main__``
or a notebook by value (its code with the globals it uses). Two gaps are closed here:

* A decorated function is not what its module's attribute holds (that is the ``ProfiledFunction`` wrapper), so
  cloudpickle would send it by value, with its globals. :class:`_Pickler` recognises a function reachable from
  its module attribute through ``__wrapped__`` and sends the path instead.
* When a value cannot be pickled, :func:`dump_plan` finds which one (a global the function uses, a closure
  variable, a config argument, following helper functions sent by value) and raises
  :class:`UnpicklableError` naming it, its type and the ways out, before ncu starts. A payload over
  :data:`LARGE_PAYLOAD_BYTES` gets a warning naming its largest parts.
"""

from __future__ import annotations

import dis
import functools
import importlib
import io
import sys
import types
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nsightx.ext import MeasurementError, Plan

LARGE_PAYLOAD_BYTES = 64 * 1024 * 1024
"""A pickled plan larger than this gets a warning naming its largest parts (they are copied on every call)."""

MAX_UNWRAP = 8
"""Most ``__wrapped__`` links followed from a module attribute to the function it wraps."""

_NSIGHTX_DIR = str(Path(__file__).resolve().parents[2] / "nsightx")
"""Functions whose code lives here are nsightx's own wrappers: diagnostics look through them."""


class UnpicklableError(MeasurementError):
    """A value the profiled function needs cannot be sent to the ncu worker (raised before ncu starts).

    Attributes:
        what: Which value, e.g. ``"global `lock`"`` or ``"config 1 argument `x`"``.
        type_name: Its type.
    """

    def __init__(self, message: str, *, what: str = "", type_name: str = "") -> None:
        super().__init__(message)
        self.what = what
        self.type_name = type_name


def type_name(value: object) -> str:
    """``_thread.lock``, ``torch.Tensor``, ``int``: the type of ``value`` as a user would look it up."""
    kind = type(value)
    if any(base.__module__ == "_ctypes" for base in kind.__mro__[1:]):  # made on the fly, "module" misleads
        return f"ctypes.{kind.__qualname__}"
    return kind.__qualname__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"


def _findable(top: str) -> bool:
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
    if module is None or getattr(module, "__spec__", None) is None or not _findable(module_name.split(".")[0]):
        return None
    obj = _lookup(module, qualname)
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
        """cloudpickle, plus by-reference for decorated functions of importable modules."""

        def reducer_override(self, obj: Any) -> Any:
            if isinstance(obj, types.FunctionType):
                ref = reference(obj)
                if ref is not None and ref[2] > 0:
                    return load_reference, ref
            return super().reducer_override(obj)

    return _Pickler


def dumps(obj: object) -> bytes:
    """Pickle ``obj`` as the worker will receive it."""
    import cloudpickle

    buffer = io.BytesIO()
    _pickler_class()(buffer, protocol=cloudpickle.DEFAULT_PROTOCOL).dump(obj)
    return buffer.getvalue()


def travels_by_reference(fn: Callable[..., Any]) -> bool:
    """Whether ``fn`` reaches the worker as an import path (its module's state is rebuilt there)."""
    return isinstance(fn, types.FunctionType) and reference(fn) is not None


def dump_plan(plan: Plan) -> bytes:
    """Pickle the worker's plan, with a named error for a value that cannot travel and a warning for a big one.

    A function of a module the worker cannot import (loaded from a file outside the path) travels by value.

    Raises:
        UnpicklableError: A value the function uses, or a config argument, cannot be pickled.
    """
    import cloudpickle

    module = sys.modules.get(getattr(plan.function, "__module__", "") or "")
    by_value = (
        module is not None
        and module.__name__ != "__main__"
        and getattr(module, "__spec__", None) is not None
        and not _findable(module.__name__.split(".")[0])
    )
    if by_value:
        cloudpickle.register_pickle_by_value(module)
    try:
        try:
            data = dumps(plan)
        except Exception as e:
            raise _diagnose(plan, e) from e
        if len(data) > LARGE_PAYLOAD_BYTES:
            warnings.warn(_size_message(plan, len(data)), RuntimeWarning, stacklevel=4)
        return data
    finally:
        if by_value:
            cloudpickle.unregister_pickle_by_value(module)


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


def _function_parts(fn: types.FunctionType) -> Iterator[Part]:
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


def _by_value(obj: object) -> bool:
    """A function cloudpickle sends with its code (not a module attribute the worker imports)."""
    if not isinstance(obj, types.FunctionType) or reference(obj) is not None:
        return False
    module = sys.modules.get(obj.__module__ or "")
    qualname = obj.__qualname__
    if module is None or obj.__module__ == "__main__" or "<locals>" in qualname or "<lambda>" in qualname:
        return True
    return _lookup(module, qualname) is not obj


def _own(fn: types.FunctionType) -> bool:
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
    if _by_value(value) and len(trail) < 6:
        assert isinstance(value, types.FunctionType)
        own = _own(value)  # nsightx's wrapper around the user's function: look through it
        inner = trail if own else (*trail, label)
        for part in _function_parts(value):
            part_label = label if own and isinstance(part.value, types.FunctionType) else part.label
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


def _diagnose(plan: Plan, error: Exception) -> UnpicklableError:
    name = plan.function_name
    found = _find(plan.function, f"function `{name}`", ())
    if found is not None and len(found[0]) > 1:
        trail, value, inner = found
        what = trail[-1]
        where = " used by ".join(reversed(trail[1:-1])) if len(trail) > 2 else ""
        via = f" (through {where})" if where else ""
        kind = type_name(value)
        state = what.split("`")[1] if "`" in what else "it"
        return UnpicklableError(
            f"cannot send {name} to the ncu worker: {what}{via}, a {kind}, cannot be pickled "
            f"({type(inner).__name__}: {inner}). {name} {_origin(plan.function)}. Ways out: (1) create `{state}` "
            f"inside {name} (it runs in the worker process, so what it makes there is the worker's own); (2) move "
            f"{name} and `{state}` into an importable module: {name} then travels by reference and the worker "
            "imports the module, rebuilding its state; (3) if it only reads something about the run (a device "
            "handle, a clock), make that an info collector: collectors run in this process and are never "
            "pickled; (4) or measure in process with backend='cupti' or 'events', which need no pickling.",
            what=what,
            type_name=kind,
        )
    for ci, config in enumerate(plan.configs):
        for ai, arg in enumerate(config):
            inner_error = _fails(arg)
            if inner_error is not None:
                param = plan.params[ai] if ai < len(plan.params) else f"#{ai + 1}"
                what = f"config {ci} argument `{param}`"
                return UnpicklableError(
                    f"cannot send {name} to the ncu worker: {what}, a {type_name(arg)}, cannot be pickled "
                    f"({type(inner_error).__name__}: {inner_error}). Configs travel to the worker by value. Pass "
                    "what the worker can rebuild it from (sizes, dtypes, names, paths) and build the object inside "
                    f"{name}; or measure in process with backend='cupti' or 'events'.",
                    what=what,
                    type_name=type_name(arg),
                )
    return UnpicklableError(
        f"cannot send {name} to the ncu worker: {type(error).__name__}: {error}. The function, the globals it "
        "uses and its configs must be picklable by cloudpickle; define the function in an importable module (it "
        "then travels by reference) or create the state inside it."
    )


def _sizes(plan: Plan) -> list[tuple[str, int]]:
    parts: list[tuple[str, object]] = []
    fn = plan.function
    if isinstance(fn, types.FunctionType) and _by_value(fn):
        for part in _function_parts(fn):
            inner = part.value
            if _own(fn) and isinstance(inner, types.FunctionType):  # nsightx's wrapper: the user's function
                if _by_value(inner):
                    parts += [(p.label, p.value) for p in _function_parts(inner)]
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


_MISSING = object()


def _lookup(module: types.ModuleType, qualname: str) -> Any:
    """The object at ``module.<qualname>`` (dotted for methods and nested classes), or ``_MISSING``."""
    obj: Any = module
    try:
        for part in qualname.split("."):
            obj = getattr(obj, part)
    except AttributeError:
        return _MISSING
    return obj
