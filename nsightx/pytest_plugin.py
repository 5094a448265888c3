"""The nsightx pytest plugin: time a test's annotated regions, store one result per test, gate CI on slowdowns.

Installed with nsightx and loaded by pytest through the ``pytest11`` entry point ``nsightx``. Unless used, it
costs nothing and changes nothing: importing it imports neither torch nor CUDA nor pandas, and it only adds
command-line options and the ``nsightx_bench`` fixture. A test asks for the fixture::

    import nsightx

    def matmul(n):
        a = torch.randn(n, n, device="cuda")
        with nsightx.annotate("matmul"):
            a @ a

    def test_matmul(nsightx_bench):
        res = nsightx_bench(matmul, configs=[1024, 2048], runs=20)
        assert (res.to_dataframe()["NumRuns"] == 20).all()

and the command line says what to do with the results::

    pytest --nsightx-backend=cupti --nsightx-save=perf/main              # on main: store the baselines
    pytest --nsightx-backend=cupti --nsightx-compare=perf/main --nsightx-threshold=5   # on a pull request

``--nsightx-save`` adds each test's result to the folder as a new save (nothing is replaced: the history of saves is
what the noise floor is learned from). With ``--nsightx-compare`` too, what is saved is the measurement the verdict
was made on: a config whose slowdown a re-measure cleared is saved as that re-measure measured it.
``--nsightx-compare`` compares each test's result with the newest save of its node id (or ``--nsightx-baseline``'s;
``nsightx compare``'s statistics and table), measures a test that looks slower again (``--nsightx-confirm``) and
fails the session (exit 1) on a slowdown that is significant, larger than the threshold and than the noise floor,
and still there when measured again; on a test whose result could not be compared with its baseline; or when nothing
at all was compared. The tables are in the terminal summary.
A test whose backend cannot run here (``--nsightx-backend=cupti`` without a GPU) is
skipped with the reason.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Generator, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, final

import pytest

from nsightx._enums import VerbosityLevel
from nsightx._errors import BackendUnavailableError, ConfigError, NsightxError
from nsightx._report.pytest_gate import DEFAULT_CONFIRM, DEFAULT_THRESHOLD_PCT, Gate, GateSettings

if TYPE_CHECKING:
    from nsightx._results.profileresults import ProfileResults

_GATE = pytest.StashKey[Gate]()
_CALL_REPORT = pytest.StashKey[pytest.TestReport]()


def _percent(text: str) -> float:
    """``--nsightx-threshold``'s value: a finite percentage >= 0."""
    import argparse

    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value >= 0):
        raise argparse.ArgumentTypeError(f"expects a percentage >= 0 such as 5 (for 5%), got {text!r}")
    return value


def _count(text: str) -> int:
    """``--nsightx-confirm``'s value: a whole number >= 0."""
    import argparse

    if not text.strip().isdigit():
        raise argparse.ArgumentTypeError(f"expects a whole number of re-measures >= 0 such as 2, got {text!r}")
    return int(text)


def pytest_addoption(parser: pytest.Parser) -> None:
    """Add the ``--nsightx-*`` options (nothing else happens until one is given or the fixture is used)."""
    group = parser.getgroup("nsightx", "nsightx: time annotated regions, gate on slowdowns")
    group.addoption(
        "--nsightx-backend",
        default="auto",
        metavar="NAME",
        help="backend of nsightx_bench calls that name none: auto (default), cupti, events, host, or any registered "
        "backend; a test whose backend cannot run here is skipped",
    )
    group.addoption(
        "--nsightx-save",
        type=Path,
        metavar="DIR",
        help="store each test's result in DIR as a new save (DIR/<test>/<NNNN>_<machine>_<commit>_<time>.json); "
        "nothing stored there is replaced",
    )
    group.addoption(
        "--nsightx-compare",
        type=Path,
        metavar="DIR",
        help="compare each test's result with the one stored in DIR; a significant slowdown above the threshold, "
        "a result that cannot be compared, or comparing nothing fails the session",
    )
    group.addoption(
        "--nsightx-threshold",
        type=_percent,
        default=DEFAULT_THRESHOLD_PCT,
        metavar="PCT",
        help="smallest significant slowdown, in percent, that fails --nsightx-compare (default "
        f"{DEFAULT_THRESHOLD_PCT:g})",
    )
    group.addoption(
        "--nsightx-baseline",
        metavar="REF",
        help="with --nsightx-compare: compare with this save of each test, a save number or the start of a commit "
        "(default: the newest; `nsightx baselines DIR` lists them)",
    )
    group.addoption(
        "--nsightx-confirm",
        type=_count,
        default=DEFAULT_CONFIRM,
        metavar="N",
        help="measure a test that looks regressed again, up to N times, and fail only if it stays regressed every "
        f"time (default {DEFAULT_CONFIRM}; 0: fail at once)",
    )
    group.addoption(
        "--nsightx-require-all",
        action="store_true",
        help="with --nsightx-compare: also fail on a test without a baseline, a baseline no test measured, or a "
        "config or metric only one side has",
    )
    group.addoption(
        "--nsightx-markdown",
        type=Path,
        metavar="FILE",
        help="append the comparison as Markdown to FILE (e.g. $GITHUB_STEP_SUMMARY)",
    )


