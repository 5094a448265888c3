"""Where a number came from: every result records its commit, CPU model and versions; the GPU facts' parsers.

The commit and CPU come from real runs of the host backend (in a real git repository); the GPU's UUID and CUDA
version are asked of a double of the CUDA driver library (the library boundary), the driver version of a copy of
``/proc/driver/nvidia/version``'s text.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import nsightx
from nsightx._run import provenance


def _measure() -> nsightx.ProfileResults:
    @nsightx.analyze.kernel(configs=[(1,)], runs=2, backend="host", verbosity=nsightx.VerbosityLevel.SILENT)
    def f(n):
        with nsightx.annotate("a"):
            pass

    return f()


def _model_name() -> str | None:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return None
    names = [line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("model name")]
    return " ".join(names[0].split()) if names else None


def test_every_result_records_its_commit_cpu_and_versions(plugin_host, tmp_path, monkeypatch):
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    repo = tmp_path / "repo"
    repo.mkdir()

    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout

    git("init", "-q")
    (repo / "a.txt").write_text("1\n")
    git("add", "a.txt")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "first")
    monkeypatch.chdir(repo)
    env = _measure().environment
    assert env["GitCommit"] == git("rev-parse", "HEAD").strip()
    model = _model_name()
    assert env["CPU"] == (model or provenance.cpu_model()) and env["CPU"] not in ("x86_64", "aarch64", "")
    assert env["python"] and env["nsightx"] == nsightx.__version__
    assert ("torch" in env) == ("torch" in sys.modules)  # asked only of a torch already imported
    assert "GpuUuid" not in env and "Driver" not in env  # the host backend measured no GPU
    monkeypatch.chdir(tmp_path)  # outside any work tree: no commit, no error
    assert "GitCommit" not in _measure().environment


class _Driver:
    """The two CUDA driver entry points provenance calls, answering like libcuda (0 = CUDA_SUCCESS)."""

    def __init__(self, uuid: bytes, version: int) -> None:
        self.uuid, self.version, self.asked = uuid, version, []

    def cuDeviceGetUuid_v2(self, out, device):
        self.asked.append(device.value)
        if device.value != 0:
            return 101  # CUDA_ERROR_INVALID_DEVICE
        ctypes.memmove(out, self.uuid, 16)
        return 0

    def cuDriverGetVersion(self, out):
        out._obj.value = self.version
        return 0


def test_gpu_uuid_cuda_version_and_driver_version(tmp_path, monkeypatch):
    lib = _Driver(bytes.fromhex("8f1c2d3e4f5061728394a5b6c7d8e9f0"), 12080)
    assert provenance.gpu_uuid(lib, 0) == "GPU-8f1c2d3e-4f50-6172-8394-a5b6c7d8e9f0"
    assert provenance.gpu_uuid(lib, 3) is None
    version = tmp_path / "version"
    version.write_text(
        "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  570.86.15  Release Build  (dvs-builder@U16)  "
        "Thu Jan 23 2025\nGCC version:  gcc version 12.3.0\n"
    )
    assert provenance.driver_version(version) == "570.86.15"
    assert provenance.driver_version(tmp_path / "missing") is None
    monkeypatch.setattr(provenance, "loaded_libcuda", lambda: lib)
    monkeypatch.setattr(provenance, "DRIVER_FILE", version)
    facts = provenance.gpu_facts(0)
    assert facts == {"Driver": "570.86.15", "GpuUuid": "GPU-8f1c2d3e-4f50-6172-8394-a5b6c7d8e9f0", "CudaDriver": "12.8"}
    assert provenance.gpu_facts("1:GPU-abc")["GpuUuid"] == "GPU-abc"  # a call with device=: the label holds it
    env: dict = {"GPU": "NVIDIA H200", "Device": 0, "CPU": "kept"}
    provenance.add_provenance(env)
    assert env["GpuUuid"].startswith("GPU-8f1c") and env["CudaDriver"] == "12.8" and env["CPU"] == "kept"


def test_cpu_model_without_a_model_name_falls_back_to_the_platform(tmp_path, monkeypatch):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nCPU part\t: 0xd0c\n")
    monkeypatch.setattr(provenance, "_CPUINFO", cpuinfo)
    provenance.cpu_model.cache_clear()
    try:
        assert provenance.cpu_model() == (provenance.platform.processor() or provenance.platform.machine())
        cpuinfo.write_text("processor\t: 0\nmodel name\t: AMD   EPYC 7763 64-Core Processor\n")
        provenance.cpu_model.cache_clear()
        assert provenance.cpu_model() == "AMD EPYC 7763 64-Core Processor"
    finally:
        provenance.cpu_model.cache_clear()


def _logging_git(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Put a ``git`` first on PATH that appends each invocation to a log, then runs the real git."""
    real = shutil.which("git")
    assert real is not None
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "git.log"
    wrapper = bin_dir / "git"
    wrapper.write_text(f'#!/bin/sh\necho "$*" >> "{log}"\nexec "{real}" "$@"\n')
    wrapper.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ.get('PATH', '')}")
    return log


