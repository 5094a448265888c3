"""The profile spec: every ``analyze.kernel`` option, validated once, at decoration time, on one model.

Each option is a field of :class:`ProfileSpec` with its one default; its check is a validator on that field
(options that constrain each other: a model validator). :meth:`ProfileSpec.from_options` is the only way in:
each check names the option, the bad value and what is accepted, and raises an error that derives from both
:class:`~nsightx.NsightxError` and ``ValueError``/``TypeError``, before any measurement starts. pydantic's
``ValidationError`` never reaches the user: the validators raise our errors, and :meth:`~ProfileSpec.from_options`
re-raises the one of the first bad option in field declaration order, outside pydantic's frames and unchained.

pydantic collects only ``ValueError``/``AssertionError`` from a validator; any other exception escapes through
its frames at once, before the options declared earlier are checked. So every check is declared with
:func:`_option_check`, which carries a :class:`~nsightx.ConfigTypeError` through pydantic inside a ValueError.
"""

from __future__ import annotations

import functools
import inspect
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

from pydantic import ConfigDict, Field, ValidationError, ValidationInfo, field_validator, model_validator

from nsightx._enums import CACHE_CONTROL, CLOCK_CONTROL, REPLAY_MODES, THERMAL_MODES, Tool, VerbosityLevel
from nsightx._errors import ConfigError, ConfigTypeError, NsightxError
from nsightx._model import Frozen
from nsightx._remote.engines import check_alone, check_executor
from nsightx._run.adaptive import ADAPTIVE_OPTIONS, FixedRuns, build_rule, int_option
from nsightx._run.collectors import CollectorLike, as_collector
from nsightx._run.thermal import DEFAULT_CONT_C, DEFAULT_WAIT_C


class _Carried(ValueError):
    """A :class:`~nsightx.ConfigTypeError` wrapped so that pydantic collects it like a ValueError."""

    def __init__(self, error: ConfigTypeError) -> None:
        super().__init__(str(error))
        self.error = error


def _collected(check: Callable[..., Any]) -> Callable[..., Any]:
    """``check``, raising :class:`_Carried` for a ConfigTypeError; the signature stays ``check``'s for pydantic."""

    @functools.wraps(check)
    def carried(*args: Any) -> Any:
        try:
            return check(*args)
        except ConfigTypeError as e:
            raise _Carried(e) from None

    return carried


def _option_check(*fields: str) -> Callable[[Callable[..., Any]], Any]:
    """``field_validator(*fields, mode="before")`` on a classmethod whose ConfigTypeError pydantic collects.

    Collected, a wrong type is reported in field order beside the other bad options instead of escaping
    through pydantic's frames ahead of them.
    """

    def declare(check: Callable[..., Any]) -> Any:
        return field_validator(*fields, mode="before")(classmethod(_collected(check)))

    return declare


