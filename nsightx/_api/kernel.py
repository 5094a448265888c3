"""``analyze.kernel``: the decorator that turns a function into a profiled sweep."""

from __future__ import annotations

import copy
import functools
import socket
import sys
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol, TypeVar, overload

from nsightx._api.aheadpolicy import AheadPolicy
from nsightx._api.callfacts import CallFacts
from nsightx._api.counters import Side, counter_spec, join_sides, without_counters
from nsightx._api.firstrun import CheckedSink, FirstRunCheck
from nsightx._api.parallel import run_parallel
from nsightx._api.sigterm import Terminated, reported_sigterm, stop_cause
from nsightx._api.sweep import SweepCall, run_sweep
from nsightx._api.tool import active_name
from nsightx._enums import VerbosityLevel
from nsightx._errors import ConfigError, CounterPermissionError, NsightxError, OutputError, did_you_mean
from nsightx._pluginhost.plugins import PluginHost, default_host
from nsightx._remote.engines import check_alone, check_executor, engine_for
from nsightx._remote.task import Measured
from nsightx._remote.taskruns import TaskRuns
from nsightx._results.output import OutputLocation, TagNumbers, allocate
from nsightx._results.profileresults import ProfileResults, build_results, now
from nsightx._results.records import Scalar
from nsightx._results.rowparts import StoredRuns
from nsightx._results.schema import PlanInfo, RawHeader, gc_paused
from nsightx._run import device as _device
from nsightx._run import exclusive as _exclusive
from nsightx._run import heap
from nsightx._run.adaptive import STOP_COLUMN
from nsightx._run.backend import Backend
from nsightx._run.collectors import CollectorLike, SweepIndexed
from nsightx._run.device import GpuInfo
from nsightx._run.loop import execute
from nsightx._run.plan import Plan
from nsightx._run.provenance import add_provenance
from nsightx._spec import configs as _configs
from nsightx._spec.makeplan import build_plan, plan_info
from nsightx._spec.options import ProfileSpec, build_spec, check_derive_arity, collector_objects
from nsightx._spec.select import Choice, choose, fallback
from nsightx._version import __version__

T = TypeVar("T", covariant=True)


@dataclass(frozen=True)
class _Planned:
    """A call planned and validated, ready to measure: what :meth:`_ProfiledFunction._run` hands a :class:`_Finish`."""

    plan: Plan
    info: PlanInfo
    """The plan's description as results and raw files carry it."""
    location: OutputLocation | None
    """Where the raw file and outputs go (``None``: no ``output_prefix``)."""
    configs: tuple[tuple[Any, ...], ...]
    """The resolved configs, as the result lists them."""
    gpu: GpuInfo | None
    """The device the user named, resolved (``None``: the current one)."""
    backend: Backend
    """The backend instance that measures it."""


class _Finish(Protocol[T]):
    """What a call does with its plan once built: measure it and build a result, or measure a task's runs."""

    def __call__(self, planned: _Planned) -> T: ...


RESERVED_COLUMNS = frozenset(
    {
        "Annotation",
        "Value",
        "Metric",
        "Kernel",
        "GPU",
        "Host",
        "ComputeClock",
        "MemoryClock",
        "Unit",
        "Tool",
        "Config",
        "Run",
        "AvgValue",
        "MedianValue",
        "StdDev",
        "MinValue",
        "MaxValue",
        "NumRuns",
        "CI95_Lower",
        "CI95_Upper",
        "RelativeStdDevPct",
        "StableMeasurement",
        "Flags",
        "Normalized",
        "NormalizationValue",
        "Geomean",
        "ThrottledRuns",
        "Throttled",
        "ThermalPauseS",
        STOP_COLUMN,
    }
)


