"""``ProfileResults``: what a decorated call returns; the one result builder; ``nsightx.load`` for a saved one.

:func:`build_results` is the only place that turns measured runs into a result: the one-process call, the
spread sweep (``parallel_devices``, ``executor=``, after it merged its tasks' runs) and :func:`nsightx.load_raw`
all go through it, so the values, the schema and the files written are the same whichever path measured.
"""

from __future__ import annotations

import datetime as _dt
import functools
import os
import threading
import warnings
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nsightx._errors import (
    ConfigError,
    ConfigTypeError,
    IncompleteResultWarning,
    OutputError,
    ResultSchemaError,
    os_error_text,
)
from nsightx._plot.plotoptions import DISTRIBUTIONS
from nsightx._plot.render import plot_frame
from nsightx._plot.roofchart import draw_roofline
from nsightx._results.combinecols import combine_columns
from nsightx._results.html import results_html
from nsightx._results.integrity import Completeness, completeness
from nsightx._results.output import OutputLocation, csv_text, write_atomic
from nsightx._results.parquetcheck import completeness_of
from nsightx._results.parquetread import MAGIC as PARQUET_MAGIC
from nsightx._results.parquetread import parse_parquet, starts_parquet
from nsightx._results.parquetwrite import result_parquet
from nsightx._results.rawread import parse_raw, starts_raw
from nsightx._results.records import Record, RunRecords, Scalar
from nsightx._results.resultfile import parse_result
from nsightx._results.roofline import roofline_frame
from nsightx._results.rowparts import StoredRuns
from nsightx._results.schema import PlanInfo, RawHeader, ResultData, gc_paused
from nsightx._results.sink import read_runs
from nsightx._results.store import ResultColumns, ValueColumns, one_per_region
from nsightx._results.table import ResultTable
from nsightx._results.transform import RunValue, combine_records, derive, new_run_value
from nsightx._version import __version__

if TYPE_CHECKING:
    import pandas as pd

    from nsightx._results.frameahead import FrameAhead

PARQUET_SUFFIX = ".parquet"
"""The suffix that makes :meth:`ProfileResults.save` write the Parquet format."""
RESULT_SUFFIX = PARQUET_SUFFIX
"""The format of the ``result-<tag>`` file a call writes under ``output_prefix``."""
_BUILD_LOCK = threading.Lock()
"""Held while a loaded result builds its objects (two threads reading ``.data`` at once build it once)."""


