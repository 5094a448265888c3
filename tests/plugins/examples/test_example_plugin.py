"""The example third-party plugin, pip-installed for real, adds its column with no change to nsightx."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from _paths import ROOT

PLUGIN = ROOT / "plugins" / "example_plugin"

SCRIPT = textwrap.dedent("""
    import json, io, contextlib
    import nsightx
    from nsightx.cli import main

    @nsightx.analyze.kernel(configs=[(1,), (2,)], runs=3, warmup=0, backend="host",
                            verbosity=nsightx.VerbosityLevel.SILENT, info_collectors=["hostload"])
    def f(n):
        with nsightx.annotate("a"):
            sum(range(1000 * n))

    res = f()
    listing = io.StringIO()
    with contextlib.redirect_stdout(listing):
        main(["plugins"])
    print(json.dumps({
        "raw": res.runs_dataframe()["HostLoad1m"].tolist(),
        "agg": [c for c in res.to_dataframe().columns if c.startswith("HostLoad1m")],
        "listing": listing.getvalue(),
    }))
""")


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """pip-install the plugin's own pyproject into a fresh target folder (no index, no dependencies)."""
    target = tmp_path_factory.mktemp("site")
    cmd = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-compile", "--target", str(target)]
    if importlib.util.find_spec("hatchling") is not None:
        cmd += ["--no-build-isolation", "--no-index"]  # offline: build with the hatchling installed here
    out = subprocess.run([*cmd, str(PLUGIN)], capture_output=True, text=True, timeout=300, check=False)
    assert out.returncode == 0, out.stderr
    assert (target / "nsightx_example_plugin" / "__init__.py").is_file()
    return target


def run_with(site, env_extra=None):
    env = dict(os.environ)
    env.pop("NSIGHTX_BLOCK_PLUGINS", None)
    env.pop("NSIGHTX_DISABLE_PLUGIN_AUTOLOAD", None)
    env["PYTHONPATH"] = os.pathsep.join([str(site), env.get("PYTHONPATH", "")])
    env.update(env_extra or {})
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, timeout=300, check=False
    )
    return out


def test_installed_plugin_adds_its_column(site):
    out = run_with(site)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert len(result["raw"]) == 6 and all(isinstance(v, float) for v in result["raw"])
    assert result["agg"] == ["HostLoad1m_Avg", "HostLoad1m_Std", "HostLoad1m_Min", "HostLoad1m_Max"]
    assert "hostload (nsightx-example-plugin 0.1.0)" in result["listing"]
    assert "HostLoad1m [run]" in result["listing"]


def test_blocked_plugin_is_not_loaded(site):
    out = run_with(site, {"NSIGHTX_BLOCK_PLUGINS": "hostload"})
    assert out.returncode != 0
    assert "unknown collector set 'hostload'" in out.stderr


def test_without_installing_the_set_is_unknown():
    out = run_with(Path("/nonexistent"))
    assert out.returncode != 0 and "unknown collector set 'hostload'" in out.stderr
