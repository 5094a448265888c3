"""Where a number came from: the facts every result records by default (commit, CPU, GPU, driver, versions).

A stored baseline is compared with a measurement made days later, maybe on another runner: the result must say
on which commit, CPU, GPU (name, UUID), driver, CUDA, Python, torch and nsightx it was measured, so that
``nsightx compare`` can name what differs between the two sides. Everything here is cheap and safe to run at every
call:

- the git commit of the current directory's work tree, asked of git (``git rev-parse HEAD``, about 2 ms, and a
  fork of the whole process) only when the files that name it changed since the last call (:func:`head_commit`),
  with git told to run no program the repository configures (:func:`git_state`; the ``env`` collector uses it);
- the CPU model from ``/proc/cpuinfo`` on Linux (``platform.processor()`` elsewhere), read once per process;
- the NVIDIA driver version from ``/proc/driver/nvidia/version``, and the GPU's UUID and the CUDA version only
  from a CUDA driver library that the process has already loaded (never loaded, never initialised here);
- torch's version and CUDA build only when torch is already imported (``sys.modules``): nothing is imported.
"""

from __future__ import annotations

import ctypes
import functools
import os
import platform
import re
import shutil
import stat
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from nsightx._cudainfo import loaded_libcuda

if TYPE_CHECKING:
    from nsightx._results.records import Scalar

PROVENANCE_KEYS = (
    "GitCommit",
    "CPU",
    "GPU",
    "GpuUuid",
    "Driver",
    "CudaDriver",
    "CudaRuntime",
    "python",
    "torch",
    "nsightx",
)
"""The environment keys that say where a number came from, in the order ``nsightx compare`` lists differences."""

DRIVER_FILE = Path("/proc/driver/nvidia/version")
"""Where the Linux NVIDIA kernel module states its version."""
_DRIVER_VERSION = re.compile(r"Kernel Module\b.*?\s(\d+\.\d+(?:\.\d+)*)\s")
_CPUINFO = Path("/proc/cpuinfo")

GIT_SAFE_CONFIG = ("core.fsmonitor=false", "core.hooksPath=/dev/null", "core.untrackedCache=false")
"""Settings given on git's command line (they win over the repository's ``.git/config``) so that git runs no
program the repository names: no file-system monitor hook (``git status`` runs ``core.fsmonitor`` at every call)
and no hook. The filters a repository configures are switched off by name, see :func:`_filter_overrides`."""


def add_provenance(environment: dict[str, Scalar], facts: Mapping[str, Scalar] | None = None) -> None:
    """Add to a call's ``environment`` the provenance facts it does not already hold (see the module docstring).

    Keys a backend set (``GPU``, its own ``CPU``) are kept. ``GpuUuid``, ``Driver`` and ``CudaDriver`` are added
    only when a GPU was measured (``GPU`` is set); ``torch`` and ``CudaRuntime`` only when torch is imported;
    ``GitCommit`` only inside a git work tree.

    Args:
        environment: The call's environment, completed in place.
        facts: What :func:`host_facts` answered for this call, when it was asked earlier (a deferred call asks
            while the GPU still works, see ``nsightx._api.callfacts``); ``None`` asks now. The same keys are added
            in the same order either way.
    """
    merged = host_facts() if facts is None else dict(facts)
    if environment.get("GPU"):
        merged.update(gpu_facts(environment.get("Device")))
    for key, value in merged.items():
        if value is not None:
            environment.setdefault(key, value)


def host_facts() -> dict[str, Scalar]:
    """The provenance facts that do not depend on what a call measured: CPU, git commit, torch.

    ``CPU`` always; ``GitCommit`` inside a git work tree (:func:`head_commit` of the current directory);
    ``torch`` and ``CudaRuntime`` only when torch is imported. Values may be ``None`` (not added then).
    """
    facts: dict[str, Scalar] = {"CPU": cpu_model()}
    commit = head_commit()
    if commit:
        facts["GitCommit"] = commit
    torch = sys.modules.get("torch")
    if torch is not None:
        facts["torch"] = str(getattr(torch, "__version__", "") or "") or None
        cuda = getattr(getattr(torch, "version", None), "cuda", None)
        if isinstance(cuda, str):
            facts["CudaRuntime"] = cuda
    return facts


