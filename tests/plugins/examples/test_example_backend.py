"""The example third-party backend, pip-installed for real, measures a sweep with no change to nsightx.

``plugins/example_backend`` is written only against :mod:`nsightx.ext`; docs/plugins.md walks through it.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from _paths import ROOT

PACKAGE = ROOT / "plugins" / "example_backend"
METRIC = "cpu__process_time.sum"

SCRIPT = textwrap.dedent("""
    import io, json, contextlib, sys, warnings
    import nsightx
    from nsightx.cli import main

    collect = sys.argv[1]

    @nsightx.analyze.kernel(configs=[(1,), (4,)], runs=3, warmup=1, backend="cputime",
                            verbosity=nsightx.VerbosityLevel.SILENT, backend_options={"cputime_collect": collect})
    def sweep(n):
        with nsightx.annotate("work"):
            sum(i * i for i in range(100_000 * n))
        with nsightx.annotate("bad", ignore_failures=True):
            raise RuntimeError("boom")

    @nsightx.analyze.kernel(configs=[(1,)], runs=1, warmup=0, verbosity=nsightx.VerbosityLevel.SILENT)
    def auto(n):
        with nsightx.annotate("a"):
            pass

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        res = sweep()
    df = res.to_dataframe()
    listing = io.StringIO()
    with contextlib.redirect_stdout(listing):
        main(["backends"])
    print(json.dumps({
        "backend": res.backend,
        "rows": df[["Annotation", "Metric", "n", "AvgValue", "NumRuns", "Kernel", "Unit"]].to_dict("records"),
        "runs": res.runs_dataframe()["Run"].tolist(),
        "environment": {k: res.environment[k] for k in ("GPU", "CPU")},
        "auto": auto().backend,
        "listing": listing.getvalue(),
    }, default=str))
""")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """pip-install the backend's own pyproject into a fresh target folder (no index, no dependencies)."""
    target = tmp_path_factory.mktemp("site")
    cmd = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-compile", "--target", str(target)]
    if importlib.util.find_spec("hatchling") is not None:
        cmd += ["--no-build-isolation", "--no-index"]  # offline: build with the hatchling installed here
    out = subprocess.run([*cmd, str(PACKAGE)], capture_output=True, text=True, timeout=300, check=False)
    assert out.returncode == 0, out.stderr
    assert (target / "nsightx_example_backend" / "__init__.py").is_file()
    return target


def run_with(site: Path, collect: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    for var in ("NSIGHTX_BLOCK_PLUGINS", "NSIGHTX_DISABLE_PLUGIN_AUTOLOAD", "NSIGHTX_PLUGINS"):
        env.pop(var, None)
    env["PYTHONPATH"] = os.pathsep.join([str(site), env.get("PYTHONPATH", "")])
    return subprocess.run(
        [sys.executable, "-c", SCRIPT, collect], capture_output=True, text=True, env=env, timeout=300, check=False
    )


@pytest.mark.parametrize("collect", ["batch", "run"])
def test_installed_backend_measures_a_sweep(site: Path, collect: str) -> None:
    out = run_with(site, collect)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["backend"] == "cputime"
    rows = {(r["Annotation"], r["n"]): r for r in result["rows"]}
    assert sorted(rows) == [("bad", 1), ("bad", 4), ("work", 1), ("work", 4)]
    for n in (1, 4):
        work = rows[("work", n)]
        assert work["Metric"] == METRIC and work["Unit"] == "ns" and work["Kernel"] == "region"
        assert work["NumRuns"] == 3 and work["AvgValue"] > 0
        bad = rows[("bad", n)]  # a failed region has no record: NaN values, Kernel "failed"
        assert bad["Kernel"] == "failed" and bad["NumRuns"] == 0 and math.isnan(bad["AvgValue"])
    assert rows[("work", 4)]["AvgValue"] > rows[("work", 1)]["AvgValue"]  # four times the work
    assert sorted(set(result["runs"])) == [0, 1, 2]  # warm-up runs are discarded
    assert result["environment"]["GPU"] is None and result["environment"]["CPU"]


def test_installed_backend_is_listed_and_not_chosen_by_auto(site: Path) -> None:
    out = run_with(site, "batch")
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout.strip().splitlines()[-1])
    line = next(line for line in result["listing"].splitlines() if line.startswith("cputime "))
    assert line.split()[:5] == ["cputime", "1000", "no", "available", "cputime"]  # name cost auto status plugin
    assert result["auto"] == "host"  # Capabilities.auto is False: auto never picks it


def test_a_bad_option_is_refused_before_anything_runs(site: Path) -> None:
    out = run_with(site, "sometimes")
    assert out.returncode != 0
    assert "backend_options['cputime_collect']='sometimes' must be 'batch' or 'run'" in out.stderr


def test_without_installing_the_backend_is_unknown() -> None:
    out = run_with(Path("/nonexistent"), "batch")
    assert out.returncode != 0 and "unknown backend 'cputime'" in out.stderr


def test_availability_never_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(PACKAGE))
    import time

    import nsightx_example_backend as example

    assert example.CpuTimeBackend.availability().available

    def broken() -> int:
        raise OSError("no clock")

    monkeypatch.setattr(time, "process_time_ns", broken)
    avail = example.CpuTimeBackend.availability()
    assert not avail.available and "no clock" in avail.reason and avail.remedy


def _contains(source: list[str], excerpt: list[str]) -> bool:
    n = len(excerpt)
    return any(source[i : i + n] == excerpt for i in range(len(source) - n + 1))


def test_the_guide_quotes_the_example_as_it_is() -> None:
    """Every Python block of docs/plugins.md's backend guide is an excerpt of the tested package.

    Blank lines and the excerpt's indentation are ignored (ruff formats the guide's blocks as top-level code).
    """
    guide = (ROOT / "docs" / "plugins.md").read_text(encoding="utf-8").split("## Writing a backend", 1)[1]
    source = (PACKAGE / "nsightx_example_backend" / "__init__.py").read_text(encoding="utf-8")
    lines = [line for line in source.splitlines() if line.strip()]
    blocks = re.findall(r"```python\n(.*?)```", guide, flags=re.S)
    assert len(blocks) >= 5
    for block in blocks:
        excerpt = [line for line in textwrap.dedent(block).splitlines() if line.strip()]
        assert any(_contains(lines, [" " * indent + line for line in excerpt]) for indent in (0, 4, 8)), block
