"""Shared fixtures: a fresh plugin host per test, skipping of GPU tests on machines without one, and one bytecode
cache for the subprocesses of a run.

The test files live in subfolders that mirror the code (docs/architecture.md, "Where the tests are"); this folder
holds this file, the helper modules they share and ``fixtures/``.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterator

import pytest


def _hypothesis_profile() -> None:
    """On CI (``.ci/run`` sets ``NSIGHTX_HYPOTHESIS_PROFILE=ci``; ``CI`` set works too) every property test draws a
    fixed sequence of examples, with no example database: a tree passes or fails CI every time, not by the draw of
    the day. The random draws (hunting) stay where people run the tests, and ``NSIGHTX_REFERENCE_RANDOM`` or an
    unset profile brings them back anywhere. A failure a random draw finds is kept as a focused test."""
    from hypothesis import settings

    settings.register_profile("ci", derandomize=True, database=None, print_blob=True)
    if os.environ.get("NSIGHTX_HYPOTHESIS_PROFILE") == "ci" or (
        os.environ.get("CI") and "NSIGHTX_REFERENCE_RANDOM" not in os.environ
    ):
        settings.load_profile("ci")


_hypothesis_profile()

BYTECODE_FOLDER = "pycache"
"""Folder under the run's base temp directory where subprocesses keep their bytecode (see :func:`_bytecode`)."""


@functools.cache
def gpu_available() -> bool:
    """True when torch sees a CUDA device (checked once, only if a gpu test is collected)."""
    try:
        import torch
    except Exception:
        return False
    try:
        return bool(torch.cuda.is_available())
    except Exception:
        return False


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    gpu_items = [item for item in items if "gpu" in item.keywords]
    if gpu_items and not gpu_available():
        skip = pytest.mark.skip(reason="needs an NVIDIA GPU with torch.cuda available")
        for item in gpu_items:
            item.add_marker(skip)


@pytest.fixture(scope="session", autouse=True)
def _bytecode(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Let the run's subprocesses compile nsightx once and share it, where ``PYTHONDONTWRITEBYTECODE`` is set.

    With it set (and no ``PYTHONPYCACHEPREFIX``), every subprocess that imports nsightx (the pytester sessions,
    the scripts run with ``sys.executable``) compiled every module again: 1.46 s per pytester session instead of
    0.80 s, about a tenth of the suite. For the run, subprocesses write their bytecode under one folder of the
    run's base temp directory instead of the source tree (``PYTHONPYCACHEPREFIX``). Python then looks for every
    module's bytecode there, so the first subprocess also compiles the dependencies it imports, once per run.
    Elsewhere nothing changes.
    """
    if not os.environ.get("PYTHONDONTWRITEBYTECODE") or os.environ.get("PYTHONPYCACHEPREFIX"):
        yield
        return
    folder = tmp_path_factory.getbasetemp() / BYTECODE_FOLDER
    folder.mkdir(exist_ok=True)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PYTHONPYCACHEPREFIX", str(folder))
        mp.delenv("PYTHONDONTWRITEBYTECODE")
        yield


@pytest.fixture
def plugin_host() -> Iterator[object]:
    """A freshly loaded plugin host installed as the default for the duration of the test."""
    from nsightx._pluginhost import plugins as _plugins

    host = _plugins.PluginHost(_plugins.LoaderSettings()).load()
    previous = _plugins._default
    _plugins.set_default_host(host)
    try:
        yield host
    finally:
        _plugins.set_default_host(previous)
