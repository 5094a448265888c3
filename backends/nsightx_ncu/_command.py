"""The ncu command line, built as data: options, NVTX range names and the argument vector.

Everything here is pure (no process is started), so every option can be checked on a machine without a GPU.
The command is passed to :func:`subprocess.run` as a list, never through a shell: a metric, annotation or path
holding shell or quote characters stays one argument.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal
from urllib.parse import quote, unquote

from pydantic import Field, StrictStr, field_validator

from nsightx.ext import BackendOptions, ConfigError, ConfigTypeError, RegionId
from nsightx_ncu._reader import DOMAIN

__all__ = ["DOMAIN", "NcuOptions", "build_command", "check_metrics", "nvtx_filter", "parse_range_name", "range_name"]

# Printable ASCII punctuation kept as is in range names; '%', '|', '/' and '@' are escaped because they
# separate fields, NVTX filter levels and the domain.
_SAFE = " !\"#$&'()*+,-.:;<=>?[\\]^_`{}~"


_OWN_FLAGS = {
    "--replay-mode": "the decorator's replay_mode=",
    "--cache-control": "the decorator's cache_control=",
    "--clock-control": "the decorator's clock_control=",
    "--metrics": "the decorator's metrics=",
    "--set": "backend_options['ncu_set']",
    "--section": "backend_options['ncu_sections']",
    "--export": "output_prefix= (the report is kept there)",
    "-o": "output_prefix= (the report is kept there)",
    "--nvtx-include": "annotate() regions (nsightx filters on its own NVTX ranges)",
    "--nvtx": "nothing (nsightx turns NVTX on itself)",
    "--target-processes": "nothing (nsightx follows its worker process itself)",
}
"""ncu options :func:`build_command` sets itself, and what sets each instead (refused in ``ncu_extra_args``)."""


class NcuOptions(BackendOptions):
    """Options of the ncu backend, given as ``backend_options={...}`` on the decorator.

    Example:
        >>> NcuOptions.from_mapping({"ncu_set": "basic", "ncu_sections": ["SpeedOfLight"]}).ncu_set
        'basic'
    """

    ncu_set: str | None = Field(default=None, strict=True)
    """Section set to collect in addition to ``metrics`` (``--set``, e.g. ``"basic"``, ``"full"``)."""
    ncu_sections: tuple[StrictStr, ...] = ()
    """Sections to collect in addition to ``metrics`` (``--section``, e.g. ``"SpeedOfLight"``)."""
    ncu_extra_args: tuple[StrictStr, ...] = ()
    """Further ncu arguments, passed verbatim (each item one argument) before the application."""
    ncu_path: str | None = Field(default=None, strict=True)
    """Use this ncu binary instead of searching ``PATH``, ``NSIGHTX_NCU`` and the standard folders."""
    ncu_keep_report: bool = False
    """Keep the ``.ncu-rep`` and the log of a call without ``output_prefix`` in its temporary folder (named in
    ``environment["ncu_report"]``/``["ncu_log"]``); by default that folder is deleted at the end of the call, as
    nothing else is written without ``output_prefix``. Under ``output_prefix`` the report and log are always kept."""
    ncu_timeout_s: float | None = Field(default=None, gt=0)
    """Kill ncu (and the worker) after this many seconds; ``None`` waits for ever."""
    ncu_check_metrics: bool = True
    """Check ``metrics`` against the names the installed ncu lists for the GPU before anything runs (asked once
    per ncu version and GPU, then cached); ``False`` leaves the names to ncu."""
    ncu_nvtx_ranges: Literal["start_end", "push_pop"] = "start_end"
    """NVTX range kind marking regions. ``start_end`` (default): process-wide ranges, so kernels that any thread
    launches while a region is open are profiled (autograd's backward threads, a ``threading.Thread``), as the
    cupti backend counts them. ``push_pop``: per-thread ranges, counting only the kernels of the thread that opened
    the region (for a process whose other threads launch unrelated GPU work meanwhile)."""

    @field_validator("ncu_set")
    @classmethod
    def _check_set(cls, value: str | None) -> str | None:
        if value is not None and (not value.strip() or "\x00" in value):
            raise ValueError(f"ncu_set must be a set name such as 'basic' or 'full', got {value!r}")
        return value

    @field_validator("ncu_sections", "ncu_extra_args")
    @classmethod
    def _check_items(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for item in value:
            if not item.strip() or "\x00" in item:
                raise ValueError(f"items must be non-empty strings without NUL characters, got {item!r}")
        return value

    @field_validator("ncu_extra_args")
    @classmethod
    def _check_not_ours(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        """Refuse an extra argument that repeats an option nsightx sets itself.

        The result and its plan say which replay mode, cache and clock control, metrics, report and NVTX filter
        were used; a second value for one of them would leave it to ncu which one counts (the result could say
        ``cache_control="all"`` over a warm-cache measurement), so the option that sets it is named instead.
        """
        for item in value:
            flag = item.split("=", 1)[0]
            if flag in _OWN_FLAGS:
                raise ValueError(
                    f"ncu_extra_args must not repeat {flag!r}, which nsightx sets itself; "
                    f"use {_OWN_FLAGS[flag]} instead"
                )
        return value

    @classmethod
    def from_mapping(cls, options: Any) -> NcuOptions:
        """Validate ``backend_options`` for this backend.

        Args:
            options: The plan's ``backend_options`` mapping.

        Returns:
            The validated options.

        Raises:
            ConfigError: An unknown key, or a value of the wrong form; the message names the accepted keys.
        """
        data = dict(options or {})
        for key in ("ncu_sections", "ncu_extra_args"):
            value = data.get(key, [])
            if isinstance(value, str):
                raise ConfigTypeError(
                    f"backend_options[{key!r}] must be a list of strings, got the str {value!r}; write [{value!r}]"
                )
            if not isinstance(value, list | tuple):  # a set would pass ncu its arguments in no fixed order
                raise ConfigTypeError(
                    f"backend_options[{key!r}] must be a list of strings, got {type(value).__name__} {value!r}; "
                    "write a list, in the order ncu should receive them"
                )
        return cls.parse(data, "ncu")

    @property
    def deep(self) -> bool:
        """True when sets or sections are asked for: then every metric they collect goes into the result."""
        return self.ncu_set is not None or bool(self.ncu_sections)


def check_metrics(metrics: Sequence[str]) -> tuple[str, ...]:
    """Check metric names before they reach ncu's comma-separated ``--metrics`` list.

    Args:
        metrics: Metric names from the plan.

    Returns:
        The names, stripped.

    Raises:
        ConfigTypeError: ``metrics`` is a bare string.
        ConfigError: A name is empty or holds a comma or a NUL character.
    """
    if isinstance(metrics, str):
        raise ConfigTypeError(f"metrics must be a list of names, got the str {metrics!r}; write [{metrics!r}]")
    out = []
    for metric in metrics:
        name = metric.strip()
        if not name or "," in name or "\x00" in name:
            raise ConfigError(
                f"ncu metric name {metric!r} is not valid: it must be non-empty and hold no comma; "
                "list each metric separately (see `ncu --query-metrics`)"
            )
        out.append(name)
    return tuple(out)


def range_name(region: RegionId) -> str:
    """The NVTX range name that carries a region's identity.

    Example:
        >>> range_name(RegionId(annotation="mat/mul", config=1, run=0))
        'mat%2Fmul|config=1|run=0'
    """
    return f"{quote(region.annotation, safe=_SAFE)}|config={region.config}|run={region.run}"


def parse_range_name(name: str) -> RegionId | None:
    """Read a region identity back from an NVTX range name; ``None`` if it is not one of ours.

    Example:
        >>> parse_range_name("mat%2Fmul|config=1|run=0")
        RegionId(annotation='mat/mul', config=1, run=0)
    """
    parts = name.rsplit("|", 2)
    if len(parts) != 3 or not parts[1].startswith("config=") or not parts[2].startswith("run="):
        return None
    try:
        config = int(parts[1][len("config=") :])
        run = int(parts[2][len("run=") :])
    except ValueError:
        return None
    return RegionId(annotation=unquote(parts[0]), config=config, run=run)


def nvtx_filter(kind: str = "start_end") -> str:
    """The ``--nvtx-include`` expression selecting every range of the nsightx domain.

    In ncu's filter syntax an expression ending with ``/`` selects push/pop (per-thread) ranges, one without it
    start/end (process-wide) ranges; ``<domain>@`` picks the domain and ``regex:`` makes the range name a regular
    expression.

    Example:
        >>> nvtx_filter("start_end"), nvtx_filter("push_pop")
        ('regex:nsightx@.+', 'regex:nsightx@.+/')
    """
    return f"regex:{DOMAIN}@.+/" if kind == "push_pop" else f"regex:{DOMAIN}@.+"


def build_command(
    ncu: str | Path,
    *,
    report: str | Path,
    app: Sequence[str],
    metrics: Sequence[str],
    replay_mode: str,
    cache_control: str,
    clock_control: str,
    options: NcuOptions | None = None,
    verbose: bool = False,
) -> list[str]:
    """Build the ncu argument vector.

    Args:
        ncu: The ncu executable.
        report: Report file to write (ncu's ``--export``); should end in ``.ncu-rep``.
        app: The application's argument vector (the worker).
        metrics: Metric names for ``--metrics``.
        replay_mode: ``kernel``, ``range`` or ``application``.
        cache_control: ``all`` (flush caches before each replay pass) or ``none``.
        clock_control: ``none`` (leave clocks alone) or ``base`` (lock them to base).

        The three come resolved from the plan: validated once by the profile spec, checked against the
        backend's capabilities and defaulted by the core when it planned the call; they are not checked again.
        options: Backend options (sets, sections, extra arguments, NVTX range kind).
        verbose: Add ``--verbose`` (debug verbosity).

    Returns:
        The command as a list of arguments, to run without a shell.

    Raises:
        ConfigError: No application, or a bad metric name.
    """
    opts = options or NcuOptions()
    if not app:
        raise ConfigError("build_command needs the application's argument vector")
    cmd = [
        str(ncu),
        "--export",
        str(report),
        "--force-overwrite",
        "--target-processes",
        "all",
        "--nvtx",
        "--nvtx-include",
        nvtx_filter(opts.ncu_nvtx_ranges),
        "--replay-mode",
        replay_mode,
        "--cache-control",
        cache_control,
        "--clock-control",
        clock_control,
    ]
    cmd += _collection_args(check_metrics(metrics), opts)
    if verbose:
        cmd.append("--verbose")
    cmd += list(opts.ncu_extra_args)
    cmd += [str(a) for a in app]
    return cmd


def _collection_args(names: Sequence[str], opts: NcuOptions) -> list[str]:
    """``--metrics``, ``--set`` and ``--section`` arguments: what ncu collects."""
    args = ["--metrics", ",".join(names)] if names else []
    if opts.ncu_set is not None:
        args += ["--set", opts.ncu_set]
    for section in opts.ncu_sections:
        args += ["--section", section]
    return args