class ProfileSpec(Frozen):
    """The validated options of one ``@analyze.kernel`` decoration."""

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)

    runs: int | Literal["auto"] = 10
    """Measured runs per config, or ``"auto"``: run until the CI is tight enough (see ``nsightx._run.adaptive``)."""
    min_runs: int | None = None
    """``runs="auto"``: measured runs made before the stopping rule is consulted (default 5)."""
    max_runs: int | None = None
    """``runs="auto"``: most measured runs per config (default 100)."""
    target_ci_pct: float | None = None
    """``runs="auto"``: target half-width of the 95% CI of the mean, in percent of the mean (default 1.0)."""
    time_budget_s: float | None = None
    """``runs="auto"``: wall time allowed for one config's measured runs, in seconds (default 10)."""
    warmup: int = Field(default=1, ge=0)
    """Runs per config done first and discarded (lazy init, autotuning, cuBLAS heuristics)."""
    metrics: tuple[str, ...] | None = None
    """Metric names; ``None`` lets each backend report its natural time metric."""
    counters: tuple[str, ...] | None = None
    """Hardware counters joined to the times: measured over ``counter_runs`` runs by the backend "auto" picks for
    them (ncu) and joined per kernel (:func:`nsightx.join_results`); ``None``: none."""
    counter_runs: int = 2
    """With ``counters``: measured runs per config of the counter backend."""
    derive_metric: Callable[..., Any] | None = None
    """``f(*metric_values, *config_args)`` returning a value, ``(value, unit)`` or a mapping of those."""
    normalize_against: str | None = None
    """Annotation whose mean every row is divided by, per config and metric."""
    verbosity: VerbosityLevel = VerbosityLevel.INFO
    """How much to print."""
    ignore_kernel_list: tuple[str, ...] = ()
    """Kernel names (exact) to drop."""
    combine_kernel_metrics: Callable[[float, float], float] | None = None
    """Binary reducer applied when a region launches several kernels (``operator.add``, a lambda, ...)."""
    cache_control: str | None = None
    """``"all"`` flushes caches before every run, ``"none"`` measures warm; ``None``: the backend's default."""
    clock_control: str | None = None
    """``"base"`` locks clocks (ncu only), ``"none"`` leaves them alone; ``None``: ``"none"``."""
    replay_mode: str | None = None
    """ncu replay mode: ``kernel``, ``range`` or ``application``; ``None``: ``"kernel"``."""
    thermal_mode: str = "auto"
    """``auto``, ``manual`` or ``off``."""
    thermal_wait: int | None = None
    """Headroom (°C) to the slowdown temperature at or below which measuring pauses (default 10)."""
    thermal_cont: int | None = None
    """Headroom (°C) at which measuring resumes (default 20); must exceed ``thermal_wait``."""
    thermal_timeout: int | None = None
    """Seconds to wait for cooling (default 180)."""
    thermal_device: int | None = None
    """CUDA ordinal to watch; ``None``: the profiled device."""
    output_prefix: str | None = None
    """Folder/prefix for raw records, CSVs and backend artifacts; ``None`` keeps results in memory."""
    output_csv: bool = False
    """Write ``profiled_data-*.csv`` and ``processed_data-*.csv`` under ``output_prefix``."""
    info_collectors: tuple[Any, ...] = ()
    """Collectors (objects, ``(name, fn, scope)`` tuples, ``@collect`` functions) or registered set names."""
    backend: str | None = None
    """Registered backend name or ``"auto"``; ``None``: the active tool, else ``"auto"``."""
    device: int | str | None = None
    """CUDA device (index or UUID) to measure; ``None``: the current device."""
    parallel_devices: tuple[int | str, ...] | Literal["all"] | None = None
    """Spread the configs over one worker process per listed device (``"all"``: every visible GPU)."""
    executor: Any = None
    """Run each config as a task on this ``concurrent.futures.Executor`` or Dask ``distributed.Client``."""
    backend_options: Mapping[str, Any] = {}
    """Backend-specific options, passed through to the backend."""

    @classmethod
    def from_options(cls, options: Mapping[str, Any]) -> ProfileSpec:
        """Validate decorator options, raising our error for the first bad one (in field order).

        Raises:
            ConfigError: a value is out of range, or options conflict.
            ConfigTypeError: a value has the wrong type.
        """
        try:
            return cls.model_validate(dict(options))
        except ValidationError as e:
            error = _our_error(e)
        # Raised outside the except block, so the user's traceback holds no chained ValidationError.
        raise error

    @model_validator(mode="before")
    @classmethod
    @_collected
    def _runs_and_rule(cls, data: Any) -> Any:
        """``runs`` and the adaptive options together (an adaptive option needs ``runs="auto"``)."""
        if not isinstance(data, dict):
            return data
        runs = data.get("runs", cls.model_fields["runs"].default)
        rule = build_rule(runs, **{k: data.get(k) for k in ADAPTIVE_OPTIONS})
        return {**data, "runs": rule.runs if isinstance(rule, FixedRuns) else "auto"}

    @_option_check("warmup")
    def _warmup(cls, value: object) -> int | None:
        return _int("warmup", value, 0)

    @_option_check("thermal_wait", "thermal_cont", "thermal_device")
    def _celsius_or_ordinal(cls, value: object, info: ValidationInfo) -> int | None:
        return _int(info.field_name or "", value, 0, allow_none=True)

    @_option_check("thermal_timeout")
    def _timeout(cls, value: object) -> int | None:
        return _int("thermal_timeout", value, 1, allow_none=True)

    @_option_check("counters")
    def _counters(cls, value: object) -> tuple[str, ...] | None:
        return _str_list("counters", value, "dram__bytes.sum")

    @_option_check("counter_runs")
    def _counter_runs(cls, value: object) -> int | None:
        return _int("counter_runs", value, 1)

    @_option_check("metrics")
    def _metrics(cls, value: object) -> tuple[str, ...] | None:
        if isinstance(value, set | frozenset):  # derive_metric takes the values in this order: it must be known
            raise ConfigTypeError(
                f"metrics must be a list of str, got a {type(value).__name__} {sorted(map(str, value))!r}, which "
                "has no order (it changes from one process to the next, and derive_metric receives the metric "
                f"values in metrics' order); write metrics={sorted(map(str, value))!r} in the order you want"
            )
        metrics = _str_list("metrics", value, "gpu__time_duration.sum")
        if metrics is not None:
            if not metrics or any(not m for m in metrics):
                raise ConfigError(f"metrics must name at least one non-empty metric, got {list(metrics)!r}")
            dupes = sorted({m for m in metrics if metrics.count(m) > 1})
            if dupes:
                raise ConfigError(f"metrics lists {dupes} more than once")
        return metrics

    @_option_check("ignore_kernel_list")
    def _ignored(cls, value: object) -> tuple[str, ...]:
        return _str_list("ignore_kernel_list", value, "kernel") or ()

    @_option_check("derive_metric")
    def _derive(cls, value: object) -> Callable[..., Any] | None:
        return _callable("derive_metric", value)

    @_option_check("combine_kernel_metrics")
    def _combine(cls, value: object) -> Callable[..., Any] | None:
        combine = _callable("combine_kernel_metrics", value)
        _check_reducer(combine)
        return combine

    @_option_check("verbosity")
    def _verbosity(cls, value: object) -> VerbosityLevel:
        try:
            return VerbosityLevel(value)  # type: ignore[arg-type]  # a bad value raises, below
        except ValueError:
            raise ConfigError(
                f"invalid verbosity {value!r}; expected one of {[v.name for v in VerbosityLevel]}"
            ) from None

    @_option_check("cache_control", "clock_control", "replay_mode")
    def _vocabulary(cls, value: object, info: ValidationInfo) -> str | None:
        option = info.field_name or ""
        return _choice(option, value, _VOCABULARY[option])

    @_option_check("thermal_mode")
    def _thermal_mode(cls, value: object) -> str | None:
        return _choice("thermal_mode", value, THERMAL_MODES, allow_none=False)

    @_option_check("normalize_against")
    def _normalize(cls, value: object) -> str | None:
        if value is not None and (not isinstance(value, str) or not value):
            raise ConfigTypeError(f"normalize_against must be an annotation name (str), got {value!r}")
        return value

    @_option_check("output_prefix")
    def _prefix(cls, value: object) -> str | None:
        return _output_prefix(value)

    @_option_check("output_csv")
    def _csv(cls, value: object) -> bool:
        if not isinstance(value, bool):
            raise ConfigTypeError(f"output_csv must be True or False, got {value!r}")
        return value

    @_option_check("info_collectors")
    def _collectors(cls, value: object) -> tuple[Any, ...]:
        collectors = value or ()
        if isinstance(collectors, str) or not isinstance(collectors, Sequence):
            raise ConfigTypeError(f"info_collectors must be a list, got {type(collectors).__name__} {collectors!r}")
        return tuple(c if isinstance(c, str) else as_collector(c) for c in collectors)

    @_option_check("backend")
    def _backend(cls, value: object) -> str | None:
        if isinstance(value, Tool):
            value = value.value
        if value is not None and (not isinstance(value, str) or not value):
            raise ConfigTypeError(f"backend must be a backend name or 'auto', got {value!r}")
        return value

    @_option_check("device")
    def _device(cls, value: object) -> int | str | None:
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | str)):
            raise ConfigTypeError(f"device must be a CUDA ordinal (int) or a GPU UUID (str), got {value!r}")
        if isinstance(value, int) and value < 0:
            raise ConfigError(f"device must be >= 0, got {value}")
        return value

    @_option_check("parallel_devices")
    def _parallel(cls, value: object) -> tuple[int | str, ...] | Literal["all"] | None:
        return _parallel_devices(value)

    @_option_check("executor")
    def _executor(cls, value: object) -> object:
        return check_executor(value)

    @_option_check("backend_options")
    def _backend_options(cls, value: object) -> dict[str, Any]:
        options = value or {}
        if not isinstance(options, Mapping):
            raise ConfigTypeError(f"backend_options must be a dict, got {type(options).__name__}")
        bad_keys = [k for k in options if not isinstance(k, str)]
        if bad_keys:
            raise ConfigTypeError(
                f"backend_options keys must be option names (str), got {bad_keys!r}; "
                "write backend_options={'name': value}"
            )
        return dict(options)

    @model_validator(mode="after")
    def _together(self) -> ProfileSpec:
        """Options that constrain each other: the thermal band, and ``device`` with ``parallel_devices``."""
        cont = self.thermal_cont if self.thermal_cont is not None else DEFAULT_CONT_C
        wait = self.thermal_wait if self.thermal_wait is not None else DEFAULT_WAIT_C
        if cont <= wait:
            raise ConfigError(
                f"Invalid thermal control parameters: thermal_cont ({cont}°C) must be greater than thermal_wait "
                f"({wait}°C). thermal_cont is the target thermal headroom after cooling, thermal_wait is the "
                f"threshold that triggers cooling. (Left out, thermal_wait is {DEFAULT_WAIT_C} and thermal_cont "
                f"{DEFAULT_CONT_C}.)"
            )
        if self.parallel_devices is not None and self.device is not None:
            raise ConfigError(
                "give device= or parallel_devices=, not both: parallel_devices pins one worker per device"
            )
        check_alone(self.executor, self.device, self.parallel_devices)
        self._check_counters()
        return self

    def _check_counters(self) -> None:
        """Refuse ``counters=`` with the options a joined result cannot take yet (derive, parallel, executor)."""
        if self.counters is None:
            return
        clash = [o for o in ("derive_metric", "parallel_devices", "executor") if getattr(self, o) is not None]
        if clash:
            raise ConfigError(
                f"counters= cannot be combined with {' or '.join(clash)} yet: the joined result holds the time "
                "backend's and the counter backend's metrics side by side; measure the two separately and "
                "join them with nsightx.join_results"
            )


