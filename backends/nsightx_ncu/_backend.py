"""The ncu backend: the plan runs in a worker process under ``ncu``; the report is read back into records.

Flow of :meth:`NcuBackend.execute`:

1. Find ncu (:mod:`nsightx_ncu._locate`) and validate ``backend_options`` (:class:`~nsightx_ncu._command.NcuOptions`).
2. Hand the plan to nsightx's :class:`~nsightx.ext.RemoteCall` (the parent's half of running the loop in another
   process): it builds the thermal guard here, replaces the plan's collectors with proxies and pickles the plan
   into a private folder (mode 0700; a function of an importable module travels by reference, one of
   ``__main__`` or a notebook by value; a value that cannot travel is named before ncu starts), then listens on
   the channel there and writes the worker's spec with a random per-call secret.
3. Start ``ncu ... python -m nsightx_ncu._worker spec.json`` without a shell and serve it
   (:mod:`nsightx_ncu._supervise`): the worker (nsightx's child loop with an NVTX session,
   :mod:`nsightx_ncu._worker`) asks for collector values and the guard at each config and run; everything
   printed goes to the log, the user's own lines also to the user's stdout/stderr.
4. Read the report in a child process (``python -m nsightx_ncu._reader``), merge it with the worker's runs by NVTX
   identity, and write every run to the sink.
5. Raise :class:`~nsightx.ext.MeasurementError` (with the log tail, and the config and run that failed) if the
   worker or ncu failed, after the runs already measured were written; :class:`~nsightx.CounterPermissionError`
   when ncu may not read the performance counters.
6. In every case, delete the private folder, with the report and log unless ``output_prefix`` is set or
   ``ncu_keep_report`` asks to keep them (:func:`keeps_files`).

The user's process never loads Nsight Compute, so CUPTI (or anything else) can be used in it afterwards.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import shlex
import shutil
import stat
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from nsightx.columns import SERIALIZES_KERNELS
from nsightx.ext import (
    Availability,
    Backend,
    BackendUnavailableError,
    Capabilities,
    CounterPermissionError,
    MeasurementError,
    MetricErrorType,
    Plan,
    RemoteCall,
    RunRecords,
    Scalar,
    Sink,
    VerbosityLevel,
    child_env,
    metrics_error_message,
)
from nsightx_ncu import _locate, _metrics
from nsightx_ncu._command import NcuOptions, build_command, check_metrics
from nsightx_ncu._readchild import ReaderChild
from nsightx_ncu._reader import Action
from nsightx_ncu._report import MergeResult, environment, merge_runs
from nsightx_ncu._supervise import Outcome, supervise

LOG_TAIL_LINES = 40
"""Lines of the ncu log quoted in error messages."""

RANGE_UNSUPPORTED = "RecordStatusUnsupportedApi"

PROFILING_FAILED = "PROFILING FAILED \nErrors:\n"
"""How nsight-python's message for a failed ncu run starts (sic: the space before the line break)."""

PERMISSION_HELP = (
    "ncu may not read this GPU's performance counters (ERR_NVGPUCTRPERM): the NVIDIA driver lets only "
    "administrators use them. Either run as an administrator (root, or a user with CAP_SYS_ADMIN; from driver "
    "R565 CAP_PERFMON also works; in a container start it with --cap-add=SYS_ADMIN), or let every user profile: "
    "add `options nvidia NVreg_RestrictProfilingToAdminUsers=0` to a file in /etc/modprobe.d/, rebuild the "
    "initramfs and reboot (see https://developer.nvidia.com/ERR_NVGPUCTRPERM). To time kernels without counters, "
    "use backend='cupti' (or backend='auto' with the default time metric)."
)


@dataclasses.dataclass
class Artifacts:
    """Where one execution keeps its files."""

    private: Path
    """Private (0700) folder: the remote call's files (payload, spec, the worker's runs and error) and the
    report reader's output."""
    report: Path
    """The ``.ncu-rep`` file."""
    log: Path
    """ncu's and the worker's combined output."""

    @property
    def actions(self) -> Path:
        """The report reader's output."""
        return self.private / "actions.json"

    @property
    def has_report(self) -> bool:
        """Whether ncu wrote the report: a regular file (never a link) that is more than the empty claim."""
        try:
            st = os.lstat(self.report)
        except OSError:
            return False
        return stat.S_ISREG(st.st_mode) and st.st_size > 0


