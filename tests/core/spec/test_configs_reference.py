"""Configs against a naive reference: which calls a decorated function gets, in which order, with which values.

The reference is written from docs/api.md ("Configs") and docs/compat.md (nsight-python's rules and messages),
not from :mod:`nsightx._spec.configs`: a config is a tuple (or list) of positional values, a bare value when the
function takes one parameter; trailing parameters with defaults may be left out, of every config alike, and are
filled from the defaults; keyword-only parameters follow the positional ones in declaration order and are passed
by name; ``*args``/``**kwargs`` stay empty. Configs run in the order given, duplicates included, once per run.
Configs come at decoration time, as ``configs=`` at call time, or as one config in positional arguments.

Hypothesis draws a signature (positional-only, positional-or-keyword, ``*args``, keyword-only, ``**kwargs``,
with and without defaults), configs in every accepted form, and lengths that fit or do not; the decorated
function runs on the real host backend. Whatever is drawn, the calls the function receives and the parameter
columns of the result are the reference's, or an error the reference expects is raised before any call, with
the offending count in its message.
"""

from __future__ import annotations

import inspect
import math
import os
from dataclasses import dataclass
from typing import Any

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, event, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import nsightx  # noqa: E402
from nsightx import ConfigError  # noqa: E402

EXAMPLES = int(os.environ.get("NSIGHTX_HUNT_EXAMPLES", "150"))
"""Examples per property (the hunt ran 3000 of each; the committed count keeps the file short on a loaded box)."""

P = inspect.Parameter
VALUES = st.sampled_from([0, 1, -3, True, False, 1.0, 2.5, "x", "", "1"])
"""Config values, with ``1``, ``True``, ``1.0`` and ``"1"`` among them: equal or alike, they must stay distinct."""
FORMS = ("tuples", "lists", "tuple_of_tuples", "generator", "scalars", "call_configs", "call_args")


@dataclass(frozen=True)
class Param:
    """One parameter of the drawn signature."""

    name: str
    kind: Any
    default: Any = P.empty


@st.composite
def signatures(draw: Any) -> list[Param]:
    """A valid signature: positional parameters (defaults trailing), maybe ``*args``, keyword-only, ``**kwargs``."""
    n_only = draw(st.integers(0, 2))
    n_pos = n_only + draw(st.integers(0, 3))
    first_default = draw(st.integers(0, n_pos))
    params = [
        Param(f"p{i}", P.POSITIONAL_ONLY if i < n_only else P.POSITIONAL_OR_KEYWORD, draw(VALUES))
        if i >= first_default
        else Param(f"p{i}", P.POSITIONAL_ONLY if i < n_only else P.POSITIONAL_OR_KEYWORD)
        for i in range(n_pos)
    ]
    if draw(st.booleans()):
        params.append(Param("rest", P.VAR_POSITIONAL))
    for i in range(draw(st.integers(0, 2))):
        params.append(Param(f"k{i}", P.KEYWORD_ONLY, draw(VALUES) if draw(st.booleans()) else P.empty))
    if draw(st.booleans()):
        params.append(Param("extra", P.VAR_KEYWORD))
    return params


def recorder(params: list[Param], calls: list[tuple[tuple[Any, ...], dict[str, Any]]]) -> Any:
    """A function with the drawn signature that records each call's positional and keyword arguments."""

    def fn(*args: Any, **kwargs: Any) -> None:
        calls.append((args, kwargs))
        with nsightx.annotate("r"):
            pass

    fn.__signature__ = inspect.Signature([P(p.name, p.kind, default=p.default) for p in params])  # type: ignore[attr-defined]
    return fn


def reference(params: list[Param], rows: list[tuple[Any, ...]], form: str) -> tuple[str, Any]:
    """What the docs say a call does: ``("calls", [(args, kwargs), ...])`` or ``("error", text in the message)``."""
    filled = [p for p in params if p.kind not in (P.VAR_POSITIONAL, P.VAR_KEYWORD)]
    positional = [p for p in filled if p.kind is not P.KEYWORD_ONLY]
    required = max((i + 1 for i, p in enumerate(filled) if p.default is P.empty), default=0)
    if form == "call_args" and not rows[0]:
        if required:
            return "error", "You have provided no configs"
        rows = [()]
    if not rows:
        return "error", "configs cannot be empty"
    lengths = [len(r) for r in rows]
    if len(set(lengths)) > 1:
        return "error", f"All configs must have the same number of arguments. Found lengths: {lengths}"
    k = lengths[0]
    if not required <= k <= len(filled):
        return "error", "does not support the input configuration" if form == "generator" else f"Configs have {k} "
    calls = []
    for row in rows:
        full = tuple(row) + tuple(p.default for p in filled[k:])
        npos = len(positional)
        calls.append((full[:npos], {p.name: v for p, v in zip(filled[npos:], full[npos:], strict=True)}))
    return "calls", calls


