"""What the env plugin looks up: package versions, CUDA, CUPTI and ncu versions, the git commit.

Nothing here imports torch, triton or JAX: versions come from installed distribution metadata. libcuda is
opened only to ask its version (no CUDA initialisation). ``ncu --version`` is run once per process; git is
asked at every call, since the working tree can change between calls, and is run so that it never executes a
program the repository's configuration names (see :func:`git_state`).
"""

from __future__ import annotations

import functools
import glob
import importlib.metadata
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from nsightx.ext import cuda_driver_version as ext_cuda_driver_version

PACKAGES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("TorchVersion", ("torch",)),
    ("TritonVersion", ("triton", "pytorch-triton")),
    ("JaxVersion", ("jax",)),
    ("CuptiPythonVersion", ("cupti-python",)),
)
"""Column, then the distributions that provide it (first one installed wins)."""
CUDA_RUNTIME_DISTS = ("nvidia-cuda-runtime", "nvidia-cuda-runtime-cu13", "nvidia-cuda-runtime-cu12")
CUPTI_DISTS = ("nvidia-cuda-cupti", "nvidia-cuda-cupti-cu13", "nvidia-cuda-cupti-cu12")
NCU_GLOBS = ("/usr/local/cuda/bin/ncu", "/usr/local/cuda-*/bin/ncu", "/opt/nvidia/nsight-compute/*/ncu")
_NCU_VERSION = re.compile(r"Version\s+(\d+(?:\.\d+)+)")


def dist_version(names: Sequence[str]) -> str | None:
    """Version of the first of ``names`` that is installed, else ``None``."""
    for name in names:
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def cuda_driver_version() -> str | None:
    """The CUDA version the driver supports (``cuDriverGetVersion``, e.g. ``"13.0"``); ``None`` without one."""
    return ext_cuda_driver_version()


def cuda_runtime_version() -> str | None:
    """CUDA runtime: torch's build when torch is already imported, else the pip runtime package's version."""
    torch = sys.modules.get("torch")
    cuda = getattr(getattr(torch, "version", None), "cuda", None)
    if isinstance(cuda, str):
        return cuda
    return dist_version(CUDA_RUNTIME_DISTS)


def find_ncu() -> str | None:
    """``ncu`` on PATH, else ``NSIGHTX_NCU``, else the standard install folders (newest last wins)."""
    found = shutil.which("ncu")
    if found:
        return found
    env = os.environ.get("NSIGHTX_NCU")
    if env:
        path = Path(env)
        path = path / "ncu" if path.is_dir() else path
        if path.is_file():
            return str(path)
    for pattern in NCU_GLOBS:
        hits = sorted(glob.glob(pattern))
        if hits:
            return hits[-1]
    return None


@functools.cache
def ncu_version(path: str | None) -> str | None:
    """Version printed by ``ncu --version`` (e.g. ``"2025.3.1.0"``); ``None`` if absent or it fails."""
    if path is None:
        return None
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = _NCU_VERSION.search(out.stdout)
    return match.group(1) if match else None


GIT_SAFE_CONFIG = ("core.fsmonitor=false", "core.hooksPath=/dev/null", "core.untrackedCache=false")
"""Settings given on git's command line (they win over the repository's ``.git/config``) so that git runs no
program the repository names: no file-system monitor hook (``git status`` runs ``core.fsmonitor`` at every call)
and no hook. The filters a repository configures are switched off by name, see :func:`_filter_overrides`."""


def git_state(cwd: str | None = None) -> tuple[str | None, bool | None]:
    """(commit, dirty) of the git work tree holding ``cwd`` (default: the current directory).

    git runs so that it never executes a program the repository configures (a cloned or unpacked folder can carry
    any ``.git/config``): :data:`GIT_SAFE_CONFIG`, every ``filter.<driver>`` emptied, ``--no-optional-locks`` (the
    user's index is not rewritten) and ``--ignore-submodules=all`` (no git is started inside a submodule). A
    repository that git itself refuses (owned by another user, see git's ``safe.directory``) gives ``(None, None)``.
    """
    git = shutil.which("git")
    if git is None:
        return None, None
    where = cwd or os.getcwd()
    head = _git(git, where, (), "rev-parse", "HEAD")
    if head is None or head.returncode != 0:
        return None, None
    commit = head.stdout.strip()
    filters = _filter_overrides(_git(git, where, (), "config", "-z", "--get-regexp", r"^filter\."))
    if filters is None:
        return commit, None
    status = _git(git, where, filters, "status", "--porcelain", "--untracked-files=no", "--ignore-submodules=all")
    dirty = None if status is None or status.returncode != 0 else bool(status.stdout.strip())
    return commit, dirty


def _git(git: str, where: str, config: Sequence[str], *args: str) -> subprocess.CompletedProcess[str] | None:
    """Run one git command in ``where`` with :data:`GIT_SAFE_CONFIG` and ``config``; ``None`` if it cannot run."""
    settings = [part for item in (*GIT_SAFE_CONFIG, *config) for part in ("-c", item)]
    cmd = [git, "-C", where, *settings, "--no-optional-locks", *args]
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=10, check=False, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return None


def _filter_overrides(listing: subprocess.CompletedProcess[str] | None) -> list[str] | None:
    """``filter.<driver>.clean=`` (and ``smudge``, ``process``, ``required=false``) for every driver configured.

    ``git status`` runs a file's clean filter to compare its content with the index; an empty command is no
    filter. ``None`` when the drivers cannot be listed, or one has a name ``-c`` cannot carry (holding ``=``):
    then ``git status`` is not run at all.
    """
    if listing is None or listing.returncode not in (0, 1):  # 1: no filter configured
        return None
    drivers = set()
    for entry in listing.stdout.split("\0"):
        key = entry.split("\n", 1)[0]
        name = key[len("filter.") :].rpartition(".")[0]
        if not name:
            continue
        if "=" in name:
            return None
        drivers.add(name)
    return [
        f"filter.{name}.{setting}"
        for name in sorted(drivers)
        for setting in ("clean=", "smudge=", "process=", "required=false")
    ]