@functools.cache
def cpu_model() -> str:
    """The CPU's model name (``"AMD EPYC 7763 64-Core Processor"``), not merely its architecture.

    Linux: the first ``model name`` of ``/proc/cpuinfo``; elsewhere, or when the file has none (some ARM
    kernels), ``platform.processor()``, else ``platform.machine()``. Read once per process.
    """
    try:
        with _CPUINFO.open(encoding="utf-8", errors="replace") as f:
            for line in f:
                key, sep, value = line.partition(":")
                if sep and key.strip() == "model name" and value.strip():
                    return " ".join(value.split())
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def driver_version(path: Path | None = None) -> str | None:
    """The NVIDIA kernel module's version (``"570.86.15"``) from ``/proc``; ``None`` without one (or off Linux)."""
    try:
        text = (path or DRIVER_FILE).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    match = _DRIVER_VERSION.search(text)
    return match.group(1) if match else None


def gpu_facts(device: object) -> dict[str, Scalar]:
    """``GpuUuid``, ``Driver`` and ``CudaDriver`` of the measured GPU, from what costs nothing.

    Args:
        device: The result's ``Device`` entry: a CUDA ordinal (CUPTI, events) or ``"<ordinal>:<uuid>"`` (a call
            with ``device=``); anything else gives no UUID.
    """
    lib = loaded_libcuda()
    ordinal = isinstance(device, int) and not isinstance(device, bool)
    if ordinal and lib is not None and (lib, device) in _GPU_FACTS:
        return dict(_GPU_FACTS[lib, device])
    facts: dict[str, Scalar] = {"Driver": driver_version()}
    if isinstance(device, str) and ":" in device:
        facts["GpuUuid"] = device.partition(":")[2] or None
    elif ordinal and lib is not None:
        facts["GpuUuid"] = gpu_uuid(lib, device)  # type: ignore[arg-type]  # an int: ``ordinal``
    if lib is not None:
        version = ctypes.c_int()
        if lib.cuDriverGetVersion(ctypes.byref(version)) == 0:
            facts["CudaDriver"] = f"{version.value // 1000}.{version.value % 1000 // 10}"
    if ordinal and lib is not None and facts.get("GpuUuid") and len(_GPU_FACTS) < _GPU_FACTS_MAX:
        _GPU_FACTS[lib, device] = dict(facts)  # the driver answered: it is initialised, see _GPU_FACTS
    return facts


_GPU_FACTS: dict[tuple[object, object], dict[str, Scalar]] = {}
""":func:`gpu_facts`' answers per (driver library, CUDA ordinal), kept once the driver gave the GPU's UUID.

The driver answers ``cuDeviceGetUuid`` only once initialised (``cuInit``), and an initialised driver holds the
NVIDIA device files open: the kernel module, its version and the library's CUDA version cannot change until the
process ends, nor can the GPU behind an ordinal. Reading ``/proc`` and asking the driver again cost ~60 us of
every profiled call (issue 35). Before that (no library, an uninitialised driver, a ``device=`` label) every call
asks again."""
_GPU_FACTS_MAX = 64


def gpu_uuid(lib: object, device: int) -> str | None:
    """``GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`` (nvidia-smi's form) of CUDA ordinal ``device``, or ``None``.

    Asks ``cuDeviceGetUuid_v2`` (``cuDeviceGetUuid`` on older drivers) of a driver library the process already
    initialised; an uninitialised driver or an unknown ordinal gives ``None``.
    """
    raw = (ctypes.c_ubyte * 16)()
    for name in ("cuDeviceGetUuid_v2", "cuDeviceGetUuid"):
        fn = getattr(lib, name, None)
        if fn is None:
            continue
        if fn(raw, ctypes.c_int(device)) != 0:
            return None
        h = bytes(raw).hex()
        return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"
    return None


