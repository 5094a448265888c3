"""The plan builder: a validated spec, one call's configs and the chosen backend become one :class:`Plan`.

This is the one place a :class:`~nsightx._run.plan.Plan` and its stored description
(:class:`~nsightx._results.schema.PlanInfo`) are made from a :class:`~nsightx._spec.options.ProfileSpec`, for a
one-process call and for each worker of a parallel one alike. It is also where the API layer resolves what the
run stage needs from the plugin host, so that nothing below it reads a global mid-run: the temperature source of
the thermal guard (:func:`temperature_source`) travels in the plan's :class:`~nsightx._run.thermal.ThermalSettings`.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from nsightx._results.output import OutputLocation
from nsightx._results.schema import PlanInfo
from nsightx._run.adaptive import ADAPTIVE_OPTIONS, AdaptiveRuns, StopRule, build_rule
from nsightx._run.collectors import CollectorLike
from nsightx._run.device import GpuInfo
from nsightx._run.plan import Plan
from nsightx._run.thermal import TemperatureSource, ThermalSettings
from nsightx._spec import configs as _configs
from nsightx._spec.configs import FunctionShape
from nsightx._spec.options import ProfileSpec
from nsightx._spec.select import Choice


class SourceHost(Protocol):
    """What :func:`temperature_source` asks of the plugin host."""

    def temperature_source(self, device: int | str | None) -> TemperatureSource | None:
        """The first temperature source a plugin offers for ``device``."""
        ...


_warned_no_source: set[str] = set()
"""Reasons already warned about (once per process each)."""


def temperature_source(
    host: SourceHost, settings: ThermalSettings, device: int | None, needs_gpu: bool = True
) -> TemperatureSource | None:
    """The temperature source the thermal guard of a call reads, from the plugins; ``None``: unguarded.

    Asked only when the guard is on (``thermal_mode`` other than ``"off"``) for a plan that measures a GPU. The
    device watched is ``thermal_device`` when given, else the profiled ``device``. When no plugin offers a source
    (or the one offered fails), a warning says so, once per process and reason.
    """
    if settings.mode == "off" or not needs_gpu:
        return None
    watched = settings.device if settings.device is not None else device
    reason = "no plugin offers a temperature source (the nvml plugin needs nvidia-ml-py and an NVIDIA driver)"
    try:
        source = host.temperature_source(watched)
    except Exception as e:  # a broken plugin must not stop the measurement
        source, reason = None, f"the temperature source failed: {type(e).__name__}: {e}"
    if source is None and reason not in _warned_no_source:
        _warned_no_source.add(reason)
        warnings.warn(
            f"Nsight Python Thermovision is not supported on this machine: thermal control is on but "
            f"{reason}; runs are not paused for cooling. "
            "Pass thermal_mode='off' to silence this.",
            RuntimeWarning,
            stacklevel=4,
        )
    return source


def build_plan(
    spec: ProfileSpec,
    *,
    fn: Callable[..., Any],
    name: str,
    shape: FunctionShape,
    configs: tuple[tuple[Any, ...], ...],
    choice: Choice,
    collectors: Sequence[CollectorLike],
    host: SourceHost,
    gpu: GpuInfo | None = None,
    location: OutputLocation | None = None,
) -> Plan:
    """The plan of one call of the profiled function ``fn``.

    Args:
        spec: The decorator's validated options.
        fn: The user's function.
        name: Its name, used in file names and the result.
        shape: Its parameters (configs are padded with their defaults).
        configs: The resolved configs.
        choice: The backend chosen, with the options resolved against its capabilities.
        collectors: Every info collector of the call.
        host: The plugin host, asked for the thermal guard's temperature source.
        gpu: The device measured (``device=``); ``None``: the current one.
        location: Where the call's files go; ``None`` keeps everything in memory.
    """
    rule = build_rule(spec.runs, **{k: getattr(spec, k) for k in ADAPTIVE_OPTIONS})
    needs_gpu = choice.backend.capabilities.needs_gpu
    device = gpu.ordinal if gpu is not None else None
    thermal = ThermalSettings(
        spec.thermal_mode, spec.thermal_wait, spec.thermal_cont, spec.thermal_timeout, spec.thermal_device
    )
    thermal = dataclasses.replace(thermal, source=temperature_source(host, thermal, device, needs_gpu))
    return Plan(
        function=_configs.make_caller(fn, shape),
        function_name=name,
        params=shape.names,
        configs=configs,
        runs=rule.max_runs,
        warmup=spec.warmup,
        metrics=choice.metrics,
        backend=choice.backend.name,
        cache_control=choice.cache_control,
        clock_control=choice.clock_control,
        replay_mode=choice.replay_mode,
        verbosity=spec.verbosity,
        output_dir=location.folder if location else None,
        output_tag=location.tag if location else name,
        output_stem=location.stem if location else "",
        device=device,
        collectors=tuple(collectors),
        thermal=thermal,
        backend_options=spec.backend_options,
        normalize_against=spec.normalize_against,
        needs_gpu=needs_gpu,
        stop_rule=_adaptive(rule, spec.ignore_kernel_list),
    )


def _adaptive(rule: StopRule, ignored: tuple[str, ...]) -> AdaptiveRuns | None:
    """The plan's adaptive rule, told to leave out ``ignore_kernel_list``'s kernels as the result does.

    ``None`` for a fixed count.
    """
    if not isinstance(rule, AdaptiveRuns):
        return None
    return dataclasses.replace(rule, ignore_kernels=frozenset(ignored)) if ignored else rule


_PRIMITIVES = (type(None), bool, int, float, str)
_last_info: tuple[ProfileSpec, tuple[tuple[Any, ...], ...], tuple[Any, ...], PlanInfo] | None = None
"""The last :func:`plan_info` answer, with the spec and configs objects it was made of and the plan's other fields."""


