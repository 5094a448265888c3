"""One path for every sweep spread over other processes: ``parallel_devices``, ``executor=`` (Dask or futures).

Each config becomes one task (:func:`nsightx._remote.task.run_task`) on an engine (:mod:`nsightx._remote.engines`);
the task measures it where the engine placed it and sends back only its runs (numbered as their config already),
with the plan and environment of the measurement and the host and device. Workers build no result and write no
file. As each task comes back, its runs go to the call's one sink (and, with ``output_prefix``, to the call's raw
file at once), so a sweep that stops, or a worker lost mid-sweep, loses only the tasks in flight. At the end the
one result builder (:func:`nsightx._results.profileresults.build_results`), the one a call in one process uses, builds
the sweep's result, once, whose ``Device`` and ``Host`` columns name where each config was measured.

The result's environment says how the sweep went: ``executor`` (what ran it), ``Devices`` and ``Hosts``
(every one used), ``retried_configs`` (indices of the configs the engine ran more than once, comma-separated,
``""`` for none, ``"unknown"`` when the engine could not say) and ``failed_configs`` (likewise, the configs
that failed for good). When a config failed, the others are still measured; then :class:`SweepError` is
raised, naming each failure, with the result of the configs that were measured as its ``results``. Its
``GitCommit`` is the caller's (:func:`caller_commit`), as a call in one process records it, not a worker's.

The function and the spec travel as they do to the ncu worker (:mod:`nsightx._remote.travel`): by reference when
importable, else by value, with an :class:`~nsightx._remote.travel.UnpicklableError` naming what cannot travel.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from nsightx._api.sigterm import Terminated, reported_sigterm, stop_cause
from nsightx._enums import VerbosityLevel
from nsightx._errors import MeasurementError, OutputError
from nsightx._remote.engines import Engine
from nsightx._remote.task import Measured, TaskFailure, TaskOutput, Worker
from nsightx._remote.taskruns import runs_of_payload
from nsightx._remote.travel import Destination, by_value_if_unimportable, diagnose, dumps
from nsightx._results.output import OutputLocation, TagNumbers, allocate
from nsightx._results.profileresults import ProfileResults, build_results
from nsightx._results.records import RunRecords, Scalar
from nsightx._results.schema import RawHeader, gc_paused
from nsightx._results.sink import RunSink
from nsightx._run.provenance import head_commit
from nsightx._spec.options import ProfileSpec

WORKERS = Destination(
    "the sweep's workers",
    "measure in this process (without executor= or parallel_devices=), where nothing is pickled",
    collectors_stay=False,
)
"""How the pickling errors name a sweep's workers; info collectors travel with the spec and run there."""


@dataclass(frozen=True)
class SweepCall:
    """What the API layer hands the sweep about one call (the backend already chosen)."""

    name: str
    """The profiled function's name."""
    function: Callable[..., Any]
    """The user's function (named in pickling errors)."""
    params: tuple[str, ...]
    """Its parameter names."""
    spec: ProfileSpec
    """Its validated options."""
    backend: str
    """The backend every task measures with."""
    needs_gpu: bool
    """Whether that backend measures a GPU (Dask tasks then ask for one ``GPU`` resource each)."""
    tags: TagNumbers | None = None
    """The function's tag numbers (see :class:`~nsightx._results.output.TagNumbers`); ``None`` starts at 0."""


class SweepError(MeasurementError):
    """Configs of a spread sweep failed; the others were measured.

    Attributes:
        failed: Per failed config index, why (which device and host, and the error).
        results: The merged result of the configs that were measured (``None`` when none was); its
            environment's ``failed_configs`` lists the failed ones.
    """

    def __init__(self, message: str, *, failed: dict[int, str], results: ProfileResults | None) -> None:
        super().__init__(message)
        self.failed = failed
        self.results = results


