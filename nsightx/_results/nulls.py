"""Measured values stored as ``null``, read back as NaN.

pydantic writes a NaN (a failed region, a counter ncu did not report) or an infinity as ``null`` in JSON, and the
float fields refuse ``null`` when the file is read back. Reading accepts ``null`` as NaN, and only there: the
``value`` of a record or of a per-run value. Everywhere else a ``null`` stays an error. The check runs only after
validation has failed, so a file without such values costs nothing more to load.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

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