def plan_info(plan: Plan, spec: ProfileSpec) -> PlanInfo:
    """The stored description of ``plan`` (written in the raw file's header and in the result).

    A decorated function called again and again makes the same description each call (its spec and its
    decoration-time configs are the same objects): validating it again (~10 us, most of it the configs' check)
    is skipped then. The last answer is reused only for the same spec and configs objects and equal other fields,
    and only when every config value is a plain ``None``, bool, int, float or str (a tuple of those cannot
    change; another object's ``repr``, which the description may hold, could).
    """
    global _last_info
    fields = (
        plan.function_name,
        plan.params,
        plan.runs,
        plan.warmup,
        plan.stop_rule is not None,
        plan.metrics,
        plan.backend,
        plan.cache_control,
        plan.clock_control,
        plan.replay_mode,
    )
    last = _last_info
    if last is not None and last[0] is spec and last[1] is plan.configs and last[2] == fields:
        return last[3]
    info = _plan_info(plan, spec)
    if all(type(v) in _PRIMITIVES for config in plan.configs for v in config):
        _last_info = (spec, plan.configs, fields, info)
    return info


def _plan_info(plan: Plan, spec: ProfileSpec) -> PlanInfo:
    """:func:`plan_info` made anew."""
    return PlanInfo(
        function=plan.function_name,
        params=plan.params,
        configs=plan.configs,
        runs=plan.runs,
        warmup=plan.warmup,
        adaptive=plan.stop_rule is not None,
        metrics=plan.metrics,
        backend=plan.backend,
        cache_control=plan.cache_control,
        clock_control=plan.clock_control,
        replay_mode=plan.replay_mode,
        normalize_against=spec.normalize_against,
        combine_kernel_metrics=_name(spec.combine_kernel_metrics),
        derive_metric=_name(spec.derive_metric),
        ignore_kernel_list=spec.ignore_kernel_list,
        device=spec.device,
    )


def _name(fn: Callable[..., Any] | None) -> str | None:
    if fn is None:
        return None
    return getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)
