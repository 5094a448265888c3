"""Checking metric names against the installed ncu before anything runs.

ncu is asked once per ncu version and GPU (``ncu --query-metrics --query-metrics-mode all --devices <n>``, which
lists every metric name with every suffix), and the answer is kept in the user's cache folder
(``$XDG_CACHE_HOME/nsightx``, else ``~/.cache/nsightx``), one file per ncu version and GPU name. A cached file is
used only when it is a regular file of this user (never through a symbolic link) whose first line names the
format, the ncu version and the GPU it was made for, followed by metric names only; anything else is asked again
and replaced. A name is known
when ncu lists it, or when its base name is listed and every part of its suffix is a suffix ncu uses
(``.sum``, ``.avg``, ``.per_second``, ``.pct_of_peak_sustained_elapsed``, ...). Names ncu does not list but accepts
(device attributes, launch statistics, ``breakdown:``/``regex:`` forms) are not checked.

When the answer cannot be had (ncu fails or is slow, no GPU visible), nothing is refused: the sweep runs and
ncu's own checks apply. ``backend_options={"ncu_check_metrics": False}`` skips the check.
"""

from __future__ import annotations

import difflib
import functools
import os
import re
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from nsightx.ext import MetricErrorType, UnknownMetricError, metrics_error_message

QUERY_TIMEOUT_S = 120.0
"""Longest wait for ncu's metric listing."""

UNLISTED_PREFIXES: tuple[str, ...] = ("device__", "launch__", "profiler__", "numa__", "pmsampling__")
"""Metric families ncu accepts but does not list under ``--query-metrics``: never refused."""

_NAME = re.compile(r"^[A-Za-z0-9_]+__[A-Za-z0-9_.]+$")

CACHE_FORMAT = "nsightx ncu metric list v1"
"""Names the cache file's format in its first line (see :func:`cache_header`)."""
MIN_NAMES = 10
"""Fewer names than this is not a listing (ncu lists some 145,000 for an H200)."""
MAX_CACHE_BYTES = 64 << 20
"""A larger cache file is not one of ours (the H200's listing is 8 MB)."""
_READ_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
"""Open a cache file: never through a symbolic link, and without blocking on a FIFO put in its place."""


@dataclass(frozen=True)
class KnownMetrics:
    """The metric names one ncu knows for one GPU."""

    names: frozenset[str]
    """Every listed name, suffixes included (``dram__bytes_read.sum.per_second``)."""

    @functools.cached_property
    def bases(self) -> frozenset[str]:
        """Base names (before the first ``.``)."""
        return frozenset(n.split(".", 1)[0] for n in self.names)

    @functools.cached_property
    def suffix_parts(self) -> frozenset[str]:
        """Every dot-separated suffix part seen (``sum``, ``avg``, ``per_second``, ...)."""
        return frozenset(part for n in self.names for part in n.split(".")[1:])

    def knows(self, name: str) -> bool:
        """Whether ``name`` is a metric ncu accepts (unlisted families and prefixed forms count as known)."""
        if name in self.names or ":" in name or name.startswith(UNLISTED_PREFIXES):
            return True
        base, _, suffix = name.partition(".")
        parts = self.suffix_parts
        return base in self.bases and all(p in parts for p in suffix.split(".") if suffix)

    def near(self, name: str, n: int = 3) -> list[str]:
        """The closest known names (same family first), for a "did you mean" hint."""
        family = name.split("__", 1)[0]
        pool = [m for m in self.names if m.split("__", 1)[0] == family] or list(self.names)
        return difflib.get_close_matches(name, pool, n=n, cutoff=0.6)


def parse_listing(text: str) -> KnownMetrics:
    """Read ncu's ``--query-metrics`` table: the first column of each row that is a metric name."""
    names = set()
    for line in text.splitlines():
        first = line.split(maxsplit=1)[0] if line.strip() else ""
        if _NAME.match(first):
            names.add(first)
    return KnownMetrics(frozenset(names))


def query_command(ncu: str | Path, device: int) -> list[str]:
    """The ncu command that lists every metric name, suffixes included, for one device.

    Example:
        >>> query_command("ncu", 0)
        ['ncu', '--query-metrics', '--query-metrics-mode', 'all', '--devices', '0']
    """
    return [str(ncu), "--query-metrics", "--query-metrics-mode", "all", "--devices", str(device)]


def cache_dir() -> Path:
    """``$XDG_CACHE_HOME/nsightx`` (or ``~/.cache/nsightx``)."""
    root = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(root) / "nsightx"


def cache_header(ncu_version: str, gpu: str) -> str:
    """The first line of the cache file for one ncu version and GPU.

    Example:
        >>> cache_header("2025.3.1.0", "NVIDIA H200")
        '# nsightx ncu metric list v1; ncu 2025.3.1.0; gpu NVIDIA H200'
    """
    return f"# {CACHE_FORMAT}; ncu {ncu_version}; gpu {gpu}"


def cache_file(ncu_version: str, gpu: str) -> Path:
    """Where the listing of one ncu version for one GPU is kept."""
    slug = re.sub(r"[^A-Za-z0-9.-]+", "_", f"{ncu_version}--{gpu}").strip("_")
    return cache_dir() / "ncu-metrics" / f"{slug}.txt"


_gpu_names: dict[tuple[str | None, str | None, int], str | None] = {}
"""GPU names already asked in this process, by (nvidia-smi path, ``CUDA_VISIBLE_DEVICES``, ordinal): one
nvidia-smi run costs tens of milliseconds, and the GPUs of a machine do not change while a process runs."""


