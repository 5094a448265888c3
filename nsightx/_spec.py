"""The profile spec: every ``analyze.kernel`` option, validated once, at decoration time.

Each check names the option, the bad value and what is accepted, and raises an error that derives from both
:class:`~nsightx.NsightxError` and ``ValueError``/``TypeError`` — before any measurement starts.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

from pydantic import ConfigDict, Field

from nsightx._adaptive import ADAPTIVE_OPTIONS, FixedRuns, build_rule, int_option
from nsightx._collectors import CollectorLike, as_collector
from nsightx._enums import CACHE_CONTROL, CLOCK_CONTROL, REPLAY_MODES, THERMAL_MODES, Tool, VerbosityLevel
from nsightx._errors import ConfigError, ConfigTypeError
from nsightx._model import Frozen


class ProfileSpec(Frozen):
    """The validated options of one ``@analyze.kernel`` decoration."""

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)

    runs: int | Literal["auto"] = 10
    """Measured runs per config, or ``"auto"``: run until the CI is tight enough (see ``nsightx._adaptive``)."""
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
    backend_options: Mapping[str, Any] = {}
    """Backend-specific options, passed through to the backend."""


_THEIR_CHOICE_SENTENCE = {
    "cache_control": "cache_control must be 'none', or 'all'",
    "clock_control": "clock_control must be 'none', or 'base'",
    "replay_mode": "replay_mode must be 'kernel', or 'range'",
}
"""nsight-python's sentence for a bad value of these options; nsightx's message starts with it."""


def _choice(option: str, value: object, accepted: Sequence[str], allow_none: bool = True) -> str | None:
    if value is None and allow_none:
        return None
    if isinstance(value, str) and value.lower() in accepted:
        return value.lower()
    names = " or ".join(repr(a) for a in accepted)
    their = _THEIR_CHOICE_SENTENCE.get(option)
    if their is None:
        raise ConfigError(f"invalid {option} {value!r}; expected {names}")
    raise ConfigError(f"{their}; got {value!r}. nsightx accepts {names}")


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

    The folder itself is created and checked for writing when the call starts, before the first run
    (:func:`nsightx._output.prepare_folder`): decorating must not touch the file system.
    """
    if value is None:
        return None
    hint = "give a folder ('out/') or a folder plus file-name prefix ('out/exp1_'), as a str or pathlib.Path"
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if not isinstance(value, str):
        raise ConfigTypeError(
            f"output_prefix must be a str or os.PathLike, got {type(value).__name__} {value!r}; {hint}"
        )
    if not value.strip() or "\0" in value:
        raise ConfigError(f"output_prefix {value!r} is not a usable path; {hint} ('./' for the current folder)")
    return value