def _check_parameter_names(names: Sequence[str], function: str) -> None:
    """Refuse a parameter named like a result column: its config column would replace that column.

    nsight-python lets the parameter's column overwrite the frame's own (a parameter ``Value`` showed the
    parameter's values as the measured ones in the per-run frame; ``Run`` replaced the run index), and nsightx's
    frames did the same or held two columns of one name, silently.

    Raises:
        ConfigError: a parameter has a reserved column's name.
    """
    clash = [name for name in names if name in RESERVED_COLUMNS]
    if clash:
        raise ConfigError(
            f"parameter {clash[0]!r} of {function}() has the name of a result column, whose values its config "
            f"column would replace; rename the parameter (reserved names: {sorted(RESERVED_COLUMNS)})"
        )


class ProfiledFunction:
    """A function decorated with ``analyze.kernel``; calling it runs the sweep and returns ProfileResults."""

    def __init__(self, fn: Callable[..., Any], spec: ProfileSpec, configs: Any) -> None:
        self.fn = fn
        self.spec = spec
        self.shape = _configs.shape_of(fn)
        self.name = getattr(fn, "__name__", "function")
        self.tags = TagNumbers()
        """The next ``n`` of this function's file tags: 0 for a newly decorated function, as in nsight-python."""
        self._decoration_configs = configs is not None
        self.configs: tuple[tuple[Any, ...], ...] | None = None
        self._deferred: NsightxError | None = None
        """What is wrong with the decoration-time configs or ``derive_metric``'s arity: raised by every call."""
        self._ahead = AheadPolicy()
        """Whether the next call computes the frame's pieces during its GPU wait (see :mod:`.aheadpolicy`)."""
        try:  # checked now, raised when the function is called (where nsight-python raises it), before any work
            _check_parameter_names(self.shape.names, self.name)
            if configs is not None:
                self.configs = _configs.normalize(self.shape, configs, self.name)
            check_derive_arity(spec.derive_metric, len(spec.metrics) if spec.metrics else None, len(self.shape.names))
        except NsightxError as e:
            self._deferred = e
        self._check_collector_names(collector_objects(spec))
        functools.update_wrapper(self, fn)

    def _check_collector_names(self, collectors: list[CollectorLike]) -> None:
        seen: set[str] = set()
        for c in collectors:
            if c.name in seen:
                raise ConfigError(
                    f"Duplicate info collector name '{c.name}'. Each collector must have a unique name (the "
                    "function name becomes the column name). Rename one of them (InfoCollector(name, ...) or "
                    "the function's name)"
                )
            seen.add(c.name)
            columns = getattr(c, "columns", None)  # optional: the keys a mapping-returning collector fills
            for col in (c.name, *(columns if isinstance(columns, tuple) else ())):
                self._check_collector_column(c.name, col)

    def _check_collector_column(self, name: str, column: str) -> None:
        what = "Info collector name" if column == name else f"Column '{column}' of info collector"
        if column in RESERVED_COLUMNS:
            raise ConfigError(
                f"{what} '{name}' collides with a reserved profiler column. Reserved names: "
                f"{sorted(RESERVED_COLUMNS)}. Rename the collector"
            )
        if column in self.shape.names:
            raise ConfigError(
                f"{what} '{name}' collides with a parameter of '{self.name}'. Rename the collector so it does "
                f"not shadow a function argument column. ({self.name}'s parameters: {', '.join(self.shape.names)})"
            )

    def __call__(self, *args: Any, configs: Any = None, executor: Any = None, **kwargs: Any) -> ProfileResults:
        """Measure the sweep and return its result (see :func:`kernel`).

        One profiled call runs at a time per process (:mod:`nsightx._run.exclusive`): a call from another
        thread waits for the one in progress (with a warning, once per process); a call from inside a profiled
        call of this thread raises :class:`~nsightx._errors.NestedCallError` before anything else. A sweep spread
        over an executor or ``parallel_devices`` measures elsewhere: its caller holds nothing, its tasks do.

        Raises:
            NestedCallError: called inside a profiled call of the same thread (nested or recursive).
            ConfigError: bad arguments, before anything runs (and before waiting for another thread's call).
        """
        _exclusive.check_not_nested(self.name)
        resolved = self._check_call(args, configs, executor, kwargs)
        executor = executor if executor is not None else self.spec.executor
        if executor is not None or self.spec.parallel_devices is not None:
            return self._call(resolved, executor)  # measured by the tasks, each under the lock where it runs
        _exclusive.enter(self.name, stacklevel=3)
        try:
            return self._call(resolved, None)
        finally:
            _exclusive.leave()

    def check_call(self, *args: Any, configs: Any = None, executor: Any = None, **kwargs: Any) -> None:
        """Raise what a call with these arguments would raise before any work, and do nothing else.

        ``analyze.plot`` calls it before raising an error of its own, so that, as in nsight-python, a bad call or
        bad configs are reported before the plot's options.

        Raises:
            ConfigError: the arguments, the configs (given at decoration or now) or ``derive_metric``'s arity.
        """
        self._check_call(args, configs, executor, kwargs)

    def _check_call(
        self, args: tuple[Any, ...], configs: Any, executor: Any, kwargs: dict[str, Any]
    ) -> tuple[tuple[Any, ...], ...]:
        """The call's checks, before any work: its arguments, its configs, then what the decoration deferred."""
        if kwargs:
            raise ConfigError(
                f"Keyword arguments are not supported yet: {list(kwargs)}. A profiled function takes its values "
                f"positionally: call {self.name}(...) with positional values or {self.name}(configs=[...]); "
                "the only other keyword a call takes is executor="
            )
        resolved = self._resolve_configs(args, configs)
        if self._deferred is not None:  # a fresh copy each call: the stored one keeps no traceback of a call
            raise copy.copy(self._deferred)
        if executor is not None:  # given at call time: checked as the decorator's option is
            check_alone(check_executor(executor), self.spec.device, self.spec.parallel_devices)
        return resolved

    def _call(self, resolved: tuple[tuple[Any, ...], ...], executor: Any) -> ProfileResults:
        """The call's work once its configs are resolved: choose the backend, then measure here or spread."""
        if self.spec.counters is not None:  # times here, counters in a second call, joined per kernel
            return self._joined(resolved, executor)
        if self.spec.parallel_devices is not None or executor is not None:
            choice, _ = self._choose(default_host(), here=False)  # workers check their backend's availability
            return self._spread(resolved, choice, executor)
        return self._here(resolved, self._finish)

    def measure_task(self, configs: list[tuple[Any, ...]], sink: TaskRuns) -> Measured:
        """In a worker of a spread sweep: measure ``configs`` in this process into ``sink``; build no result.

        The task sends the runs back and the caller builds the sweep's one result (:mod:`nsightx._api.sweep`).
        The same checks and the same lock as a call apply; the worker writes no file (its spec has no
        ``output_prefix``).
        """
        _exclusive.check_not_nested(self.name)
        resolved = self._check_call((), configs, None, {})
        _exclusive.enter(self.name, stacklevel=3)
        try:
            return self._here(resolved, functools.partial(self._finish_task, sink), sweep_index=sink.index)
        finally:
            _exclusive.leave()

    def _choose(self, host: PluginHost, *, here: bool) -> tuple[Choice, list[CollectorLike]]:
        """The backend for this call and its collectors, checked against the options before any work."""
        choice = choose(self.spec, host, active_name(), here=here)
        check_derive_arity(self.spec.derive_metric, len(choice.metrics), len(self.shape.names))
        collectors = self._collectors(host)
        self._check_per_device(choice, host)
        return choice, collectors

    def _here(self, resolved: tuple[tuple[Any, ...], ...], finish: _Finish[T], sweep_index: int | None = None) -> T:
        """Measure ``resolved`` in this process and hand the plan to ``finish`` (a result, or a task's runs).

        ``sweep_index``: in a task of a spread sweep, its config's index in the sweep, which the collectors see.
        """
        host = default_host()
        choice, collectors = self._choose(host, here=True)
        if sweep_index is not None:
            collectors = [SweepIndexed(c, sweep_index) for c in collectors]
        gpu = None
        if self.spec.device is not None:
            gpu = _device.resolve(self.spec.device, _device.visible())
        try:
            return self._run(resolved, choice, collectors, host, gpu, finish)
        except CounterPermissionError:  # "auto" with only a time metric: time it without counters
            other = fallback(self.spec, host, active_name(), choice)
            if other is None:
                raise
            dropped = f" ({', '.join(other[1])} not honoured there)" if other[1] else ""
            warnings.warn(
                f"{choice.backend.name} may not read the GPU's performance counters here (admin-only; "
                f"see CounterPermissionError); backend='auto' asked only for a time metric, so "
                f"{self.name} is measured with {other[0].backend.name} instead{dropped}",
                RuntimeWarning,
                stacklevel=4,
            )
            return self._run(resolved, other[0], collectors, host, gpu, finish)

    def _spread(self, configs: tuple[tuple[Any, ...], ...], choice: Choice, executor: Any) -> ProfileResults:
        """Measure each config as a task on ``executor``, or on the local pool of ``parallel_devices``."""
        caps = choice.backend.capabilities
        spec = self.spec.model_copy(update={"executor": None})  # the tasks' spec travels; the executor stays
        call = SweepCall(self.name, self.fn, self.shape.names, spec, choice.backend.name, caps.needs_gpu, self.tags)
        make_worker = functools.partial(ProfiledFunction, self.fn, configs=None)
        if executor is None:
            return run_parallel(call, configs, make_worker)
        return run_sweep(call, configs, make_worker, engine_for(executor, caps.needs_gpu, self.name))

    def _joined(self, configs: tuple[tuple[Any, ...], ...], executor: Any) -> ProfileResults:
        """``counters=``: a time call and a counter call over the same configs, joined per kernel."""
        if executor is not None:
            raise ConfigError(
                "counters= cannot be combined with executor=: the counter call needs Nsight Compute where the "
                "sweep runs; run the counter sweep on the GPU host itself"
            )
        # the two calls are parts of this one (not nested calls): they run under its lock, if it holds one
        time_part = ProfiledFunction(self.fn, without_counters(self.spec), configs=None)
        counter_part = ProfiledFunction(self.fn, counter_spec(self.spec), configs=None)
        time_part.tags = counter_part.tags = self.tags  # their files are this function's: one numbering
        # the counter backend is chosen before the times are measured: a machine without one fails before any work
        choose(counter_part.spec, default_host(), active_name(), metrics_option="counters")
        times = time_part._here(configs, time_part._finish_side)
        counters = counter_part._here(configs, counter_part._finish_side)
        return join_sides(
            times, counters, combine=self.spec.combine_kernel_metrics, configs=configs, output_csv=self.spec.output_csv
        )

    def _check_per_device(self, choice: Choice, host: PluginHost) -> None:
        """Refuse ``device=``/``parallel_devices=`` for a backend that cannot measure on a chosen device."""
        caps = choice.backend.capabilities
        # CPU backends may still spread configs over worker processes (parallel_devices lists worker ids).
        if self.spec.device is None and (self.spec.parallel_devices is None or not caps.needs_gpu):
            return
        if not caps.per_device:
            others = ", ".join(n for n, cls in host.backends.items() if cls.capabilities.per_device) or "none"
            option = "device=" if self.spec.device is not None else "parallel_devices="
            raise ConfigError(
                f"backend {choice.backend.name!r} cannot run per device ({option} was given); "
                f"backends that can: {others}"
            )

    def _resolve_configs(self, args: tuple[Any, ...], configs: Any) -> tuple[tuple[Any, ...], ...]:
        given = [
            what
            for what, present in (
                ("decoration-time configs", self._decoration_configs),
                ("call-time configs=", configs is not None),
                ("positional arguments", bool(args)),
            )
            if present
        ]
        if len(given) > 1:
            if self._decoration_configs:  # nsight-python's sentence says it all but what came at the call
                raise ConfigError(
                    "You have provided configs at decoration time and at runtime. Provide configs at decoration "
                    f"time or at runtime. ({self.name} was called with "
                    f"{'configs=' if configs is not None else 'positional arguments'} as well)"
                )
            raise ConfigError(
                f"{self.name} got {' and '.join(given)}; give configs in exactly one place "
                "(at decoration, or configs=[...] at call time, or one config as positional arguments)"
            )
        if self._decoration_configs:
            return self.configs or ()  # empty only when they were refused (raised by the caller)
        if configs is not None:
            return _configs.normalize(self.shape, configs, self.name)
        if args:
            return _configs.normalize(self.shape, [args], self.name)
        if self.shape.required:
            raise ConfigError(
                "You have provided no configs. Provide configs at decoration time or at runtime. "
                f"{self.name} requires {self.shape.required} argument(s) ({', '.join(self.shape.names)}): write "
                f"@analyze.kernel(configs=[...]) or call {self.name}(configs=[...])"
            )
        return _configs.normalize(self.shape, [()])

    def _collectors(self, host: PluginHost) -> list[CollectorLike]:
        collectors = collector_objects(self.spec)
        for item in self.spec.info_collectors:
            if isinstance(item, str):
                collectors += host.collectors(item)
        named = {id(c) for c in collectors}  # a default set the call also names is used once
        collectors += [c for c in host.default_collectors() if id(c) not in named]
        self._check_collector_names(collectors)
        return collectors

    def _run(
        self,
        configs: tuple[tuple[Any, ...], ...],
        choice: Choice,
        collectors: list[CollectorLike],
        host: PluginHost,
        gpu: GpuInfo | None,
        finish: _Finish[T],
    ) -> T:
        """Plan the call, measure it in this process and hand it to ``finish`` (which builds its result)."""
        spec = self.spec
        backend = choice.backend()
        location = allocate(spec.output_prefix, self.name, self.tags) if spec.output_prefix is not None else None
        plan = build_plan(
            spec,
            fn=self.fn,
            name=self.name,
            shape=self.shape,
            configs=configs,
            choice=choice,
            collectors=collectors,
            host=host,
            gpu=gpu,
            location=location,
        )
        try:
            backend.validate(plan)
        except BaseException:
            if location is not None:
                location.raw.unlink(missing_ok=True)  # nothing ran: give the reserved tag back
                self.tags.next = location.number
            raise
        planned = _Planned(plan, plan_info(plan, spec), location, configs, gpu, backend)
        with heap.holding():  # the runs measured stay out of the collector's rescans until the result is built
            return finish(planned)

    def _finish(self, planned: _Planned) -> ProfileResults:
        """Measure ``plan`` in this process and build its result (and files).

        The result is built with the cyclic garbage collector paused, as a loaded one is: building it makes a few
        objects per run and region and no reference cycle, and the collector would walk them again and again as
        they are made (0.5 to 1.7 us a run of a host-bound call, ``benchmarks/run_loop_cost.py``). The user's
        code that runs there, ``combine_kernel_metrics`` and ``derive_metric``, computes numbers; a cycle it made
        would be freed by the first collection after the build, and reference counting frees everything else.
        """
        spec, plan, location = self.spec, planned.plan, planned.location
        start = time.perf_counter()
        facts = CallFacts()
        with reported_sigterm():  # one handler for the runs and the build (the runs' own is then a no-op)
            runs, environment = self._measure(planned.backend, plan, planned.info, location, facts)
            elapsed = time.perf_counter() - start
            _add_environment(environment, planned.gpu, location, facts)
            with gc_paused():  # see the docstring
                try:
                    results = build_results(
                        planned.info,
                        runs,
                        environment,
                        combine=spec.combine_kernel_metrics,
                        derive_metric=spec.derive_metric,
                        configs=planned.configs,
                        location=location,
                        output_csv=spec.output_csv,
                    )
                except BaseException as e:  # say where the runs are, or that they are lost (OutputError says it)
                    if spec.verbosity >= VerbosityLevel.INFO and not isinstance(e, OutputError):
                        line = stopped_line(self.name, e, runs.measured(), location, building=True)
                        print(line, file=sys.stderr)
                    raise
        if spec.verbosity >= VerbosityLevel.INFO:
            print(done_line(plan, runs, elapsed, location), file=sys.stderr)
        return results

    def _finish_side(self, planned: _Planned) -> Side:
        """Measure ``plan`` in this process (its raw file written as it goes) and keep its runs for a join."""
        plan, info, location = planned.plan, planned.info, planned.location
        start = time.perf_counter()
        facts = CallFacts()
        runs, environment = self._measure(planned.backend, plan, info, location, facts)
        _add_environment(environment, planned.gpu, location, facts)
        if self.spec.verbosity >= VerbosityLevel.INFO:
            print(done_line(plan, runs, time.perf_counter() - start, location), file=sys.stderr)
        return Side(info, runs, environment, location)

    def _finish_task(self, sink: TaskRuns, planned: _Planned) -> Measured:
        """Measure ``plan`` into a task's ``sink`` and say how, without a result.

        Its first run is checked as the sweep's first run only in config 0's task (see :class:`FirstRunCheck`);
        a later config's task leaves the ``normalize_against`` check out of its run loop too, as a call in one
        process checks it on config 0's first run alone (the plan it sends back keeps the option).
        """
        first = sink.index == 0
        sink.check = FirstRunCheck(planned.plan, self.spec, sweep_first=first)
        plan = planned.plan if first else replace(planned.plan, normalize_against=None)
        facts = CallFacts()
        environment = self._measure_into(planned.backend, plan, sink, planned.location, facts)
        _add_environment(environment, planned.gpu, planned.location, facts)
        return Measured(planned.info, environment, now(), __version__)

    def _measure(
        self, backend: Backend, plan: Plan, info: PlanInfo, location: OutputLocation | None, facts: CallFacts
    ) -> tuple[StoredRuns, dict[str, Scalar]]:
        """Run the run stage into a checked sink (and the raw file); return the runs and the environment.

        ``facts`` are asked while the run stage waits for the GPU where it can (see :meth:`_measure_into`).
        """
        header = None
        if location is not None:
            header = RawHeader(
                sweep=location.sweep, nsightx_version=__version__, created=now(), host=socket.gethostname(), plan=info
            )
        with reported_sigterm():  # one handler for the sink's opening and the run stage (the inner one then is a no-op)
            sink = CheckedSink(location.raw if location else None, header, check=FirstRunCheck(plan, self.spec))
            environment = self._measure_into(backend, plan, sink, location, facts)
        # The result reads the runs' columns from the rows; their objects are made only if something reads them
        # (derive_metric, combine_kernel_metrics, .data), then frozen before the collector resumes (heap.settle; in
        # heap's pause mode they are walked once instead, by the young collection that ends a long call).
        return sink.stored(made=heap.settle), environment

    def _measure_into(
        self,
        backend: Backend,
        plan: Plan,
        sink: CheckedSink | TaskRuns,
        location: OutputLocation | None,
        facts: CallFacts,
    ) -> dict[str, Scalar]:
        """Run the run stage into ``sink`` and close it; return the environment. A stop says what was kept.

        ``facts`` are asked while a deferred session waits for its last runs (the run loop's ``while_waiting``):
        they do not depend on what is measured, and what failed there is raised where the call asks for them.
        The frame's set-up (:func:`_prepare_frame`) is done there too, then the frame's work that reads no measured
        value (the sink's ``prepare_frame``, :mod:`nsightx._results.frameahead`; only while the function's calls'
        waits hide it, :mod:`.aheadpolicy`), and the young generations are collected
        (:func:`~nsightx._run.heap.before_wait`).
        """
        with reported_sigterm():  # SIGTERM: the stop line below, then the process ends as SIGTERM ends it
            try:
                frame = getattr(sink, "prepare_frame", None) if self._ahead.enabled else None
                waiting = (facts.prepare, _prepare_frame, *((frame,) if frame else ()), heap.before_wait)
                environment = dict(execute(backend, plan, sink, while_waiting=waiting))
                self._ahead.update(getattr(sink, "ahead_ns", None), getattr(sink, "blocked_ns", None))
                return environment
            except BaseException as e:
                if self.spec.verbosity >= VerbosityLevel.INFO:
                    line = stopped_line(self.name, e, sink.measured, location) if sink.measured else None
                    line = line or nothing_measured_line(self.name, e, location)
                    if line:  # an error's traceback says the rest; none when no run completed but a file was left
                        print(line, file=sys.stderr)
                raise
            finally:
                sink.close()