class ProfileResults:
    """The result of a profiled call: raw records, per-run values and the aggregated DataFrame.

    Its primary data are columns (:class:`~nsightx._results.store.ResultColumns`): the DataFrames and the
    Parquet file are made from them. ``data`` (the pydantic ``ResultData``, the schema 1 form) and ``records``
    hold Python objects; a loaded Parquet result builds them from the columns when first read, and a result
    given as ``ResultData`` makes its columns from it when first needed.

    Example:
        >>> results = profiled_function()            # doctest: +SKIP
        >>> results.to_dataframe()[["Annotation", "AvgValue", "CI95_Lower", "CI95_Upper"]]  # doctest: +SKIP
    """

    _frame_source: Callable[[], pd.DataFrame] | None = None
    """Makes the aggregated frame (statistics done) between the first and the second ``to_dataframe()``; a class
    default, so that a result pickled before it existed reads as one without it."""
    _frame_ahead: FrameAhead | None = None
    """What the first ``to_dataframe()`` may take instead of computing it: the pieces of the frame that read no
    measured value, computed while the call's GPU worked (:mod:`nsightx._results.frameahead`); a class default."""

    def __init__(
        self,
        data: ResultData,
        configs: Sequence[tuple[Any, ...]] | None = None,
        *,
        columns: ResultColumns | None = None,
    ) -> None:
        self._shell = data
        """The plan, environment and per-config lists (and, unless built from columns alone, the runs and values)."""
        self._data: ResultData | None = data
        self._columns = columns
        self._configs = configs
        self._frame: pd.DataFrame | None = None
        """The aggregated frame that ``to_dataframe()`` copies (made at its second call)."""
        self._table_cache: ResultTable | None = None
        self._build: Callable[[], tuple[tuple[RunRecords, ...], tuple[RunValue, ...]]] | None = None

    @classmethod
    def from_columns(
        cls,
        shell: ResultData,
        columns: ResultColumns,
        configs: Sequence[tuple[Any, ...]] | None = None,
        *,
        build: Callable[[], tuple[tuple[RunRecords, ...], tuple[RunValue, ...]]] | None = None,
    ) -> ProfileResults:
        """The result whose runs and values are ``columns``.

        Args:
            shell: Its other parts (plan, environment, per-config lists); its runs and values are not read.
            columns: Its runs and values.
            configs: The config values as the call gave them.
            build: Makes its runs and values as objects, when ``data`` is first read (``None``: from ``columns``).
        """
        results = cls(shell, configs, columns=columns)
        results._data = None
        results._build = build
        return results

    @property
    def data(self) -> ResultData:
        """Everything the call produced (the saved form). Built from the columns on first read where needed."""
        data = self._data
        if data is None:
            with _BUILD_LOCK:
                if self._data is None:
                    cols = self.columns
                    runs, values = self._build() if self._build else (cols.run_records(), cols.run_values())
                    self._data = self._shell.model_copy(update={"runs": runs, "values": values})
                data = self._data
        return data

    @property
    def columns(self) -> ResultColumns:
        """The runs and values as columns (made from ``data`` once, when the result was given as objects)."""
        cols = self._columns
        if cols is None:
            with _BUILD_LOCK:
                if self._columns is None:
                    assert self._data is not None, "a ProfileResults holds its data, its columns or both"
                    self._columns = ResultColumns.of(self._data.runs, self._data.values)
                cols = self._columns
        return cols

    def __getstate__(self) -> dict[str, Any]:
        """The state to pickle: all but the columnar view (it holds a lock; it is made again when needed)."""
        return {**self.__dict__, "_table_cache": None, "_frame_source": None, "_frame_ahead": None}

    def _table(self) -> ResultTable:
        """The columnar view the DataFrames read (made once)."""
        if self._table_cache is None:
            self._table_cache = ResultTable(self.columns)
        return self._table_cache

    @property
    def _plan(self) -> PlanInfo:
        return self._shell.plan

    def __repr__(self) -> str:
        p = self._plan
        runs = f"auto (<= {p.runs}) runs" if p.adaptive else f"{p.runs} run(s)"
        done = self.completeness
        part = "" if done.complete else f", {done.describe()}"
        count = self._columns.values.n if self._columns is not None else len(self.data.values)
        return (
            f"ProfileResults({p.function}, backend={p.backend!r}, {len(p.configs)} config(s) x {runs}, "
            f"{count} values{part})"
        )

    def _repr_html_(self) -> str:
        """The aggregated table as HTML for Jupyter: readable units, 95% CIs, stability, Tool (see its renderer)."""
        return results_html(self.to_dataframe(), self._shell)

    @property
    def completeness(self) -> Completeness:
        """How many of the planned runs this result holds (``.complete``, ``.held``, ``.planned``, ``.describe()``).

        A sweep that was stopped (its raw file read back) or a spread sweep with a failed config holds fewer runs
        than its plan asked for; :func:`nsightx.load` warns about such a result with an
        :class:`~nsightx.IncompleteResultWarning`.
        """
        if self._columns is not None:
            return completeness_of(self._plan, self.columns.runs.config)
        return completeness(self._plan, self.data.runs)

    @property
    def backend(self) -> str:
        """Name of the backend that measured (the ``Tool`` column)."""
        return self._plan.backend

    @property
    def environment(self) -> Mapping[str, Scalar]:
        """Where it was measured: GPU, host, rated clocks, versions, artifact paths."""
        return self._shell.environment

    @property
    def records(self) -> list[Record]:
        """Every raw record the backend produced (one per region, kernel, metric and run)."""
        return [rec for run in self.data.runs for rec in run.records]

    def to_dataframe(self) -> pd.DataFrame:
        """The aggregated DataFrame: one row per annotation, config and metric (a frame of its own each call).

        The first call hands out the frame it built, without a copy (the user's ``f().to_dataframe()`` is the
        common case, issue 35) and keeps what makes another; a second call makes the cached frame from it, and
        every later call gets a copy of that one.
        """
        from nsightx._results.dataframe import aggregate_source, frame_copy

        if self._frame is None:
            source = self._frame_source
            if source is None:
                table, ahead, self._frame_ahead = self._table(), self._frame_ahead, None
                pieces = ahead.take(table) if ahead is not None else None
                source = self._frame_source = aggregate_source(self._shell, self._configs, table, pieces)
                return source()  # the local: another thread's second call may have cleared the attribute
            self._frame, self._frame_source = source(), None
        return frame_copy(self._frame)

    def runs_dataframe(self) -> pd.DataFrame:
        """The per-run DataFrame: one row per run, annotation and metric (``profiled_data`` CSV)."""
        from nsightx._results.dataframe import runs_frame

        return runs_frame(self._shell, self._table())

    def save(self, path: str | Path) -> Path:
        """Write the result to ``path``; read it back with :func:`nsightx.load`.

        The suffix picks the format: ``.parquet`` a Parquet file (columnar: about 11 bytes per record, and
        ``pandas.read_parquet(path)`` returns the per-run values with the parameter columns; the records, regions,
        collector values, plan and environment travel in the same file, see
        :mod:`nsightx._results.parquetwrite`); any other suffix (``.json``) the schema 1 JSON of earlier versions.
        The file is written atomically (a temporary file in the same folder, then ``os.replace``): a reader or
        a crash sees the old file or the whole new one, never a part. Missing parent folders are created.

        Raises:
            ConfigError: ``path`` is a folder, lies under a file, or cannot be written.
        """
        out = Path(path)
        if out.is_dir():
            raise ConfigError(
                f"ProfileResults.save({str(path)!r}): that is a folder; give a file path such as "
                f"{str(out / 'result.parquet')!r}"
            )
        try:
            out.parent.mkdir(parents=True, exist_ok=True)
            return write_atomic(out, self._file_bytes(out.suffix))
        except OSError as e:
            raise ConfigError(
                f"ProfileResults.save({str(path)!r}) failed: {type(e).__name__}: {e.strerror or e}; give a path "
                "in a folder you can write to"
            ) from e

    def _file_bytes(self, suffix: str) -> str | bytes:
        """The file of this result in the format of ``suffix`` (``.parquet``: Parquet; else schema 1 JSON)."""
        if suffix.lower() == PARQUET_SUFFIX:
            return result_parquet(self._shell, self.columns)
        return self.data.json_text(measured_finite=self._measured_finite())

    def _measured_finite(self) -> bool:
        """Whether every measured value is known finite (from the columns, when the result holds them already).

        Then the JSON holds no measured value for :func:`~nsightx._results.nulls.measured_as_null` to put back to
        ``null``, and its scans of the text (~0.5 s at 1e6 records) are skipped. Without columns, ``False``: the
        text is scanned.
        """
        cols = self._columns
        if cols is None:
            return False
        import numpy as np

        return bool(np.isfinite(cols.records.value).all() and np.isfinite(cols.values.value).all())

    def write_outputs(self, location: OutputLocation, csv: bool) -> None:
        """Write ``result-<tag>.parquet`` and, with ``csv``, the per-run and aggregated CSVs to ``location``.

        Each file is written atomically under the tag that :func:`nsightx._results.output.allocate` reserved.

        Raises:
            OutputError: a file could not be written (a full disk); the error's ``results`` is this result, so a
                finished sweep is not lost, and its message says where the raw runs are and how to load them.
        """
        result = location.path("result", RESULT_SUFFIX.lstrip("."))
        files: list[tuple[Path, Callable[[], str | bytes]]] = [(result, lambda: self._file_bytes(result.suffix))]
        if csv:
            files.append((location.path("profiled_data", "csv"), lambda: csv_text(self.runs_dataframe())))
            files.append((location.path("processed_data", "csv"), lambda: csv_text(self.to_dataframe())))
        for path, text in files:
            try:
                write_atomic(path, text())
            except OSError as e:
                raise self._output_error(path, location.raw, e) from e

    def _output_error(self, path: Path, raw: Path, e: OSError) -> OutputError:
        saved = int((self.columns.runs.config >= 0).sum())
        return OutputError(
            f"the sweep finished, but its file {str(path)!r} cannot be written: {os_error_text(e)}; the result is "
            f"not lost: it is this error's .results, and its {saved} run(s) are in {str(raw)!r} (load them with "
            f"nsightx.load({str(raw)!r})); free space on that disk or give output_prefix a folder on another one",
            path=str(path),
            errno=e.errno,
            raw=str(raw),
            saved=saved,
            results=self,
        )

    def plot(self, filename: str = "plot.png", **options: Any) -> Path:
        """Plot this result (see :func:`nsightx.analyze.plot` for the options).

        ``plot_type="box"`` or ``"violin"`` draws every run of each point (:meth:`runs_dataframe`).
        """
        runs = self.runs_dataframe() if options.get("plot_type") in DISTRIBUTIONS else None
        return plot_frame(self.to_dataframe(), filename, runs=runs, function=self._plan.function, **options)

    def roofline(self) -> pd.DataFrame:
        """The roofline table: per (annotation, config, kernel) achieved FLOP/s, bytes/s, intensity, roof fraction.

        Computed from the ncu counters of :data:`nsightx.ROOFLINE_METRICS` (see :mod:`nsightx._results.roofline`); rows
        lack what was not measured (NaN).
        """
        return roofline_frame(self.data.runs, self.data.plan.params, self._configs or self.data.plan.configs)

    def plot_roofline(self, filename: str | Path = "roofline.png", *, title: str | None = None) -> Path:
        """Draw the roofline of :meth:`roofline` (one point per kernel and config, CI bars where there are runs)."""
        return draw_roofline(self.roofline(), filename, title=title or self._plan.function)