def differences(baseline: Mapping[str, Scalar], new: Mapping[str, Scalar]) -> list[tuple[str, Scalar, Scalar]]:
    """``(key, baseline value, new value)`` for each :data:`PROVENANCE_KEYS` entry (then ``Host``) that differs."""
    return [
        (key, baseline.get(key), new.get(key))
        for key in (*PROVENANCE_KEYS, "Host")
        if baseline.get(key) != new.get(key)
    ]


# --- git -----------------------------------------------------------------------------------------------------------


def git_state(cwd: str | None = None, *, dirty: bool = True) -> tuple[str | None, bool | None]:
    """(commit, dirty) of the git work tree holding ``cwd`` (default: the current directory).

    git runs so that it never executes a program the repository configures (a cloned or unpacked folder can carry
    any ``.git/config``): :data:`GIT_SAFE_CONFIG`, every ``filter.<driver>`` emptied, ``--no-optional-locks`` (the
    user's index is not rewritten) and ``--ignore-submodules=all`` (no git is started inside a submodule). A
    repository that git itself refuses (owned by another user, see git's ``safe.directory``), a folder outside any
    work tree or a machine without git gives ``(None, None)``.

    Args:
        cwd: The folder to ask about.
        dirty: Also ask whether tracked files changed (``git status``, slower in a large tree); when false, the
            second value is ``None``.
    """
    git = shutil.which("git")
    if git is None:
        return None, None
    where = cwd or os.getcwd()
    head = _git(git, where, (), "rev-parse", "HEAD")
    if head is None or head.returncode != 0:
        return None, None
    commit = head.stdout.strip() or None
    if not dirty or commit is None:
        return commit, None
    filters = _filter_overrides(_git(git, where, (), "config", "-z", "--get-regexp", r"^filter\."))
    if filters is None:
        return commit, None
    status = _git(git, where, filters, "status", "--porcelain", "--untracked-files=no", "--ignore-submodules=all")
    changed = None if status is None or status.returncode != 0 else bool(status.stdout.strip())
    return commit, changed


_HEADS: dict[tuple[object, ...], str | None] = {}
"""``head_commit``'s answers, by what the commit depends on (:func:`_head_key`)."""
_HEADS_MAX = 64
_GIT_LOCATION_VARS = ("GIT_DIR", "GIT_WORK_TREE", "GIT_COMMON_DIR", "GIT_CEILING_DIRECTORIES", "GIT_INDEX_FILE")


def head_commit(cwd: str | None = None) -> str | None:
    """The commit checked out in the work tree holding ``cwd`` (default: the current directory), or ``None``.

    Every profiled call records it, so asking git each time put a subprocess (about 2 ms on a 2-core CI CPU, more
    to fork a process holding torch and a CUDA context) into every call. git is asked again only when what the
    answer depends on changed: the folder, the ``.git`` found above it, the content of its ``HEAD``, and the
    identity (inode, size, mtime) of the branch's ref file, or of ``packed-refs`` where the branch has no file of
    its own (a loose ref wins over ``packed-refs``, and a detached ``HEAD`` holds the commit itself: one ``stat``
    less a call), or of ``reftable/tables.list`` in a repository that keeps its refs in git's reftable format
    (its ``HEAD`` names a branch that has no file, ``refs/heads/.invalid``); git rewrites one of those files (by
    renaming a new one into place) whenever the checked-out commit changes. Where git is told
    where the repository is through the environment (``GIT_DIR`` and the like), git is asked every time.
    """
    where = cwd or os.getcwd()
    key = _head_key(where)
    if key is not None and key in _HEADS:
        return _HEADS[key]
    commit, _ = git_state(where, dirty=False)
    if key is not None:
        if len(_HEADS) >= _HEADS_MAX:
            _HEADS.clear()
        _HEADS[key] = commit
    return commit