def _prepare_frame() -> None:
    """Import and set up what ``to_dataframe()`` needs (see :func:`~nsightx._results.dataframe.prepare`).

    Run while a GPU call waits for its last runs. Never raises (the run loop's ``while_waiting`` contract): what
    fails here fails again, with its own message, where ``to_dataframe()`` does it.
    """
    try:
        from nsightx._results.dataframe import prepare

        prepare()
    except Exception:  # to_dataframe() meets it again and reports it
        pass


def _add_environment(
    environment: dict[str, Scalar], gpu: GpuInfo | None, location: OutputLocation | None, facts: CallFacts | None = None
) -> None:
    """What a call in this process adds to its backend's environment: device, host, versions, provenance, files.

    ``facts``: the call's facts, asked while its GPU still worked where the run loop could (see
    :class:`~nsightx._api.callfacts.CallFacts`); ``None`` asks now. Either way the same keys come in the same order.
    """
    if gpu is not None:
        environment["Device"] = gpu.label
    process, provenance = (facts or CallFacts()).facts()
    for key, value in process.items():
        environment.setdefault(key, value)
    add_provenance(environment, provenance)
    if location is not None:
        environment.setdefault("raw_data", str(location.raw))
        environment.setdefault("sweep", location.sweep)


def done_line(plan: Plan, runs: StoredRuns, elapsed: float, location: OutputLocation | None) -> str:
    """The one line printed when a call finishes: configs, runs, backend, time and where the files went."""
    where = f" -> {location.folder}" if location else ""
    count = (
        f"x {plan.runs} run(s)"
        if plan.stop_rule is None
        else f"{runs.measured()} run(s) in all, {plan.stop_rule.describe()}"
    )
    return (
        f"nsightx: {plan.function_name}: {len(plan.configs)} config(s) {count} on {plan.backend} in "
        f"{elapsed:.2f} s{where}"
    )