def now() -> str:
    """The current UTC time as results store it (ISO 8601, seconds)."""
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")


def build_results(
    plan: PlanInfo,
    runs: Sequence[RunRecords],
    environment: Mapping[str, Scalar],
    *,
    combine: Callable[[float, float], float] | None = None,
    derive_metric: Callable[..., Any] | None = None,
    configs: Sequence[tuple[Any, ...]] | None = None,
    created: str | None = None,
    nsightx_version: str = __version__,
    config_devices: tuple[str, ...] = (),
    config_hosts: tuple[str, ...] = (),
    location: OutputLocation | None = None,
    output_csv: bool = False,
) -> ProfileResults:
    """Turn measured runs into a :class:`ProfileResults` and, with ``location``, write its files.

    Args:
        plan: What was measured (its metrics, ignored kernels and configs drive the transforms).
        runs: Every run, in order (ONCE-scope rows included).
        environment: Where it was measured.
        combine: ``combine_kernel_metrics``.
        derive_metric: ``derive_metric``.
        configs: The config values as the call gave them (for the DataFrame); ``None``: ``plan.configs``.
        created: Timestamp to store; ``None``: now.
        nsightx_version: Version that measured.
        config_devices: Per config, the device label that measured it (``parallel_devices``, ``executor=``).
        config_hosts: Per config, the host that measured it (``parallel_devices``, ``executor=``).
        location: Where the call's files go; ``None`` keeps the result in memory.
        output_csv: With ``location``, also write the per-run and aggregated CSVs.

    Raises:
        KernelCountError: a region launched several kernels and no ``combine`` was given.
        TransformError: ``derive_metric`` failed.
        OutputError: with ``location``, a file could not be written; its ``results`` holds the result.
    """
    stored = runs if isinstance(runs, StoredRuns) else StoredRuns.of_objects(runs)
    shell = ResultData(
        nsightx_version=nsightx_version,
        created=created or now(),
        plan=plan,
        environment=environment,
        runs=(),
        values=(),
        config_devices=config_devices,
        config_hosts=config_hosts,
    )
    results = _result(shell, stored, configs, combine, derive_metric)
    if location is not None:
        results.write_outputs(location, output_csv)
    return results


