"""Reading a saved result (``ProfileResults.save``, schema 1 JSON) back, refusing what is not one whole result.

In order: the bytes (:mod:`nsightx._results.filebytes`: empty, byte-order mark; invalid UTF-8 once parsing has
failed), the types (pydantic in strict mode, straight from the JSON text: ``"0"`` is not an index, ``1.0`` not a
count), the fields every nsightx version has written (a file without ``runs`` is not a result with no runs), then
how the parts fit together (:mod:`nsightx._results.integrity`). Each problem is one :class:`ResultSchemaError`
that names the file, the field by its JSON path and what was expected.
"""

from __future__ import annotations

from pydantic import ValidationError

from nsightx._errors import ResultSchemaError
from nsightx._results.filebytes import start_problem, utf8_problem
from nsightx._results.integrity import check_result
from nsightx._results.nulls import RESULT_NULLS, null_locations, patch_stored, with_nan
from nsightx._results.schema import ResultData, describe_errors, gc_paused, schema_message

REQUIRED = ("schema_version", "nsightx_version", "created", "plan", "environment", "runs", "values")
"""Top-level fields every saved result has had since the first schema (the model gives some a default, for
results built in memory; a file without one was cut or edited)."""


def parse_result(data: bytes, source: str) -> ResultData:
    """The result whose JSON text is ``data``, checked (``source`` is the quoted file name, for messages).

    Raises:
        ResultSchemaError: the first problem found (see the module docstring).
    """
    problem = start_problem(data)
    if problem is not None:
        raise ResultSchemaError(f"{source} {problem}")
    try:
        with gc_paused():
            result = ResultData.model_validate_json(data, strict=True)
    except ValidationError as e:
        result = _retry_nulls(data, e, source)
    missing = [name for name in REQUIRED if name not in result.model_fields_set]
    if missing:
        raise ResultSchemaError(
            f"{source} is not a whole nsightx result: field {missing[0]!r} is missing; every saved result has "
            f"{', '.join(REQUIRED)} (the file was cut or edited)"
        )
    with gc_paused():  # the checks make many short-lived tuples; a collection would walk the whole result
        check_result(result, source)
    return result


def _retry_nulls(data: bytes, error: ValidationError, source: str) -> ResultData:
    """Validate again with stored ``null`` measured values read as NaN; raise for what is still wrong.

    With other problems beside the nulls, the retry reports those (not a null that is fine).
    """
    locs = null_locations(error, RESULT_NULLS)
    fixed = (patch_stored(data, len(locs)) or with_nan(data, locs)) if locs else None
    if fixed is None:
        raise _refusal(data, error, source) from None
    try:
        with gc_paused():
            return ResultData.model_validate_json(fixed, strict=True)
    except ValidationError as e:
        raise _refusal(data, e, source) from None


def _refusal(data: bytes, error: ValidationError, source: str) -> ResultSchemaError:
    """The error for a file that pydantic refused: a newer schema, bad bytes, or the first bad field."""
    message = schema_message(error)
    if message is not None:
        return ResultSchemaError(f"{source}: {message}")
    if any(err["type"] == "json_invalid" for err in error.errors(include_url=False)):
        problem = utf8_problem(data)
        if problem is not None:
            return ResultSchemaError(f"{source} {problem}")
        if "EOF while parsing" in describe_errors(error):
            return ResultSchemaError(
                f"{source} is not a whole nsightx result: the JSON ends early ({describe_errors(error)}); the file "
                "was cut short (a full disk, an interrupted copy)"
            )
    return ResultSchemaError(f"{source} is not an nsightx result: {describe_errors(error)}")
