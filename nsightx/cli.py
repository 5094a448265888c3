"""The ``nsightx`` command: ``doctor``, ``demo``, ``show``, ``plot``, ``compare``, ``reconcile`` and the listings.

It behaves like a Unix tool: ``nsightx --version``; ``python -m nsightx`` is the same command; bare ``nsightx``
prints the help on stdout and exits 2, as bare ``git`` prints its usage and exits non-zero (no command is a
misuse, so a script running ``nsightx $CMD`` with an empty ``$CMD`` fails); every misuse and every error nsightx
anticipates (a bad option, an unknown command, a missing or unreadable file, an ``NsightxError`` from a command)
is one line on stderr, ``nsightx <command>: <what went wrong>``, with exit status 2 and no traceback. Only a bug in
nsightx itself still ends in a traceback, so that it can be reported.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, NoReturn

from nsightx._commands import args as _types

if TYPE_CHECKING:
    from nsightx._pluginhost.plugins import PluginHost


class _UsageError(Exception):
    """A command-line misuse found by argparse, carrying its one-line message."""


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line (``nsightx demo: error: ...``), not a usage block and exit."""

    commands: dict[str, _Parser]
    """The subcommands' parsers by name (on the top-level parser), so that a misuse names its command."""

    def error(self, message: str) -> NoReturn:
        """Raise the misuse for :func:`main` to print as one line and turn into exit status 2."""
        raise _UsageError(f"{self.prog}: error: {message} (see {self.prog} --help)")


def one_line(error: BaseException) -> str:
    """An error's message on one line: a CLI prints one line per misuse, never a traceback."""
    text = " ".join(part.strip() for part in str(error).splitlines() if part.strip())
    return text or type(error).__name__


_COMMANDS: dict[str, tuple[str, Callable[[argparse.ArgumentParser], None], Callable[[argparse.Namespace], int]]] = {}


def command(
    name: str, help: str, configure: Callable[[argparse.ArgumentParser], None] | None = None
) -> Callable[[Callable[[argparse.Namespace], int]], Callable[[argparse.Namespace], int]]:
    """Register a subcommand (name, one-line help, argument setup)."""

    def register(fn: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
        _COMMANDS[name] = (help, configure or (lambda p: None), fn)
        return fn

    return register


def _listing_host() -> PluginHost:
    """The default host, loaded without the failed-plugin warning: the listing commands show failures."""
    from nsightx._pluginhost.plugins import default_host

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return default_host()


@command("doctor", "show GPU, driver, ncu, CUPTI and each backend's availability (and why not)")
def _doctor(args: argparse.Namespace) -> int:
    from nsightx._commands.doctor import report

    print(report(_listing_host()))
    return 0


def _demo_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--output", default="nsightx-out/", help="output folder (default: nsightx-out/)")
    p.add_argument(
        "--runs",
        type=_types.runs,
        default=10,
        metavar="N",
        help="measured runs per size, or 'auto': until each size's 95%% CI is within 1%% of its mean (default: 10)",
    )
    p.add_argument("--backend", default="auto", help="backend name or 'auto' (default)")


@command("demo", "profile a matmul size sweep on the best available backend and print the table", _demo_args)
def _demo(args: argparse.Namespace) -> int:
    from nsightx._commands.demo import run

    run(output=args.output, runs=args.runs, backend=args.backend)
    return 0


@command("backends", "list registered backends: cost, whether 'auto' may pick it, availability (or why not)")
def _backends(args: argparse.Namespace) -> int:
    from nsightx._pluginhost.plugins import default_host

    host = default_host()
    print("'auto' picks the first available backend marked auto=yes that fits the call (lowest cost first)")
    print(f"{'backend':<8} {'cost':>4} {'auto':<4} {'status':<11} {'plugin':<10} reason")
    for name, avail in host.availability().items():
        caps = host.backends[name].capabilities
        reason = " ".join(part.strip() for part in avail.reason.splitlines() if part.strip())
        print(
            f"{name:<8} {caps.cost:>4} {'yes' if caps.auto else 'no':<4} "
            f"{'available' if avail.available else 'unavailable':<11} {host.backend_plugin[name]:<10} {reason}"
        )
    return 0


@command("plugins", "list loaded plugins, their versions and what they register, and those that failed to load")
def _plugins_cmd(args: argparse.Namespace) -> int:
    from nsightx._pluginhost.listing import describe

    print(describe(_listing_host()))
    return 0


def _compare_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "baseline",
        help="the reference: a saved result, a folder of result-* files, or a folder written by pytest --nsightx-save",
    )
    p.add_argument("new", help="saved result or folder (the same kinds) to check against the baseline")
    p.add_argument(
        "--threshold",
        type=_types.percent,
        default=5.0,
        metavar="PCT",
        help="smallest significant slowdown, in percent, that fails (exit 1); default 5",
    )
    p.add_argument(
        "--alpha", type=_types.fraction, default=0.05, help="significance level after Holm adjustment (0.05)"
    )
    p.add_argument(
        "--metric", action="append", default=None, help="compare only this metric (repeatable; default: all)"
    )
    p.add_argument(
        "--format",
        choices=("text", "markdown", "json", "csv"),
        default="text",
        help="text (a table that fits the terminal; default), markdown (job summaries), json or csv (programs)",
    )
    p.add_argument(
        "--base-ref",
        metavar="REF",
        help="in a --nsightx-save folder: the save of each test to compare with, a save number or the start of a "
        "commit (default: the newest; `nsightx baselines DIR` lists them)",
    )
    p.add_argument(
        "--history",
        type=_types.count,
        default=5,
        metavar="N",
        help="learn the noise floor from the baseline and the stored processes before it, N in all (default 5; "
        "1: from the runs alone)",
    )
    p.add_argument(
        "--require-all",
        action="store_true",
        help="fail (exit 1) when a row is in only one of the two results; by default such rows are "
        "listed and do not fail",
    )