def _result(
    shell: ResultData,
    runs: StoredRuns,
    configs: Sequence[tuple[Any, ...]] | None,
    combine: Callable[[float, float], float] | None,
    derive_metric: Callable[..., Any] | None,
) -> ProfileResults:
    """The result of ``runs``: its columns from the runs, its values through the transforms (see ``build_results``).

    The columns are read from the sink's rows (:meth:`StoredRuns.parts`), and the run objects are made only when
    ``data`` is read. A result of one record per region (the common case) takes its values from the record
    columns (:func:`~nsightx._results.store.one_per_region`, what ``combine_records`` would make) and builds
    their objects only then too; any other goes through ``combine_records`` and ``derive`` over the run objects.
    """
    plan = shell.plan
    parts = runs.parts()
    fast = one_per_region(parts.records, parts.regions, plan.ignore_kernel_list) if derive_metric is None else None
    if fast is not None:
        build = functools.partial(_one_per_region, runs)
        results = ProfileResults.from_columns(shell, parts.with_values(fast), configs, build=build)
        results._frame_ahead = runs.frame_ahead(parts)  # the frame's pieces computed during the GPU wait, if any
        return results
    if derive_metric is None:
        combined = combine_columns(parts, plan.metrics, plan.ignore_kernel_list, combine)
        if combined is not None:  # its objects, when read, are made from the columns
            results = ProfileResults.from_columns(shell, parts.with_values(combined), configs)
            results._frame_ahead = runs.frame_ahead(parts)  # taken only where the rows are the predicted ones
            return results
    objects = tuple(runs.objects())
    values = combine_records(objects, plan.metrics, ignore_kernels=plan.ignore_kernel_list, combine=combine)
    if derive_metric is not None:
        values = derive(values, derive_metric, plan.metrics, plan.configs)
    data = shell.model_copy(update={"runs": objects, "values": tuple(values)})
    return ProfileResults(data, configs, columns=parts.with_values(ValueColumns.of(values)))


