"""Automation using nox: `nox` runs lint and the CPU tests; `nox -s gpu` runs everything that needs the GPU."""

from __future__ import annotations

import nox

nox.needs_version = ">=2025.02.09"
nox.options.sessions = ["lint", "tests"]
nox.options.default_venv_backend = "venv"

PYPROJECT = nox.project.load_toml("pyproject.toml")


@nox.session(python=["3.11", "3.12"])
def tests(session: nox.Session) -> None:
    """CPU test suite (GPU tests are skipped)."""
    session.install("-e", ".", *nox.project.dependency_groups(PYPROJECT, "test"))
    session.run("pytest", "-ra", "--strict-markers", "-m", "not gpu", *session.posargs)


@nox.session
def lint(session: nox.Session) -> None:
    """ruff over the whole tree."""
    session.install(*nox.project.dependency_groups(PYPROJECT, "lint"))
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")


@nox.session
def typecheck(session: nox.Session) -> None:
    """mypy over the package, the backends and plugins."""
    session.install("-e", ".", *nox.project.dependency_groups(PYPROJECT, "typecheck"))
    session.run("mypy", *(session.posargs or ["nsightx", "backends", "plugins"]))


@nox.session(default=False, venv_backend="none")
def gpu(session: nox.Session) -> None:
    """Every GPU test and benchmark, on a GPU machine, writing under $OUT (see benchmarks/run_gpu.sh)."""
    session.run("bash", "benchmarks/run_gpu.sh", *session.posargs, external=True)