_VOCABULARY = {"cache_control": CACHE_CONTROL, "clock_control": CLOCK_CONTROL, "replay_mode": REPLAY_MODES}
"""Accepted values of the options whose default depends on the backend (see ``_select.option_defaults``)."""


def _our_error(e: ValidationError) -> Exception:
    """The error of the first bad option in field declaration order, or a ConfigError for pydantic's own check.

    pydantic lists its errors in the order it met them, which is not always the declaration order; a model
    validator's error (no field) comes first, a name that is no field last.
    """
    order = {name: i for i, name in enumerate(ProfileSpec.model_fields)}

    def position(err: Any) -> int:
        loc = err["loc"]
        return -1 if not loc else order.get(str(loc[0]), len(order))

    err = min(e.errors(include_url=False), key=position)
    original = err.get("ctx", {}).get("error")
    if isinstance(original, _Carried):
        return original.error
    if isinstance(original, NsightxError):
        return original
    option = ".".join(str(p) for p in err["loc"]) or "analyze.kernel"
    return ConfigError(f"invalid {option} {err.get('input')!r}: {err['msg']}")


_THEIR_CHOICE_SENTENCE = {
    "cache_control": ("cache_control must be 'none', or 'all'", ("none", "all")),
    "clock_control": ("clock_control must be 'none', or 'base'", ("none", "base")),
    "replay_mode": ("replay_mode must be 'kernel', or 'range'", ("kernel", "range")),
}
"""nsight-python's sentence for a bad value of these options, and the values it names.

nsightx's message starts with the sentence, then says only what it does not: the value given, and a value
nsightx accepts beyond those named (``replay_mode='application'``).
"""