def _one_per_region(runs: StoredRuns) -> tuple[tuple[RunRecords, ...], tuple[RunValue, ...]]:
    """The runs and their values as objects, for a result of one record per region (:func:`one_per_region`).

    Each value is its record's fields, the value itself included as the record holds it (what ``combine_records``
    makes of such a result).
    """
    objects = tuple(runs.objects())
    with gc_paused():
        values = tuple(
            new_run_value(r.annotation, r.config, r.run, r.metric, r.value, r.unit, r.kernel)
            for run in objects
            for r in run.records
        )
    return objects, values


def results_from_raw(
    path: str | Path,
    *,
    combine_kernel_metrics: Callable[[float, float], float] | None = None,
    derive_metric: Callable[..., Any] | None = None,
) -> ProfileResults:
    """The completed runs of a raw file as a result (the body of :func:`nsightx.load_raw`, which documents it).

    Raises:
        ResultSchemaError: the file has no header, was written by a newer nsightx, or has a damaged line.
        KernelCountError: a region launched several kernels and no ``combine_kernel_metrics`` was given.
    """
    header, runs = read_runs(path)
    return _raw_results(path, header, runs, combine_kernel_metrics, derive_metric, stacklevel=4)


def _raw_results(
    path: str | Path,
    header: RawHeader | None,
    runs: list[RunRecords],
    combine_kernel_metrics: Callable[[float, float], float] | None,
    derive_metric: Callable[..., Any] | None,
    *,
    stacklevel: int,
) -> ProfileResults:
    """Build the result of a raw file's runs, warning when the sweep did not finish (``stacklevel``: the caller's)."""
    if header is None:
        raise ResultSchemaError(
            f"{str(path)!r} has no header line, so its runs cannot be matched to configs; it was written by an "
            "older nsightx or by a backend's worker; nsightx.ext.read_raw reads its runs without parameters"
        )
    runs.sort(key=lambda r: (r.config, r.run))  # configs of parallel_devices come back in completion order
    done = completeness(header.plan, runs)
    if not done.complete:
        held = "the runs there are" if done.held else "none: no run was measured"
        warnings.warn(
            f"{path}: {done.describe()}: the sweep stopped before it finished (or is still running); the result "
            f"holds {held} (ProfileResults.completeness)",
            IncompleteResultWarning,
            stacklevel=stacklevel,
        )
    environment: dict[str, Scalar] = {
        "Host": header.host,
        "nsightx": header.nsightx_version,
        "raw_data": str(path),
        "sweep": header.sweep,
    }
    return build_results(
        header.plan,
        runs,
        environment,
        combine=combine_kernel_metrics,
        derive_metric=derive_metric,
        created=header.created,
        nsightx_version=header.nsightx_version,
    )


