"""A backend's ``environment()`` checked: a mapping of str keys to scalars, numpy scalars taken exactly.

The environment is asked once, after the call's last run, and goes into the result, its files and its frames'
environment columns, which hold scalars only. A value of another kind (a list, a dict, a ``datetime``), a key that
is no str, or no mapping at all used to fail the call in the result's build with pydantic's ``ValidationError``
or a ``TypeError`` that named neither the backend nor the key. It is now a :class:`~nsightx.PluginError`
naming both, raised from the run stage, so the call's stop line says where the measured runs are (the raw file
with ``output_prefix``). A numpy scalar or a 0-d tensor is taken as its ``item()`` (``np.int64(2**53 + 1)`` stays
that int, ``np.bool_(True)`` stays True), as collector values are (:func:`~nsightx._results.rows.to_scalar`).
"""

from __future__ import annotations

from collections.abc import Mapping

from nsightx._errors import PluginError
from nsightx._results.records import Scalar
from nsightx._results.rows import PLAIN_TYPES, item_scalar

_ACCEPTED = "str, int, float, bool or None (a numpy scalar or 0-d tensor is taken as its item())"
"""What an environment value may be, as the error says it."""


def checked_environment(backend: str, environment: object) -> dict[str, Scalar]:
    """``environment`` (what ``backend``'s ``environment()`` returned) as a dict of str keys to plain scalars.

    Raises:
        PluginError: it is no mapping, has a key that is no str, or a value that is no scalar (naming the backend,
            the key and the value's type, and what is accepted).
    """
    if not isinstance(environment, Mapping):
        raise PluginError(
            f"backend {backend!r}: environment() returned {type(environment).__name__} {environment!r:.80}, not a "
            f"mapping of str keys to {_ACCEPTED}; the backend must return one ({{}} when it has no facts to add)"
        )
    out: dict[str, Scalar] = {}
    for key, value in environment.items():
        if type(key) is not str:
            raise PluginError(
                f"backend {backend!r}: environment() has the key {key!r} ({type(key).__name__}); keys must be str "
                "(they are the result's environment names); the backend must return str keys"
            )
        out[key] = value if type(value) in PLAIN_TYPES else _scalar(backend, key, value)
    return out


def _scalar(backend: str, key: str, value: object) -> Scalar:
    """A value that is no plain scalar: its ``item()``'s plain scalar, or a plain copy of a scalar subclass."""
    plain = item_scalar(value)
    if type(plain) in PLAIN_TYPES and plain is not None:
        return plain  # checked: a plain scalar
    for kind in (bool, int, float, str):  # a subclass (an IntEnum, a str subclass): its plain value
        if isinstance(value, kind):
            return kind(value)
    raise PluginError(
        f"backend {backend!r}: environment() has {key!r} = {value!r:.80} ({type(value).__name__}); an environment "
        f"value must be {_ACCEPTED}; the backend must return a scalar there (a str of the value, or one key per item)"
    )