def build_spec(**options: Any) -> ProfileSpec:
    """Validate decorator options into a :class:`ProfileSpec`, raising a clear error on the first bad one."""
    rule = build_rule(options.get("runs", 10), **{k: options.get(k) for k in ADAPTIVE_OPTIONS})
    metrics = _str_list("metrics", options.get("metrics"), "gpu__time_duration.sum")
    if metrics is not None:
        if not metrics or any(not m for m in metrics):
            raise ConfigError(f"metrics must name at least one non-empty metric, got {list(metrics)!r}")
        dupes = sorted({m for m in metrics if metrics.count(m) > 1})
        if dupes:
            raise ConfigError(f"metrics lists {dupes} more than once")
    thermal_wait = _int("thermal_wait", options.get("thermal_wait"), 0, allow_none=True)
    thermal_cont = _int("thermal_cont", options.get("thermal_cont"), 0, allow_none=True)
    cont = thermal_cont if thermal_cont is not None else 20
    wait = thermal_wait if thermal_wait is not None else 10
    if cont <= wait:
        raise ConfigError(
            f"Invalid thermal control parameters: thermal_cont ({cont}°C) must be greater than thermal_wait "
            f"({wait}°C). thermal_cont is the target thermal headroom after cooling, thermal_wait is the "
            "threshold that triggers cooling. (Left out, thermal_wait is 10 and thermal_cont 20.)"
        )
    verbosity = options.get("verbosity", VerbosityLevel.INFO)
    try:
        verbosity = VerbosityLevel(verbosity)
    except ValueError:
        raise ConfigError(
            f"invalid verbosity {verbosity!r}; expected one of {[v.name for v in VerbosityLevel]}"
        ) from None
    backend = options.get("backend")
    if isinstance(backend, Tool):
        backend = backend.value
    if backend is not None and (not isinstance(backend, str) or not backend):
        raise ConfigTypeError(f"backend must be a backend name or 'auto', got {backend!r}")
    device = options.get("device")
    if device is not None and (isinstance(device, bool) or not isinstance(device, int | str)):
        raise ConfigTypeError(f"device must be a CUDA ordinal (int) or a GPU UUID (str), got {device!r}")
    if isinstance(device, int) and device < 0:
        raise ConfigError(f"device must be >= 0, got {device}")
    parallel = _parallel_devices(options.get("parallel_devices"))
    if parallel is not None and device is not None:
        raise ConfigError("give device= or parallel_devices=, not both: parallel_devices pins one worker per device")
    combine = _callable("combine_kernel_metrics", options.get("combine_kernel_metrics"))
    _check_reducer(combine)
    normalize = options.get("normalize_against")
    if normalize is not None and (not isinstance(normalize, str) or not normalize):
        raise ConfigTypeError(f"normalize_against must be an annotation name (str), got {normalize!r}")
    output_prefix = _output_prefix(options.get("output_prefix"))
    output_csv = options.get("output_csv", False)
    if not isinstance(output_csv, bool):
        raise ConfigTypeError(f"output_csv must be True or False, got {output_csv!r}")
    collectors = options.get("info_collectors") or ()
    if isinstance(collectors, str) or not isinstance(collectors, Sequence):
        raise ConfigTypeError(f"info_collectors must be a list, got {type(collectors).__name__} {collectors!r}")
    checked: list[Any] = []
    for c in collectors:
        checked.append(c if isinstance(c, str) else as_collector(c))
    backend_options = options.get("backend_options") or {}
    if not isinstance(backend_options, Mapping):
        raise ConfigTypeError(f"backend_options must be a dict, got {type(backend_options).__name__}")
    bad_keys = [k for k in backend_options if not isinstance(k, str)]
    if bad_keys:
        raise ConfigTypeError(
            f"backend_options keys must be option names (str), got {bad_keys!r}; "
            "write backend_options={'name': value}"
        )
    return ProfileSpec(
        runs=rule.runs if isinstance(rule, FixedRuns) else "auto",
        **{k: options.get(k) for k in ADAPTIVE_OPTIONS},
        warmup=_int("warmup", options.get("warmup", 1), 0),  # type: ignore[arg-type]
        metrics=metrics,
        derive_metric=_callable("derive_metric", options.get("derive_metric")),
        normalize_against=normalize,
        verbosity=verbosity,
        ignore_kernel_list=_str_list("ignore_kernel_list", options.get("ignore_kernel_list"), "kernel") or (),
        combine_kernel_metrics=combine,
        cache_control=_choice("cache_control", options.get("cache_control"), CACHE_CONTROL),
        clock_control=_choice("clock_control", options.get("clock_control"), CLOCK_CONTROL),
        replay_mode=_choice("replay_mode", options.get("replay_mode"), REPLAY_MODES),
        thermal_mode=_choice("thermal_mode", options.get("thermal_mode", "auto"), THERMAL_MODES, False) or "auto",
        thermal_wait=thermal_wait,
        thermal_cont=thermal_cont,
        thermal_timeout=_int("thermal_timeout", options.get("thermal_timeout"), 1, allow_none=True),
        thermal_device=_int("thermal_device", options.get("thermal_device"), 0, allow_none=True),
        output_prefix=output_prefix,
        output_csv=output_csv,
        info_collectors=tuple(checked),
        backend=backend,
        device=device,
        parallel_devices=parallel,
        backend_options=dict(backend_options),
    )


def collector_objects(spec: ProfileSpec) -> list[CollectorLike]:
    """The spec's collector objects (set names are resolved later, against the plugin host)."""
    return [c for c in spec.info_collectors if not isinstance(c, str)]