def load(path: str | Path) -> ProfileResults:
    """Load a result saved with :meth:`ProfileResults.save` (Parquet or JSON), or the completed runs of a raw file.

    The format is told by the content: a Parquet file starts with ``PAR1``, a raw file with its header line,
    anything else is read as the schema 1 JSON.

    A raw ``raw_data-*.jsonl`` file (what a stopped sweep leaves behind) is recognised by its first line and
    read as :func:`nsightx.load_raw` reads it. A result that holds fewer runs than its plan asked for still loads,
    with an :class:`~nsightx.IncompleteResultWarning` (``ProfileResults.completeness`` says how many).

    Raises:
        ResultSchemaError: the file is not one whole, consistent result: it cannot be read, is empty, starts
            with a byte-order mark, holds invalid UTF-8, lacks a field, has a field of the wrong type, an index
            out of range or an entry stored twice (the message names the file, the field by its JSON path or
            the line, and what was expected); or it was written by a newer schema; or it is a raw file with a
            damaged line.
    """
    if not isinstance(path, str | os.PathLike):
        raise ConfigTypeError(
            f"nsightx.load needs a file path (str or pathlib.Path), got {type(path).__name__} {path!r}; give the "
            "path of a result-*.parquet, a saved .json or a raw_data-*.jsonl file"
        )
    p = Path(path)
    try:
        with p.open("rb") as file:  # a Parquet file is read by Arrow from here on: no whole copy of it held
            data = file.read(len(PARQUET_MAGIC))
            parquet = starts_parquet(data)
            if not parquet:
                file.seek(0)
                data = file.read()
    except OSError as e:
        raise ResultSchemaError(f"cannot read result file {str(path)!r}: {e}") from e
    if parquet:
        results = ProfileResults.from_columns(*parse_parquet(p, repr(str(path))))
    elif starts_raw(data):
        header, runs = parse_raw(p, data)
        return _raw_results(p, header, runs, None, None, stacklevel=3)
    else:
        results = ProfileResults(parse_result(data, repr(str(path))))
    done = results.completeness
    if not done.complete:
        warnings.warn(
            f"{path}: {done.describe()}: the call that made it did not finish every run (a stopped sweep, a config "
            "that failed); the result holds the runs there are (ProfileResults.completeness)",
            IncompleteResultWarning,
            stacklevel=2,
        )
    return results
