"""Finding ncu: PATH, then NSIGHTX_NCU, then standard folders; version checks; clear errors."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
from nsightx_ncu import _locate

from nsightx._errors import BackendUnavailableError


def fake_ncu(folder: Path, version: str | None, name: str = "ncu") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    said = f"Version {version} (build 1) (public-release)" if version else "something else"
    path.write_text(f"#!/bin/sh\necho 'NVIDIA (R) Nsight Compute Command Line Profiler'\necho '{said}'\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


@pytest.fixture(autouse=True)
def no_standard_folders(monkeypatch, tmp_path):
    monkeypatch.setattr(_locate, "STANDARD_GLOBS", (str(tmp_path / "std" / "*" / "ncu"),))


def test_parse_version():
    assert _locate.parse_version("Version 2025.3.1.0 (build 36398880)") == (2025, 3, 1, 0)
    assert _locate.parse_version("Version 2023.1.0") == (2023, 1, 0)
    assert _locate.parse_version("no version here") is None


def test_path_wins_when_new_enough(tmp_path):
    on_path = fake_ncu(tmp_path / "bin", "2025.3.1.0")
    explicit = fake_ncu(tmp_path / "env", "2026.1.0.0")
    result = _locate.find_ncu({"PATH": str(tmp_path / "bin"), "NSIGHTX_NCU": str(explicit)})
    assert result.install is not None and result.install.path == on_path
    assert result.install.version == (2025, 3, 1, 0) and result.install.version_string == "2025.3.1.0"


def test_env_var_used_when_path_ncu_is_too_old(tmp_path):
    fake_ncu(tmp_path / "bin", "2022.2.0.0")
    explicit = fake_ncu(tmp_path / "env", "2025.3.1.0")
    result = _locate.find_ncu({"PATH": str(tmp_path / "bin"), "NSIGHTX_NCU": str(tmp_path / "env")})
    assert result.install is not None and result.install.path == explicit
    assert "older than the 2023.1.0" in result.attempts[0].problem


def test_standard_folders_newest_first(tmp_path):
    fake_ncu(tmp_path / "std" / "2024.1.0", "2024.1.0.0")
    newest = fake_ncu(tmp_path / "std" / "2025.3.1", "2025.3.1.0")
    result = _locate.find_ncu({"PATH": ""})
    assert result.install is not None and result.install.path == newest
    assert [a.source for a in result.attempts] == ["standard folder"]


def test_missing_everywhere_error_lists_every_path_tried(tmp_path):
    fake_ncu(tmp_path / "bin", "2021.1.0.0")
    fake_ncu(tmp_path / "std" / "x", None)
    with pytest.raises(BackendUnavailableError) as info:
        _locate.require_ncu({"PATH": str(tmp_path / "bin"), "NSIGHTX_NCU": str(tmp_path / "nope" / "ncu")})
    text = str(info.value)
    assert str(tmp_path / "bin" / "ncu") in text and "2021.1.0.0 is older" in text
    assert str(tmp_path / "nope" / "ncu") in text and "no such file" in text
    assert "printed no version" in text
    assert "NSIGHTX_NCU" in text and info.value.backend == "ncu"


def test_nothing_found_at_all():
    with pytest.raises(BackendUnavailableError, match="no candidate found"):
        _locate.require_ncu({"PATH": ""})


def test_explicit_path_is_the_only_candidate(tmp_path):
    fake_ncu(tmp_path / "bin", "2025.3.1.0")
    explicit = fake_ncu(tmp_path / "mine", "2025.2.0.0")
    got = _locate.require_ncu({"PATH": str(tmp_path / "bin")}, explicit=str(explicit))
    assert got.path == explicit


def test_not_executable(tmp_path):
    path = tmp_path / "ncu"
    path.write_text("#!/bin/sh\n")
    assert _locate.probe(str(path)) == (None, "not executable")


def test_python_dir_found_next_to_the_install(tmp_path):
    root = tmp_path / "nsight-compute" / "2025.3.1"
    ncu = fake_ncu(root, "2025.3.1.0")
    (root / "extras" / "python").mkdir(parents=True)
    (root / "extras" / "python" / "ncu_report.py").write_text("")
    install = _locate.NcuInstall(ncu, (2025, 3, 1, 0))
    assert install.python_dir == root / "extras" / "python"
    assert _locate.reader_location(install) == ("install", str(root / "extras" / "python"))


def test_python_dir_of_a_cuda_toolkit_wrapper(tmp_path):
    cuda = tmp_path / "cuda-13.0"
    ncu = fake_ncu(cuda / "bin", "2025.3.1.0")
    extras = cuda / "nsight-compute-2025.3.1" / "extras" / "python"
    extras.mkdir(parents=True)
    (extras / "ncu_report.py").write_text("")
    assert _locate.NcuInstall(ncu, (2025, 3, 1, 0)).python_dir == extras


def _siblings(cuda: Path, versions: tuple[str, ...]) -> None:
    for version in versions:
        extras = cuda / f"nsight-compute-{version}" / "extras" / "python"
        extras.mkdir(parents=True)
        (extras / "ncu_report.py").write_text("")


def test_the_newest_sibling_reader_is_chosen_by_version_number_not_by_text(tmp_path):
    """2025.10.0 is newer than 2025.3.1, though it sorts below it as text."""
    cuda = tmp_path / "cuda-13.0"
    ncu = fake_ncu(cuda / "bin", "2026.1.0.0")  # a wrapper whose own version has no folder here
    _siblings(cuda, ("2025.3.1", "2025.10.0", "2024.1"))
    newest = cuda / "nsight-compute-2025.10.0" / "extras" / "python"
    assert _locate.NcuInstall(ncu, (2026, 1, 0, 0)).python_dir == newest


@pytest.mark.parametrize(("version", "folder"), [((2024, 1, 0, 0), "2024.1"), ((2025, 3, 1, 0), "2025.3.1")])
def test_the_sibling_reader_of_the_ncu_own_version_comes_first(tmp_path, version, folder):
    cuda = tmp_path / "cuda-13.0"
    ncu = fake_ncu(cuda / "bin", ".".join(map(str, version)))
    _siblings(cuda, ("2025.3.1", "2025.10.0", "2024.1"))
    assert _locate.NcuInstall(ncu, version).python_dir == cuda / f"nsight-compute-{folder}" / "extras" / "python"
