"""Finding Nsight Compute (``ncu``), reading its version, and finding a report reader.

Search order: ``ncu`` on ``PATH``, then the ``NSIGHTX_NCU`` environment variable (the ``ncu`` binary or the
folder holding it), then the standard install folders (``/usr/local/cuda/bin``, ``/usr/local/cuda-*/bin``,
``/opt/nvidia/nsight-compute/*``, newest first). The first candidate whose version is at least
:data:`MIN_VERSION` wins; every candidate tried is listed in the error when none fits.
"""

from __future__ import annotations

import glob
import importlib.util
import os
import re
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from nsightx.ext import BackendUnavailableError

MIN_VERSION: tuple[int, int, int] = (2023, 1, 0)
"""Oldest ncu accepted: NVTX regex filters, ``--replay-mode range``/``application`` and cache/clock control."""

ENV_VAR = "NSIGHTX_NCU"
"""Environment variable naming the ``ncu`` binary (or its folder) to use when none is on ``PATH``."""

STANDARD_GLOBS: tuple[str, ...] = (
    "/usr/local/cuda/bin/ncu",
    "/usr/local/cuda-*/bin/ncu",
    "/opt/nvidia/nsight-compute/*/ncu",
)
"""Install locations tried after ``PATH`` and ``NSIGHTX_NCU``."""

_VERSION_RE = re.compile(r"Version\s+(\d+)\.(\d+)\.(\d+)(?:\.(\d+))?")


@dataclass(frozen=True)
class NcuInstall:
    """One usable ncu: where it is, which version, and where its Python report reader lives."""

    path: Path
    """Absolute path of the ``ncu`` executable."""
    version: tuple[int, ...]
    """Version numbers, e.g. ``(2025, 3, 1, 0)``."""

    @property
    def version_string(self) -> str:
        """The version as dotted text."""
        return ".".join(str(v) for v in self.version)

    @property
    def python_dir(self) -> Path | None:
        """The install's ``extras/python`` folder holding ``ncu_report.py``, when present."""
        real = self.path.resolve()
        for root in (real.parent, real.parent.parent):
            candidate = root / "extras" / "python"
            if (candidate / "ncu_report.py").is_file():
                return candidate
        # /usr/local/cuda/bin/ncu is often a wrapper script next to a sibling nsight-compute-<ver> folder.
        for sibling in sorted(real.parent.parent.glob("nsight-compute*"), key=self._sibling_rank, reverse=True):
            candidate = sibling / "extras" / "python"
            if (candidate / "ncu_report.py").is_file():
                return candidate
        dotted = ".".join(str(v) for v in self.version[:3])
        candidate = Path("/opt/nvidia/nsight-compute") / dotted / "extras" / "python"
        if (candidate / "ncu_report.py").is_file():
            return candidate
        return None

    def _sibling_rank(self, folder: Path) -> tuple[bool, tuple[int, ...]]:
        """Order of a sibling ``nsight-compute-<ver>`` folder: this ncu's own version first, then newest first.

        Compared as numbers, not as text: as text ``2025.10.0`` sorts below ``2025.3.1`` (``"1" < "3"``), and the
        reader of an older release would be taken for the newest.
        """
        numbers = tuple(int(n) for n in re.findall(r"\d+", folder.name))
        padded = (*numbers, 0, 0, 0)[:3]
        return (bool(numbers) and padded == (*self.version, 0, 0, 0)[:3], numbers)


@dataclass
class Attempt:
    """One candidate tried, and why it was or was not used."""

    source: str
    """Where the candidate came from (``PATH``, ``NSIGHTX_NCU``, a standard folder)."""
    path: str
    """The path tried."""
    problem: str = ""
    """Why it was rejected; empty when it was accepted."""


@dataclass
class SearchResult:
    """The outcome of :func:`find_ncu`: the install found (if any) and every attempt."""

    install: NcuInstall | None
    attempts: list[Attempt] = field(default_factory=list)

    def describe(self) -> str:
        """The attempts as indented lines, for error messages."""
        if not self.attempts:
            return "  (no candidate found)"
        lines = []
        for a in self.attempts:
            verdict = a.problem or "ok"
            lines.append(f"  {a.source}: {a.path} -> {verdict}")
        return "\n".join(lines)


def parse_version(text: str) -> tuple[int, ...] | None:
    """Read the version out of ``ncu --version`` output.

    Args:
        text: What ``ncu --version`` printed.

    Returns:
        The version numbers, or ``None`` when no version line is found.

    Example:
        >>> parse_version("Version 2025.3.1.0 (build 36398880) (public-release)")
        (2025, 3, 1, 0)
    """
    match = _VERSION_RE.search(text)
    if match is None:
        return None
    return tuple(int(g) for g in match.groups() if g is not None)


