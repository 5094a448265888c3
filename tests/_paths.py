"""The suite's fixed places, for test files at any depth under ``tests/``.

Test files live in subfolders that mirror nsightx's stages, backends and plugins (``tests/core/results/``,
``tests/backends/ncu/``...), so a path counted from a test file's own folder changes whenever the file moves.
They take these instead. ``tests/`` itself is on ``sys.path`` (``pythonpath`` in pyproject.toml's pytest options),
which is also how the shared helper modules beside this one (``ncu_fake``, ``nvml_double``, ``_synthetic``...) are
imported.
"""

from __future__ import annotations

from pathlib import Path

TESTS = Path(__file__).resolve().parent
"""``tests/``: the helper modules and ``conftest.py``."""
ROOT = TESTS.parent
"""The repository root (``nsightx/``, ``backends/``, ``plugins/``, ``docs/``, ``benchmarks/``, pyproject.toml)."""
FIXTURES = TESTS / "fixtures"
"""Recorded data (CUPTI activity, ncu reports, saved results) and the scripts that captured them."""
