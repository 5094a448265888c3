"""The shape of the code: the import graph of ``nsightx/``, ``backends/`` and ``plugins/`` has no circle and goes
only down the stages, and no function is over 60 lines.

Import graph policy (decided here, enforced below):

* The graph holds every module of ``nsightx/`` and of each package under ``backends/`` and ``plugins/``
  (``nsightx_cupti``, ``nsightx_nvml``, the example packages, ...). Every ``import`` statement between them is an
  edge, whether it sits at module level or inside a function. A function-local import delays a circle to call
  time; it does not remove it. So the *runtime* graph (module-level plus function-level imports) must have no
  circle at all.
* Imports under ``if TYPE_CHECKING:`` never run (every module has ``from __future__ import annotations``), so
  they cannot form a runtime circle; they are still edges of the *design*: a type-only import pointing back is a
  hidden circle. The graph with them must have no circle either, with no exception: what two modules both need
  goes into a third module both import.
* ``from nsightx import _x`` is an edge to ``nsightx._x``; an edge to the package ``nsightx`` itself is not counted
  (its ``__init__`` only loads submodules lazily, by name, through ``importlib``).
* Stages: ``nsightx/`` is a stack of stages (:data:`STAGES`); every backend and plugin package sits above all of
  them (:data:`PLUGINS_STAGE`) and imports no other backend or plugin (that it imports only nsightx's public
  modules is tests/library/test_ext.py's check). nsightx names those packages only as strings and loads them through
  ``importlib``.

Function size policy: no function or method in ``nsightx/``, ``backends/`` or ``plugins/`` is longer than
:data:`MAX_FUNCTION_LINES` lines, counted as ``end_lineno - lineno + 1`` of the ``def`` (decorators excluded,
docstring and nested functions included), excluding nothing.

Test layout policy: ``tests/`` mirrors the code (:func:`layout_homes`). A test file lives in the folder of what it
tests: ``tests/core/<stage>/`` for a stage of :data:`STAGES` (``floor`` and ``public`` for the first and last),
``tests/backends/<name>/`` for ``backends/nsightx_<name>`` (checks over every backend in ``tests/backends/``
itself), ``tests/plugins/<name>/`` for ``plugins/nsightx_<name>``, the example plugins and nsightx's pytest plugin,
``tests/library/`` for checks of the library as a whole, ``tests/benchmarks/`` for the benchmark scripts. The top
level of ``tests/`` holds only ``conftest.py``, the shared helper modules and ``fixtures/``.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest
from _paths import ROOT, TESTS

PACKAGE = "nsightx"
PLUGIN_FOLDERS = ("backends", "plugins")
"""Folders holding one importable package each (at any depth: ``plugins/example_backend/nsightx_example_backend``)."""
MAX_FUNCTION_LINES = 60


@dataclass(frozen=True)
class Edge:
    """One import of one module of ``nsightx/``, ``backends/`` or ``plugins/`` by another."""

    source: str
    target: str
    kind: str
    """``"module"``, ``"function"`` or ``"type"`` (under ``if TYPE_CHECKING:``)."""
    line: int


def plugin_packages() -> dict[str, Path]:
    """Each package under ``backends/`` and ``plugins/`` (its import name -> its folder)."""
    found: dict[str, Path] = {}
    for folder in PLUGIN_FOLDERS:
        for init in sorted((ROOT / folder).rglob("__init__.py")):
            if not (init.parent.parent / "__init__.py").exists():
                found[init.parent.name] = init.parent
    return found


def _module_name(path: Path, base: Path) -> str:
    parts = path.relative_to(base).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    """Every module of ``nsightx/`` and of each package under ``backends/`` and ``plugins/``, by import name."""
    modules = {_module_name(p, ROOT): p for p in sorted((ROOT / PACKAGE).rglob("*.py"))}
    for folder in plugin_packages().values():
        modules.update({_module_name(p, folder.parent): p for p in sorted(folder.rglob("*.py"))})
    return modules


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _targets(node: ast.Import | ast.ImportFrom, source: str, modules: dict[str, Path]) -> list[str]:
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    else:
        if node.level:
            package = source if modules[source].name == "__init__.py" else source.rpartition(".")[0]
            for _ in range(node.level - 1):
                package = package.rpartition(".")[0]
            base = f"{package}.{node.module}" if node.module else package
        else:
            base = node.module or ""
        names = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
    return sorted({n for n in names if n in modules and n != PACKAGE})


def _edges_of(source: str, path: Path, modules: dict[str, Path]) -> list[Edge]:
    edges: list[Edge] = []

    def visit(node: ast.AST, kind: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import | ast.ImportFrom):
                edges.extend(Edge(source, t, kind, child.lineno) for t in _targets(child, source, modules))
            elif isinstance(child, ast.If) and _is_type_checking(child):
                for stmt in child.body:
                    visit(ast.Module(body=[stmt], type_ignores=[]), "type")
                for stmt in child.orelse:
                    visit(ast.Module(body=[stmt], type_ignores=[]), kind)
            elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                visit(child, "type" if kind == "type" else "function")
            else:
                visit(child, kind)

    visit(ast.parse(path.read_text(encoding="utf-8")), "module")
    return edges


def import_edges() -> list[Edge]:
    """Every import edge between modules of ``nsightx/``, ``backends/`` and ``plugins/``."""
    modules = _modules()
    return [e for name, path in modules.items() for e in _edges_of(name, path, modules)]


def find_cycle(edges: list[Edge]) -> list[Edge] | None:
    """One circle of ``edges`` (as the edges that form it), or ``None`` when the graph has none."""
    graph: dict[str, list[Edge]] = {}
    for e in edges:
        graph.setdefault(e.source, []).append(e)
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[Edge] = []

    def walk(node: str) -> list[Edge] | None:
        state[node] = 1
        for e in graph.get(node, []):
            if state.get(e.target) == 1:
                start = next((i for i, p in enumerate(path) if p.source == e.target), len(path))
                return [*path[start:], e]
            if e.target not in state:
                path.append(e)
                found = walk(e.target)
                if found:
                    return found
                path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            found = walk(node)
            if found:
                return found
    return None


def describe(cycle: list[Edge]) -> str:
    """``a -> b (module import, line 3) -> a (function import, line 9)``."""
    text = cycle[0].source
    for e in cycle:
        text += f" -> {e.target} ({e.kind} import, {e.source.rpartition('.')[2]}.py line {e.line})"
    return text


def test_graph_sees_every_kind_of_import() -> None:
    """The walker finds module-level, function-level and TYPE_CHECKING imports (the test is not vacuous)."""
    kinds = {e.kind for e in import_edges()}
    assert kinds == {"module", "function", "type"}


def test_find_cycle_reports_the_circle() -> None:
    edges = [Edge("a", "b", "module", 1), Edge("b", "c", "function", 2), Edge("c", "a", "type", 3)]
    cycle = find_cycle(edges)
    assert cycle is not None
    assert describe(cycle).startswith("a -> b (module import")
    assert find_cycle(edges[:2]) is None


def test_runtime_imports_have_no_circle() -> None:
    """Module-level and function-level imports together form no circle."""
    cycle = find_cycle([e for e in import_edges() if e.kind != "type"])
    assert cycle is None, "import circle: " + describe(cycle)


def test_type_checking_imports_close_no_circle() -> None:
    """With TYPE_CHECKING imports added, the graph still has no circle: a type-only back edge is a hidden one."""
    cycle = find_cycle(import_edges())
    assert cycle is None, "import circle through a TYPE_CHECKING import: " + describe(cycle)


def test_backends_and_plugins_are_in_the_graph() -> None:
    """The graph reaches into every package under ``backends/`` and ``plugins/``, function-level imports too."""
    packages = plugin_packages()
    assert {"nsightx_host", "nsightx_cupti", "nsightx_ncu", "nsightx_nvml", "nsightx_example_backend"} <= set(packages)
    edges = import_edges()
    assert {e.source.partition(".")[0] for e in edges} >= {"nsightx_cupti", "nsightx_ncu", "nsightx_nvml"}
    assert any(e.source.startswith("nsightx_cupti.") and e.kind == "function" for e in edges)


def _long_functions() -> list[str]:
    found = []
    for folder in ("nsightx", "backends", "plugins"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    lines = (node.end_lineno or node.lineno) - node.lineno + 1
                    if lines > MAX_FUNCTION_LINES:
                        found.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({lines} lines)")
    return found


def test_no_function_is_over_60_lines() -> None:
    long = _long_functions()
    assert not long, f"functions over {MAX_FUNCTION_LINES} lines:\n" + "\n".join(long)


@pytest.mark.parametrize("lines, fails", [(MAX_FUNCTION_LINES, False), (MAX_FUNCTION_LINES + 1, True)])
def test_function_length_is_counted_from_def_to_last_line(tmp_path: Path, lines: int, fails: bool) -> None:
    body = "\n".join(f"    x{i} = {i}" for i in range(lines - 1))
    node = ast.parse(f"@decorator\ndef f():\n{body}\n").body[0]
    assert isinstance(node, ast.FunctionDef)
    assert ((node.end_lineno or 0) - node.lineno + 1 > MAX_FUNCTION_LINES) is fails


def _constructions(name: str) -> list[str]:
    """Modules of ``nsightx/`` that call ``name(...)`` (a class constructed by name)."""
    found = []
    for module, path in _modules().items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == name:
                found.append(module)
    return sorted(set(found))


@pytest.mark.parametrize(
    ("cls", "builder"),
    [
        ("ResultData", "nsightx._results.profileresults"),
        ("Plan", "nsightx._spec.makeplan"),
        ("PlanInfo", "nsightx._spec.makeplan"),
    ],
)
def test_one_builder_for_results_and_plans(cls: str, builder: str) -> None:
    """Every execution path (one process, parallel workers, a raw file) builds results and plans in one place."""
    assert _constructions(cls) == [builder]


FUNCTION_IMPORTS_ALLOWED: dict[tuple[str, str], str] = {
    (
        "nsightx._run.context",
        "nsightx._results.records",
    ): "import time: `import nsightx` (annotate) must not load pydantic",
    (
        "nsightx._api.tool",
        "nsightx._pluginhost.plugins",
    ): "import time: `import nsightx` (activate) must not load pluggy/pydantic",
    ("nsightx._results.profileresults", "nsightx._results.dataframe"): "pandas, loaded only when a DataFrame is built",
    ("nsightx._api.kernel", "nsightx._results.dataframe"): "pandas, loaded only inside a GPU call (while it waits)",
    ("nsightx._results.sink", "nsightx._results.frameahead"): "the frame's modules, loaded only while a GPU call waits",
    ("nsightx.pytest_plugin", "nsightx.analyze"): "pytest imports the plugin at every start: pydantic only when used",
    (
        "nsightx.pytest_plugin",
        "nsightx._pluginhost.plugins",
    ): "pytest loads the plugin at every start: pluggy only when used",
    (
        "nsightx._report.pytest_gate",
        "nsightx._report.compare",
    ): "pytest loads the plugin at every start: pandas only when used",
    ("nsightx._report.pytest_gate", "nsightx._report.views"): "pytest imports the plugin at every start (as above)",
    ("nsightx._report.pytest_gate", "nsightx._report.sources"): "pytest imports the plugin at every start (as above)",
    ("nsightx._report.pytest_gate", "nsightx._report.kept"): "pytest imports the plugin at every start (as above)",
    (
        "nsightx._report.history",
        "nsightx._results.profileresults",
    ): "the plugin's baseline store is imported at pytest's start: pydantic only when a result is saved",
}
"""Function-level imports between modules of ``nsightx/`` kept on purpose (heavy or import-time-sensitive).