def call_with(params: list[Param], rows: list[tuple[Any, ...]], form: str, fn: Any) -> Any:
    """Decorate ``fn`` and call it with ``rows`` given in ``form``; returns the result."""
    options = {"backend": "host", "runs": 1, "warmup": 0, "verbosity": 0}
    if form == "call_configs":
        return nsightx.analyze.kernel(**options)(fn)(configs=list(rows))
    if form == "call_args":
        return nsightx.analyze.kernel(**options)(fn)(*rows[0])
    given: Any = {
        "tuples": [tuple(r) for r in rows],
        "lists": [list(r) for r in rows],
        "tuple_of_tuples": tuple(tuple(r) for r in rows),
        "generator": (tuple(r) for r in rows),
        "scalars": [r[0] if len(r) == 1 else r for r in rows],
    }[form]
    return nsightx.analyze.kernel(configs=given, **options)(fn)()


def same_value(got: Any, want: Any) -> bool:
    """Equal, and a bool only where a bool was given (``1 == True`` must not pass for a swapped config)."""
    if isinstance(want, float) and math.isnan(want):
        return isinstance(got, float) and math.isnan(got)
    return bool(got == want) and (type(want) is bool) == (type(got).__name__ in ("bool", "bool_"))


@st.composite
def cases(draw: Any) -> tuple[list[Param], list[tuple[Any, ...]], str]:
    """A signature, configs (fitting or not) and the form they are given in."""
    params = draw(signatures())
    filled = [p for p in params if p.kind not in (P.VAR_POSITIONAL, P.VAR_KEYWORD)]
    n = len(filled)
    form = "scalars" if n == 1 and draw(st.booleans()) else draw(st.sampled_from(FORMS))
    required = max((i + 1 for i, p in enumerate(filled) if p.default is P.empty), default=0)
    k = draw(st.integers(required, n)) if draw(st.integers(0, 3)) else draw(st.integers(0, n + 1))
    count = 1 if form == "call_args" else draw(st.integers(0, 5))
    rows = [tuple(draw(st.lists(VALUES, min_size=k, max_size=k))) for _ in range(count)]
    if rows and draw(st.integers(0, 5)) == 0:  # one config of another length
        i = draw(st.integers(0, len(rows) - 1))
        rows[i] = tuple(draw(st.lists(VALUES, min_size=0, max_size=n + 1)))
    if rows and form != "call_args" and draw(st.booleans()):  # a duplicate
        rows.append(rows[draw(st.integers(0, len(rows) - 1))])
    if form == "scalars" and (n != 1 or any(len(r) != 1 for r in rows)):
        form = "tuples"  # a bare value is a config only for a function of one parameter
    return params, rows, form


@settings(
    max_examples=EXAMPLES, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow], database=None
)
@given(cases())
def test_calls_and_parameter_columns_match_the_reference(case: tuple[list[Param], list[tuple[Any, ...]], str]) -> None:
    params, rows, form = case
    calls: list[tuple[tuple[Any, ...], dict[str, Any]]] = []
    fn = recorder(params, calls)
    outcome, want = reference(params, rows, form)
    event(f"{form}: {outcome}")
    if outcome == "error":
        with pytest.raises(ConfigError) as info:
            call_with(params, rows, form, fn)
        assert want in str(info.value)
        assert calls == []  # refused before the function ran
        return
    result = call_with(params, rows, form, fn)
    assert len(calls) == len(want)
    for (got_args, got_kwargs), (want_args, want_kwargs) in zip(calls, want, strict=True):
        assert len(got_args) == len(want_args) and all(map(same_value, got_args, want_args))
        assert got_kwargs.keys() == want_kwargs.keys()
        assert all(same_value(got_kwargs[name], v) for name, v in want_kwargs.items())
    frame = result.to_dataframe()
    names = [p.name for p in params if p.kind not in (P.VAR_POSITIONAL, P.VAR_KEYWORD)]
    assert list(frame.columns[2 : 2 + len(names)]) == names  # Annotation, Metric, then the parameters in order
    assert len(frame) == len(want)  # one annotation, one metric: one row per config, duplicates included
    for i, (args, kwargs) in enumerate(want):
        expected = list(args) + [kwargs[name] for name in names[len(args) :]]
        assert all(same_value(frame[name].iloc[i], v) for name, v in zip(names, expected, strict=True))
