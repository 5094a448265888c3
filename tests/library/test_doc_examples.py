"""The examples of the user documentation run as written and show what the documentation says they show.

A new user copies code from README.md and the guides in docs/. Every ```python block of those pages is checked:

- it compiles (a fragment too: a method body is dedented, a lone decorator gets a ``def`` to decorate);
- every ``nsightx`` name it uses (``nsightx.analyze.kernel``, ``from nsightx.ext import Backend``...) exists;
- its module-level definitions run: imports, ``def`` and ``class`` statements, so every ``@nsightx.analyze.kernel``
  and ``@nsightx.analyze.plot`` in it goes through the decorator's option validation (an unknown option, a bad
  value, ``runs="auto"`` options with a fixed ``runs`` fail here), without calling the decorated function (most
  blocks need a GPU and torch for that);
- a block marked ``<!-- doc-test: cpu -->`` on the line before its fence runs whole, as a script in a temporary
  folder, on the host backend.

Calls of nsightx functions must fit their signatures, a complete example must import the modules it uses, the
columns it selects from a result must exist, and ``nsightx_bench`` must be given an undecorated function.

The command lines whose output a page shows (``nsightx demo``, ``show``, ``plot``, ``backends``, ``doctor``,
``baselines``, ``compare`` on the recorded H200 results, the CLI's usage errors) are run, and the structure of what
they print (column names, rows, the verdict, the message) is compared with the page; api.md's command table and
ci.md's option table must list exactly the options the parsers accept.
"""

from __future__ import annotations

import ast
import builtins
import importlib.util
import inspect
import os
import re
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from _paths import ROOT

import nsightx
from nsightx._commands.demo import BLAS_THREAD_VARIABLES

PAGES = (
    "README.md",
    "docs/tutorial.md",
    "docs/api.md",
    "docs/plugins.md",
    "docs/ci.md",
    "docs/cluster.md",
    "docs/compat.md",
    "docs/flags.md",
    "docs/roofline.md",
)
"""The pages a new user copies code from."""

CPU_MARK = "<!-- doc-test: cpu -->"
"""Written on the line before a fence: the block runs whole on a machine without a GPU."""

ABSENT_HERE = frozenset({"torch", "dask_cuda", "dask_jobqueue"})
"""Modules a block may import that the CPU test machine lacks; their imports are left out of the definition run."""

PRELUDE = "import operator, os, sys, time\nfrom typing import Literal\nimport nsightx\nfrom nsightx.ext import *\n"
"""What a fragment of a page may take from the page's earlier blocks (imports only)."""

FENCE = re.compile(r"^(\s*)```(\w*)\s*$")


@dataclass(frozen=True)
class Block:
    """One fenced code block of a page."""

    page: str
    line: int
    lang: str
    code: str
    cpu: bool

    @property
    def id(self) -> str:
        """``page:line``, the block's test id."""
        return f"{self.page}:{self.line}"


def blocks(page: str) -> list[Block]:
    """Every fenced block of ``page`` (relative to the repository root), dedented, with its marker."""
    lines = (ROOT / page).read_text(encoding="utf-8").split("\n")
    found, i = [], 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if opening is None:
            i += 1
            continue
        start, body = i, []
        i += 1
        while not lines[i].strip().startswith("```"):
            body.append(lines[i])
            i += 1
        cpu = start > 0 and lines[start - 1].strip() == CPU_MARK
        code = textwrap.dedent("\n".join(body)) + "\n"
        found.append(Block(page, start + 1, opening.group(2), code, cpu))
        i += 1
    return found


PYTHON = [b for page in PAGES for b in blocks(page) if b.lang == "python"]


def parse(block: Block) -> ast.Module:
    """The block's syntax tree; a block ending in a decorator gets a function to decorate, as on the page."""
    try:
        return ast.parse(block.code, filename=block.id)
    except SyntaxError:
        return ast.parse(block.code + "def _decorated(*args): ...\n", filename=block.id)


def _aliases(tree: ast.Module) -> set[str]:
    """The names the code gives the nsightx package: ``nsightx``, and ``nsight`` after ``import nsightx as nsight``."""
    imported = {
        a.asname or a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names if a.name == "nsightx"
    }
    return {"nsightx", *imported}


