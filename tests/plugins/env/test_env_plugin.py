"""The env plugin on the real host backend: versions, git state, ncu version, and that it imports nothing heavy."""

from __future__ import annotations

import importlib.metadata
import os
import platform
import shutil
import subprocess
import sys

import pytest
from nsightx_env import COLUMNS, _probe

import nsightx

SILENT = nsightx.VerbosityLevel.SILENT


def profile(**options):
    @nsightx.analyze.kernel(configs=[(1,)], runs=2, warmup=0, backend="host", verbosity=SILENT, **options)
    def f(n):
        with nsightx.annotate("a"):
            sum(range(100))

    return f()


@pytest.fixture
def fake_ncu(tmp_path, monkeypatch):
    """An `ncu` on PATH that prints what Nsight Compute 2025.3.1 prints for --version."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    ncu = bindir / "ncu"
    ncu.write_text(
        "#!/bin/sh\necho 'NVIDIA (R) Nsight Compute Command Line Profiler'\n"
        "echo 'Copyright (c) 2018-2025 NVIDIA Corporation'\n"
        "echo 'Version 2025.3.1.0 (build 36398880) (public-release)'\n"
    )
    ncu.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    _probe.ncu_version.cache_clear()
    yield ncu
    _probe.ncu_version.cache_clear()


@pytest.fixture
def git_repo(tmp_path, monkeypatch):
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    repo = tmp_path / "repo"
    repo.mkdir()

    def git(*args):
        return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout

    git("init", "-q")
    (repo / "a.txt").write_text("1")
    git("add", "a.txt")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "first")
    monkeypatch.chdir(repo)
    return repo, git


def test_env_is_off_by_default(plugin_host):
    assert not set(COLUMNS) & set(profile().to_dataframe().columns)


def test_env_columns_when_named(plugin_host, fake_ncu, git_repo):
    _, git = git_repo
    df = profile(info_collectors=["env"]).to_dataframe()
    row = df.iloc[0]
    assert row["PythonVersion"] == platform.python_version()
    assert row["NsightxVersion"] == nsightx.__version__
    assert row["NcuVersion"] == "2025.3.1.0"
    assert row["GitCommit"] == git("rev-parse", "HEAD").strip()
    assert bool(row["GitDirty"]) is False
    assert row["Platform"] == platform.platform()
    for column, dists in _probe.PACKAGES:
        expected = _probe.dist_version(dists)
        assert (row[column] if expected is not None else None) == expected
    raw = profile(info_collectors=["env"]).runs_dataframe()
    assert set(COLUMNS) <= set(raw.columns)  # ONCE values repeat on every per-run row


def test_dirty_tree_and_no_repo(plugin_host, git_repo, tmp_path, monkeypatch):
    repo, _ = git_repo
    (repo / "a.txt").write_text("2")
    assert bool(profile(info_collectors=["env"]).to_dataframe()["GitDirty"].iloc[0]) is True
    outside = tmp_path / "plain"
    outside.mkdir()
    monkeypatch.chdir(outside)
    assert _probe.git_state() == (None, None)


def test_environment_variable_enables_it_for_every_call(monkeypatch):
    from nsightx._pluginhost import plugins as _plugins

    host = _plugins.PluginHost(_plugins.LoaderSettings.from_env({"NSIGHTX_COLLECTORS": "env"})).load()
    monkeypatch.setattr(_plugins, "_default", host)
    assert "PythonVersion" in profile().to_dataframe().columns


def test_versions_come_from_metadata_without_importing(plugin_host, monkeypatch):
    heavy = ("torch", "triton", "jax")
    before = {m for m in heavy if m in sys.modules}
    profile(info_collectors=["env"])
    assert {m for m in heavy if m in sys.modules} == before


def test_dist_version_picks_first_installed():
    assert _probe.dist_version(["no-such-dist-xyz", "pluggy"]) == importlib.metadata.version("pluggy")
    assert _probe.dist_version(["no-such-dist-xyz"]) is None


def test_missing_ncu_is_none(monkeypatch, tmp_path):
    monkeypatch.setattr(_probe, "find_ncu", lambda: None)
    assert _probe.ncu_version(None) is None


def test_detached_head_digit_led_commit_and_no_git(plugin_host, git_repo, tmp_path, monkeypatch):
    """docs/plugins.md: GitCommit and GitDirty of the current directory's work tree, kept as written when saved."""
    repo, git = git_repo
    for i in range(64):  # a commit whose hash starts with three digits (about one in four does)
        head = git("rev-parse", "HEAD").strip()
        if head[:3].isdigit():
            break
        (repo / "a.txt").write_text(str(i))
        git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", f"c{i}")
    assert head[:3].isdigit()
    git("checkout", "-q", "--detach", head)
    (repo / "a.txt").write_text("changed")
    res = profile(info_collectors=["env"])
    assert (res.to_dataframe().iloc[0]["GitCommit"], bool(res.to_dataframe().iloc[0]["GitDirty"])) == (head, True)
    for name in ("r.json", "r.parquet"):
        row = nsightx.load(res.save(tmp_path / name)).to_dataframe().iloc[0]
        assert row["GitCommit"] == head and isinstance(row["GitCommit"], str)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))  # no git at all
    row = profile(info_collectors=["env"]).to_dataframe().iloc[0]
    assert row["GitCommit"] is None or row["GitCommit"] != row["GitCommit"]  # empty cell