def _choice(option: str, value: object, accepted: Sequence[str], allow_none: bool = True) -> str | None:
    if value is None and allow_none:
        return None
    if isinstance(value, str) and value.lower() in accepted:
        return value.lower()
    names = " or ".join(repr(a) for a in accepted)
    their = _THEIR_CHOICE_SENTENCE.get(option)
    if their is None:
        raise ConfigError(f"invalid {option} {value!r}; expected {names}")
    sentence, named = their
    more = [a for a in accepted if a not in named]
    also = f" (nsightx also accepts {' or '.join(repr(a) for a in more)})" if more else ""
    raise ConfigError(f"{sentence}; got {value!r}{also}")


def _int(option: str, value: object, minimum: int, allow_none: bool = False) -> int | None:
    if value is None and allow_none:
        return None
    return int_option(option, value, minimum)


def _str_list(option: str, value: object, example: str) -> tuple[str, ...] | None:
    if value is None:
        return None
    if isinstance(value, str):
        raise ConfigTypeError(
            f"{option} must be a list of str, got the str {value!r}; write {option}=[{value!r}] "
            f"(e.g. {option}=[{example!r}])"
        )
    if not isinstance(value, Sequence | set | frozenset | tuple):
        raise ConfigTypeError(f"{option} must be a list of str, got {type(value).__name__}")
    items = []
    for v in value:
        if not isinstance(v, str):
            raise ConfigTypeError(f"{option} entries must be str, got {type(v).__name__} {v!r}")
        items.append(v.strip())
    return tuple(items)


def _callable(option: str, value: object) -> Callable[..., Any] | None:
    if value is None:
        return None
    if not callable(value):
        their = _THEIR_CALLABLE_SENTENCE.get(option, f"{option} must be callable")
        raise ConfigTypeError(f"{their}; got {type(value).__name__} {value!r}")
    return value