def nsightx_names(tree: ast.Module) -> set[str]:
    """Every dotted name the code reads from nsightx: ``nsightx.a.b`` (under any alias) and ``from nsightx.x import
    y`` (as ``x.y``)."""
    aliases = _aliases(tree)
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "nsightx":
            prefix = node.module.removeprefix("nsightx").lstrip(".")  # type: ignore[union-attr]
            names |= {f"{prefix}.{a.name}".lstrip(".") for a in node.names if a.name != "*"}
    for node in ast.walk(tree):
        chain: list[str] = []
        while isinstance(node, ast.Attribute):
            chain.insert(0, node.attr)
            node = node.value
        if chain and isinstance(node, ast.Name) and node.id in aliases:
            names.add(".".join(chain))
    return names


def resolve(dotted: str) -> Any:
    """The object ``nsightx.<dotted>`` names (importing submodules as ``from nsightx.x import y`` would)."""
    obj: Any = nsightx
    for part in dotted.split("."):
        if not hasattr(obj, part) and hasattr(obj, "__path__"):
            __import__(f"{obj.__name__}.{part}")
        obj = getattr(obj, part)
    return obj


def definitions(tree: ast.Module) -> ast.Module:
    """The block's imports (but those of modules not installed here), ``def`` and ``class`` statements.

    A definition whose decorators read a name that a left-out statement binds (``executor=client``, a client of a
    cluster that is not here) is left out too, as is one whose decorator takes ``...`` for options the page omits.
    """
    kept: list[ast.stmt] = []
    unbound: set[str] = set()
    for stmt in tree.body:
        if isinstance(stmt, ast.Import | ast.ImportFrom):
            modules = [a.name for a in stmt.names] if isinstance(stmt, ast.Import) else [stmt.module or ""]
            if not any(m.split(".")[0] in ABSENT_HERE for m in modules):
                kept.append(stmt)
                continue
        elif isinstance(stmt, ast.FunctionDef | ast.ClassDef):
            read = {n.id for dec in stmt.decorator_list for n in ast.walk(dec) if isinstance(n, ast.Name)}
            if not _has_placeholder(stmt) and not read & unbound:
                kept.append(stmt)
                continue
        unbound |= {n.id for n in ast.walk(stmt) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
        unbound |= {a.asname or a.name.split(".")[0] for a in getattr(stmt, "names", ())}
        unbound |= {stmt.name} if isinstance(stmt, ast.FunctionDef | ast.ClassDef) else set()
    return ast.Module(body=kept, type_ignores=[])


def _has_placeholder(stmt: ast.FunctionDef | ast.ClassDef) -> bool:
    """True when a decorator is called with ``...`` standing for options the page leaves out."""
    return any(
        isinstance(arg, ast.Constant) and arg.value is Ellipsis
        for dec in stmt.decorator_list
        if isinstance(dec, ast.Call)
        for arg in dec.args
    )


EXCERPTS = {"docs/plugins.md": ROOT / "plugins" / "example_backend" / "nsightx_example_backend" / "__init__.py"}
"""Pages whose fragments (blocks that import nothing) are excerpts of a module of the repository."""


def _normalised(code: str) -> str:
    """The code's non-blank lines, stripped: an excerpt is compared without its indentation."""
    return "\n".join(line.strip() for line in code.splitlines() if line.strip())


def _is_fragment(block: Block) -> bool:
    """True for a block that imports nothing: a piece of a larger module (False where it does not parse: the
    compile test names the error)."""
    try:
        tree = parse(block)
    except SyntaxError:
        return False
    return not any(isinstance(n, ast.Import | ast.ImportFrom) for n in ast.walk(tree))


def _namespace(block: Block) -> dict[str, Any]:
    """What the block's definitions run in: an excerpt's own module, else the prelude's names."""
    source = EXCERPTS.get(block.page)
    if source is not None and _is_fragment(block):
        assert _normalised(block.code) in _normalised(source.read_text(encoding="utf-8")), (
            f"{block.id} is not an excerpt of {source.relative_to(ROOT)} any more: update the page"
        )
        spec = importlib.util.spec_from_file_location(f"doc_excerpt_{source.parent.name}", source)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return dict(vars(module))
    namespace: dict[str, Any] = {"__name__": "doc_example", "__builtins__": builtins}
    exec(compile(PRELUDE, "prelude", "exec"), namespace)
    return namespace


@pytest.mark.parametrize("block", PYTHON, ids=lambda b: b.id)
def test_python_block_compiles_and_its_nsightx_names_exist(block: Block) -> None:
    tree = parse(block)
    missing = []
    for name in sorted(nsightx_names(tree)):
        try:
            resolve(name)
        except (AttributeError, ImportError):
            missing.append(name)
    assert not missing, f"{block.id} uses nsightx names that do not exist: {missing}"


@pytest.mark.parametrize("block", PYTHON, ids=lambda b: b.id)
def test_python_block_definitions_pass_option_validation(
    block: Block, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, plugin_host: object
) -> None:
    """Decorating is where every option is checked: a page's decorator with a bad option fails here."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", [block.id, str(tmp_path / "out") + "/"])
    exec(compile(definitions(parse(block)), block.id, "exec"), _namespace(block))


def _env() -> dict[str, str]:
    """The environment of a subprocess: this checkout's nsightx, its backends and plugins first, and no GPU in
    sight (``CUDA_VISIBLE_DEVICES=""``), as on the machine without a GPU whose output the pages show (the demo
    times NumPy on the host backend there, torch on a GPU). No BLAS thread variable either, as in the fresh shell
    the README shows: an in-process ``nsightx demo`` of another test sets them in this process's environment."""
    paths = [str(ROOT), str(ROOT / "backends"), str(ROOT / "plugins")]
    old = os.environ.get("PYTHONPATH")
    pythonpath = os.pathsep.join([*paths, *([old] if old else [])])
    env = {k: v for k, v in os.environ.items() if k not in BLAS_THREAD_VARIABLES}
    return {**env, "PYTHONPATH": pythonpath, "COLUMNS": "300", "CUDA_VISIBLE_DEVICES": ""}


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run ``args`` in ``cwd`` with this checkout's nsightx, generous timeout."""
    return subprocess.run(args, cwd=cwd, env=_env(), capture_output=True, text=True, timeout=120, check=False)


CPU_BLOCKS = [b for b in PYTHON if b.cpu]


def test_some_blocks_are_marked_to_run_on_the_cpu() -> None:
    assert len(CPU_BLOCKS) >= 5, [b.id for b in CPU_BLOCKS]


@pytest.mark.parametrize("block", CPU_BLOCKS, ids=lambda b: b.id)
def test_cpu_block_runs_as_written(block: Block, tmp_path: Path) -> None:
    script = tmp_path / "example.py"
    script.write_text(block.code, encoding="utf-8")
    done = _run([sys.executable, str(script)], tmp_path)
    assert done.returncode == 0, f"{block.id} failed:\n{done.stdout}\n{done.stderr}"


def _doc_block(page: str, starts: str) -> str:
    """The text of the first block of ``page`` whose first line starts with ``starts``."""
    return next(b.code for b in blocks(page) if b.code.lstrip().startswith(starts))


def _header(line: str) -> list[str]:
    """The column names of a table's header line (two spaces or more between names; a pipe table too)."""
    if line.startswith(("|", "> |")):
        return [c.strip() for c in line.removeprefix(">").strip().strip("|").split("|")]
    return re.split(r"\s{2,}", line.strip())


def test_readme_demo_prints_the_table_and_files_it_shows(tmp_path: Path) -> None:
    shown = _doc_block("README.md", "$ nsightx demo").splitlines()
    done = _run([sys.executable, "-m", "nsightx", "demo"], tmp_path)
    assert done.returncode == 0, done.stderr
    out = done.stdout.splitlines()
    assert _header(out[0]) == _header(shown[2])
    doc_rows = [line for line in shown if line.startswith("matmul ")]
    rows = [line for line in out if line.startswith("matmul ")]
    assert [r.split()[:3] for r in rows] == [r.split()[:3] for r in doc_rows]
    assert "device: CPU (host backend), 1 BLAS thread" in out
    files = [line.strip() for line in shown if line.startswith("  ")]
    assert [line.strip() for line in out if line.startswith("  ")] == files
    assert sorted(p.name for p in (tmp_path / "nsightx-out").iterdir()) == files
    assert done.stderr.startswith("nsightx: matmul: 4 config(s) x 10 run(s) on host in ")
    # `nsightx show` and `nsightx plot ... --type violin`, as the README goes on
    saved = "nsightx-out/result-matmul-0.parquet"
    shown_again = _run([sys.executable, "-m", "nsightx", "show", saved], tmp_path)
    assert shown_again.returncode == 0 and _header(shown_again.stdout.splitlines()[1]) == _header(shown[2])
    violin = _run([sys.executable, "-m", "nsightx", "plot", saved, "runs.png", "--type", "violin"], tmp_path)
    assert violin.returncode == 0 and (tmp_path / "runs.png").stat().st_size > 0, violin.stderr


def test_command_line_conventions(tmp_path: Path) -> None:
    """README's and api.md's rules: ``--version``, bare ``nsightx`` exits 2, one-line errors, no abbreviation."""
    version = _run([sys.executable, "-m", "nsightx", "--version"], tmp_path)
    assert version.returncode == 0 and version.stdout.startswith("nsightx ")
    bare = _run([sys.executable, "-m", "nsightx"], tmp_path)
    assert bare.returncode == 2 and "usage: nsightx" in bare.stdout + bare.stderr
    bad = _run([sys.executable, "-m", "nsightx", "demo", "--runs", "0"], tmp_path)
    assert bad.returncode == 2 and bad.stderr.startswith("nsightx demo: ") and "--runs" in bad.stderr
    assert "Traceback" not in bad.stderr
    unknown = _run([sys.executable, "-m", "nsightx", "demo", "--frobnicate"], tmp_path)
    assert unknown.returncode == 2
    api = " ".join((ROOT / "docs" / "api.md").read_text(encoding="utf-8").split())  # line breaks as spaces
    assert f"`{unknown.stderr.strip()}`" in api
    prefix = _run([sys.executable, "-m", "nsightx", "compare", "old.parquet", "new.parquet", "--thresh", "3"], tmp_path)
    assert "`nsightx compare old.parquet new.parquet --thresh 3` is refused, naming `--threshold`" in api
    assert prefix.returncode == 2 and len(prefix.stderr.strip().splitlines()) == 1
    assert "--thresh is not accepted as an abbreviation of --threshold" in prefix.stderr


def test_plugins_page_shows_the_backends_table_as_printed(tmp_path: Path) -> None:
    page = (ROOT / "docs" / "plugins.md").read_text(encoding="utf-8").splitlines()
    first = next(i for i, line in enumerate(page) if line.strip().startswith("'auto' picks the first"))
    doc = [line.strip() for line in page[first : first + 6]]  # an indented block: the table as printed
    done = _run([sys.executable, "-m", "nsightx", "backends"], tmp_path)
    assert done.returncode == 0, done.stderr
    out = done.stdout.splitlines()
    assert out[:2] == doc[:2]
    assert [line.split()[:3] for line in out[2:6]] == [line.split()[:3] for line in doc[2:6]]


DATA = ROOT / "docs" / "data"


def test_ci_page_compare_of_the_recorded_results_prints_what_it_shows(tmp_path: Path) -> None:
    base, new = str(DATA / "h200-gemm-tf32.json"), str(DATA / "h200-gemm-fp32.json")
    text = _run([sys.executable, "-m", "nsightx", "compare", base, new, "--threshold", "5"], tmp_path)
    assert text.returncode == 1, text.stderr
    assert "FAIL: 3 significant slowdown(s) larger than 5% (3 slower)" in text.stdout
    markdown = _run(
        [sys.executable, "-m", "nsightx", "compare", base, new, "--threshold", "5", "--format", "markdown"], tmp_path
    )
    assert markdown.returncode == 1, markdown.stderr
    page = (ROOT / "docs" / "ci.md").read_text(encoding="utf-8")
    quoted = [line.removeprefix(">").strip() for line in page.splitlines() if line.startswith("> ")]
    printed = [line.strip() for line in markdown.stdout.splitlines() if line.strip()]
    assert [line for line in quoted if line] == printed
    same = _run([sys.executable, "-m", "nsightx", "compare", base, base], tmp_path)
    assert same.returncode == 0
    assert "no change: baseline and new hold identical runs (3 row(s))" in same.stdout
    assert "no change: baseline and new hold identical runs (3 row(s))" in page


def _cli_options() -> dict[str, set[str]]:
    """Each ``nsightx`` command and the long options its parser accepts (``--help`` aside)."""
    from nsightx.cli import _parser

    parser = _parser()
    return {
        name: {f for a in sub._actions for f in a.option_strings if f.startswith("--") and f != "--help"}
        for name, sub in parser.commands.items()
    }


def test_api_page_lists_every_command_with_exactly_its_options() -> None:
    page = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")
    listed = {}
    for synopsis in re.findall(r"^\| `nsightx ([a-z]+)([^`]*)`", page, flags=re.MULTILINE):
        listed[synopsis[0]] = set(re.findall(r"--[a-z][a-z-]*", synopsis[1]))
    assert listed == _cli_options()


REFUSED_ON_PURPOSE = frozenset({"--frobnicate", "--thresh"})
"""Options api.md gives as examples of a misuse (test_command_line_conventions runs them)."""

COMMAND_LINE = re.compile(r"(?:^|[`$] ?)(?:python -m )?nsightx ([a-z]+)\b([^`\n|]*)")


def test_every_option_a_page_gives_a_command_is_accepted() -> None:
    options = _cli_options()
    wrong = []
    for page in PAGES:
        for command, rest in COMMAND_LINE.findall((ROOT / page).read_text(encoding="utf-8")):
            if command not in options:
                continue
            used = set(re.findall(r"(?<![\w-])--[a-z][a-z-]*", rest))
            wrong += [
                f"{page}: nsightx {command} {o}" for o in used - options[command] - {"--help"} - REFUSED_ON_PURPOSE
            ]
    assert not wrong


def test_ci_page_lists_exactly_the_pytest_plugins_options(tmp_path: Path) -> None:
    page = (ROOT / "docs" / "ci.md").read_text(encoding="utf-8")
    listed = set(re.findall(r"^\| `(--nsightx-[a-z-]+)", page, flags=re.MULTILINE))
    done = _run([sys.executable, "-m", "pytest", "--help", "-p", "no:cacheprovider"], tmp_path)
    assert done.returncode == 0, done.stderr
    assert listed == set(re.findall(r"^\s+(--nsightx-[a-z-]+)", done.stdout, flags=re.MULTILINE))


def _calls(tree: ast.Module) -> list[tuple[str, ast.Call]]:
    """Each call of an nsightx function the code makes directly, ``nsightx.x.y(...)``, with the dotted name."""
    aliases = _aliases(tree)
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        chain, func = [], node.func
        while isinstance(func, ast.Attribute):
            chain.insert(0, func.attr)
            func = func.value
        if chain and isinstance(func, ast.Name) and func.id in aliases:
            found.append((".".join(chain), node))
    return found


@pytest.mark.parametrize("block", PYTHON, ids=lambda b: b.id)
def test_python_block_calls_nsightx_with_arguments_its_signature_takes(block: Block) -> None:
    """A keyword the function does not take, or too many positional arguments, is a TypeError for the user."""
    wrong = []
    for name, call in _calls(parse(block)):
        target = resolve(name)
        if isinstance(target, type) or not callable(target):
            continue
        args = [None] * sum(not isinstance(a, ast.Starred) for a in call.args)
        kwargs = {k.arg: None for k in call.keywords if k.arg is not None}
        try:
            inspect.signature(target).bind(*args, **kwargs)
        except TypeError as e:
            wrong.append(f"nsightx.{name}: {e}")
    assert not wrong, f"{block.id}: {wrong}"


MODULE_NAMES = frozenset({"nsightx", "nsight", "torch", "operator", "time", "sys", "os", "numpy", "np", "pytest"})
"""Names a page's code reads as modules: a complete example (one that imports anything) must import them."""


@pytest.mark.parametrize("block", [b for b in PYTHON if not _is_fragment(b)], ids=lambda b: b.id)
def test_complete_example_imports_the_modules_it_uses(block: Block) -> None:
    tree = parse(block)
    imported = {
        (a.asname or a.name).split(".")[0]
        for n in ast.walk(tree)
        if isinstance(n, ast.Import | ast.ImportFrom)
        for a in n.names
    }
    used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    assert not (used & MODULE_NAMES) - imported, f"{block.id} uses {sorted((used & MODULE_NAMES) - imported)}"


def _selections(tree: ast.Module) -> list[tuple[str, list[str]]]:
    """``x.to_dataframe()[[...]]`` and ``x.roofline()[[...]]`` in the code: the method and the column names."""
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Subscript) and isinstance(node.slice, ast.List)):
            continue
        call = node.value
        if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute):
            names = [e.value for e in node.slice.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
            found.append((call.func.attr, names))
    return found


def _parses(block: Block) -> bool:
    """True when the block parses (the compile test names the error of one that does not)."""
    try:
        parse(block)
    except SyntaxError:
        return False
    return True


SELECTIONS = [(b, method, names) for b in PYTHON if _parses(b) for method, names in _selections(parse(b))]


def test_pages_select_columns_from_results() -> None:
    assert {method for _, method, _ in SELECTIONS} >= {"to_dataframe", "roofline"}


@pytest.mark.parametrize(("block", "method", "names"), SELECTIONS, ids=lambda v: getattr(v, "id", None))
def test_columns_a_page_selects_exist(block: Block, method: str, names: list[str], plugin_host: object) -> None:
    """The columns of a result measured on the host, the roofline's, a config's parameter ``n`` and ``Device``
    (every result measured with ``parallel_devices`` or ``executor`` has it)."""
    from nsightx._results.roofline import COLUMNS

    result = nsightx.measure(lambda: None, runs=2, name="n")
    known = {
        "to_dataframe": {*result.to_dataframe().columns, "Device"},
        "roofline": {"Annotation", "Kernel", "Precision", *COLUMNS.values()},
    }
    assert set(names) - known[method] - {"n"} == set(), f"{block.id}: {method}()[{names}]"


def _gemm_results(tmp_path: Path) -> None:
    """``base/`` and ``new/`` results of a function ``gemm`` measured on the host, over configs no side shares."""
    script = (
        "import nsightx\n"
        "def make(configs, out):\n"
        "    @nsightx.analyze.kernel(configs=configs, runs=3, output_prefix=out, verbosity=0)\n"
        "    def gemm(n):\n"
        "        with nsightx.annotate('gemm'):\n"
        "            sum(range(n))\n"
        "    gemm()\n"
        "make([1024, 2048], 'base/')\n"
        "make([4096], 'new/')\n"
    )
    done = _run([sys.executable, "-c", script], tmp_path)
    assert done.returncode == 0, done.stderr


def test_ci_page_nothing_to_compare_message_is_the_one_printed(tmp_path: Path) -> None:
    _gemm_results(tmp_path)
    done = _run([sys.executable, "-m", "nsightx", "compare", "base", "new"], tmp_path)
    assert done.returncode == 2
    shown = next(b.code for b in blocks("docs/ci.md") if b.code.startswith("nsightx compare: nothing to compare"))
    assert done.stderr == shown


def test_ci_page_baselines_listing_has_the_shape_shown(tmp_path: Path) -> None:
    (tmp_path / "test_timing.py").write_text(
        "import time\nimport nsightx\n\n\ndef nap(n):\n    with nsightx.annotate('nap'):\n        time.sleep(0.001)\n"
        "\n\ndef test_nap(nsightx_bench):\n    nsightx_bench(nap, configs=[1], runs=3)\n",
        encoding="utf-8",
    )
    pytest_args = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_timing.py"]
    for _ in range(2):
        saved = _run([*pytest_args, "--nsightx-save=perf-baseline"], tmp_path)
        assert saved.returncode == 0, saved.stdout + saved.stderr
    listed = _run([sys.executable, "-m", "nsightx", "baselines", "perf-baseline"], tmp_path)
    assert listed.returncode == 0, listed.stderr
    shown = _doc_block("docs/ci.md", "$ nsightx baselines perf-baseline").splitlines()[1:]
    out = listed.stdout.splitlines()
    assert out[0] == shown[0]
    assert out[1] == shown[1].replace("3 save(s)", "2 save(s)")  # the node id's hash is the page's too
    pattern = re.compile(r"^(  \*|   ) #\d    commit -           host \S+\s+\d{8}T\d{6}Z$")
    assert all(pattern.match(line) for line in [*out[2:], *shown[2:]]), out


def test_tutorial_doctor_describes_each_backend_as_printed(tmp_path: Path) -> None:
    shown = _doc_block("docs/tutorial.md", "$ nsightx doctor")
    done = _run([sys.executable, "-m", "nsightx", "doctor"], tmp_path)
    assert done.returncode == 0, done.stderr
    heading = "backends (in the order 'auto' prefers them):"
    assert heading in shown and heading in done.stdout
    described = re.compile(r"^  (?:yes|no) +(\w+) +(?:\[[^\]]*\] )?(.+)$", flags=re.MULTILINE)
    assert dict(described.findall(shown)) == dict(described.findall(done.stdout))


BENCH_BLOCKS = [b for b in PYTHON if "nsightx_bench(" in b.code]


@pytest.mark.parametrize("block", BENCH_BLOCKS, ids=lambda b: b.id)
def test_nsightx_bench_examples_pass_an_undecorated_function_they_define(block: Block) -> None:
    """``nsightx_bench`` refuses a function decorated with ``analyze.kernel``; a page that passes one defined
    elsewhere on the page (the README's decorated ``matmul``) shows a test that fails with ``ConfigError``."""
    tree = parse(block)
    defined = {f.name: f for f in tree.body if isinstance(f, ast.FunctionDef)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "nsightx_bench":
            first = node.args[0]
            assert isinstance(first, ast.Name) and first.id in defined, f"{block.id}: define {ast.unparse(first)}"
            assert not defined[first.id].decorator_list, f"{block.id}: {first.id} must be undecorated"