def run_sweep(
    call: SweepCall, configs: tuple[tuple[Any, ...], ...], make_worker: Callable[[ProfileSpec], Worker], engine: Engine
) -> ProfileResults:
    """Measure each config as one task on ``engine``, write runs as they arrive, and merge.

    Args:
        call: The call: its function, spec and backend.
        configs: The resolved configs.
        make_worker: Builds the profiled function a task runs from its spec; it travels with the task.
        engine: Runs the tasks.

    Raises:
        UnpicklableError: the function, a value it uses or a config cannot be sent to the workers.
        SweepError: a config failed (after the engine's retries); the others were measured.
    """
    commit = head_commit()  # asked before any task runs, as a call in one process asks it (CallFacts)
    head, blobs = _payloads(call, configs, make_worker)
    location = None if call.spec.output_prefix is None else allocate(call.spec.output_prefix, call.name, call.tags)
    collected = _Collected(location, configs)
    with reported_sigterm():  # SIGTERM: the stop line below, then the process ends as SIGTERM ends it
        try:
            failed, retried = _collect(engine, head, blobs, configs, collected)
            results = None
            if collected.measured:
                results = _build(call.spec, configs, collected, location, retried, sorted(failed), engine.label, commit)
        except BaseException as e:
            if call.spec.verbosity >= VerbosityLevel.INFO and collected.sink is not None and collected.sink.measured:
                if not (collected.done and isinstance(e, OutputError)):  # one from the build says it all
                    print(stopped_line(call.name, e, collected, location), file=sys.stderr)
            elif call.spec.verbosity >= VerbosityLevel.INFO and collected.sink is None:
                line = nothing_line(call.name, e, configs, location)
                if line:
                    print(line, file=sys.stderr)
            raise
        finally:
            if collected.sink is None and location is not None:  # nothing came back: no raw file, not an empty one
                location.raw.unlink(missing_ok=True)
    if failed:
        raise SweepError(_failure_summary(failed, len(configs), location), failed=failed, results=results)
    assert results is not None
    return results


def _collect(
    engine: Engine, head: bytes, blobs: list[bytes], configs: tuple[tuple[Any, ...], ...], collected: _Collected
) -> tuple[dict[int, str], list[int] | None]:
    """Submit every task, hand each that comes back to ``collected``; the failed configs and the retried ones.

    On a stop (an error, Ctrl-C, SIGTERM) the tasks not finished are cancelled, and the running ones ended where
    the engine can (see :meth:`Engine.cancel`): after Ctrl-C or SIGTERM a config must not go on measuring.
    """
    failed: dict[int, str] = {}
    try:
        for i, blob in enumerate(blobs):
            engine.submit(i, head, blob)
        for i, outcome in engine.completed():
            if isinstance(outcome, TaskOutput):
                collected.add(outcome)
            else:
                failed[i] = _failure(i, configs[i], outcome, engine.label)
        retried = engine.retried()
    except BaseException as e:
        engine.cancel(end_running=isinstance(e, (KeyboardInterrupt, Terminated)))
        raise
    finally:
        collected.close()
    collected.done = True
    return failed, retried


def stopped_line(name: str, error: BaseException, collected: _Collected, location: OutputLocation | None) -> str:
    """The one line printed when a spread sweep stops: how many configs came back, where they are, how to load them.

    Args:
        name: The profiled function's name.
        error: What stopped it (see :func:`~nsightx._api.sigterm.stop_cause`).
        collected: What came back: its configs, and its runs (with ``location``: those in the raw file).
        location: Where the call's files go; ``None`` without ``output_prefix`` (the runs were not saved).
    """
    assert collected.sink is not None
    total = len(collected.configs)
    came = f"after {len(collected.measured)} of {total} config(s) came back ({collected.sink.measured} run(s))"
    if collected.done:
        came = f"while its result was built, {came}"
    if location is None:
        return (
            f"nsightx: {name} {stop_cause(error)} {came}; they were not saved "
            "(give output_prefix='out/' to keep the configs of a sweep that stops)"
        )
    raw = str(location.raw)
    return f"nsightx: {name} {stop_cause(error)} {came}, saved in {raw}; load them with nsightx.load({raw!r})"


