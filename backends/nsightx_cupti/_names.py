"""Names: the backend's one metric, and kernel names as results show them (base names, as ncu does).

CUPTI reports a kernel's mangled symbol:

``_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEE...`` becomes
``vectorized_elementwise_kernel``. Names that are not Itanium-mangled (cuBLAS's ``sm90_xmma_gemm_...``,
``extern "C"`` kernels) pass through. This is a small scanner, not a demangler: when it meets something it does
not understand it returns the name unchanged rather than guess.
"""

from __future__ import annotations

import functools

METRIC = "gpu__time_duration.sum"
"""The one metric this backend measures: kernel end minus start, in ns (ncu's name for it). Here, not in
:mod:`nsightx_cupti._attribution`, so that the backend class (its capabilities) imports no attribution code."""

_OPEN = frozenset("INXFZJ")
"""Codes that open a construct closed by ``E`` inside template arguments."""
_TWO_CHAR_D = frozenset("pnacsihuotTe")
"""Second letters of two-letter ``D`` codes without further structure (``Dp``, ``Dn``, ...)."""


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
    return s[j : j + n], j + n


def _skip_number_underscore(s: str, i: int) -> int:
    """Skip ``[<digits>]_`` starting at ``i``."""
    while i < len(s) and s[i].isdigit():
        i += 1
    if i >= len(s) or s[i] != "_":
        raise _Unparsed
    return i + 1


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


def _skip_discriminator(s: str, i: int) -> int:
    """After a local entity: ``_<digit>`` or ``__<digits>_`` (or nothing)."""
    if s.startswith("__", i):
        return _skip_number_underscore(s, i + 2)
    if i + 1 < len(s) and s[i] == "_" and s[i + 1].isdigit():
        return i + 2
    return i


def _skip_template_args(s: str, i: int) -> int:
    """``s[i] == 'I'``; return the index just after the matching ``E``."""
    stack: list[str] = []
    while i < len(s):
        c = s[i]
        if c.isdigit():
            _, i = _source_name(s, i)
        elif c == "L":
            if s.startswith("L_Z", i):  # an external name as a template argument: closed by its own E
                stack.append("L")
                i += 3
            elif i + 1 < len(s) and s[i + 1].islower():  # a literal of a builtin type, e.g. Li4E, Lm1E
                j = s.find("E", i + 2)
                if j < 0:
                    raise _Unparsed
                i = j + 1
            else:
                raise _Unparsed
        elif c == "U":
            if s.startswith("Ul", i):  # lambda: Ul <params> E [<n>] _
                stack.append("U")
                i += 2
            elif s.startswith("Ut", i):  # unnamed type: Ut [<n>] _
                i = _skip_number_underscore(s, i + 2)
            else:
                raise _Unparsed
        elif c == "S":
            i = _skip_substitution(s, i)
        elif c == "T":
            i = _skip_number_underscore(s, i + 1)
        elif c == "A":  # array: A <n> _ <type>
            i = _skip_number_underscore(s, i + 1)
        elif c == "D":
            if i + 1 >= len(s):
                raise _Unparsed
            if s[i + 1] in "vF":  # Dv<n>_<type>, DF<n>_
                i = _skip_number_underscore(s, i + 2)
            elif s[i + 1] in _TWO_CHAR_D:
                i += 2
            else:
                raise _Unparsed
        elif c in _OPEN:
            stack.append(c)
            i += 1
        elif c == "E":
            if not stack:
                raise _Unparsed
            opener = stack.pop()
            i += 1
            if not stack:
                return i
            if opener == "U":
                i = _skip_number_underscore(s, i)
            elif opener == "Z":
                i = _skip_local_entity(s, i)
        elif c == "_":
            raise _Unparsed
        else:  # builtin types, qualifiers, pointer and reference marks, operator names
            i += 1
    raise _Unparsed


def _skip_local_entity(s: str, i: int) -> int:
    """After ``Z <encoding> E``: the entity's name, then an optional discriminator."""
    if i < len(s) and s[i].isdigit():
        _, i = _source_name(s, i)
    elif s.startswith("Ul", i) or s.startswith("Ut", i) or s.startswith("N", i):
        return i  # the caller's loop parses it (the lambda's number and _ are handled there)
    elif s.startswith("s", i):  # string literal entity
        i += 1
    return _skip_discriminator(s, i)


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