The command line (``nsightx.cli``) imports each command's module when that command runs, so ``nsightx --help``
stays fast; its imports are not listed one by one."""


def test_function_level_imports_are_only_for_import_time():
    """A function-local import in ``nsightx/`` is for import time (heavy dependencies), never a circle.

    Inside a backend or plugin package, function-level imports are how registration stays light (the hook
    specifications ask it); the circle tests above count them all the same."""
    extra = sorted(
        {
            (e.source, e.target)
            for e in import_edges()
            if e.kind == "function"
            and stage_of(e.source) < PLUGINS_STAGE
            and e.source != "nsightx.cli"
            and (e.source, e.target) not in FUNCTION_IMPORTS_ALLOWED
        }
    )
    assert not extra, f"function-level imports without a reason in FUNCTION_IMPORTS_ALLOWED: {extra}"


STAGES: tuple[tuple[str, ...], ...] = (
    (
        "nsightx._errors",
        "nsightx._enums",
        "nsightx._model",
        "nsightx._version",
        "nsightx._cudainfo",
        "nsightx.columns",
        "nsightx._units",
        "nsightx._textcell",
        "nsightx._warn",
    ),
    ("nsightx._plot",),
    ("nsightx._results",),
    ("nsightx._run",),
    ("nsightx._remote",),
    ("nsightx._pluginhost",),
    ("nsightx._spec",),
    ("nsightx._report",),
    ("nsightx._api",),
    ("nsightx._commands",),
    (
        "nsightx.ext",
        "nsightx.analyze",
        "nsightx.experimental",
        "nsightx.exceptions",
        "nsightx.cli",
        "nsightx.pytest_plugin",
        "nsightx",
    ),
)
"""The stages of ``nsightx/``, lowest first (docs/architecture.md): a module may import its own stage and those
below it, never one above. A subpackage is one stage; the floor modules and the public modules are listed."""


PLUGINS_STAGE = len(STAGES)
"""The stage of every package under ``backends/`` and ``plugins/``: above all of ``nsightx/``, which names them only
as strings (``BUILTIN_PLUGINS``, entry points) and loads them through ``importlib``."""


def stage_of(module: str) -> int:
    """The stage of ``module``: its index in :data:`STAGES` (the longest prefix listed), or :data:`PLUGINS_STAGE`."""
    if module.partition(".")[0] in plugin_packages():
        return PLUGINS_STAGE
    best, rank = "", -1
    for i, members in enumerate(STAGES):
        for m in members:
            if (module == m or module.startswith(m + ".")) and len(m) > len(best):
                best, rank = m, i
    return rank


def test_every_module_has_a_stage() -> None:
    unplaced = sorted(m for m in _modules() if stage_of(m) < 0)
    assert not unplaced, f"modules in no stage of STAGES (add them, or move them into a stage): {unplaced}"


def test_imports_only_go_down_the_stages() -> None:
    """Every import (module, function or TYPE_CHECKING) points to the importer's stage or one below it."""
    up = [
        f"{e.source} -> {e.target} ({e.kind} import, line {e.line})"
        for e in import_edges()
        if stage_of(e.target) > stage_of(e.source)
    ]
    assert not up, "imports that go up the stages:\n" + "\n".join(up)