_THEIR_CALLABLE_SENTENCE = {
    "derive_metric": "derive_metric must be a callable function",
    "combine_kernel_metrics": "Profiler error: combine_kernel_metrics must be a binary function",
}
"""nsight-python's sentence when these options are not callable (or, for the reducer, not binary)."""


def _check_reducer(fn: Callable[..., Any] | None) -> None:
    if fn is None:
        return
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return  # builtins such as max, operator.add on old Pythons: accepted, checked by calling
    try:
        sig.bind(0.0, 0.0)
    except TypeError:
        raise ConfigError(
            f"{_THEIR_CALLABLE_SENTENCE['combine_kernel_metrics']}: combine_kernel_metrics={fn!r} must accept two "
            f"values (a, b) and return one; its signature is {sig}"
        ) from None


def check_derive_arity(fn: Callable[..., Any] | None, n_metrics: int | None, n_params: int) -> None:
    """Check that ``derive_metric`` can take ``n_metrics`` values followed by ``n_params`` config arguments."""
    if fn is None or n_metrics is None:
        return
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return
    try:
        sig.bind(*([0.0] * (n_metrics + n_params)))
    except TypeError:
        raise ConfigError(
            f"derive_metric expects {n_metrics + n_params} parameters ({n_metrics} metric values + {n_params} "
            f"configs), but has {len(sig.parameters)} parameters. derive_metric {getattr(fn, '__name__', fn)!r} "
            f"must accept the metric values then the config arguments, positionally; its signature is {sig}"
        ) from None


def _parallel_devices(value: object) -> tuple[int | str, ...] | Literal["all"] | None:
    if value is None:
        return None
    if value == "all":
        return "all"
    if isinstance(value, bool) or isinstance(value, str) or not isinstance(value, Sequence):
        raise ConfigTypeError(f"parallel_devices must be 'all' or a list of device ordinals/UUIDs, got {value!r}")
    items = tuple(value)
    if not items:
        raise ConfigError("parallel_devices is empty; list at least one device, or use 'all'")
    for v in items:
        if isinstance(v, bool) or not isinstance(v, int | str) or (isinstance(v, int) and v < 0):
            raise ConfigError(f"parallel_devices entry {v!r} is not a device ordinal (int >= 0) or UUID (str)")
    if len(set(items)) != len(items):
        raise ConfigError(f"parallel_devices lists a device twice: {list(items)}")
    return items


def _output_prefix(value: object) -> str | None:
    """``output_prefix`` as a str: a ``str`` or an ``os.PathLike`` of str; anything else is refused.

    A leading ``~`` or ``~user`` is expanded (:func:`os.path.expanduser`), as every Unix tool does.

    An ``os.PathLike`` names a folder, created if missing (its str gets a trailing separator): ``pathlib`` drops
    a trailing ``/`` (``Path("out/")`` is ``Path("out")``), so a ``Path`` could not say "folder" otherwise, and
    ``output_prefix=Path("out")`` with no ``out`` yet wrote ``outraw_data-f-0.jsonl`` beside it. A str keeps
    nsight-python's reading: ``"out/"`` or an existing folder is a folder, anything else a file-name prefix.

    The folder itself is created and checked for writing when the call starts, before the first run
    (:func:`nsightx._results.output.prepare_folder`): decorating must not touch the file system.
    """
    if value is None:
        return None
    hint = "give a folder ('out/' or pathlib.Path('out')) or a folder plus file-name prefix as a str ('out/exp1_')"
    folder = isinstance(value, os.PathLike)
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if not isinstance(value, str):
        raise ConfigTypeError(
            f"output_prefix must be a str or os.PathLike, got {type(value).__name__} {value!r}; {hint}"
        )
    if not value.strip() or "\0" in value:
        raise ConfigError(f"output_prefix {value!r} is not a usable path; {hint} ('./' for the current folder)")
    value = os.path.expanduser(value)  # "~/out/" is the home folder's out/, as in a shell, not a folder named "~"
    return os.path.join(value, "") if folder else value  # a Path names a folder (see above)


def build_spec(**options: Any) -> ProfileSpec:
    """Validate decorator options into a :class:`ProfileSpec` (see :meth:`ProfileSpec.from_options`)."""
    return ProfileSpec.from_options(options)


def collector_objects(spec: ProfileSpec) -> list[CollectorLike]:
    """The spec's collector objects (set names are resolved later, against the plugin host)."""
    return [c for c in spec.info_collectors if not isinstance(c, str)]