def stopped_line(
    function: str, error: BaseException, runs: int, location: OutputLocation | None, building: bool = False
) -> str:
    """The one line printed when a sweep stops early: how many runs were saved, where, and how to load them.

    Without ``output_prefix`` the runs were kept in memory only, so the line says they are lost; a stop while the
    result was being built (``building``: every run was measured, the build of a large result takes seconds) says
    that too, since nothing else would tell the user that the measurement itself had finished.

    Args:
        function: Name of the profiled function.
        error: What stopped it: ``KeyboardInterrupt``, SIGTERM (:class:`~nsightx._api.sigterm.Terminated`), an
            exception from the user's function or the backend, or an :class:`~nsightx.OutputError` (the raw
            file could not be written).
        runs: Measured runs stored (with ``location``: in the raw file).
        location: Where the call's files go; ``None`` without ``output_prefix``.
        building: Whether it stopped after the runs, while the result was built.
    """
    what = stop_cause(error)
    if location is None and building:
        return (
            f"nsightx: {function} {what} while its result was built, after all {runs} run(s) were measured; they "
            "were not saved anywhere (give output_prefix='out/' to keep the runs of a sweep that stops)"
        )
    if location is None:
        return (
            f"nsightx: {function} {what} after {runs} completed run(s); they were not saved "
            "(give output_prefix='out/' to keep the runs of a sweep that stops)"
        )
    raw = str(location.raw)
    load = f"load them with nsightx.load({raw!r})"
    if isinstance(error, OutputError):  # more runs may have completed than the file holds: count what it holds
        return f"nsightx: {function} {what}; {runs} run(s) saved in {raw}; {load}"
    return f"nsightx: {function} {what} after {runs} completed run(s), saved in {raw}; {load}"