def test_no_backend_or_plugin_imports_another() -> None:
    """Each backend or plugin package stands alone: blocking or uninstalling one never breaks another.

    (That they import only nsightx's public modules is tests/library/test_ext.py's check.)"""
    crossing = [
        f"{e.source} -> {e.target} ({e.kind} import, line {e.line})"
        for e in import_edges()
        if stage_of(e.target) == PLUGINS_STAGE and e.target.partition(".")[0] != e.source.partition(".")[0]
    ]
    assert not crossing, "imports between backend or plugin packages:\n" + "\n".join(crossing)


def module_names(modules: list[str], packages: list[str]) -> dict[str, list[str]]:
    """Each name used more than once: ``modules`` (dotted, ``nsightx.<...>``) by their last part, leading ``_`` off,
    and ``packages`` (backends and plugins) without their ``nsightx_`` prefix -> who uses it.

    ``nsightx/_plot/`` and ``nsightx/_api/plot.py`` are both ``plot``; ``nsightx/_host/`` and the
    ``nsightx_host`` backend are both ``host``. ``nsightx`` itself and ``__init__`` modules (their package's name)
    are not counted twice."""
    users: dict[str, list[str]] = {}
    for module in modules:
        if module != PACKAGE:
            users.setdefault(module.rpartition(".")[2].lstrip("_"), []).append(module)
    for package in packages:
        users.setdefault(package.removeprefix("nsightx_"), []).append(package)
    return {name: sorted(who) for name, who in sorted(users.items()) if len(who) > 1}


