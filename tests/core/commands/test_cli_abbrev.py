"""No ``nsightx`` command accepts an abbreviated option (docs/api.md, "The nsightx command").

argparse accepts any unique prefix of a long option by default (``--thresh`` for ``--threshold``); a CI script
that relies on one breaks, or silently changes meaning, the day another option sharing the prefix is added. Every
parser is built with ``allow_abbrev=False`` and the refusal names the full option.
"""

from __future__ import annotations

import pytest

from nsightx.cli import _COMMANDS, _parse, _parser, _UsageError, main


def _abbreviations() -> list[tuple[list[str], str, str]]:
    """(command and its positionals, full option, its prefix) for each command's long options, one letter short."""
    parser = _parser()
    found = [([], "--version", "--versio")]
    for name in _COMMANDS:
        actions = parser.commands[name]._actions
        command = [name] + [f"{a.dest}.parquet" for a in actions if not a.option_strings]
        flags = [f for a in actions for f in a.option_strings if f.startswith("--")]
        for flag in flags:
            prefix = flag[:-1]
            if flag != "--help" and prefix not in flags and len(prefix) > 2:
                found.append((command, flag, prefix))
    return found


ABBREVIATIONS = _abbreviations()
IDS = [" ".join([*command[:1], prefix]) for command, _, prefix in ABBREVIATIONS]


def test_every_command_has_options_to_abbreviate() -> None:
    assert {"compare", "reconcile", "demo", "plot"} <= {command[0] for command, _, _ in ABBREVIATIONS if command}


@pytest.mark.parametrize(("command", "flag", "prefix"), ABBREVIATIONS, ids=IDS)
def test_an_abbreviated_option_is_refused(command: list[str], flag: str, prefix: str) -> None:
    with pytest.raises(_UsageError) as refused:
        _parse(_parser(), [*command, prefix])
    message = str(refused.value)
    assert "unrecognized arguments" in message and flag in message and "in full" in message, message


def test_compare_thresh_is_one_line_with_exit_status_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compare", "a.parquet", "b.parquet", "--thresh", "3"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("nsightx compare: error:"), err
    assert "--thresh is not accepted as an abbreviation of --threshold" in err, err
