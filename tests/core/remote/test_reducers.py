"""Objects pickle cannot send as they are: the reducer registry (``nsightx.ext.register_reducer``), the Triton
kernel reducer and the size limit on tensors, arrays and models (issue 36).

The registry is tested with a real reducer for a class that holds an RLock, in this process and through the
real ncu worker under the fake ncu (the double at the ncu-binary boundary). Triton is not installed on the CPU
machines: a stand-in ``triton`` package written to ``tmp_path`` (the double at the Triton boundary) has a
``JITFunction`` that, like Triton's, holds an RLock and reads its function's source when built;
``tests/backends/ncu/test_triton_gpu.py`` runs the real thing.
"""

from __future__ import annotations

import json
import linecache
import pickle
import subprocess
import sys
import textwrap
import threading

import ncu_fake
import numpy as np
import pytest

import nsightx
from nsightx import ext
from nsightx._remote import reducers, travel

pytest.importorskip("cloudpickle")

TO = travel.Destination("the test worker", "measure in process")


class Guarded:
    """A value that refuses pickling: it holds an RLock, as a Triton kernel does."""

    def __init__(self, scale: int) -> None:
        self.scale = scale
        self.lock = threading.RLock()


def _rebuild_guarded(scale: int) -> Guarded:
    return Guarded(scale)


def _reduce_guarded(g: Guarded) -> object:
    return _rebuild_guarded, (g.scale,)


GUARD = Guarded(3)


def _uses_guard():
    def f(n):  # defined in a function: travels by value, with the global GUARD
        with GUARD.lock:
            return GUARD.scale * n

    return f


def _dump(fn) -> bytes:
    return travel.dump_checked(fn, function=fn, name="f", configs=[(1,)], params=["n"], destination=TO)


@pytest.fixture
def registered():
    ext.register_reducer(Guarded, _reduce_guarded)
    yield
    ext.unregister_reducer(Guarded, _reduce_guarded)


def test_without_a_reducer_the_global_is_named():
    with pytest.raises(travel.UnpicklableError, match=r"global `GUARD`, a test_reducers.Guarded, cannot be pickled"):
        _dump(_uses_guard())


def test_a_registered_reducer_makes_the_global_travel(registered):
    fn = pickle.loads(_dump(_uses_guard()))
    assert fn(2) == 6  # rebuilt with its scale and a lock of its own


@pytest.mark.parametrize("kind", ["test_reducers.Guarded", lambda obj: isinstance(obj, Guarded)])
def test_reducers_keyed_by_qualified_name_or_predicate(kind):
    ext.register_reducer(kind, _reduce_guarded)
    try:
        assert pickle.loads(_dump(_uses_guard()))(5) == 15
    finally:
        ext.unregister_reducer(kind, _reduce_guarded)
    with pytest.raises(travel.UnpicklableError):
        _dump(_uses_guard())


def test_newest_registration_wins_and_not_implemented_pickles_as_usual(registered):
    refuse = lambda g: (_ for _ in ()).throw(RuntimeError("refused by the newer rule"))  # noqa: E731
    ext.register_reducer("test_reducers.Guarded", refuse)
    try:
        with pytest.raises(travel.UnpicklableError, match="refused by the newer rule"):
            _dump(_uses_guard())
    finally:
        ext.unregister_reducer("test_reducers.Guarded", refuse)
    as_usual = lambda obj: NotImplemented  # noqa: E731
    ext.register_reducer(Guarded, as_usual)
    try:
        with pytest.raises(travel.UnpicklableError, match=r"cannot pickle '_thread\.RLock'"):
            _dump(_uses_guard())
    finally:
        ext.unregister_reducer(Guarded, as_usual)


@pytest.mark.parametrize(
    ("kind", "reduce", "match"),
    [
        ("Guarded", _reduce_guarded, "not a qualified class name"),
        (3, _reduce_guarded, "kind must be a class"),
        (Guarded, "nope", "reduce must be callable"),
    ],
)
def test_bad_registrations_are_refused(kind, reduce, match):
    with pytest.raises(nsightx.ConfigTypeError, match=match):
        ext.register_reducer(kind, reduce)


