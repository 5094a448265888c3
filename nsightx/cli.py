"""The ``nsightx`` command: ``doctor``, ``demo``, ``backends``, ``plugins``."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence

_COMMANDS: dict[str, tuple[str, Callable[[argparse.ArgumentParser], None], Callable[[argparse.Namespace], int]]] = {}


def command(
    name: str, help: str, configure: Callable[[argparse.ArgumentParser], None] | None = None
) -> Callable[[Callable[[argparse.Namespace], int]], Callable[[argparse.Namespace], int]]:
    """Register a subcommand (name, one-line help, argument setup)."""

    def register(fn: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
        _COMMANDS[name] = (help, configure or (lambda p: None), fn)
        return fn

    return register


@command("doctor", "show GPU, driver, ncu, CUPTI and each backend's availability (and why not)")
def _doctor(args: argparse.Namespace) -> int:
    from nsightx._doctor import report
    from nsightx._plugins import default_host

    print(report(default_host()))
    return 0


def _demo_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--output", default="nsightx-out/", help="output folder (default: nsightx-out/)")
    p.add_argument("--runs", type=int, default=10, help="measured runs per size (default: 10)")
    p.add_argument("--backend", default="auto", help="backend name or 'auto' (default)")


@command("demo", "profile a matmul size sweep on the best available backend and print the table", _demo_args)
def _demo(args: argparse.Namespace) -> int:
    from nsightx._demo import run

    run(output=args.output, runs=args.runs, backend=args.backend)
    return 0


@command("backends", "list registered backends with their availability")
def _backends(args: argparse.Namespace) -> int:
    from nsightx._plugins import default_host

    host = default_host()
    for name, avail in host.availability().items():
        cls = host.backends[name]
        print(f"{name:<8} {'available' if avail.available else 'unavailable':<11} "
              f"plugin={host.backend_plugin[name]:<10} {avail.reason}")
        del cls
    return 0


@command("plugins", "list loaded plugins, their versions and what they register")
def _plugins_cmd(args: argparse.Namespace) -> int:
    from nsightx._plugin_list import describe
    from nsightx._plugins import default_host

    print(describe(default_host()))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``nsightx`` console script."""
    parser = argparse.ArgumentParser(prog="nsightx", description="Measure GPU kernels from Python.")
    sub = parser.add_subparsers(dest="cmd", required=True)
    for name, (help_text, configure, _fn) in _COMMANDS.items():
        configure(sub.add_parser(name, help=help_text, description=help_text))
    args = parser.parse_args(argv)
    return _COMMANDS[args.cmd][2](args)


if __name__ == "__main__":
    raise SystemExit(main())