REPORT_KIND = "ncu-output"
"""Report and log names are nsight-python's: ``<output_prefix>ncu-output-<function>-<n>.ncu-rep`` and ``.log``."""


def _safe(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in text)


def _name_parts(plan: Plan) -> tuple[str, int]:
    """The function part of the report name and the first ``n`` to try.

    Under ``output_prefix`` both come from the call's tag ``<function>-<n>``, whose function part the core already
    made safe for file names, so the report shares the tag of the call's other files; otherwise they are the
    function's name (made safe here) and 0.
    """
    head, _, tail = plan.output_tag.rpartition("-")
    if plan.output_dir is not None and head and tail.isdigit():
        return head, int(tail)
    return _safe(plan.function_name or "profile"), 0


_CLAIM_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
"""Exclusive create that never goes through a symbolic link: a name held by anything (a dangling link too) fails."""


def _claim(path: Path) -> bool:
    """Create ``path`` empty with :data:`_CLAIM_FLAGS`; ``False`` when the name is taken."""
    try:
        os.close(os.open(path, _CLAIM_FLAGS, 0o666))
    except FileExistsError:
        return False
    return True


def reserve_name(folder: Path, base: str, first: int) -> tuple[Path, Path]:
    """Claim ``<base>-<n>.ncu-rep`` and ``.log`` for the first free ``n`` from ``first``; never reuse a name.

    The claim is the exclusive creation of both files, empty, which ncu's report and output then fill: two calls,
    in this process or another, can never get the same ``n``. A number whose report or log already exists, as a
    file, a folder or a symbolic link (dangling or not), is skipped: nsightx never writes through a link planted
    at a predictable name, and once claimed the names are this call's files (in a sticky folder such as ``/tmp``
    nobody else can replace them).

    Args:
        folder: Where the files go.
        base: The name before ``-<n>``, e.g. ``exp1_ncu-output-scale``.
        first: The first ``n`` tried.

    Returns:
        ``(report, log)`` paths.
    """
    n = first
    while True:
        report, log = folder / f"{base}-{n}.ncu-rep", folder / f"{base}-{n}.log"
        if _claim(report):
            if _claim(log):
                return report, log
            report.unlink()
        n += 1


def make_artifacts(plan: Plan) -> Artifacts:
    """Create the private folder and claim report and log names (in ``output_dir`` when one is set).

    The names are nsight-python's, ``<stem>ncu-output-<function>-<n>``, where ``<stem>`` is ``output_prefix``'s
    file part and ``<function>-<n>`` starts at the call's tag (see :func:`_name_parts`); ``n`` moves on to the
    next free one if a file of that name exists. Without ``output_dir`` the report and log go in the private
    folder, which the call deletes at its end unless ``ncu_keep_report`` is set.
    """
    private = Path(tempfile.mkdtemp(prefix="nsightx-ncu-"))
    os.chmod(private, 0o700)
    where = private
    if plan.output_dir is not None:
        where = Path(plan.output_dir)
        where.mkdir(parents=True, exist_ok=True)
    function, first = _name_parts(plan)
    report, log = reserve_name(where, f"{_safe(plan.output_stem)}{REPORT_KIND}-{function}", first)
    return Artifacts(private=private, report=report, log=log)


