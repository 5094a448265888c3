"""``ProfileResults``: what a decorated call returns, and ``nsightx.load`` for a saved one."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from nsightx._errors import ResultSchemaError
from nsightx._records import Record, Scalar
from nsightx._result_schema import ResultData

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
        return (f"ProfileResults({p.function}, backend={p.backend!r}, {len(p.configs)} config(s) x {runs}, "
                f"{len(self.data.values)} values)")

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
        """Write the result as JSON (versioned schema); read it back with :func:`nsightx.load`."""
        out = Path(path)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(self.data.model_dump_json(), encoding="utf-8")
        return out

    def write_outputs(self, location: OutputLocation, csv: bool) -> None:
        """Write ``result-<tag>.json`` and, with ``csv``, the per-run and aggregated CSVs to ``location``."""
        self.save(location.path("result", "json"))
        if csv:
            self.runs_dataframe().to_csv(location.path("profiled_data", "csv"), index=False)
            self.to_dataframe().to_csv(location.path("processed_data", "csv"), index=False)

    def plot(self, filename: str = "plot.png", **options: Any) -> Path:
        """Plot this result (see :func:`nsightx.analyze.plot` for the options)."""
        from nsightx._plot import plot_frame

        return plot_frame(self.to_dataframe(), filename, **options)


def load(path: str | Path) -> ProfileResults:
    """Load a result saved with :meth:`ProfileResults.save`.

    Raises:
        ResultSchemaError: the file is not a saved result, or was written by a newer schema.
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as e:
        raise ResultSchemaError(f"cannot read result file {str(path)!r}: {e}") from e
    try:
        return ProfileResults(ResultData.model_validate_json(text))
    except ResultSchemaError:
        raise
    except ValidationError as e:
        if any("schema v" in str(err.get("msg", "")) for err in e.errors()):
            raise ResultSchemaError(str(e.errors()[0]["msg"]).removeprefix("Value error, ")) from e
        raise ResultSchemaError(f"{str(path)!r} is not an nsightx result: {e.errors()[0]['msg']}") from e