def test_one_name_per_concept() -> None:
    """A module name of ``nsightx/`` (a file or a subpackage) says one thing: no two modules share it, across
    stages or within one, and none takes the name of a backend or plugin package (issue 39)."""
    repeated = module_names([m for m in _modules() if stage_of(m) < PLUGINS_STAGE], list(plugin_packages()))
    assert not repeated, (
        f"module names used more than once (rename one so that each name says its one concept): {repeated}"
    )


def test_name_check_can_fail() -> None:
    repeated = module_names(
        ["nsightx", "nsightx._plot", "nsightx._plot.draw", "nsightx._api.plot", "nsightx._host", "nsightx.ext"],
        ["nsightx_host", "nsightx_ncu"],
    )
    assert repeated == {"host": ["nsightx._host", "nsightx_host"], "plot": ["nsightx._api.plot", "nsightx._plot"]}


def test_stage_check_can_fail() -> None:
    assert stage_of("nsightx._run.loop") < stage_of("nsightx._spec.options")
    assert stage_of("nsightx.ext") < stage_of("nsightx_cupti._session") == PLUGINS_STAGE
    assert stage_of("nsightx._results.records") < stage_of("nsightx._run.loop")
    assert stage_of("nsightx.columns") == 0 and stage_of("nsightx") == len(STAGES) - 1
    assert stage_of("nsightx._run.loop") < stage_of("nsightx._remote.child") < stage_of("nsightx._spec.options")