def test_registered_reducer_carries_a_main_script_global_to_the_ncu_worker(tmp_path, monkeypatch):
    """End to end: a script's module-level object reaches the real worker (under the fake ncu) and is used there."""
    pytest.importorskip("nvtx")
    pytest.importorskip("ncu_report")
    ncu_fake.use_fake_ncu(monkeypatch, tmp_path)
    script = tmp_path / "bench.py"
    script.write_text(
        textwrap.dedent("""
        import json, os, threading
        import nsightx
        from nsightx.ext import register_reducer

        class Sensor:  # holds an RLock, like a Triton kernel
            def __init__(self, scale):
                self.scale, self.lock, self.pid = scale, threading.RLock(), os.getpid()

        register_reducer(Sensor, lambda s: (Sensor, (s.scale,)))
        SENSOR = Sensor(3)

        @nsightx.analyze.kernel(configs=[(1,), (2,)], runs=2, backend="ncu", verbosity=0, thermal_mode="off",
                                clock_control="none")
        def scale(n):
            with SENSOR.lock, nsightx.annotate("scale"):
                assert SENSOR.pid == os.getpid() != PARENT  # rebuilt in the worker
                print("scale", SENSOR.scale * n, flush=True)

        PARENT = os.getpid()
        print(json.dumps(scale().to_dataframe()["NumRuns"].tolist()))
        """)
    )
    out = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=ncu_fake.subprocess_env(FAKE_NCU_REPORT=str(ncu_fake.ONE_METRIC)),
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) == [2, 2]


# --- the Triton reducer, keyed by name: triton is imported only to rebuild a kernel ------------------------------

FAKE_TRITON = '''
"""Stand-in for triton.runtime.jit: the parts of JITFunction nsightx relies on."""
import inspect
import threading


class JITFunction:
    def __init__(self, fn, version=None, do_not_specialize=None, do_not_specialize_on_alignment=None, debug=None,
                 noinline=None, repr=None, launch_metadata=None):
        self.fn = fn
        self.version = version
        self.do_not_specialize = do_not_specialize if do_not_specialize else []
        self.do_not_specialize_on_alignment = do_not_specialize_on_alignment if do_not_specialize_on_alignment else []
        self.debug = debug
        self.noinline = noinline
        self._repr = repr
        self.launch_metadata = launch_metadata
        self.raw_src, self.starting_line_number = inspect.getsourcelines(fn)  # as Triton's does
        self.compile_lock = threading.RLock()

    def __getitem__(self, grid):
        return lambda *args: self.fn(*args)


def jit(fn=None, *, version=None, repr=None, launch_metadata=None, do_not_specialize=None,
        do_not_specialize_on_alignment=None, debug=None, noinline=None):
    def decorator(fn):
        return JITFunction(fn, version=version, do_not_specialize=do_not_specialize,
                           do_not_specialize_on_alignment=do_not_specialize_on_alignment, debug=debug,
                           noinline=noinline, repr=repr, launch_metadata=launch_metadata)
    return decorator(fn) if fn is not None else decorator
'''


