"""``nsightx doctor``: what this machine offers nsightx, and why a backend is unavailable."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import platform
import shutil
import sys

from nsightx._commands.clockcost import clock_line
from nsightx._cudainfo import NvidiaSmiError, query_gpus
from nsightx._pluginhost.plugins import PluginHost
from nsightx._version import __version__


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def _gpu_lines() -> list[str]:
    try:
        rows = query_gpus(("index", "name", "driver_version", "uuid"), timeout=20)
    except NvidiaSmiError as e:
        if e.missing:
            return ["GPU: none found (no nvidia-smi on PATH); GPU backends need an NVIDIA GPU and driver"]
        return [f"GPU: nvidia-smi failed: {e.detail[:200]}"]
    return [f"GPU {', '.join(row)}" for row in rows]


def report(host: PluginHost) -> str:
    """The doctor's text: environment, tools found, and each backend's availability with its reason."""
    lines = [
        f"nsightx {__version__} on Python {platform.python_version()} ({sys.executable})",
        f"platform: {platform.platform()}",
        clock_line(),
    ]
    lines += _gpu_lines()
    ncu = shutil.which("ncu")
    lines.append(f"ncu on PATH: {ncu or 'not found'}")
    for dist in (
        "cupti-python",
        "nvidia-cuda-cupti",
        "nvidia-cuda-cupti-cu12",
        "nvidia-ml-py",
        "torch",
        "cloudpickle",
        "matplotlib",
        "distributed",
        "dask-cuda",
    ):
        v = _version(dist)
        lines.append(f"{dist}: {v or 'not installed'}")
    lines.append("")
    lines.append("backends (in the order 'auto' prefers them):")
    any_gpu = False
    for name, avail in host.availability().items():
        cls = host.backends[name]
        mark = "yes" if avail.available else "no "
        version = f" [{avail.version}]" if avail.version else ""
        manual = "" if cls.capabilities.auto else f" (not in 'auto': name it, backend={name!r})"
        lines.append(f"  {mark} {name:<8}{version} {cls.description}{manual}")
        reason = "\n      ".join(part.strip() for part in avail.reason.splitlines())
        lines.append(f"      {reason}")
        if not avail.available and avail.remedy:
            lines.append(f"      fix: {avail.remedy}")
        any_gpu |= avail.available and cls.capabilities.needs_gpu
    if not any_gpu:
        lines.append("")
        lines.append("No GPU backend is available here: 'auto' uses the host clock (CPU time only).")
    for name, err in host.load_errors.items():
        lines.append(f"plugin {name!r} failed to load: {err}")
    return "\n".join(lines)