@command(
    "compare",
    "compare two saved results; exit 1 on a significant slowdown above --threshold, 2 when nothing could be compared",
    _compare_args,
)
def _compare(args: argparse.Namespace) -> int:
    from nsightx._errors import NsightxError
    from nsightx._report import views
    from nsightx._report.compare import compare, gate_failed

    try:
        frame = compare(
            args.baseline,
            args.new,
            threshold_pct=args.threshold,
            alpha=args.alpha,
            metrics=args.metric,
            require_all=args.require_all,
            base_ref=args.base_ref,
            history=args.history,
        )
    except NsightxError as e:
        print(f"nsightx compare: {one_line(e)}", file=sys.stderr)
        return 2
    if args.format == "text":
        print(views.render_text(frame, width=views.terminal_width(sys.stdout.isatty())))
    else:
        formats = {"markdown": views.render_markdown, "json": views.render_json, "csv": views.render_csv}
        print(formats[args.format](frame), end="" if args.format == "csv" else "\n")
    return 1 if gate_failed(frame) else 0


def _baselines_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("folder", help="a folder written by pytest --nsightx-save")


@command(
    "baselines",
    "list the results pytest --nsightx-save stored: per test, each save's commit, host and time",
    _baselines_args,
)
def _baselines(args: argparse.Namespace) -> int:
    from pathlib import Path

    from nsightx._report.history import listing

    print("\n".join(listing(Path(args.folder))))
    return 0


def _show_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "file",
        help="a saved result (result-*.parquet or .json), a save of pytest --nsightx-save, a raw_data-*.jsonl, "
        "or a folder of result-* files or of --nsightx-save saves (the newest result of each function or test)",
    )


@command("show", "print a saved result as a table in readable units, fitting the terminal", _show_args)
def _show(args: argparse.Namespace) -> int:
    from nsightx._commands.show import show
    from nsightx._report.views import terminal_width

    return show(args.file, terminal_width(sys.stdout.isatty()))


def _plot_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", help="a saved result, a save of pytest --nsightx-save, or a raw_data-*.jsonl")
    p.add_argument("out", help="the image to write; its extension picks the format (.png, .svg, .pdf, ...)")
    p.add_argument("--metric", help="the metric to draw (default: the first, the measured time)")
    p.add_argument(
        "--type",
        dest="plot_type",
        choices=("line", "bar", "box", "violin"),
        help="line (default) or bar: means and their 95%% CI; box or violin: every run of each config",
    )
    p.add_argument(
        "--x-log",
        action=argparse.BooleanOptionalAction,
        help="log x axis (default: chosen from the data, for a numeric x spanning 16x or more)",
    )
    p.add_argument(
        "--y-log",
        action=argparse.BooleanOptionalAction,
        help="log y axis (default: chosen from the data, for values spanning more than two decades)",
    )
    p.add_argument("--title", help="the figure's title (default: the function, the metric and the backend)")


