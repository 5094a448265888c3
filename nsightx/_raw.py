"""Reading raw ``raw_data-*.jsonl`` files: the runs a sweep had finished, even if it never returned.

A raw file is what is left after an exception, Ctrl-C or SIGKILL. Its first line is a :class:`RawHeader` (the
plan: function, parameter names, config values, ...) and every further line one finished run. :func:`load_raw`
turns such a file into a :class:`~nsightx.ProfileResults` of the completed runs, with the parameter columns
filled. A last line cut short by the crash is skipped with a warning; a damaged line anywhere before it is an
error that names its line number, because the runs after it would otherwise be lost silently.
"""

from __future__ import annotations

import functools
import json
import re
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import TypeAdapter, ValidationError

from nsightx._errors import ResultSchemaError
from nsightx._records import RunRecords
from nsightx._result_schema import RAW_KIND, RawHeader, ResultData, describe_errors, gc_paused, schema_message

if TYPE_CHECKING:
    from nsightx._results import ProfileResults

_RAW_START = re.compile(r'\s*\{\s*"(kind|config)"\s*:')
"""How a raw file starts: its header (``{"kind": ...``) or, in a file without a header, a run."""


@functools.cache
def _run_adapter() -> TypeAdapter[RunRecords]:
    return TypeAdapter(RunRecords)


def looks_raw(path: Path) -> bool:
    """Whether ``path`` starts like a raw JSON-lines file rather than a saved result (reads 200 characters)."""
    try:
        with path.open(encoding="utf-8") as fh:
            head = fh.read(200)
    except (OSError, UnicodeDecodeError):
        return False
    return _RAW_START.match(head) is not None


def _header(path: Path, number: int, obj: dict[str, Any]) -> RawHeader:
    try:
        return RawHeader.model_validate(obj)
    except ValidationError as e:
        raise ResultSchemaError(
            schema_message(e) or f"{str(path)!r} line {number}: the raw file's header is damaged: {describe_errors(e)}"
        ) from e


def _run(path: Path, number: int, obj: object, header: RawHeader | None) -> RunRecords:
    if not isinstance(obj, dict):
        raise ResultSchemaError(f"{str(path)!r} line {number}: expected one run (a JSON object), got {obj!r:.80}")
    sweep = obj.pop("sweep", None)
    if header is not None and sweep != header.sweep:
        raise ResultSchemaError(
            f"{str(path)!r} line {number} belongs to sweep {sweep!r}, not to {header.sweep!r} named in the header; "
            "the file mixes two sweeps and cannot be attributed"
        )
    try:
        return _run_adapter().validate_python(obj)
    except ValidationError as e:
        raise ResultSchemaError(f"{str(path)!r} line {number} is not a run: {describe_errors(e)}") from e


def read_runs(path: str | Path) -> tuple[RawHeader | None, list[RunRecords]]:
    """Read a raw file: its header (``None`` when it has none) and its finished runs, in order.

    Raises:
        ResultSchemaError: the file cannot be read, or a line other than an unterminated last one is damaged
            (the message names the line number), or a line belongs to another sweep than the header's.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise ResultSchemaError(f"cannot read raw file {str(path)!r}: {e}") from e
    with gc_paused():
        return _parse(path, text)


def _parse(path: Path, text: str) -> tuple[RawHeader | None, list[RunRecords]]:
    lines = text.split("\n")
    last = len(lines)  # number of the last line; a complete file ends with "\n", so its last element is ""
    header: RawHeader | None = None
    runs: list[RunRecords] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            if number == last:  # no newline after it: the writer was stopped in the middle of this line
                warnings.warn(
                    f"{path}: skipped the unfinished last line {number} (the sweep was stopped while "
                    f"writing it); {len(runs)} complete run line(s) read",
                    RuntimeWarning,
                    stacklevel=3,
                )
                break
            raise ResultSchemaError(
                f"{str(path)!r} line {number} is damaged ({e.msg} at column {e.colno}); the lines after it cannot "
                "be trusted either; repair or remove that line to read the rest"
            ) from e
        if isinstance(obj, dict) and obj.get("kind") == RAW_KIND:
            if header is not None or runs:
                raise ResultSchemaError(f"{str(path)!r} line {number}: a second header; one file holds one sweep")
            header = _header(path, number, obj)
            continue
        runs.append(_run(path, number, obj, header))
    return header, runs


def read_raw(path: str | Path) -> list[RunRecords]:
    """The finished runs of a raw file, with or without a header (see :func:`read_runs`)."""
    return read_runs(path)[1]


def load_raw(
    path: str | Path,
    *,
    combine_kernel_metrics: Callable[[float, float], float] | None = None,
    derive_metric: Callable[..., Any] | None = None,
) -> ProfileResults:
    """Load the completed runs of a raw ``raw_data-*.jsonl`` file as a :class:`~nsightx.ProfileResults`.

    This is how to get at the data of a sweep that was stopped (an exception, Ctrl-C, SIGKILL): the raw file
    holds every run that finished, and its header names the function, its parameters and the config values,
    so the DataFrame has the parameter columns. :func:`nsightx.load` calls this for a raw file.

    Functions are not stored in the file: give ``combine_kernel_metrics`` again when a region launched several
    kernels, and ``derive_metric`` to add the derived metric.

    Args:
        path: The raw file (``<output_prefix>raw_data-<function>-<n>.jsonl``).
        combine_kernel_metrics: Reducer for regions with several kernels, as given to ``analyze.kernel``.
        derive_metric: Derive function, as given to ``analyze.kernel``.

    Returns:
        The completed runs; ``environment`` holds ``Host``, ``raw_data`` (the path) and ``sweep``.

    Raises:
        ResultSchemaError: the file has no header (written by an older nsightx or a backend's worker), was
            written by a newer nsightx, or has a damaged line before the last one (named by number).
        KernelCountError: a region launched several kernels and no ``combine_kernel_metrics`` was given.
    """
    from nsightx._results import ProfileResults
    from nsightx._transform import combine_records, derive

    header, runs = read_runs(path)
    if header is None:
        raise ResultSchemaError(
            f"{str(path)!r} has no header line, so its runs cannot be matched to configs; it was written by an "
            "older nsightx or by a backend's worker; nsightx._sink.read_raw reads its runs without parameters"
        )
    plan = header.plan
    runs.sort(key=lambda r: (r.config, r.run))  # configs of parallel_devices come back in completion order
    values = combine_records(runs, plan.metrics, ignore_kernels=plan.ignore_kernel_list, combine=combine_kernel_metrics)
    if derive_metric is not None:
        values = derive(values, derive_metric, plan.metrics, plan.configs)
    data = ResultData(
        nsightx_version=header.nsightx_version,
        created=header.created,
        plan=plan,
        environment={
            "Host": header.host,
            "nsightx": header.nsightx_version,
            "raw_data": str(path),
            "sweep": header.sweep,
        },
        runs=tuple(runs),
        values=tuple(values),
    )
    return ProfileResults(data)