def nothing_line(
    name: str, error: BaseException, configs: tuple[tuple[Any, ...], ...], location: OutputLocation | None
) -> str | None:
    """The line printed when Ctrl-C or SIGTERM stops a spread sweep with a file before any config came back.

    A call in one process says it when stopped before any run completed (``kernel.nothing_measured_line``). The
    raw file is opened when the first config comes back (its header is the plan as that config's worker resolved
    it), so none is left: the name reserved for it is freed. An error stops it silently (its traceback says why),
    as does a sweep without a file.
    """
    if location is None or not isinstance(error, (KeyboardInterrupt, Terminated)):
        return None
    return (
        f"nsightx: {name} {stop_cause(error)} before any of {len(configs)} config(s) came back; nothing was "
        f"measured, so no raw file was kept ({location.raw})"
    )


def _payloads(
    call: SweepCall, configs: tuple[tuple[Any, ...], ...], make_worker: Callable[[ProfileSpec], Worker]
) -> tuple[bytes, list[bytes]]:
    """The pickled ``(make_worker, task spec)`` and each pickled config; a named error for what cannot go."""
    spec = call.spec.model_copy(
        update={"parallel_devices": None, "device": None, "backend": call.backend, "output_prefix": None}
    )
    with by_value_if_unimportable(call.function):
        try:
            return dumps((make_worker, spec)), [dumps(c) for c in configs]
        except Exception as e:
            raise diagnose(call.function, call.name, configs, call.params, WORKERS, e) from e


def _failure(index: int, config: tuple[Any, ...], error: BaseException, engine: str) -> str:
    """``config 2 (3,) failed on device 1:cpu of host h: RuntimeError: ...`` for one failed task."""
    if isinstance(error, TaskFailure):
        return f"config {index} {config!r} failed {error}"
    return f"config {index} {config!r} failed in a worker of {engine}: {type(error).__name__}: {error}"


def _failure_summary(failed: dict[int, str], total: int, location: OutputLocation | None) -> str:
    first = failed[min(failed)]
    kept = total - len(failed)
    where = f"; their runs are in {location.raw}" if location is not None and kept else ""
    others = f" ({len(failed) - 1} more: see .failed)" if len(failed) > 1 else ""
    held = f"the exception's .results holds them{where}" if kept else "the exception's .results is None"
    return f"{first}{others}. {len(failed)} of {total} config(s) failed, {kept} were measured ({held})"