@command("plot", "draw a saved result's default plot to an image file", _plot_args)
def _plot(args: argparse.Namespace) -> int:
    from nsightx._commands.show import plot

    try:
        written = plot(
            args.file,
            args.out,
            args.metric,
            plot_type=args.plot_type,
            x_log=args.x_log,
            y_log=args.y_log,
            title=args.title,
        )
    except ImportError as e:
        print(f"nsightx plot: drawing needs matplotlib ({e}); pip install 'nsightx[plot]'", file=sys.stderr)
        return 2
    print(written)
    return 0


def _parser() -> _Parser:
    """The ``nsightx`` parser: ``--version`` and one subparser per registered command."""
    from nsightx._version import __version__

    parser = _Parser(
        prog="nsightx",
        allow_abbrev=False,
        description="Measure GPU kernels from Python.",
        epilog="exit status: 0 success; 1 a failed 'compare' gate; 2 a misuse or an error (one line on stderr)",
    )
    parser.add_argument("--version", action="version", version=f"nsightx {__version__}")
    sub = parser.add_subparsers(dest="cmd", metavar="COMMAND")
    parser.commands = {}
    for name, (help_text, configure, _fn) in _COMMANDS.items():
        parser.commands[name] = sub.add_parser(name, help=help_text, description=help_text, allow_abbrev=False)
        configure(parser.commands[name])
    return parser


def _parse(parser: _Parser, argv: Sequence[str] | None) -> argparse.Namespace:
    """Parse ``argv``; an argument no parser knows is a misuse of the command it follows (``nsightx demo: ...``).

    Raises:
        _UsageError: a misuse, with its one-line message.
    """
    args, extra = parser.parse_known_args(argv)
    if extra:
        owner = (parser.commands.get(args.cmd) if args.cmd else None) or parser
        owner.error(f"unrecognized arguments: {' '.join(extra)}{_abbreviation_hint(owner, extra)}")
    return args


def _abbreviation_hint(parser: argparse.ArgumentParser, extra: Sequence[str]) -> str:
    """Name the full option an unrecognized ``--prefix`` abbreviates, since nsightx refuses abbreviations.

    Every parser is built with ``allow_abbrev=False``: a CI script's ``--thresh`` would break the day another
    option starting with ``--thresh`` is added, so the full name is asked for now, and named where it is known.
    """
    known = [flag for action in parser._actions for flag in action.option_strings if flag.startswith("--")]
    hints = []
    for arg in extra:
        prefix = arg.split("=", 1)[0]
        matches = sorted(flag for flag in known if prefix.startswith("--") and flag.startswith(prefix))
        if matches:
            hints.append(f"{prefix} is not accepted as an abbreviation of {' or '.join(matches)}")
    return f" ({'; '.join(hints)}: write the option in full)" if hints else ""


def _reconcile_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("a", help="saved result (result-*.parquet or .json) or a folder of them, measured with one backend")
    p.add_argument("b", help="the same sweep measured with another backend")
    p.add_argument(
        "--threshold", type=_types.percent, default=5.0, metavar="PCT", help="explain differences above PCT percent (5)"
    )


@command(
    "reconcile",
    "match two backends' times of the same sweep and explain each difference above --threshold from the data",
    _reconcile_args,
)
def _reconcile(args: argparse.Namespace) -> int:
    from nsightx._api.reconcile import reconcile, render_text

    print(render_text(reconcile(args.a, args.b, threshold_pct=args.threshold)))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``nsightx`` console script.

    Returns:
        The exit status: the command's own (0, or 1 for a failed ``compare`` gate), 0 for ``--help`` and
        ``--version``, or 2 for any misuse (no command, a bad argument, an option nsightx refuses, a file it
        cannot read or write), which prints one line to stderr and no traceback (bare ``nsightx`` prints the
        help on stdout instead).
    """
    from nsightx._errors import NsightxError

    parser = _parser()
    try:
        args = _parse(parser, argv)
    except _UsageError as e:
        print(e, file=sys.stderr)
        return 2
    except SystemExit as e:  # --help and --version print, then argparse exits 0
        return e.code if isinstance(e.code, int) else 0
    if args.cmd is None:
        parser.print_help()
        return 2
    try:
        return _COMMANDS[args.cmd][2](args)
    except (NsightxError, OSError) as e:
        print(f"nsightx {args.cmd}: {one_line(e)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"nsightx {args.cmd}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