TEST_FILE_GLOBS = ("test_*.py", "*_test.py")
"""pytest's default ``python_files``: what it collects as a test file."""


def layout_homes() -> set[str]:
    """The folders of ``tests/`` (relative, ``/``-separated) where a test file may live, derived from the code."""
    stages = [members[0].removeprefix(PACKAGE + "._") for members in STAGES[1:-1]]
    packages = plugin_packages()
    backends = [name.removeprefix("nsightx_") for name, path in packages.items() if path.parent.name == "backends"]
    plugins = [name.removeprefix("nsightx_") for name, path in packages.items() if path.parent.name == "plugins"]
    return {
        "library",
        "benchmarks",
        "backends",
        "plugins/examples",
        "plugins/pytest_plugin",
        *(f"core/{stage}" for stage in ("floor", *stages, "public")),
        *(f"backends/{name}" for name in backends),
        *(f"plugins/{name}" for name in plugins),
    }


def misplaced_test_files(tests: Path, homes: set[str]) -> list[str]:
    """Test files under ``tests`` (``fixtures/`` aside) whose folder is not one of ``homes``."""
    found = {path for pattern in TEST_FILE_GLOBS for path in tests.rglob(pattern)}
    misplaced = []
    for path in sorted(found):
        relative = path.relative_to(tests)
        if relative.parts[0] != "fixtures" and relative.parent.as_posix() not in homes:
            misplaced.append(relative.as_posix())
    return misplaced


def test_every_test_file_is_in_the_folder_of_what_it_tests() -> None:
    homes = layout_homes()
    misplaced = misplaced_test_files(TESTS, homes)
    assert not misplaced, (
        f"test files outside the folders that mirror the code: {misplaced}; move each (git mv) into one of "
        f"{sorted(homes)} (the module docstring says which)"
    )


def test_homes_follow_the_code() -> None:
    homes = layout_homes()
    assert {"core/results", "core/run", "core/remote", "core/api", "core/floor", "core/public"} <= homes
    assert {"backends/cupti", "backends/ncu", "backends/events", "backends/host", "plugins/nvml"} <= homes
    assert "." not in homes and "core" not in homes and "fixtures" not in homes


def test_layout_check_can_fail(tmp_path: Path) -> None:
    for name in ("test_top.py", "core/test_loose.py", "core/results/test_ok.py", "core/nowhere/x_test.py"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("")
    (tmp_path / "fixtures" / "scripts").mkdir(parents=True)
    (tmp_path / "fixtures" / "scripts" / "test_script.py").write_text("")
    misplaced = misplaced_test_files(tmp_path, {"core/results"})
    assert misplaced == ["core/nowhere/x_test.py", "core/test_loose.py", "test_top.py"]