def _head_key(where: str) -> tuple[object, ...] | None:
    """What the commit of ``where`` depends on, read from the file system (see :func:`head_commit`).

    ``None`` when it cannot be told without git (a ``GIT_*`` location variable is set, a file is unreadable).
    Plain ``os`` calls, not ``pathlib``: this runs at every profiled call (about 20 us here, against 60 with paths).
    """
    if any(os.environ.get(name) for name in _GIT_LOCATION_VARS):
        return None
    try:
        gitdir = _find_gitdir(os.path.abspath(where))
        if gitdir is None:
            return (where, None)
        head_file = os.path.join(gitdir, "HEAD")
        head = _read_known(head_file)
        if head is None:
            raise FileNotFoundError(head_file)
        common = gitdir
        pointer = _read_known(os.path.join(gitdir, "commondir"))
        if pointer is not None:
            common = os.path.join(gitdir, pointer.decode("utf-8").strip())
        if not head.startswith(b"ref: "):  # detached: HEAD holds the commit, in the key by its content
            return (where, gitdir, head)
        ref = _identity(os.path.join(common, head[5:].strip().decode("utf-8", "replace")))
        if ref is not None:  # a loose ref wins over packed-refs: that file cannot change the answer
            return (where, gitdir, head, ref)
        tables = _identity(os.path.join(common, "reftable", "tables.list"))
        if tables is not None:  # git's reftable format: every ref update renames a new tables.list into place
            return (where, gitdir, head, None, tables)
        return (where, gitdir, head, None, None, _identity(os.path.join(common, "packed-refs")))
    except (OSError, ValueError):
        return None


def _find_gitdir(folder: str) -> str | None:
    """The git directory of the work tree holding ``folder`` (``.git``, or where a ``.git`` file points)."""
    while True:
        dot = os.path.join(folder, ".git")
        try:
            st: os.stat_result | None = os.stat(dot)
        except FileNotFoundError:
            st = None
        mode = st.st_mode if st is not None else 0
        if stat.S_ISDIR(mode):
            return dot
        if stat.S_ISREG(mode):  # a worktree's ``.git`` file: read by the stat just made (no second one)
            text = (_read_known(dot, st) or b"").decode("utf-8").strip()
            if not text.startswith("gitdir:"):
                raise ValueError(f"{dot}: not a gitdir link")
            return os.path.join(folder, text[len("gitdir:") :].strip())
        parent = os.path.dirname(folder)
        if parent == folder:
            return None
        folder = parent


_KNOWN: dict[str, tuple[tuple[int, int, int], bytes]] = {}
"""The small git files :func:`_head_key` reads (``HEAD``, ``commondir``, a worktree's ``.git``), by path, with the
identity they had when read."""


def _read_known(path: str, st: os.stat_result | None = None) -> bytes | None:
    """The bytes of the regular file ``path`` (``None`` when there is none), kept while its identity is the same.

    It is read again only when its identity (inode, size, mtime) changed: one ``stat`` per call instead of an open
    and a read of each file. git replaces these files by renaming a new one into place (a new inode), so a changed
    content is a changed identity.

    ``st``: the file's ``stat`` when the caller made it already.
    """
    if st is None:
        try:
            st = os.stat(path)
        except FileNotFoundError:
            return None
    if not stat.S_ISREG(st.st_mode):
        return None
    identity = (st.st_ino, st.st_size, st.st_mtime_ns)
    known = _KNOWN.get(path)
    if known is not None and known[0] == identity:
        return known[1]
    with open(path, "rb") as f:
        data = f.read()
    if len(_KNOWN) >= _HEADS_MAX:
        _KNOWN.clear()
    _KNOWN[path] = (identity, data)
    return data


def _identity(path: str) -> tuple[int, int, int] | None:
    """(inode, size, mtime in ns) of ``path``, ``None`` when it does not exist."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)


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
