"""``nsightx.ext`` is the one door: backends and plugins use nothing private, and type checkers see every name."""

from __future__ import annotations

import ast
import inspect
import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from _paths import ROOT

import nsightx
import nsightx.ext as ext

EXTENSION_FOLDERS = (ROOT / "backends", ROOT / "plugins")
PRIVATE = re.compile(r"nsightx\._")


def _files() -> list[Path]:
    return sorted(
        p
        for folder in EXTENSION_FOLDERS
        for p in folder.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and ".egg-info" not in str(p) and p.suffix != ".pyc"
    )


def _private_imports(tree: ast.AST) -> list[str]:
    """Every import of an ``nsightx._*`` module, at any depth (function-local ones included)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.startswith("nsightx._")]
        elif isinstance(node, ast.ImportFrom) and node.module:
            if node.module.startswith("nsightx._"):
                found.append(node.module)
            elif node.module == "nsightx":
                found += [f"nsightx.{a.name}" for a in node.names if a.name.startswith("_") and a.name != "__version__"]
    return found


def test_backends_and_plugins_use_no_private_nsightx_module() -> None:
    offenders = []
    for path in _files():
        text = path.read_text(encoding="utf-8", errors="replace")
        rel = path.relative_to(ROOT)
        offenders += [f"{rel}:{text[: m.start()].count(chr(10)) + 1}" for m in PRIVATE.finditer(text)]
        if path.suffix == ".py":
            offenders += [f"{rel}: imports {name}" for name in _private_imports(ast.parse(text))]
    assert offenders == [], "use nsightx.ext (or the user API) instead of:\n" + "\n".join(offenders)


def test_the_scan_finds_local_imports_and_strings() -> None:
    code = "def f():\n    from nsightx import _plan\n    import nsightx._results.sink as s\n"
    assert _private_imports(ast.parse(code)) == ["nsightx._plan", "nsightx._results.sink"]
    assert PRIVATE.search('importlib.import_module("nsightx._run.loop")')
    assert _files(), "no files scanned"


def test_every_public_name_resolves_and_is_documented() -> None:
    api = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")
    assert len(ext.__all__) == len(set(ext.__all__))
    for name in ext.__all__:
        value = getattr(ext, name)
        assert value is not None, name
        assert f"`{name}" in api, f"docs/api.md does not mention nsightx.ext.{name}"
        if inspect.isclass(value) or inspect.isfunction(value):
            assert inspect.getdoc(value), f"nsightx.ext.{name} has no docstring"
    assert sorted(dir(ext)) == sorted(ext.__all__)
    with pytest.raises(AttributeError, match="no attribute 'Sesion'"):
        ext.Sesion  # type: ignore[attr-defined]  # noqa: B018


def test_lazy_table_matches_what_type_checkers_see() -> None:
    """The TYPE_CHECKING imports of ext.py (what mypy sees) and its runtime table name the same objects."""
    tree = ast.parse(Path(ext.__file__).read_text(encoding="utf-8"))
    block = next(n for n in tree.body if isinstance(n, ast.If) and getattr(n.test, "id", "") == "TYPE_CHECKING")
    seen = {
        alias.asname or alias.name: (node.module, alias.name)
        for node in block.body
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }
    assert seen == ext._LAZY
    assert sorted(seen) == sorted(ext.__all__)


def test_importing_ext_loads_nothing_heavy() -> None:
    """``python -m nsightx_ncu._reader`` must not pay for pydantic: ext and the ncu package load names lazily."""
    probe = (
        "import json, sys; import nsightx.ext, nsightx_ncu, nsightx_cupti; "
        "print(json.dumps(sorted(m for m in ('pydantic', 'pandas', 'numpy', 'pluggy') if m in sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == ["pluggy"]  # hookimpl is pluggy's marker


def test_no_backend_or_plugin_loads_libcuda_at_import() -> None:
    probe = (
        "import json, sys; events = []; "
        "sys.addaudithook(lambda ev, args: events.append(str(args[0])) if ev == 'ctypes.dlopen' else None); "
        "import nsightx.ext, nsightx_host, nsightx_cupti, nsightx_events, nsightx_ncu, nsightx_nvml, nsightx_env; "
        "print(json.dumps([e for e in events if 'cuda' in e]))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == []


# --- type checkers see the public names, and only them -------------------------------------------------

GOOD = """
from __future__ import annotations

import nsightx
import nsightx.ext
from nsightx.ext import Backend, Plan, RegionId, RunOutput, Session


def bench(record: nsightx.Record, session: Session, plan: Plan) -> None:
    with nsightx.annotate("x"):
        pass
    print(nsightx.analyze.kernel, nsightx.load, nsightx.ext.Capabilities, Backend, RegionId, RunOutput, record)
"""

BAD = """
import nsightx
import nsightx.ext
from nsightx.ext import Sesion

nsightx.annotat("x")
record: nsightx.Recrod
nsightx.ext.Backendd
"""


@pytest.fixture(scope="module")
def mypy_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("mypy")
    return tmp_path_factory.mktemp("mypy-cache")


def _mypy(tmp_path: Path, cache: Path, source: str) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "user_script.py"
    script.write_text(textwrap.dedent(source), encoding="utf-8")
    cmd = [sys.executable, "-m", "mypy", "--strict", "--cache-dir", str(cache), "--no-error-summary", script.name]
    return subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False)


def test_a_misspelt_public_name_is_a_type_error(tmp_path: Path, mypy_cache: Path) -> None:
    out = _mypy(tmp_path, mypy_cache, BAD)
    assert out.returncode == 1, out.stdout + out.stderr
    for name in ("Sesion", "annotat", "Recrod", "Backendd"):
        assert f'"{name}"' in out.stdout or f'"nsightx.{name}"' in out.stdout, (name, out.stdout)
    assert len(out.stdout.strip().splitlines()) == 4, out.stdout


def test_correctly_spelt_names_type_check(tmp_path: Path, mypy_cache: Path) -> None:
    out = _mypy(tmp_path, mypy_cache, GOOD)
    assert out.returncode == 0, out.stdout + out.stderr


def test_user_api_still_loads_lazily() -> None:
    assert nsightx.ext is ext
    assert nsightx.Backend is ext.Backend and nsightx.Record is ext.Record