def gpu_name(device: int) -> str | None:
    """The name of CUDA device ``device`` (from nvidia-smi, once per process), or ``None`` when it cannot be told."""
    from nsightx.ext import visible_gpus

    key = (shutil.which("nvidia-smi"), os.environ.get("CUDA_VISIBLE_DEVICES"), device)
    if key in _gpu_names:
        return _gpu_names[key]
    try:
        devices = visible_gpus()
    except Exception:
        return None  # not remembered: a failure may be passing (nvidia-smi busy)
    name = devices[device].name if 0 <= device < len(devices) else None
    _gpu_names[key] = name
    return name


def forget() -> None:
    """Drop what this process remembers (GPU names, parsed listings): the next check asks again."""
    _gpu_names.clear()
    _parsed.clear()


def load_known(ncu: str | Path, ncu_version: str, device: int) -> tuple[KnownMetrics | None, str | None]:
    """The names ncu knows for ``device``: from the cache, else asked from ncu once and cached.

    A cache file that is a link, not this user's, or not made by this format for this ncu version and GPU is not
    trusted: ncu is asked and the file replaced.

    Returns:
        The names (``None`` when ncu could not be asked: the check is then skipped) and the GPU's name (``None``
        when it cannot be told; the answer is then used but not cached).
    """
    gpu = gpu_name(device)
    path = cache_file(ncu_version, gpu) if gpu else None
    header = cache_header(ncu_version, gpu) if gpu else ""
    if path is not None:
        cached = _read_cached(path, header)
        if cached is not None:
            return cached, gpu
    try:
        out = subprocess.run(
            query_command(ncu, device),
            capture_output=True,
            text=True,
            timeout=QUERY_TIMEOUT_S,
            stdin=subprocess.DEVNULL,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None, gpu
    known = parse_listing(out.stdout)
    if out.returncode != 0 or len(known.names) < MIN_NAMES:
        return None, gpu
    if path is not None:
        _write_atomically(path, "\n".join([header, *sorted(known.names)]) + "\n")
    return known, gpu


_parsed: dict[tuple[str, int, int, int], KnownMetrics] = {}
"""Cache files already read by this process, by (path, inode, mtime, size): a listing holds ~145,000 names (8 MB on
the H200), and parsing it again took 0.07-0.13 s per call (a synthetic list of that size on a 2-core VM), with
0.16 s more for the suffix sets of a name that is not listed verbatim; a file replaced on disk is read again."""


def _read_cached(path: Path, header: str) -> KnownMetrics | None:
    """The listing in one of our cache files, parsed once per process and file version; ``None`` if not usable.

    Usable: a regular file (opened without following a link), owned by this user, no larger than
    :data:`MAX_CACHE_BYTES`, whose first line is ``header`` and whose other lines are at least
    :data:`MIN_NAMES` metric names.
    """
    try:
        fd = os.open(path, _READ_FLAGS)
    except OSError:  # missing, or a symbolic link (ELOOP)
        return None
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fh.fileno())
        mine = not hasattr(os, "getuid") or st.st_uid == os.getuid()
        if not stat.S_ISREG(st.st_mode) or not mine or st.st_size > MAX_CACHE_BYTES:
            return None
        key = (str(path), st.st_ino, st.st_mtime_ns, st.st_size)
        known = _parsed.get(key)
        if known is not None:
            return known
        lines = fh.read(MAX_CACHE_BYTES + 1).decode("utf-8", errors="replace").splitlines()
    names = lines[1:]
    if not lines or lines[0] != header or len(names) < MIN_NAMES or not all(_NAME.match(n) for n in names):
        return None
    known = KnownMetrics(frozenset(names))
    _parsed.clear()  # keep one listing: a process profiles one GPU with one ncu, nearly always
    _parsed[key] = known
    return known


def _write_atomically(path: Path, text: str) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except OSError:
        pass  # an unwritable cache only costs asking again next time


def unknown_metrics(metrics: Iterable[str], known: KnownMetrics) -> list[str]:
    """The names in ``metrics`` that ``known`` does not accept, in order."""
    return [m for m in metrics if not known.knows(m)]


def check_known(metrics: Sequence[str], known: KnownMetrics, *, ncu_version: str, gpu: str | None) -> None:
    """Raise :class:`~nsightx.UnknownMetricError` naming every unknown metric, with near matches.

    The message starts with nsight-python's sentence for an invalid metric.

    Raises:
        UnknownMetricError: At least one name is unknown.
    """
    bad = unknown_metrics(metrics, known)
    if not bad:
        return
    suggestions = {m: known.near(m) for m in bad}
    lines = [
        f"  - {m!r}: " + (f"did you mean {' or '.join(repr(s) for s in near)}?" if near else "no close match")
        for m, near in suggestions.items()
    ]
    raise UnknownMetricError(
        f"{metrics_error_message(bad, MetricErrorType.INVALID)}\n"
        f"ncu {ncu_version} does not know {'this metric' if len(bad) == 1 else 'these metrics'} for "
        f"{gpu or 'this GPU'}:\n" + "\n".join(lines) + "\n"
        "Nothing was run. Fix the name(s): `ncu --query-metrics --query-metrics-mode all` lists every name with "
        "its suffixes. If ncu does accept a name, skip this check with backend_options={'ncu_check_metrics': "
        "False}.",
        metrics=bad,
        suggestions=suggestions,
    )