def log_tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    """The last ``lines`` lines of a log file (empty if it does not exist)."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


@functools.cache
def _cached_search(path_env: str, explicit_env: str) -> _locate.SearchResult:
    return _locate.find_ncu({"PATH": path_env, _locate.ENV_VAR: explicit_env})


class NcuBackend(Backend):
    """Nsight Compute in a worker process: any ncu metric, sets and sections, kernel/range/application replay.

    ``backend_options`` keys (all optional): ``ncu_set`` (``--set``), ``ncu_sections`` (``--section`` each),
    ``ncu_extra_args`` (verbatim ncu arguments), ``ncu_path`` (ncu binary to use), ``ncu_keep_report``,
    ``ncu_timeout_s`` and ``ncu_nvtx_ranges`` (``start_end``, the default, or ``push_pop``); see
    :class:`~nsightx_ncu._command.NcuOptions`.

    Example:
        >>> NcuBackend.name
        'ncu'
    """

    name: ClassVar[str] = "ncu"
    description: ClassVar[str] = "Nsight Compute in a worker process: any hardware counter, replay, cache/clock control"
    capabilities: ClassVar[Capabilities] = Capabilities(
        metrics=None,
        default_metrics=("gpu__time_duration.sum",),
        cache_control=frozenset({"all", "none"}),
        clock_control=frozenset({"none", "base"}),
        replay_modes=frozenset({"kernel", "range", "application"}),
        cost=100,
        auto=True,
    )

    @classmethod
    def availability(cls) -> Availability:
        """Whether ncu, a report reader, cloudpickle and nvtx are all present. Never raises."""
        try:
            result = _cached_search(os.environ.get("PATH", ""), os.environ.get(_locate.ENV_VAR, ""))
            if result.install is None:
                return Availability(
                    available=False,
                    reason=f"no usable Nsight Compute (ncu) found; tried:\n{result.describe()}",
                    remedy=f"install Nsight Compute, put ncu on PATH or set {_locate.ENV_VAR}",
                )
            missing = _locate.missing_worker_modules()
            if missing:
                return Availability(
                    available=False,
                    version=result.install.version_string,
                    reason=f"ncu {result.install.version_string} found but Python module(s) "
                    f"{', '.join(missing)} are missing",
                    remedy="pip install 'nsightx[ncu]'",
                )
            reader = _locate.reader_location(result.install)
            if reader is None:
                return Availability(
                    available=False,
                    version=result.install.version_string,
                    reason=f"ncu {result.install.version_string} at {result.install.path} has no "
                    "extras/python/ncu_report.py and the ncu-report package is not installed",
                    remedy="pip install ncu-report",
                )
            return Availability(
                available=True,
                version=result.install.version_string,
                reason=f"ncu {result.install.version_string} at {result.install.path}",
            )
        except Exception as e:  # availability() must never raise
            return Availability(available=False, reason=f"checking for ncu failed: {e!r}")

    def validate(self, plan: Plan) -> None:
        """Check ``backend_options`` and metric names before anything runs.

        Metric names other than the default are checked against the names the installed ncu lists for the GPU
        (see :mod:`nsightx_ncu._metrics`), unless ``ncu_check_metrics`` is ``False``.

        Raises:
            ConfigError: An unknown option, a bad value or a metric name ncu cannot take.
            UnknownMetricError: A metric name the installed ncu does not know (a ``ConfigError``); the message
                starts with nsight-python's ``Invalid value [...] for 'metrics' parameter ...`` and names near
                matches.
        """
        options = NcuOptions.from_mapping(plan.backend_options)
        metrics = check_metrics(plan.metrics)
        asked = [m for m in metrics if m not in self.capabilities.default_metrics]
        if options.ncu_check_metrics and asked:
            self._check_known_metrics(asked, options, plan)

    @staticmethod
    def _check_known_metrics(asked: list[str], options: NcuOptions, plan: Plan) -> None:
        try:
            if options.ncu_path:
                install: _locate.NcuInstall | None = _locate.require_ncu(explicit=options.ncu_path)
            else:
                install = _cached_search(os.environ.get("PATH", ""), os.environ.get(_locate.ENV_VAR, "")).install
        except BackendUnavailableError:
            return  # execute() says what is missing
        if install is None:
            return
        known, gpu = _metrics.load_known(install.path, install.version_string, plan.device or 0)
        if known is not None:
            _metrics.check_known(asked, known, ncu_version=install.version_string, gpu=gpu)

    def execute(self, plan: Plan, sink: Sink) -> Mapping[str, Scalar]:
        """Run ``plan`` under ncu in a worker and write each run's records to ``sink``.

        Returns:
            The environment: ``GPU``, ``ComputeClock`` and ``MemoryClock`` (rated, kHz), ``MeasuredComputeClock``
            (kHz, when ``gpc__cycles_elapsed.avg.per_second`` was collected), and the paths ``ncu_report`` and
            ``ncu_log`` plus ``ncu_version``, ``ncu_path`` and ``ncu_command``.

        Raises:
            BackendUnavailableError: No usable ncu, report reader, cloudpickle or nvtx.
            UnpicklableError: A value the function uses (a global, a closure variable, a config argument)
                cannot be sent to the worker; raised before ncu starts (see :class:`~nsightx.ext.RemoteCall`).
            CounterPermissionError: ncu may not read the performance counters (admin-only).
            MeasurementError: ncu or the worker failed (the message holds the log tail and the failed config
                and run; runs measured before the failure are already in ``sink``).
        """
        if RemoteCall.inside_child():
            raise MeasurementError(
                f"{plan.function_name} was called with backend='ncu' inside the ncu worker: the worker imported "
                "the module of the profiled function and that import itself starts a profiled call. Put the "
                'module\'s top-level calls under `if __name__ == "__main__":` (or define the function in '
                "another module than the one that runs the sweep)."
            )
        options = NcuOptions.from_mapping(plan.backend_options)
        metrics = check_metrics(plan.metrics or self.capabilities.default_metrics)
        if options.ncu_path:
            install = _locate.require_ncu(explicit=options.ncu_path)
        else:  # the search availability() made (one `ncu --version`) is reused; a miss is searched again
            found = _cached_search(os.environ.get("PATH", ""), os.environ.get(_locate.ENV_VAR, ""))
            install = found.install or _locate.require_ncu()
        missing = _locate.missing_worker_modules()
        if missing:
            raise BackendUnavailableError(
                f"the ncu backend needs the Python module(s) {', '.join(missing)}; pip install 'nsightx[ncu]'",
                backend=self.name,
            )
        reader = _locate.reader_location(install)
        if reader is None:
            raise BackendUnavailableError(
                f"no ncu report reader: {install.path} has no extras/python/ncu_report.py and the ncu-report "
                "package is not installed; pip install ncu-report",
                backend=self.name,
            )
        art = make_artifacts(plan)
        try:
            with ReaderChild(reader[1], child_env()) as child:  # starts up while ncu profiles
                env = self._execute(plan, sink, options, metrics, install, child, art)
        finally:
            self._cleanup(art, options, plan)
        if not art.has_report:
            env["ncu_report"] = None
        if not art.log.exists():
            env["ncu_log"] = None
        if plan.verbosity >= VerbosityLevel.INFO and env["ncu_report"] is not None:
            print(
                f"nsightx: {plan.function_name}: ncu report {env['ncu_report']}, log {env['ncu_log']}", file=sys.stderr
            )
        return env

    def _execute(
        self,
        plan: Plan,
        sink: Sink,
        options: NcuOptions,
        metrics: tuple[str, ...],
        install: _locate.NcuInstall,
        child: ReaderChild,
        art: Artifacts,
    ) -> dict[str, Scalar]:
        call = RemoteCall(
            plan,
            art.private,
            where="the ncu worker",
            in_process="measure in process with backend='cupti' or 'events', which need no pickling",
            label=f"{plan.function_name} -> {art.report.name}",
            options={"nvtx_ranges": options.ncu_nvtx_ranges},
            changes={"metrics": metrics},
        )
        try:
            return self._measure(plan, sink, options, metrics, install, child, art, call)
        finally:
            call.cleanup()

    def _measure(
        self,
        plan: Plan,
        sink: Sink,
        options: NcuOptions,
        metrics: tuple[str, ...],
        install: _locate.NcuInstall,
        child: ReaderChild,
        art: Artifacts,
        call: RemoteCall,
    ) -> dict[str, Scalar]:
        """Run ncu over the worker, then read the report, merge it with the worker's runs and check the outcome."""
        debug = plan.verbosity >= VerbosityLevel.DEBUG
        outcome, cmd = _run_ncu(plan, art, options, metrics, install.path, call)
        if outcome.permission_denied:  # nothing was measured: keep the sink empty (auto may measure elsewhere)
            raise CounterPermissionError(f"{PERMISSION_HELP}\n{_log_note(art, plan, options)}", backend=self.name)
        worker_runs = call.runs()
        actions, read_problem = self._read_report(art, metrics, options.deep, child)
        merged = merge_runs(actions, worker_runs, metrics, deep=options.deep)
        missing = [m for m in metrics if actions and not any(m in a.metrics for a in actions)]
        for run in merged.runs:
            sink.write(run)
        env: dict[str, Scalar] = {
            **environment(actions),
            "ncu_version": install.version_string,
            "ncu_path": str(install.path),
            "ncu_report": str(art.report) if art.has_report else None,
            "ncu_log": str(art.log),
            "ncu_command": shlex.join(cmd),
            # Nsight Compute serialises every kernel launch it profiles: the ``serialized`` flag reads this key
            # and leaves ``launch_bound`` unjudged under replay.
            SERIALIZES_KERNELS: True,
        }
        self._check(plan, art, outcome, options, merged, read_problem, missing, call)
        if debug:
            print(log_tail(art.log, 200), file=sys.stderr)
        return env

    @staticmethod
    def _read_report(
        art: Artifacts, metrics: tuple[str, ...], deep: bool, child: ReaderChild
    ) -> tuple[list[Action], str]:
        """The report's actions (none when ncu wrote no report), and why it could not be read (or "")."""
        if not art.has_report:
            return [], ""
        try:
            return child.read(art.report, metrics, deep, art.actions), ""
        except MeasurementError as e:
            return [], str(e)

    def _check(
        self,
        plan: Plan,
        art: Artifacts,
        outcome: Outcome,
        options: NcuOptions,
        merged: MergeResult,
        read_problem: str,
        missing: list[str],
        call: RemoteCall,
    ) -> None:
        error = call.error()
        tail = log_tail(art.log)
        where = f"\n{_log_note(art, plan, options)}\n--- last lines of the log ---\n{tail}"
        done = [r for r in merged.runs if r.config >= 0]
        kept = f"{len(done)} measured run(s) completed and were kept"
        self._check_worker(plan, outcome, options, call, error, tail, done, kept, where)
        self._check_report(plan, art, merged, read_problem, missing, done, where)

    @staticmethod
    def _check_worker(
        plan: Plan,
        outcome: Outcome,
        options: NcuOptions,
        call: RemoteCall,
        error: dict[str, Any] | None,
        tail: str,
        done: list[RunRecords],
        kept: str,
        where: str,
    ) -> None:
        """Raise when ncu or the worker failed: the parent's own error, a time-out, a worker error or death."""
        if call.failure is not None:  # the parent's own error (a thermal timeout): as on other backends
            raise call.failure
        if outcome.timed_out:
            raise MeasurementError(
                f"ncu did not finish within ncu_timeout_s={options.ncu_timeout_s}s and was killed; {kept}.{where}"
            )
        if error is not None:
            failed_at = (
                "while loading the plan in the worker"
                if error.get("stage") == "setup"
                else f"at {_run_label(plan, error.get('config'), error.get('run'))}"
            )
            raise MeasurementError(
                f"{plan.function_name} failed in the ncu worker {failed_at}: {error.get('type')}: "
                f"{error.get('message')}; {kept} (the traceback is in the log).{where}"
            )
        if RANGE_UNSUPPORTED in tail or (plan.replay_mode == "range" and "invalid capture range" in tail):
            raise MeasurementError(
                "ncu range replay could not capture the annotated region (RecordStatusUnsupportedApi): the "
                "region calls a CUDA API that range replay does not support (cuBLAS and many torch operators "
                "do). Use replay_mode='kernel' (each kernel replayed alone) or replay_mode='application' "
                f"(the whole worker re-run per pass); {kept}.{where}"
            )
        died = call.died_at()
        if died is not None:
            raise MeasurementError(
                f"the ncu worker died at {_run_label(plan, *died)} without finishing it (ncu "
                f"exited with {_status(outcome.returncode)}): it was killed (by the out-of-memory killer, a "
                f"signal, or os._exit) or crashed inside the function; {kept}.{where}"
            )
        if outcome.returncode != 0:
            after = f"after config {done[-1].config} run {done[-1].run}" if done else "before the first run"
            raise MeasurementError(
                f"{PROFILING_FAILED}ncu exited with {_status(outcome.returncode)} {after} (an ncu error, an "
                f"invalid metric, or a crash of the worker); {kept}.{where}"
            )

    @staticmethod
    def _check_report(
        plan: Plan,
        art: Artifacts,
        merged: MergeResult,
        read_problem: str,
        missing: list[str],
        done: list[RunRecords],
        where: str,
    ) -> None:
        """Raise when the report is missing, unreadable, lacks a metric, or profiled no kernel of any region."""
        if read_problem:
            raise MeasurementError(f"{read_problem}{where}")
        if not art.has_report:
            raise MeasurementError(
                f"No NVIDIA Nsight Compute report found. ncu finished but wrote no report at {art.report}.{where}"
            )
        if missing:
            raise MeasurementError(
                f"{metrics_error_message(missing, MetricErrorType.INVALID)}\n"
                f"ncu returned no value for metric(s) {missing} in any of the {merged.profiled} profiled "
                "kernel(s): the name is not a metric ncu knows for this GPU. List the metrics with "
                f"`ncu --query-metrics` (base names; add a suffix such as .sum, .avg or .max).{where}"
            )
        regions = sum(len(r.regions) for r in done)
        if regions and merged.profiled == 0:
            raise MeasurementError(
                f"No kernels were profiled: ncu profiled no kernel inside the {regions} annotated region(s) of "
                f"{plan.function_name}: "
                "either no region launched GPU work or the NVTX ranges were not seen (is the nvtx package "
                f"working in the worker?).{where}"
            )

    @staticmethod
    def _cleanup(art: Artifacts, options: NcuOptions, plan: Plan) -> None:
        """Delete the call's private files; give back unused name claims; without keeping, the whole folder."""
        art.actions.unlink(missing_ok=True)  # the remote call removed its own files
        if not art.has_report:
            art.report.unlink(missing_ok=True)  # the empty claim: ncu wrote no report
            if art.log.exists() and art.log.stat().st_size == 0:
                art.log.unlink()  # the name was claimed but ncu never started: give it back
        if not keeps_files(plan, options):
            shutil.rmtree(art.private, ignore_errors=True)
        elif not any(art.private.iterdir()):
            art.private.rmdir()


