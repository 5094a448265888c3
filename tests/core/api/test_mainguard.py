"""parallel_devices from a script without a ``__main__`` guard: one clear error, no re-run of its top level.

The scripts are real files run in a subprocess with the host backend, as a user would run them.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import types
from pathlib import Path

import pytest
from _paths import TESTS

from nsightx._api.mainguard import _guarded, _rerun_path

HEADER = f"""\
import sys
import threading
sys.path.insert(0, {str(TESTS)!r})
import nsightx
import par_workload

print("top level ran", flush=True)
profiled = nsightx.analyze.kernel(configs=[1, 2], runs=1, warmup=0, backend="host", parallel_devices=[0],
                                  verbosity=nsightx.VerbosityLevel.SILENT)(par_workload.sleepy)
"""


def _run(tmp_path: Path, body: str) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "bench.py"
    script.write_text(HEADER + textwrap.dedent(body))
    return subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120, cwd=tmp_path)


def test_unguarded_script_gets_one_error_before_any_worker_starts(tmp_path):
    out = _run(tmp_path, "print(profiled().to_dataframe())\n")
    assert out.returncode == 1
    assert out.stdout.count("top level ran") == 1  # no worker ran the script again
    assert "bootstrapping phase" not in out.stderr
    assert out.stderr.count("Traceback") == 1  # the script's own uncaught error, nothing from workers
    last = out.stderr.strip().splitlines()[-1]
    line = len(HEADER.splitlines()) + 1
    assert last.startswith(
        "nsightx._errors.ConfigError: sleepy uses parallel_devices but is called from the top "
        f"level of {tmp_path / 'bench.py'} (line {line}), not under"
    )
    assert 'put the code that runs the sweep under `if __name__ == "__main__":`' in last


def test_guarded_script_runs(tmp_path):
    out = _run(
        tmp_path,
        """\
        if __name__ == "__main__":
            print(profiled().to_dataframe()["n"].unique().tolist())
        """,
    )
    assert out.returncode == 0, out.stderr
    # the worker imports the script too (spawn always does): its unguarded print runs there, the sweep does not
    assert out.stdout.splitlines() == ["top level ran", "top level ran", "[1, 2]"]


def test_call_from_a_thread_is_caught_in_the_worker(tmp_path):
    """The parent cannot see where a thread's call came from: the worker says it, on one line, and exits."""
    out = _run(
        tmp_path,
        """\
        def go():
            try:
                profiled()
            except nsightx.MeasurementError as e:
                print(f"parent got: {e}", file=sys.stderr)

        worker = threading.Thread(target=go)
        worker.start()
        worker.join()
        """,
    )
    assert "bootstrapping phase" not in out.stderr and "Traceback" not in out.stderr
    # multiprocessing's resource tracker may add a warning at exit about the dead worker's semaphore (not ours)
    lines = [line for line in out.stderr.strip().splitlines() if "resource_tracker" not in line]
    assert lines[0].startswith("nsightx: a parallel_devices worker, importing the main script, called sleepy again")
    assert lines[-1].startswith("parent got: config 0 (1,) failed on device 0:cpu")
    assert "its worker process died" in lines[-1] and "guard" in lines[-1]


@pytest.mark.parametrize(
    ("source", "line", "guarded"),
    [
        ('if __name__ == "__main__":\n    run()\n', 2, True),
        ('if "__main__" == __name__:\n    run()\n', 2, True),
        ("if __name__ in ('__main__',):\n    run()\n", 2, True),
        ("run()\n", 1, False),
        ("def main():\n    run()\n\nmain()\n", 4, False),
        ("with open('x') as f:\n    run()\n", 2, False),
        ("if True:\n    run()\n", 2, False),
        ("x = 1\n", 5, None),
    ],
)
def test_guard_detection(tmp_path, source, line, guarded):
    path = tmp_path / "s.py"
    path.write_text(source)
    assert _guarded(str(path), line) is guarded


def test_modules_spawn_does_not_rerun_are_not_checked(tmp_path):
    script = tmp_path / "s.py"
    script.write_text("")
    as_script = types.ModuleType("__main__")
    as_script.__file__ = str(script)
    assert _rerun_path(as_script) == str(script)
    interactive = types.ModuleType("__main__")  # python -c, a REPL, a notebook: no file
    assert _rerun_path(interactive) is None
    package_main = types.ModuleType("__main__")  # python -m pkg runs pkg/__main__.py, which spawn skips
    package_main.__file__ = str(script)
    package_main.__spec__ = types.SimpleNamespace(name="pkg.__main__")  # type: ignore[assignment]
    assert _rerun_path(package_main) is None
