"""``ProfileResults``: what a decorated call returns, and ``nsightx.load`` for a saved one."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from nsightx._errors import ConfigError, ResultSchemaError
from nsightx._records import Record, Scalar
from nsightx._result_schema import ResultData, describe_errors, gc_paused, schema_message

if TYPE_CHECKING:
    import pandas as pd

    from nsightx._output import OutputLocation


class ProfileResults:
    """The result of a profiled call: raw records, per-run values and the aggregated DataFrame.

    Example:
        >>> results = profiled_function()            # doctest: +SKIP
        >>> results.to_dataframe()[["Annotation", "AvgValue", "CI95_Lower", "CI95_Upper"]]  # doctest: +SKIP
    """

    def __init__(self, data: ResultData, configs: Sequence[tuple[Any, ...]] | None = None) -> None:
        self.data = data
        self._configs = configs
        self._frame: pd.DataFrame | None = None

    def __repr__(self) -> str:
        p = self.data.plan
        runs = f"auto (<= {p.runs}) runs" if p.adaptive else f"{p.runs} run(s)"
        return (
            f"ProfileResults({p.function}, backend={p.backend!r}, {len(p.configs)} config(s) x {runs}, "
            f"{len(self.data.values)} values)"
        )

    @property
    def backend(self) -> str:
        """Name of the backend that measured (the ``Tool`` column)."""
        return self.data.plan.backend

    @property
    def environment(self) -> Mapping[str, Scalar]:
        """Where it was measured: GPU, host, rated clocks, versions, artifact paths."""
        return self.data.environment

    @property
    def records(self) -> list[Record]:
        """Every raw record the backend produced (one per region, kernel, metric and run)."""
        return [rec for run in self.data.runs for rec in run.records]

    def to_dataframe(self) -> pd.DataFrame:
        """The aggregated DataFrame: one row per annotation, config and metric (a copy each call)."""
        if self._frame is None:
            from nsightx._dataframe import aggregate

            self._frame = aggregate(self.data, self._configs)
        return self._frame.copy()

    def runs_dataframe(self) -> pd.DataFrame:
        """The per-run DataFrame: one row per run, annotation and metric (``profiled_data`` CSV)."""
        from nsightx._dataframe import runs_frame

        return runs_frame(self.data)

    def save(self, path: str | Path) -> Path:
        """Write the result as JSON (versioned schema); read it back with :func:`nsightx.load`.

        The file is written atomically (a temporary file in the same folder, then ``os.replace``): a reader or
        a crash sees the old file or the whole new one, never a part. Missing parent folders are created.

        Raises:
            ConfigError: ``path`` is a folder, lies under a file, or cannot be written.
        """
        from nsightx._output import write_atomic

        out = Path(path)
        if out.is_dir():
            raise ConfigError(
                f"ProfileResults.save({str(path)!r}): that is a folder; give a file path such as "
                f"{str(out / 'result.json')!r}"
            )
        try:
            out.parent.mkdir(parents=True, exist_ok=True)
            return write_atomic(out, self.data.model_dump_json())
        except OSError as e:
            raise ConfigError(
                f"ProfileResults.save({str(path)!r}) failed: {type(e).__name__}: {e.strerror or e}; give a path "
                "in a folder you can write to"
            ) from e

    def write_outputs(self, location: OutputLocation, csv: bool) -> None:
        """Write ``result-<tag>.json`` and, with ``csv``, the per-run and aggregated CSVs to ``location``.

        Each file is written atomically under the tag that :func:`nsightx._output.allocate` reserved.
        """
        from nsightx._output import write_atomic

        self.save(location.path("result", "json"))
        if csv:
            write_atomic(location.path("profiled_data", "csv"), self.runs_dataframe().to_csv(index=False))
            write_atomic(location.path("processed_data", "csv"), self.to_dataframe().to_csv(index=False))

    def plot(self, filename: str = "plot.png", **options: Any) -> Path:
        """Plot this result (see :func:`nsightx.analyze.plot` for the options)."""
        from nsightx._plot import plot_frame

        return plot_frame(self.to_dataframe(), filename, **options)


def load(path: str | Path) -> ProfileResults:
    """Load a result saved with :meth:`ProfileResults.save`, or the completed runs of a raw file.

    A raw ``raw_data-*.jsonl`` file (what a stopped sweep leaves behind) is recognised by its first line and
    read with :func:`nsightx.load_raw`.

    Raises:
        ResultSchemaError: the file is not a saved result (the message names the first bad or missing field),
            was written by a newer schema, or is a raw file with a damaged line.
    """
    from nsightx._raw import load_raw, looks_raw

    p = Path(path)
    if looks_raw(p):
        return load_raw(p)
    try:
        text = p.read_bytes()
    except OSError as e:
        raise ResultSchemaError(f"cannot read result file {str(path)!r}: {e}") from e
    try:
        with gc_paused():
            return ProfileResults(ResultData.model_validate_json(text))
    except ValidationError as e:
        raise ResultSchemaError(
            schema_message(e) or f"{str(path)!r} is not an nsightx result: {describe_errors(e)}"
        ) from e