def _check_backend(name: str) -> None:
    """Refuse an unknown ``--nsightx-backend`` before any test runs (loads nsightx's plugins only when given)."""
    if name == "auto":
        return
    from nsightx._pluginhost.plugins import default_host  # pluggy and pydantic: only when a backend is named

    try:
        default_host().backend(name)
    except NsightxError as e:
        raise pytest.UsageError(f"--nsightx-backend={name}: {e}") from e


def _settings(config: pytest.Config) -> GateSettings:
    """The options, checked: a bad value stops pytest with a usage error naming it."""
    backend = str(config.getoption("nsightx_backend"))
    compare_dir = config.getoption("nsightx_compare")
    _check_backend(backend)
    if compare_dir is not None and not compare_dir.is_dir():
        raise pytest.UsageError(
            f"--nsightx-compare={compare_dir}: no such folder; store baselines there first with "
            f"--nsightx-save={compare_dir}"
        )
    markdown = config.getoption("nsightx_markdown")
    if markdown is not None and not markdown.parent.is_dir():
        raise pytest.UsageError(f"--nsightx-markdown={markdown}: the folder {str(markdown.parent)!r} does not exist")
    return GateSettings(
        backend=backend,
        save_dir=config.getoption("nsightx_save"),
        compare_dir=compare_dir,
        threshold_pct=float(config.getoption("nsightx_threshold")),
        require_all=bool(config.getoption("nsightx_require_all")),
        markdown=markdown,
        baseline_ref=config.getoption("nsightx_baseline"),
        confirm=int(config.getoption("nsightx_confirm")),
    )


def pytest_configure(config: pytest.Config) -> None:
    """Check the options and set up the session's gate (a small object; no nsightx work)."""
    config.stash[_GATE] = Gate(_settings(config))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, Any]:
    """Keep each test's call-phase report, so the fixture's teardown knows whether the test passed."""
    report = yield
    if report.when == "call":
        item.stash[_CALL_REPORT] = report
    return report