def keeps_files(plan: Plan, options: NcuOptions) -> bool:
    """Whether the report and log outlive the call: always under ``output_prefix``, else only when asked.

    nsight-python leaves a temporary folder of reports behind at every call; nsightx writes nothing that lasts
    unless ``output_prefix`` is given or ``backend_options={"ncu_keep_report": True}`` asks to keep them (then they
    stay in the call's private temporary folder, named in ``environment["ncu_report"]``).
    """
    return plan.output_dir is not None or options.ncu_keep_report


def _log_note(art: Artifacts, plan: Plan, options: NcuOptions) -> str:
    """``ncu log: <path>`` for an error message, saying so when the log goes with the call's temporary folder."""
    if keeps_files(plan, options):
        return f"ncu log: {art.log}"
    return (
        f"ncu log: {art.log} (deleted at the end of the call with its temporary folder; give output_prefix or "
        "backend_options={'ncu_keep_report': True} to keep it)"
    )


def _run_ncu(
    plan: Plan,
    art: Artifacts,
    options: NcuOptions,
    metrics: tuple[str, ...],
    ncu: Path,
    call: RemoteCall,
) -> tuple[Outcome, list[str]]:
    """Run ncu over the worker, serving the call's channel, until it ends; return how it ended and its command."""
    debug = plan.verbosity >= VerbosityLevel.DEBUG
    cmd = build_command(
        ncu,
        report=art.report,
        app=call.command("nsightx_ncu._worker"),
        metrics=metrics,
        replay_mode=plan.replay_mode,
        cache_control=plan.cache_control,
        clock_control=plan.clock_control,
        options=options,
        verbose=debug,
    )
    if debug:
        print(f"nsightx: {shlex.join(cmd)}", file=sys.stderr)
    with call.serving():
        outcome = supervise(cmd, call=call, log=art.log, timeout_s=options.ncu_timeout_s, show_tool_lines=debug)
    return outcome, cmd


def _config_args(plan: Plan, config: Any) -> str:
    if isinstance(config, int) and 0 <= config < len(plan.configs):
        text = repr(plan.configs[config])
        return text if len(text) <= 200 else text[:197] + "..."
    return "?"


def _run_label(plan: Plan, config: Any, run: Any) -> str:
    """``config 1 (args (2,)), run 0`` (``warm-up run -1`` for a warm-up)."""
    kind = "warm-up run" if isinstance(run, int) and run < 0 else "run"
    return f"config {config} (args {_config_args(plan, config)}), {kind} {run}"


def _status(rc: int) -> str:
    """The exit status of ncu in words (a negative one is the signal that killed it)."""
    return f"signal {-rc}" if rc < 0 else f"status {rc}"
