"""Choosing the backend for a call, and resolving the options each backend leaves to its defaults."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from nsightx._errors import BackendUnavailableError, ConfigError
from nsightx._pluginhost.plugins import PluginHost, available
from nsightx._run.backend import Backend, Capabilities, first_supported
from nsightx._spec.options import ProfileSpec


@dataclass(frozen=True)
class Choice:
    """The backend chosen for a call, with the options resolved against its capabilities."""

    backend: type[Backend]
    metrics: tuple[str, ...]
    cache_control: str
    clock_control: str
    replay_mode: str


MAX_NAMED = 3
"""How many metric names a message lists before it says how many more (a counter set can hold 26)."""


def _few(names: Sequence[str]) -> str:
    """``[a, b, c and 23 more]``: a list of names a person reads at a glance."""
    shown = ", ".join(names[:MAX_NAMED])
    more = f" and {len(names) - MAX_NAMED} more" if len(names) > MAX_NAMED else ""
    return f"[{shown}{more}]"


@dataclass(frozen=True)
class _Misfit:
    """One thing a backend cannot deliver: the option, what was asked, and what the backend offers instead."""

    option: str
    asked: str
    offers: str


def _misfits(spec: ProfileSpec, caps: Capabilities) -> list[_Misfit]:
    """What ``caps`` cannot deliver of what ``spec`` asks (empty when it can)."""
    why = []
    if spec.metrics is not None and caps.metrics is not None:
        missing = [m for m in spec.metrics if m not in caps.metrics]
        if missing:
            why.append(_Misfit("metrics", f"metrics {_few(missing)}", f"measures only {_few(sorted(caps.metrics))}"))
    for option, value, accepted in (
        ("cache_control", spec.cache_control, caps.cache_control),
        ("clock_control", spec.clock_control, caps.clock_control),
        ("replay_mode", spec.replay_mode, caps.replay_modes),
    ):
        if value is not None and value not in accepted:
            why.append(_Misfit(option, f"{option}={value!r}", f"accepts {option} {sorted(accepted)} only"))
    return why


def _supporting(host: PluginHost, spec: ProfileSpec) -> list[str]:
    return [n for n, cls in host.backends.items() if not _misfits(spec, cls.capabilities)]


def _one_line(text: str) -> str:
    return " ".join(part.strip() for part in text.splitlines() if part.strip())


def choose(
    spec: ProfileSpec, host: PluginHost, active: str | None, *, here: bool = True, metrics_option: str = "metrics"
) -> Choice:
    """Pick the backend: ``backend=``, else the active tool, else the cheapest available one that fits.

    "auto" considers only backends whose :attr:`Capabilities.auto` is true (the first-party ones, and third-party
    ones that opt in), lowest :attr:`Capabilities.cost` first. With ``here=False`` (a sweep measured by other
    machines' workers) a named backend need not be available in this process: each worker checks it.
    ``metrics_option`` is what the user called the metrics asked for (``"counters"`` for the counter call of
    ``counters=``), for the message.

    Raises:
        ConfigError: the named backend cannot deliver an option (the message names backends that can).
        BackendUnavailableError: the named backend cannot run here, or no backend fits ("auto").
    """
    name = spec.backend or active or "auto"
    host.load()
    if name != "auto":
        cls = host.backend(name)
        why = _misfits(spec, cls.capabilities)
        if why:
            others = ", ".join(_supporting(host, spec)) or "none"
            text = "; ".join(f"{m.asked} (it {m.offers})" for m in why)
            raise ConfigError(f"backend {name!r} cannot deliver {text}. Backends that can: {others}")
        avail = available(cls)  # never raising: a check that raises says the backend is unavailable, and why
        if here and not avail.available:
            raise BackendUnavailableError(
                f"backend {name!r} is not available: {avail.reason}"
                + (f". {avail.remedy}" if avail.remedy else "")
                + ". Run `nsightx doctor` for details.",
                backend=name,
            )
        return _resolve(cls, spec)
    for _, cls in host.cheapest_first():  # a costlier backend is not imported once a cheaper one fits
        if cls.capabilities.auto and not _misfits(spec, cls.capabilities) and available(cls).available:
            return _resolve(cls, spec)
    raise BackendUnavailableError(_nothing_fits(spec, host, metrics_option), backend="auto")


def _nothing_fits(spec: ProfileSpec, host: PluginHost, metrics_option: str) -> str:
    """Why "auto" found no backend: what was asked, which backends could deliver it and what they need.

    Each backend gets one short line: what was asked is said once, at the top, not once per backend.
    """
    asked: dict[str, str] = {}
    could, cannot = [], []
    for bname, avail in host.availability().items():
        cls = host.backends[bname]
        why = _misfits(spec, cls.capabilities)
        for m in why:
            asked.setdefault(m.option, _asked(spec, m, metrics_option))
        if why:
            cannot.append(f"  {bname}: {'; '.join(m.offers for m in why)}")
        elif not cls.capabilities.auto:
            could.append(f"  {bname}: takes no part in 'auto' (name it: backend={bname!r})")
        else:
            remedy = f"; {_one_line(avail.remedy)}" if avail.remedy else ""
            could.append(f"  {bname}: could, but is not available here: {_one_line(avail.reason)}{remedy}")
    head = f"no available backend can deliver {', '.join(asked.values())}" if asked else "no backend is available"
    return "\n".join([f"{head}:", *could, *cannot, "Run `nsightx doctor` to see what is missing."])


def _asked(spec: ProfileSpec, misfit: _Misfit, metrics_option: str) -> str:
    """What the call asked for ``misfit``'s option, in full (a backend's misfit names only what it lacks)."""
    if misfit.option == "metrics" and spec.metrics is not None:
        return f"{metrics_option}={_few(list(spec.metrics))}"
    return misfit.asked


def option_defaults(caps: Capabilities) -> dict[str, str]:
    """The one default of ``cache_control``, ``clock_control`` and ``replay_mode`` for a backend with ``caps``.

    The spec leaves these ``None`` when the decorator does not give them; this is the only place that says what
    ``None`` becomes, and backends (the ncu command line included) take the resolved value from the plan.
    """
    return {
        "cache_control": first_supported(("all", "none"), caps.cache_control),
        "clock_control": first_supported(("none", "base"), caps.clock_control),
        "replay_mode": first_supported(("kernel", "range", "application"), caps.replay_modes),
    }


def _resolve(cls: type[Backend], spec: ProfileSpec) -> Choice:
    caps = cls.capabilities
    defaults = option_defaults(caps)
    return Choice(
        backend=cls,
        metrics=spec.metrics if spec.metrics is not None else caps.default_metrics,
        cache_control=spec.cache_control or defaults["cache_control"],
        clock_control=spec.clock_control or defaults["clock_control"],
        replay_mode=spec.replay_mode or defaults["replay_mode"],
    )


def fallback(
    spec: ProfileSpec, host: PluginHost, active: str | None, failed: Choice
) -> tuple[Choice, list[str]] | None:
    """Another GPU backend taking part in "auto", for a call whose "auto" choice may not read the counters.

    Only for ``backend="auto"`` and only when no metric beyond a time metric was asked: ``metrics`` unset, or
    every metric one the other backend measures. Options that backend cannot honour (e.g. ``clock_control``)
    fall back to its defaults; they are returned so the caller can say so.

    Returns:
        ``(choice, dropped options)``, or ``None`` when there is no such backend.
    """
    if (spec.backend or active or "auto") != "auto":
        return None
    for name, avail in host.availability().items():
        cls = host.backends[name]
        caps = cls.capabilities
        if cls is failed.backend or not caps.auto or not avail.available or not caps.needs_gpu:
            continue
        if spec.metrics is not None and (caps.metrics is None or not set(spec.metrics) <= caps.metrics):
            continue
        dropped = {
            option: None
            for option, value, accepted in (
                ("cache_control", spec.cache_control, caps.cache_control),
                ("clock_control", spec.clock_control, caps.clock_control),
                ("replay_mode", spec.replay_mode, caps.replay_modes),
            )
            if value is not None and value not in accepted
        }
        said = [f"{option}={getattr(spec, option)!r}" for option in dropped]
        return _resolve(cls, spec.model_copy(update=dropped)), said
    return None