class _Collected:
    """The caller's side of a sweep: one sink that receives each task's runs as it comes back.

    The sink is opened when the first task comes back (the raw file's header names the plan as its worker
    resolved it); with ``output_prefix`` it writes each run to the caller's raw file at once, as a call in one
    process does, so a sweep that stops keeps every config that came back.

    Every task runs the call's ONCE collectors and sends their values back (config -1). The sweep's ONCE values
    are those of the task of the lowest config index that came back, as its plan and environment are (see
    :func:`_build`): a task's ONCE run is kept (and written) only when its index is below that of every task that
    came back before it. The last ONCE run kept is then the lowest task's, and the last ONCE value wins wherever a
    result or a raw file is read, so the result, its saves and the raw file read back show the same values,
    whichever order the tasks finished in (before, the last task to finish gave them).
    """

    def __init__(self, location: OutputLocation | None, configs: tuple[tuple[Any, ...], ...]) -> None:
        self.location = location
        self.configs = configs
        self.sink: RunSink | None = None
        self.measured: dict[int, Measured] = {}
        """Per config that came back, its plan and environment."""
        self.where: dict[int, tuple[str, str]] = {}
        """Per config that came back, the (host, device) that measured it."""
        self.done = False
        """Whether every task came back (or failed): a stop after it came while the result was built."""

    def add(self, output: TaskOutput) -> None:
        """Hand the runs of one task to the sink (numbered as their config already)."""
        measured = output.measured
        if self.sink is None:
            header = None
            if self.location is not None:
                header = RawHeader(
                    sweep=self.location.sweep,
                    nsightx_version=measured.nsightx_version,
                    created=measured.created,
                    host=str(measured.environment.get("Host")),
                    plan=measured.plan.model_copy(update={"configs": self.configs}),
                )
            self.sink = RunSink(None if self.location is None else self.location.raw, header)
        lowest = output.index < min(self.measured, default=len(self.configs))
        for item in runs_of_payload(output.runs):
            if not lowest and (item[0] if isinstance(item, tuple) else item.config) < 0:
                continue  # a ONCE run of a task above one that came back already: see _Collected
            if isinstance(item, tuple):
                self.sink.add_run(item)
            else:
                self.sink.write(item)
        self.measured[output.index] = measured
        self.where[output.index] = (output.host, output.device)

    def runs(self) -> list[RunRecords]:
        """Every run received, in config order (a ONCE run first; each config's runs in the order measured)."""
        assert self.sink is not None
        return sorted(self.sink.runs, key=lambda run: run.config)

    def close(self) -> None:
        """Close the raw file, if one was opened."""
        if self.sink is not None:
            self.sink.close()


def _build(
    spec: ProfileSpec,
    configs: tuple[tuple[Any, ...], ...],
    collected: _Collected,
    location: OutputLocation | None,
    retried: list[int] | None,
    failed: list[int],
    engine: str,
    commit: str | None,
) -> ProfileResults:
    """The sweep's one result, built from the runs received by the builder a call in one process uses.

    Its plan and environment are those of the lowest config that came back, as its worker resolved them, but for
    ``GitCommit`` (see :func:`caller_commit`).
    """
    first = collected.measured[min(collected.measured)]
    where = collected.where
    devices = tuple(where[i][1] if i in where else "" for i in range(len(configs)))
    hosts = tuple(where[i][0] if i in where else "" for i in range(len(configs)))
    environment = caller_commit(first.environment, commit)
    environment["executor"] = engine
    environment["Devices"] = ",".join(dict.fromkeys(d for d in devices if d))
    environment["Hosts"] = ",".join(dict.fromkeys(h for h in hosts if h))
    environment["retried_configs"] = "unknown" if retried is None else ",".join(map(str, retried))
    environment["failed_configs"] = ",".join(map(str, failed))
    if location is not None:
        environment["raw_data"] = str(location.raw)
        environment["sweep"] = location.sweep
    with gc_paused():  # many objects and no cycle: see gc_paused
        return build_results(
            first.plan.model_copy(update={"configs": configs}),
            collected.runs(),
            environment,
            combine=spec.combine_kernel_metrics,
            derive_metric=spec.derive_metric,
            configs=configs,
            created=first.created,
            nsightx_version=first.nsightx_version,
            config_devices=devices,
            config_hosts=hosts,
            location=location,
            output_csv=spec.output_csv,
        )


def caller_commit(environment: Mapping[str, Scalar], commit: str | None) -> dict[str, Scalar]:
    """``environment`` (a worker's) with the caller's ``GitCommit``: ``commit``, or none when that is ``None``.

    ``GitCommit`` says which code a number came from (``nsightx compare`` and the gate's history read it). A
    worker reports the commit of its own current folder, which a pool started elsewhere, a Dask worker or a
    process that changed folder need not share with the caller (or may not be in a git work tree at all): the
    same sweep then recorded another commit, or none, depending on where its workers happened to start. The
    caller's folder is the one the user ran the sweep from, and a call in one process records it; a spread sweep
    now records the same. The key keeps its place when both have one.
    """
    out = dict(environment)
    if commit:
        out["GitCommit"] = commit
    else:
        out.pop("GitCommit", None)
    return out
