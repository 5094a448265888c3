"""A naive third-party backend package, installed as a distribution, against what the docs say of the contract.

docs/plugins.md ("Writing a backend", "How 'auto' picks a backend"), docs/api.md (the ``Session`` table) and the
docstrings of ``nsightx/_run/backend.py`` say what a session may do and what the result then holds. The
package below (a module and its ``.dist-info`` with an ``nsightx`` entry point, put on ``sys.path`` as
``pip install --target`` would) is found by the real entry-point discovery. Its deferred session misbehaves
as the contract allows: runs handed back in any order, some never, extra and warm-up keys, an error after some
runs; the reference says, per the docs, what the raw file then holds and what is raised. Other packages
register a backend named like the built-in ``host`` and backends that tie with it in ``"auto"``.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import itertools
import math
import random
import sys
import textwrap
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import nsightx
from nsightx._pluginhost import plugins as _plugins
from nsightx._remote.child import LinkedSession
from nsightx._results.sink import RunSink
from nsightx._run.loop import run_loop
from nsightx._run.plan import Plan
from nsightx.ext import read_raw

NAIVE = textwrap.dedent('''
    """A naive third-party backend: a deferred session whose collections do what ``SCRIPT`` says."""
    import contextlib

    from nsightx.ext import Availability, Backend, Capabilities, RunOutput, Session, hookimpl, new_record

    METRIC = "naive__value.sum"
    SCRIPT = {}
    """Set by the test: ``value(key) -> float``, ``order(keys) -> keys``, ``drop``, ``extra``, ``raise_after``,
    ``incremental``, ``availability`` (a callable), ``opened`` (a list the session appends to)."""


    class Boom(Exception):
        pass


    class NaiveSession(Session):
        deferred = True

        def __init__(self):
            self._finished, self._regions, self._handed = [], {}, 0
            SCRIPT.setdefault("opened", []).append(self)

        def region_enter(self, region):
            pass

        def region_exit(self, region, failed):
            self._regions.setdefault((region.config, region.run), []).append(region.annotation)

        def finish_run(self, config, run):
            self._finished.append((config, run))
            return RunOutput()

        def _output(self, key):
            records = [new_record(a, key[0], key[1], "region", METRIC, SCRIPT["value"](key), "ns", 0)
                       for a in self._regions.pop(key, [])]
            return RunOutput(records)

        def _items(self):
            finished, self._finished = self._finished, []
            keys = [k for k in SCRIPT["order"](finished) if k not in SCRIPT["drop"]] + list(SCRIPT["extra"])
            items = [(k, self._output(k)) for k in keys]
            for item in items:
                if self._handed == SCRIPT["raise_after"]:
                    self._handed += 1  # once: the clean-up's collection after the failure hands back nothing
                    raise Boom("tracer died")
                self._handed += 1
                yield item

        def collect_runs(self):
            return dict(self._items())

        def completed_runs(self):
            if SCRIPT["incremental"]:
                yield from self._items()
            else:
                yield from super().completed_runs()


    class NaiveBackend(Backend):
        name = "naive3p"
        description = "a naive third-party backend"
        capabilities = Capabilities(
            metrics=frozenset({METRIC}), default_metrics=(METRIC,), needs_gpu=False, per_device=False
        )

        @classmethod
        def availability(cls):
            check = SCRIPT.get("availability")
            return check() if check else Availability(available=True, reason="always")

        @contextlib.contextmanager
        def session(self, plan):
            yield NaiveSession()


    @hookimpl
    def nsightx_register_backends(register):
        register(NaiveBackend)
''')

IMPOSTOR = textwrap.dedent('''
    """Registers a backend named ``host``, the built-in one's name."""
    from nsightx.ext import Availability, Backend, Capabilities, hookimpl


    class Impostor(Backend):
        name = "host"
        capabilities = Capabilities(
            metrics=frozenset({"x"}), default_metrics=("x",), needs_gpu=False, cost=50, auto=True
        )

        @classmethod
        def availability(cls):
            return Availability(available=True)


    @hookimpl
    def nsightx_register_backends(register):
        register(Impostor)