@final
class Bench:
    """The ``nsightx_bench`` fixture's value: profiles a function once per test.

    Example:
        >>> def test_build(nsightx_bench):  # doctest: +SKIP
        ...     res = nsightx_bench(build, configs=[1000, 2000], runs=10)
        ...     assert len(res.to_dataframe()) == 2
    """

    def __init__(self, nodeid: str, backend: str) -> None:
        self.nodeid = nodeid
        """The test's node id: its result is stored and compared under this name."""
        self.backend = backend
        """The backend used when a call names none (``--nsightx-backend``)."""
        self.result: ProfileResults | None = None
        """What the call measured (``None`` before it)."""
        self._again: Callable[[Sequence[int]], ProfileResults] | None = None

    def __call__(self, fn: Callable[..., object], /, configs: object = None, **options: Any) -> ProfileResults:
        """Profile every ``nsightx.annotate`` region of ``fn`` over ``configs``, as ``@analyze.kernel`` does.

        Args:
            fn: The undecorated function; its regions are what is timed.
            configs: Its configs, as ``analyze.kernel`` takes them (a list of tuples, or of scalars for a
                function of one parameter); ``None`` for a function without parameters.
            **options: Any ``analyze.kernel`` option (``runs``, ``warmup``, ``metrics``, ...). ``backend``
                defaults to ``--nsightx-backend`` and, given here, wins over it; ``verbosity`` defaults to silent.

        Returns:
            The result, which the test may inspect; after the test passes it is saved and compared.

        Raises:
            ConfigError: a second call in the same test (one result per test: parametrize the test instead),
                a function already decorated, or a bad option.
            pytest.skip.Exception: the backend cannot run here (e.g. no GPU); the test is skipped with the reason.
        """
        from nsightx import analyze  # pydantic and the run loop: only when a test measures

        if self.result is not None:
            raise ConfigError(
                f"nsightx_bench was already called in {self.nodeid}; it stores one result per test: split the "
                "test or parametrize it (@pytest.mark.parametrize) to time another function"
            )
        if isinstance(fn, analyze.ProfiledFunction):
            raise ConfigError(
                f"nsightx_bench takes the undecorated function, got {fn.name!r} already decorated with "
                "@nsightx.analyze.kernel; pass its options to nsightx_bench(fn, configs=..., **options) instead"
            )
        options.setdefault("backend", self.backend)
        options.setdefault("verbosity", VerbosityLevel.SILENT)
        profiled = analyze.kernel(configs=configs, **options)(fn)
        try:
            self.result = profiled()
        except BackendUnavailableError as e:
            pytest.skip(f"nsightx: {' '.join(str(e).split())}")
        again = {k: v for k, v in options.items() if k != "output_prefix"}  # a re-measure writes no files

        def remeasure(indices: Sequence[int]) -> ProfileResults:
            chosen = [profiled.configs[i] for i in indices] if profiled.configs else None
            return analyze.kernel(configs=chosen, **again)(fn)()

        self._again = remeasure
        return self.result

    def remeasure(self, indices: Sequence[int]) -> ProfileResults:
        """Measure the function again, with the same options, over the configs at ``indices`` only.

        The gate calls this to confirm a slowdown before failing on it (``--nsightx-confirm``).

        Raises:
            ConfigError: the fixture was not called yet.
        """
        if self._again is None:
            raise ConfigError(f"nsightx_bench was not called in {self.nodeid}: there is nothing to measure again")
        return self._again(indices)


@pytest.fixture
def nsightx_bench(request: pytest.FixtureRequest) -> Iterator[Bench]:
    """A :class:`Bench` for this test: calling it with a function and its configs times the function's regions.

    ``res = nsightx_bench(fn, configs=[...], runs=10)``. After a test that passed, its result is saved
    (``--nsightx-save``) and compared with its baseline (``--nsightx-compare``); a test that failed or skipped
    after measuring is kept out of both.
    """
    gate = request.config.stash[_GATE]
    bench = Bench(request.node.nodeid, gate.settings.backend)
    yield bench
    if bench.result is None:
        return
    report = request.node.stash.get(_CALL_REPORT, None)
    if report is None or not report.passed:
        gate.not_recorded(bench.nodeid, "the test did not pass, so its timing is neither saved nor compared")
        return
    gate.record(bench.nodeid, bench.result, bench.remeasure)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Fail the session (exit 1) when the gate fails, and write the Markdown summary if asked."""
    gate = session.config.stash.get(_GATE, None)
    if gate is None or not gate.settings.active:
        return
    if gate.failures() and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
    if gate.settings.markdown is not None:
        with gate.settings.markdown.open("a", encoding="utf-8") as f:
            f.write(gate.markdown())


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    """Print each test's comparison (tables for those that fail the gate) and the verdict."""
    gate = config.stash.get(_GATE, None)
    if gate is None or not gate.settings.active:
        return
    failed = bool(gate.failures())
    terminalreporter.write_sep("=", "nsightx", red=failed, green=not failed)
    tty = bool(getattr(terminalreporter, "isatty", False)) or os.environ.get("COLUMNS", "").strip().isdigit()
    width = config.get_terminal_writer().fullwidth if tty else None  # a log or a pipe has no width to fit
    for line in gate.report_lines(verbose=int(config.getoption("verbose")) > 0, width=width):
        terminalreporter.write_line(line)
    terminalreporter.write_line(gate.verdict(), red=failed, green=not failed, bold=True)
