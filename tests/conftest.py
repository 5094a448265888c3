"""Shared fixtures: a fresh plugin host per test, and skipping of GPU tests on machines without one."""

from __future__ import annotations

import functools
from collections.abc import Iterator

import pytest


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


@pytest.fixture
def plugin_host() -> Iterator[object]:
    """A freshly loaded plugin host installed as the default for the duration of the test."""
    from nsightx._host import plugins as _plugins

    host = _plugins.PluginHost(_plugins.LoaderSettings()).load()
    previous = _plugins._default
    _plugins.set_default_host(host)
    try:
        yield host
    finally:
        _plugins.set_default_host(previous)
