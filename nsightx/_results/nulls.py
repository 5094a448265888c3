"""Measured NaN values stored as ``null``, read back as NaN; measured infinities stored as JSON tokens.

A measured value that is NaN (a failed region's per-run value, a counter ncu did not report) is written as
``null`` in JSON, as every nsightx version has written it (:func:`measured_as_null`), and the float fields refuse
``null`` when the file is read back. Reading accepts ``null`` as NaN, and only there: the ``value`` of a record or
of a per-run value. Everywhere else a ``null`` stays an error. The check runs only after validation has failed, so
a file without such values costs nothing more to load.

A measured value that is infinite (a derived metric that divides by zero, a backend's inf) is written as JSON's
``Infinity`` or ``-Infinity`` token and reads back as that float (files21; before, it was written as ``null`` and
read back as NaN, while the Parquet file kept it). Earlier nsightx versions (checked: 87b97cb, d6b4a1c) read those
tokens as the floats, so the schema version is unchanged. Other non-finite values (a collector's, an environment
entry, a region attribute) are written as the ``NaN`` and ``Infinity`` tokens too
(:data:`~nsightx._results.schema.NON_FINITE_AS_TOKENS`): there ``null`` is a value of its own, the value of a
collector that raised.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any, TypeVar

from pydantic import ValidationError

Loc = tuple[int | str, ...]

RESULT_NULLS: tuple[Loc, ...] = (("values", 0, "value"), ("runs", 0, "records", 0, "value"))
"""Where a saved result may hold a measured value (``0`` stands for any list position)."""
RUN_NULLS: tuple[Loc, ...] = (("records", 0, "value"),)
"""Where a raw run line may hold a measured value."""


def _matches(loc: Loc, pattern: Loc) -> bool:
    return len(loc) == len(pattern) and all(
        isinstance(got, int) if isinstance(want, int) else got == want for got, want in zip(loc, pattern, strict=True)
    )


def null_locations(error: ValidationError, patterns: Sequence[Loc]) -> list[Loc]:
    """The locations of those of ``error``'s problems that are a ``null`` measured value (maybe none)."""
    locs: list[Loc] = []
    for err in error.errors(include_url=False):
        loc = tuple(err["loc"])
        if err["type"] == "float_type" and err.get("input", 0) is None and any(_matches(loc, p) for p in patterns):
            locs.append(loc)
    return locs


def with_nan(text: str | bytes, locs: Sequence[Loc]) -> str | None:
    """``text`` (a JSON document) with NaN at each of ``locs``, written back as JSON (with ``NaN`` literals).

    Returns ``None`` when ``text`` cannot be read that way (the caller reports the original problem).
    """
    try:
        doc: Any = json.loads(text)
        for loc in locs:
            node = doc
            for key in loc[:-1]:
                node = node[key]
            node[loc[-1]] = math.nan
    except (ValueError, LookupError, TypeError, RecursionError):
        return None
    return json.dumps(doc, allow_nan=True, separators=(",", ":"))


_STORED = b'"value":null,"unit":'
"""How a record or a per-run value with a NaN value is written (its fields in declaration order)."""


def patch_stored(data: bytes, count: int) -> bytes | None:
    """``data`` with its ``count`` null measured values written as NaN, or ``None``.

    A byte replacement, so a large result need not be parsed twice; it is used only when exactly ``count`` values
    are written the way nsightx writes them (else ``None``, and the caller patches the parsed document).
    """
    if data.count(_STORED) != count:
        return None
    return data.replace(_STORED, b'"value":NaN,"unit":')


Text = TypeVar("Text", str, bytes)


def measured_as_null(data: Text) -> Text:
    """``data`` (a result or run line written with non-finite tokens) with each measured NaN's token as ``null``.

    A measured value (a record's or per-run value's ``value``) is the one field written as ``"value":`` followed by
    ``,"unit":`` (the next field of both classes); a collector value is its class's last field. A measured NaN is
    put back to ``null``, as every nsightx version wrote it, so a result whose only non-finite values are failed
    regions stays strict JSON; a measured infinity keeps its ``Infinity``/``-Infinity`` token (see the module
    docstring). A string cannot hold the pattern (its quotes are escaped); a mapping (environment, attributes) with
    a key ``value`` holding NaN just before a key ``unit`` gets ``null`` there too, as before fix20. Costs one scan
    of ``data`` when it holds no NaN.
    """
    if isinstance(data, bytes):
        return data.replace(b'"value":NaN,"unit":', b'"value":null,"unit":') if b"NaN" in data else data
    return data.replace('"value":NaN,"unit":', '"value":null,"unit":') if "NaN" in data else data