def _version_key(path: str) -> tuple[int, ...]:
    numbers = re.findall(r"\d+", path)
    return tuple(int(n) for n in numbers)


def candidates(environ: Mapping[str, str] | None = None) -> list[tuple[str, str]]:
    """List ``(source, path)`` candidates in search order, without running any of them.

    Args:
        environ: Environment to read ``PATH`` and ``NSIGHTX_NCU`` from (default ``os.environ``).

    Returns:
        Candidates in the order they are tried; duplicates (same resolved path) are dropped.
    """
    env = os.environ if environ is None else environ
    found: list[tuple[str, str]] = []
    on_path = shutil.which("ncu", path=env.get("PATH", ""))
    if on_path:
        found.append(("PATH", on_path))
    explicit = env.get(ENV_VAR, "").strip()
    if explicit:
        p = Path(explicit).expanduser()
        found.append((ENV_VAR, str(p / "ncu" if p.is_dir() else p)))
    for pattern in STANDARD_GLOBS:
        for match in sorted(glob.glob(pattern), key=_version_key, reverse=True):
            found.append(("standard folder", match))
    unique: list[tuple[str, str]] = []
    seen: set[str] = set()
    for source, path in found:
        key = os.path.realpath(path)
        if key not in seen:
            seen.add(key)
            unique.append((source, path))
    return unique


def probe(path: str, timeout_s: float = 60.0) -> tuple[tuple[int, ...] | None, str]:
    """Run ``<path> --version``.

    Args:
        path: The ncu executable to try.
        timeout_s: How long to wait for it.

    Returns:
        ``(version, problem)``: the version (``None`` when unreadable) and a problem description (empty if none).
    """
    if not os.path.isfile(path):
        return None, "no such file"
    if not os.access(path, os.X_OK):
        return None, "not executable"
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=timeout_s, check=False)
    except (OSError, subprocess.SubprocessError) as e:
        return None, f"could not run '{path} --version': {e}"
    version = parse_version(out.stdout + out.stderr)
    if version is None:
        tail = (out.stdout + out.stderr).strip().splitlines()[-1:] or ["(no output)"]
        return None, f"'--version' printed no version (exit {out.returncode}: {tail[0][:200]})"
    return version, ""


def find_ncu(environ: Mapping[str, str] | None = None, explicit: str | None = None) -> SearchResult:
    """Find the first usable ncu.

    Args:
        environ: Environment to search (default ``os.environ``).
        explicit: A path given through ``backend_options["ncu_path"]``; when set, only it is tried.

    Returns:
        The install (``None`` when no candidate fits) and every attempt made.
    """
    result = SearchResult(install=None)
    tries = [("ncu_path option", explicit)] if explicit else candidates(environ)
    for source, path in tries:
        version, problem = probe(path)
        if version is not None and version[:3] < MIN_VERSION:
            need = ".".join(str(v) for v in MIN_VERSION)
            problem = f"version {'.'.join(map(str, version))} is older than the {need} nsightx needs"
        result.attempts.append(Attempt(source, path, problem))
        if not problem and version is not None:
            result.install = NcuInstall(Path(path).absolute(), version)
            break
    return result


def require_ncu(environ: Mapping[str, str] | None = None, explicit: str | None = None) -> NcuInstall:
    """Like :func:`find_ncu` but raise when nothing usable is found.

    Raises:
        BackendUnavailableError: No ncu, or only ones too old; the message lists each path tried.
    """
    result = find_ncu(environ, explicit)
    if result.install is None:
        need = ".".join(str(v) for v in MIN_VERSION)
        raise BackendUnavailableError(
            f"Nsight Compute (ncu) {need} or newer was not found. Tried:\n{result.describe()}\n"
            f"Install Nsight Compute (it ships with the CUDA toolkit), put ncu on PATH, or set {ENV_VAR} "
            "to the ncu binary.",
            backend="ncu",
        )
    return result.install


def reader_location(install: NcuInstall | None) -> tuple[str, str | None] | None:
    """Say which ``ncu_report`` module would read reports, without importing it.

    Args:
        install: The ncu in use (its ``extras/python`` reader is preferred).

    Returns:
        ``("install", folder)`` for the install's own reader, ``("package", None)`` for the ``ncu-report``
        package, or ``None`` when neither exists.
    """
    if install is not None and install.python_dir is not None:
        return "install", str(install.python_dir)
    if importlib.util.find_spec("ncu_report") is not None:
        return "package", None
    return None


def missing_worker_modules(names: Sequence[str] = ("cloudpickle", "nvtx")) -> list[str]:
    """The Python modules the worker needs that this interpreter cannot import."""
    return [n for n in names if importlib.util.find_spec(n) is None]