def test_the_commit_is_asked_of_git_only_when_head_moves(tmp_path, monkeypatch):
    """Every call records its commit; git (a subprocess, ms with CUDA loaded) runs only when HEAD changed."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    repo = tmp_path / "repo"
    repo.mkdir()
    real = shutil.which("git")

    def git(*args: str) -> str:  # the real git, not the logging one
        cmd = [str(real), "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args]
        return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.strip()

    git("init", "-q")
    for name in ("a", "b"):
        (repo / name).write_text(name)
        git("add", name)
        git("commit", "-q", "-m", name)
    log = _logging_git(tmp_path, monkeypatch)
    provenance._HEADS.clear()
    head = git("rev-parse", "HEAD")
    assert [provenance.head_commit(str(repo)) for _ in range(3)] == [head] * 3
    asked = lambda: log.read_text().count("rev-parse")  # noqa: E731
    assert asked() == 1
    (repo / "c").write_text("c")  # a new commit on the branch: the ref file is replaced
    git("add", "c")
    git("commit", "-q", "-m", "c")
    assert provenance.head_commit(str(repo)) == git("rev-parse", "HEAD") != head
    git("checkout", "-q", head)  # detached at an older commit: HEAD itself changes
    assert provenance.head_commit(str(repo)) == head
    git("checkout", "-q", "-")
    git("pack-refs", "--all")  # the branch now lives in packed-refs only
    assert provenance.head_commit(str(repo)) == git("rev-parse", "HEAD")
    git("worktree", "add", "-q", "--detach", str(tmp_path / "wt"), head)  # a .git file pointing elsewhere
    assert provenance.head_commit(str(tmp_path / "wt")) == head
    before = asked()
    assert provenance.head_commit(str(tmp_path / "wt")) == head and asked() == before
    monkeypatch.setenv("GIT_DIR", str(repo / ".git"))  # git told where the repository is: always asked
    provenance.head_commit(str(tmp_path))
    provenance.head_commit(str(tmp_path))
    assert asked() == before + 2


class _Initialising(_Driver):
    """A driver double that refuses the UUID until ``cuInit`` ran (``initialised``), as libcuda does."""

    def __init__(self) -> None:
        super().__init__(bytes.fromhex("00112233445566778899aabbccddeeff"), 13000)
        self.initialised = False

    def cuDeviceGetUuid_v2(self, out, device):
        if not self.initialised:
            self.asked.append(device.value)
            return 3  # CUDA_ERROR_NOT_INITIALIZED
        return super().cuDeviceGetUuid_v2(out, device)


def _driver_file(path: Path, version: str) -> Path:
    path.write_text(f"NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  {version}  Release Build\n")
    return path


def test_gpu_facts_are_asked_once_the_driver_is_initialised_and_again_before(tmp_path, monkeypatch):
    lib = _Initialising()
    version = _driver_file(tmp_path / "version", "570.1")
    monkeypatch.setattr(provenance, "loaded_libcuda", lambda: lib)
    monkeypatch.setattr(provenance, "DRIVER_FILE", version)
    monkeypatch.setattr(provenance, "_GPU_FACTS", {}, raising=False)  # a fresh cache
    assert provenance.gpu_facts(0) == {"Driver": "570.1", "GpuUuid": None, "CudaDriver": "13.0"}
    _driver_file(version, "580.2")  # not initialised: the module may still be replaced, so it is read again
    assert provenance.gpu_facts(0)["Driver"] == "580.2"
    lib.initialised = True
    first = provenance.gpu_facts(0)
    assert first == {"Driver": "580.2", "GpuUuid": "GPU-00112233-4455-6677-8899-aabbccddeeff", "CudaDriver": "13.0"}
    asked = len(lib.asked)
    first["Driver"] = "changed by the caller"
    _driver_file(version, "590.3")  # cannot happen while the driver is in use: the kept answer stands
    assert provenance.gpu_facts(0) == {**first, "Driver": "580.2"}
    assert len(lib.asked) == asked  # neither the driver nor /proc was asked again
    assert provenance.gpu_facts(1)["GpuUuid"] is None and provenance.gpu_facts(1)["Driver"] == "590.3"  # no GPU 1
    assert provenance.gpu_facts("1:GPU-abc") == {"Driver": "590.3", "GpuUuid": "GPU-abc", "CudaDriver": "13.0"}
    other = _Initialising()  # another library (a test's double, a process that reloaded it): asked anew
    monkeypatch.setattr(provenance, "loaded_libcuda", lambda: other)
    assert provenance.gpu_facts(0)["Driver"] == "590.3"


def test_a_worktree_git_file_is_stat_ed_once_per_call(tmp_path, monkeypatch):
    """In a worktree (``.git`` a file pointing elsewhere) a call stats that file once (not to find, then to read)."""
    git_exe = shutil.which("git")
    if git_exe is None:
        pytest.skip("git is not installed")
    repo = tmp_path / "repo"
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "a").write_text("a")
    subprocess.run([*git, "add", "a"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "a"], check=True)
    subprocess.run([*git, "worktree", "add", "-q", "--detach", str(tmp_path / "wt")], check=True)
    provenance._HEADS.clear()
    head = provenance.head_commit(str(tmp_path / "wt"))
    assert head is not None
    stats: list[str] = []
    real_stat = os.stat

    def counting_stat(path, *args, **kwargs):
        stats.append(str(path))
        return real_stat(path, *args, **kwargs)

    monkeypatch.setattr(os, "stat", counting_stat)
    assert provenance.head_commit(str(tmp_path / "wt")) == head
    assert stats.count(str(tmp_path / "wt" / ".git")) == 1


def test_a_reftable_repository_asks_git_again_when_its_tables_change(tmp_path, monkeypatch):
    """git's reftable format keeps every ref in ``reftable/`` and points ``HEAD`` at ``refs/heads/.invalid``: a new
    commit rewrites ``tables.list`` and nothing else the key read, so the commit was kept for good."""
    repo = tmp_path / "repo"
    tables = repo / ".git" / "reftable"
    tables.mkdir(parents=True)
    (repo / ".git" / "HEAD").write_text("ref: refs/heads/.invalid\n")
    listing = tables / "tables.list"
    listing.write_text("0x01-0x01-a.ref\n")
    commits = iter(["1" * 40, "2" * 40])
    asked: list[str] = []

    def git_state(where: str, dirty: bool = True) -> tuple[str | None, bool | None]:
        asked.append(where)
        return next(commits), None

    monkeypatch.setattr(provenance, "git_state", git_state)
    provenance._HEADS.clear()
    assert [provenance.head_commit(str(repo)) for _ in range(2)] == ["1" * 40] * 2 and len(asked) == 1
    update = tables / "tables.list.lock"  # what git does on a commit: a new list renamed into place
    update.write_text("0x01-0x01-a.ref\n0x02-0x02-b.ref\n")
    os.replace(update, listing)
    assert provenance.head_commit(str(repo)) == "2" * 40 and len(asked) == 2


def test_packed_refs_is_stat_ed_only_where_the_branch_has_no_loose_ref(tmp_path, monkeypatch):
    """A loose ref wins over packed-refs and a detached HEAD names its commit: neither needs packed-refs' stat."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    repo = tmp_path / "repo"
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "a").write_text("a")
    subprocess.run([*git, "add", "a"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "a"], check=True)
    packed = str(repo / ".git" / "packed-refs")
    stats: list[str] = []
    real_stat = os.stat

    def counting_stat(path, *args, **kwargs):
        stats.append(str(path))
        return real_stat(path, *args, **kwargs)

    def packed_stats() -> int:
        provenance.head_commit(str(repo))
        stats.clear()
        monkeypatch.setattr(os, "stat", counting_stat)
        head = provenance.head_commit(str(repo))
        monkeypatch.setattr(os, "stat", real_stat)
        assert (
            head
            == subprocess.run([*git, "rev-parse", "HEAD"], check=True, capture_output=True, text=True).stdout.strip()
        )
        return stats.count(packed)

    provenance._HEADS.clear()
    assert packed_stats() == 0  # the branch's loose ref
    subprocess.run([*git, "checkout", "-q", "--detach"], check=True)
    assert packed_stats() == 0  # detached
    subprocess.run([*git, "checkout", "-q", "-"], check=True)
    subprocess.run([*git, "pack-refs", "--all"], check=True)
    assert packed_stats() == 1  # the branch lives in packed-refs alone
