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
from nsightx.ext import git_state as git_state  # the env collector's GitCommit and GitDirty

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