def nothing_measured_line(function: str, error: BaseException, location: OutputLocation | None) -> str | None:
    """The line printed when Ctrl-C or SIGTERM stops a call with ``output_prefix`` before any run completed.

    Its raw file holds the sweep's header and no run; the interrupt's traceback says nothing of it, so the line
    says that nothing was measured (``nsightx.load`` of the file gives a result of no run). An exception from the
    function stops it silently there (its traceback says why; nothing was lost), as does a call without a file.
    """
    if location is None or not isinstance(error, (KeyboardInterrupt, Terminated)):
        return None
    return (
        f"nsightx: {function} {stop_cause(error)} before any run completed; nothing was measured "
        f"({location.raw} holds the sweep's plan and no run)"
    )


@overload
def kernel(_func: Callable[..., Any]) -> ProfiledFunction: ...
@overload
def kernel(
    _func: None = None, *, configs: Any = None, **options: Any
) -> Callable[[Callable[..., Any]], ProfiledFunction]: ...
def kernel(_func: Callable[..., Any] | None = None, *, configs: Any = None, **options: Any) -> Any:
    """Profile every annotated region of the decorated function over a sweep of configs.

    Usable bare (``@kernel``), empty (``@kernel()``) or with keyword options. Every option is validated
    here, at decoration time; a bad value raises an error deriving from ``NsightxError`` and
    ``ValueError``/``TypeError`` before anything runs. Two checks that need the function are made here but
    raised when the function is called, before any work, because nsight-python raises them there: what is
    wrong with decoration-time ``configs`` (empty, of different lengths, not fitting the parameters) and a
    ``derive_metric`` that cannot take the metrics and parameters. A module holding such a decorator imports.

    Args:
        _func: The function, when used bare.
        configs: Iterable of configs (tuples of positional values; scalars for one-parameter functions).
            May instead be given at call time (``f(configs=[...])``) or as one config (``f(2048)``).
        **options: ``runs`` (10), ``warmup`` (1), ``metrics``, ``derive_metric``, ``normalize_against``,
            ``combine_kernel_metrics``, ``ignore_kernel_list``, ``cache_control``, ``clock_control``,
            ``replay_mode``, ``thermal_mode``/``thermal_wait``/``thermal_cont``/``thermal_timeout``/
            ``thermal_device``, ``output_prefix``, ``output_csv``, ``verbosity``, ``info_collectors``,
            ``backend`` ("auto" or a registered name), ``device``, ``parallel_devices``, ``executor`` (a
            ``concurrent.futures.Executor`` or Dask ``distributed.Client``; also accepted at call time,
            ``f(configs=[...], executor=client)``), ``backend_options``.

    Returns:
        A callable returning :class:`ProfileResults` (or, used bare, that callable itself).

    Example:
        >>> import nsightx
        >>> @nsightx.analyze.kernel(configs=[(1000,), (2000,)], runs=3, backend="host",
        ...                         verbosity=nsightx.VerbosityLevel.SILENT)
        ... def build(n):
        ...     with nsightx.annotate("list"):
        ...         list(range(n))
        >>> build().to_dataframe()["NumRuns"].tolist()
        [3, 3]
    """
    unknown = sorted(set(options) - set(ProfileSpec.model_fields))
    if unknown:
        accepted = ["configs", *ProfileSpec.model_fields]
        hints = "".join(f" ({u!r}: {hint})" for u in unknown if (hint := did_you_mean(u, accepted)))
        raise ConfigError(f"unknown option(s) for analyze.kernel: {unknown}{hints}; accepted: {', '.join(accepted)}")
    spec = build_spec(**options)

    def decorate(fn: Callable[..., Any]) -> ProfiledFunction:
        if not callable(fn):
            raise ConfigError(f"analyze.kernel decorates a function, got {fn!r}")
        return ProfiledFunction(fn, spec, configs)

    return decorate(_func) if _func is not None else decorate