''')

TIE = textwrap.dedent('''
    """Registers backend ``{name}``, which ties with ``host`` (cost 50) in "auto"."""
    from nsightx.ext import Availability, Backend, Capabilities, hookimpl


    class Tie(Backend):
        name = "{name}"
        capabilities = Capabilities(metrics=None, default_metrics=("x",), needs_gpu=False, cost=50, auto=True)

        @classmethod
        def availability(cls):
            return Availability(available=True)


    @hookimpl
    def nsightx_register_backends(register):
        register(Tie)
''')

TIES = [f"tie3p{i:02d}" for i in range(12)]
"""Backends that tie with ``host``: with a dozen, an order that depends on hashing matches the docs' by chance
about once in a dozen draws for ``host`` first, and practically never for the whole order."""

IMPOSTORS = [f"nsightx_impostor{i}_3p" for i in range(8)]
"""Packages that each register a backend named ``host``: the built-in one must win against every one of them."""


def install(site: Path, module: str, source: str) -> None:
    """A distribution as ``pip install --target`` leaves it: the module and a ``.dist-info`` with an entry point."""
    (site / f"{module}.py").write_text(source)
    info = site / f"{module}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {module.replace('_', '-')}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[nsightx]\n{module} = {module}\n")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The packages on ``sys.path`` for the module's tests (removed, and their modules forgotten, after)."""
    site = tmp_path_factory.mktemp("site")
    install(site, "nsightx_naive3p", NAIVE)
    for name in IMPOSTORS:
        install(site, name, IMPOSTOR)
    for name in TIES:
        install(site, f"nsightx_{name}", TIE.format(name=name))
    sys.path.insert(0, str(site))
    importlib.invalidate_caches()
    try:
        yield site
    finally:
        sys.path.remove(str(site))
        for name in [m for m in sys.modules if m.endswith("_3p") or m.startswith(("nsightx_naive3p", "nsightx_tie3p"))]:
            del sys.modules[name]


@pytest.fixture
def host(site: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """A fresh plugin host that discovers the installed packages (no nvml: no default collector columns)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # the impostor is refused with a warning (tested below)
        host = _plugins.PluginHost(_plugins.LoaderSettings(blocked=("nvml",))).load()
    monkeypatch.setattr(_plugins, "_default", host)
    return host


@pytest.fixture
def naive(host: Any) -> Iterator[Any]:
    """The installed naive package's module, its script reset after the test."""
    module = sys.modules["nsightx_naive3p"]
    yield module
    module.SCRIPT.clear()


# ---- the name of a built-in backend, and ties with it in "auto" ------------------------------------------------


def test_a_package_registering_a_built_in_backends_name_is_refused_and_the_built_in_measures(host: Any) -> None:
    """docs/plugins.md: the first-party backends are registered before any installed plugin, and a registration
    of a name already taken raises ``PluginError`` naming the plugin, which is skipped with nothing of it kept.

    Before, the plugins' registrations were collected in the order of a set (of module objects): about as often
    as not the impostor took ``host``, the built-in host plugin was the one skipped, and ``backend="host"``
    measured with the impostor's class, the result saying ``host``.
    """
    assert host.backends["host"].__module__ == "nsightx_host"
    assert host.backend_plugin["host"] == "host"
    assert "host" not in host.load_errors
    for name in IMPOSTORS:
        assert "already registered by 'host'" in host.load_errors[name]

    @nsightx.analyze.kernel(configs=[()], runs=2, warmup=0, backend="host", verbosity=nsightx.VerbosityLevel.SILENT)
    def f() -> None:
        with nsightx.annotate("a"):
            pass

    assert set(f().runs_dataframe()["Metric"]) == {"host__time_duration.sum"}


def test_backends_that_tie_in_auto_keep_the_order_they_were_registered_in(host: Any) -> None:
    """docs/plugins.md: ties go to the backend registered first; the first-party ones before any installed
    plugin, and installed ones in the order their entry points are found. "auto" picks ``host`` on a CPU."""
    found = [ep.name for ep in importlib.metadata.entry_points(group="nsightx")]
    expected = ["host", *sorted(TIES, key=lambda name: found.index(f"nsightx_{name}"))]
    assert [name for name in host.backends.by_cost() if name in expected] == expected

    @nsightx.analyze.kernel(configs=[()], runs=1, warmup=0, verbosity=nsightx.VerbosityLevel.SILENT)
    def f() -> None:
        with nsightx.annotate("a"):
            pass

    assert f().backend == "host"


# ---- availability() that breaks its contract ------------------------------------------------------------------


def _raises() -> Any:
    raise RuntimeError("probe exploded")


@pytest.mark.parametrize(
    ("check", "reason"),
    [
        (_raises, "availability() raised RuntimeError('probe exploded')"),
        (lambda: "yes", "availability() returned 'yes', not an Availability"),
        (lambda: None, "availability() returned None, not an Availability"),
    ],
)
def test_a_named_backend_whose_availability_breaks_its_contract_is_unavailable_before_any_run(
    naive: Any, host: Any, check: Any, reason: str
) -> None:
    """docs/plugins.md: ``availability()`` "must never raise"; the core reports one that does as unavailable (as
    ``nsightx backends`` and "auto" did). A named backend used to let the exception (or an ``AttributeError`` for a
    value that is no ``Availability``) out of the call, and ``nsightx backends``/``doctor`` crashed on the latter.
    """
    naive.SCRIPT["availability"] = check

    @nsightx.analyze.kernel(configs=[()], runs=1, backend="naive3p", verbosity=nsightx.VerbosityLevel.SILENT)
    def f() -> None:
        with nsightx.annotate("a"):
            pass

    with pytest.raises(nsightx.exceptions.BackendUnavailableError, match="naive3p") as caught:
        f()
    assert reason in str(caught.value)
    assert naive.SCRIPT.get("opened", []) == []  # before any run: no session opened
    listed = host.availability()["naive3p"]  # what `nsightx backends` and `nsightx doctor` print
    assert not listed.available and reason in listed.reason


# ---- a deferred session's collections, against the docs -------------------------------------------------------


@dataclass(frozen=True)
class Script:
    """How the session misbehaves in one sweep."""

    configs: int
    runs: int
    warmup: int
    values: tuple[float, ...]
    seed: int
    drop: frozenset[tuple[int, int]]
    extra: tuple[tuple[int, int], ...]
    raise_after: int | None
    incremental: bool

    def value(self, key: tuple[int, int]) -> float:
        """The session's value for a run (warm-ups and extra keys too)."""
        return self.values[(key[0] * 7 + key[1]) % len(self.values)]


@st.composite
def scripts(draw: st.DrawFn) -> Script:
    configs, runs, warmup = draw(st.integers(1, 3)), draw(st.integers(1, 4)), draw(st.integers(0, 2))
    measured = [(c, r) for c in range(configs) for r in range(runs)]
    every = [(c, r) for c in range(configs) for r in range(-warmup, runs)]
    return Script(
        configs,
        runs,
        warmup,
        tuple(draw(st.lists(st.floats(allow_nan=True, allow_infinity=True, width=64), min_size=1, max_size=5))),
        draw(st.integers(0, 2**16)),
        frozenset(draw(st.lists(st.sampled_from(every), max_size=3))) if measured else frozenset(),
        tuple(draw(st.lists(st.sampled_from([(0, runs), (0, runs + 5), (configs, 0), (99, -1)]), max_size=2))),
        draw(st.none() | st.integers(0, len(every) + 2)),
        draw(st.booleans()),
    )


def reference(s: Script) -> tuple[dict[tuple[int, int], list[float]], bool]:
    """What the raw file holds per measured run (its values, in plan order), and whether the call raises.

    The session's one collection hands back, in its order, every finished key but the dropped ones, then the extra
    ones; it raises after ``raise_after`` of them. Docs: a run handed back has its output; one never handed back is
    written with what ``finish_run`` gave (a deferred session: nothing); warm-up runs and keys of no measured run
    are discarded; an error "reaches the run loop as one from collect_runs would, after the runs already yielded
    were written" (a mapping raises before any run is handed back); the runs are written in the order they ran.
    """
    every = [(c, r) for c in range(s.configs) for r in range(-s.warmup, s.runs)]
    order = [k for k in _shuffled(every, s.seed) if k not in s.drop] + list(s.extra)
    raises = s.raise_after is not None and s.raise_after < len(order)
    handed = order[: s.raise_after] if raises and s.incremental else [] if raises else order
    return {
        (c, r): ([s.value((c, r))] if (c, r) in handed else []) for c in range(s.configs) for r in range(s.runs)
    }, raises


def _shuffled(keys: list[tuple[int, int]], seed: int) -> list[tuple[int, int]]:
    out = list(keys)
    random.Random(seed).shuffle(out)
    return out


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(s=scripts())
def test_a_deferred_sessions_collection_is_written_as_the_docs_say(naive: Any, tmp_path: Path, s: Script) -> None:
    naive.SCRIPT.clear()
    naive.SCRIPT.update(
        value=s.value,
        order=lambda keys: _shuffled(keys, s.seed),
        drop=s.drop,
        extra=s.extra,
        raise_after=s.raise_after,
        incremental=s.incremental,
    )
    out = tmp_path / f"x{next(_FOLDERS)}"  # hypothesis seeds `random` alike for each example
    kernel = nsightx.analyze.kernel(
        configs=[(c,) for c in range(s.configs)],
        runs=s.runs,
        warmup=s.warmup,
        backend="naive3p",
        output_prefix=f"{out}/",
        verbosity=nsightx.VerbosityLevel.SILENT,
    )

    @kernel
    def f(c: int) -> None:
        with nsightx.annotate("work"):
            pass

    expected, raises = reference(s)
    if raises:
        with pytest.raises(naive.Boom):
            f()
    else:
        f()
    (raw,) = out.glob("raw_data-*.jsonl")
    runs = [r for r in read_raw(raw) if r.config >= 0]
    assert [(r.config, r.run) for r in runs] == list(expected)  # every measured run, once, in the order it ran
    for run in runs:
        got = [x.value for x in run.records]
        want = expected[(run.config, run.run)]
        assert len(got) == len(want) and all(_same(a, b) for a, b in zip(got, want, strict=True)), (run, want)
        assert [(g.annotation, g.failed) for g in run.regions] == [("work", False)]


_FOLDERS = itertools.count()


def _same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or a == b


# ---- a host_timed session run by nsightx.ext.run_child ---------------------------------------------------------


@pytest.mark.filterwarnings("ignore:region 'bad' raised:RuntimeWarning")
def test_a_host_timed_session_run_by_run_child_measures_what_it_measures_in_process() -> None:
    """docs/plugins.md: a ``host_timed`` session is not called ``region_enter``/``region_exit``, and is handed each
    region's time through ``region_timed``; ``run_child`` runs "the shared run loop on the backend's own session".

    The child wraps the session (to ask the parent before each run) and did not take its ``host_timed`` over: the
    loop then called the wrapper's ``region_enter``/``region_exit`` (no-ops in such a session) and never
    ``region_timed``, so every run of a child came back with its regions and no value.
    """
    from nsightx.ext import RunOutput, Session, new_record

    class Timed(Session):
        host_timed = True

        def __init__(self) -> None:
            self.rows: list[tuple[str, int, int, int]] = []

        def region_enter(self, region: Any) -> None:
            pass  # never called: host_timed

        def region_exit(self, region: Any, failed: bool) -> None:
            pass  # never called: host_timed

        def region_timed(self, name: str, config: int, run: int, ns: int, failed: bool) -> None:
            if not failed:
                self.rows.append((name, config, run, ns))

        def finish_run(self, config: int, run: int) -> RunOutput:
            rows, self.rows = self.rows, []
            return RunOutput([new_record(n, c, r, "region", "t", float(ns), "ns", 0) for n, c, r, ns in rows])

    def work() -> None:
        with nsightx.annotate("a"):
            pass
        with nsightx.annotate("bad", ignore_failures=True):
            raise ValueError("ignored")

    plan = Plan(
        function=work, function_name="work", params=(), configs=((),), runs=3, warmup=1, metrics=("t",), backend="t",
        needs_gpu=False,
    )  # fmt: skip
    for session in (Timed(), LinkedSession(Timed(), None)):
        sink = RunSink()
        run_loop(plan, session, sink)
        assert [r.run for r in sink.runs] == [0, 1, 2]
        for run in sink.runs:
            times = {g.annotation: g.host_ns for g in run.regions}
            assert [(x.annotation, x.value) for x in run.records] == [("a", float(times["a"]))], type(session)