@pytest.fixture
def fake_triton(tmp_path, monkeypatch):
    package = tmp_path / "site" / "triton"
    (package / "runtime").mkdir(parents=True)
    (package / "__init__.py").write_text("from triton.runtime.jit import jit, JITFunction\n")
    (package / "runtime" / "__init__.py").write_text("")
    (package / "runtime" / "jit.py").write_text(FAKE_TRITON)
    for name in [m for m in sys.modules if m == "triton" or m.startswith("triton.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    return tmp_path / "site"


NOTEBOOK_CELL = """
import triton


@triton.jit(debug=True, do_not_specialize=["n"])
def axpb(x, n):
    return 2 * x + n


@triton.jit
def twice(x):
    return 2 * x


def run(x):
    return axpb[(1,)](x, 1) + twice[(1,)](x)
"""


def _cell(name: str) -> dict:
    """Run a cell as IPython does: code compiled under a file name that exists only in the line cache."""
    filename = f"/nonexistent/ipykernel/{name}.py"
    linecache.cache[filename] = (len(NOTEBOOK_CELL), None, NOTEBOOK_CELL.splitlines(True), filename)
    namespace: dict = {"__name__": "__main__"}
    exec(compile(NOTEBOOK_CELL, filename, "exec"), namespace)
    return namespace


def test_triton_kernel_global_is_rebuilt_from_its_function_with_its_options(fake_triton):
    cell = _cell("cell1")
    with pytest.raises(TypeError, match="RLock"):  # what cloudpickle alone does with it
        import cloudpickle

        cloudpickle.dumps(cell["axpb"])
    data = _dump(cell["run"])
    linecache.cache.pop("/nonexistent/ipykernel/cell1.py")  # the worker has no such line cache entry
    run = pickle.loads(data)
    assert run(5) == 21
    kernel, other = run.__globals__["axpb"], run.__globals__["twice"]
    assert type(kernel).__module__ == "triton.runtime.jit" and kernel is not cell["axpb"]
    assert kernel.debug is True and kernel.do_not_specialize == ["n"] and other.debug is None
    # each found its source again (from the lines sent along), under the cell's name
    assert kernel.raw_src == cell["axpb"].raw_src and other.raw_src == cell["twice"].raw_src
    assert kernel.fn.__code__.co_filename == "/nonexistent/ipykernel/cell1.py"


def test_triton_kernel_of_a_script_finds_its_source_in_the_script(fake_triton, tmp_path):
    """cloudpickle renames the file of a function sent by value ``<dynamic-code>``; the kernel gets its own back."""
    script = tmp_path / "script.py"
    script.write_text(NOTEBOOK_CELL)
    namespace: dict = {"__name__": "__main__"}
    exec(compile(NOTEBOOK_CELL, str(script), "exec"), namespace)
    run = pickle.loads(_dump(namespace["run"]))
    assert run(1) == 5
    assert run.__globals__["twice"].raw_src == namespace["twice"].raw_src
    assert str(script) not in linecache.cache or linecache.cache[str(script)][1] is not None  # read from the file


def test_matching_by_name_never_imports_triton(fake_triton):
    import cloudpickle  # noqa: F401  (imported before the check: it is not what is checked)

    plain = {"n": 3, "array": np.zeros(4), "guard": [1, 2.0, "x"]}
    travel.dumps(plain)
    travel.dumps(_uses_guard)
    assert "triton" not in sys.modules


# --- tensors, arrays and models travel by value only when small -------------------------------------------------


BIG = np.zeros(1 << 20, dtype=np.uint8)  # 1 MiB


def _uses_big():
    def f(n):
        return int(BIG[:n].sum())

    return f


def test_a_large_module_level_array_is_refused_with_its_size_and_what_to_do(monkeypatch):
    monkeypatch.setattr(reducers, "MAX_VALUE_BYTES", 512 * 1024)
    with pytest.raises(travel.UnpicklableError) as info:
        _dump(_uses_big())
    text = str(info.value)
    assert "global `BIG`, a numpy.ndarray of 1.0 MiB, is too large to travel by value (the limit is 512.0 KiB" in text
    assert "create `BIG` inside f" in text and "into an importable module" in text
    assert "register_reducer('numpy.ndarray', lambda obj: NotImplemented) lifts it" in text
    assert info.value.what == "global `BIG`"


def test_a_small_array_travels_and_the_limit_can_be_lifted(monkeypatch):
    assert pickle.loads(_dump(_uses_big()))(4) == 0  # 1 MiB is under the default limit
    monkeypatch.setattr(reducers, "MAX_VALUE_BYTES", 512 * 1024)
    lift = lambda obj: NotImplemented  # noqa: E731
    ext.register_reducer("numpy.ndarray", lift)
    try:
        assert pickle.loads(_dump(_uses_big()))(4) == 0
    finally:
        ext.unregister_reducer("numpy.ndarray", lift)


def test_a_large_config_argument_is_refused_with_its_size(monkeypatch):
    monkeypatch.setattr(reducers, "MAX_VALUE_BYTES", 1024)

    def f(x):
        return None

    configs = [(BIG,)]
    with pytest.raises(travel.UnpicklableError, match=r"config 0 argument `x`, a numpy.ndarray of 1.0 MiB, is too"):
        travel.dump_checked((f, configs), function=f, name="f", configs=configs, params=["x"], destination=TO)


def test_a_container_holding_a_large_array_names_both(monkeypatch):
    monkeypatch.setattr(reducers, "MAX_VALUE_BYTES", 1024)
    table = {"weights": BIG}

    def f(n):
        return table["weights"][n]

    with pytest.raises(travel.UnpicklableError, match=r"closure variable `table`, a dict holding a numpy.ndarray of 1"):
        _dump(f)


def test_too_large_error_pickles_whole():
    error = reducers.ValueTooLargeError("torch.Tensor", 3 << 20, 1 << 20, "torch.Tensor")
    again = pickle.loads(pickle.dumps(error))
    assert (again.kind, again.size, again.limit, again.key, str(again)) == (
        "torch.Tensor",
        3 << 20,
        1 << 20,
        "torch.Tensor",
        str(error),
    )


@pytest.mark.gpu
def test_torch_tensors_and_models_travel_by_value_only_when_small(monkeypatch):
    """torch is on the GPU machines only; the tensors here are on the CPU, the rule is the same for CUDA ones."""
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(reducers, "MAX_VALUE_BYTES", 1 << 20)
    small, weights, model = torch.ones(1024), torch.ones(1 << 20), torch.nn.Linear(1024, 1024)
    view = weights[:10]  # pickling a view sends the storage it views: 4 MiB

    def uses(value):
        def f(n):
            return value

        return f

    assert pickle.loads(_dump(uses(small)))(1).shape == (1024,)
    for value, kind in ((weights, "torch.Tensor"), (view, "torch.Tensor"), (model, "torch.nn.modules.linear.Linear")):
        with pytest.raises(travel.UnpicklableError, match=rf"`value`, a {kind} of 4\.0 MiB, is too large"):
            _dump(uses(value))
