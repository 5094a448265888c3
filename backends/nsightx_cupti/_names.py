"""Kernel names: CUPTI reports the mangled symbol; results show the function's base name, as ncu does.

``_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEE...`` becomes
``vectorized_elementwise_kernel``. Names that are not Itanium-mangled (cuBLAS's ``sm90_xmma_gemm_...``,
``extern "C"`` kernels) pass through. This is a small scanner, not a demangler: when it meets something it does
not understand it returns the name unchanged rather than guess.
"""

from __future__ import annotations

import functools

_OPEN = frozenset("INXFZJ")
"""Codes that open a construct closed by ``E`` inside template arguments."""


class _Unparsed(Exception):
    pass


def _source_name(s: str, i: int) -> tuple[str, int]:
    j = i
    while j < len(s) and s[j].isdigit():
        j += 1
    if j == i:
        raise _Unparsed
    n = int(s[i:j])
    if n <= 0 or j + n > len(s):
        raise _Unparsed
    return s[j:j + n], j + n


def _skip_substitution(s: str, i: int) -> int:
    # S_, S<seq-id>_, St, Sa, Sb, Ss, Si, So, Sd
    if i + 1 >= len(s):
        raise _Unparsed
    if s[i + 1] in "tabsiod":
        return i + 2
    j = s.find("_", i + 1)
    if j < 0:
        raise _Unparsed
    return j + 1


def _skip_template_args(s: str, i: int) -> int:
    """``s[i] == 'I'``; return the index just after the matching ``E``."""
    depth = 0
    while i < len(s):
        c = s[i]
        if c.isdigit():
            _, i = _source_name(s, i)
            continue
        if c == "L":
            if s.startswith("L_Z", i):  # an external name as a template argument: closed by its own E
                depth += 1
                i += 3
                continue
            if i + 1 < len(s) and s[i + 1].islower():  # a literal of a builtin type, e.g. Li4E, Lm1E
                j = s.find("E", i + 2)
                if j < 0:
                    raise _Unparsed
                i = j + 1
                continue
            raise _Unparsed
        elif c == "U" and s.startswith("Ul", i):
            depth += 1
            i += 2
            continue
        elif c == "S":
            i = _skip_substitution(s, i)
            continue
        elif c == "T":
            j = s.find("_", i + 1)
            if j < 0:
                raise _Unparsed
            i = j + 1
            continue
        elif c in _OPEN:
            depth += 1
        elif c == "E":
            depth -= 1
            if depth == 0:
                return i + 1
            if depth < 0:
                raise _Unparsed
        i += 1
    raise _Unparsed


def _base(s: str) -> str:
    if not s.startswith("_Z"):
        raise _Unparsed
    i = 2
    if i < len(s) and s[i] == "L":
        i += 1
    if i < len(s) and s[i].isdigit():
        name, _ = _source_name(s, i)
        return name
    if i >= len(s) or s[i] != "N":
        raise _Unparsed
    i += 1
    while i < len(s) and s[i] in "rVKRO":
        i += 1
    last: str | None = None
    while i < len(s):
        c = s[i]
        if c.isdigit():
            last, i = _source_name(s, i)
        elif c == "I":
            i = _skip_template_args(s, i)
        elif c == "S":
            i = _skip_substitution(s, i)
        elif c == "L":
            i += 1
        elif c == "E":
            if last is None:
                raise _Unparsed
            return last
        else:
            raise _Unparsed
    raise _Unparsed


@functools.lru_cache(maxsize=4096)
def kernel_base_name(name: str) -> str:
    """The function's base name of a kernel symbol, or ``name`` unchanged when it is not a mangled name.

    Example:
        >>> kernel_base_name("_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEEEEviT0_")
        'vectorized_elementwise_kernel'
        >>> kernel_base_name("sm90_xmma_gemm_f32f32_nn")
        'sm90_xmma_gemm_f32f32_nn'
    """
    try:
        return _base(name)
    except (_Unparsed, ValueError):
        return name
