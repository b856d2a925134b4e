"""Every `engine` command's `--help` ends with examples that the real parser accepts,
and a mistyped command or action is answered with the closest name (docs/cli.md)."""

from __future__ import annotations

import shlex

import pytest

from engine.cli import examples
from engine.cli.exits import USAGE
from engine.cli.main import build_parser, main

PARSER = build_parser()
COMMANDS = examples.commands(PARSER)
EXAMPLES = [(path, line) for path, lines in examples.EXAMPLES.items() for line in lines]


def test_every_command_has_examples_and_no_example_names_a_missing_command() -> None:
    """The table and the registered commands (sub-commands too) are the same set."""
    assert set(COMMANDS) == set(examples.EXAMPLES)
    assert all(examples.EXAMPLES[path] for path in COMMANDS)


@pytest.mark.parametrize(("path", "line"), EXAMPLES)
def test_each_example_parses_as_its_own_command(path: str, line: str) -> None:
    """An example is `engine <path> ...` and the full parser accepts it, reaching the
    handler of that command."""
    words = shlex.split(line)
    assert words[0] == "engine"
    assert words[1 : 1 + len(path.split())] == path.split()
    args = PARSER.parse_args(words[1:])
    assert args.handler is not None


@pytest.mark.parametrize("path", sorted(COMMANDS))
def test_help_shows_the_examples(path: str, capsys: pytest.CaptureFixture[str]) -> None:
    """`engine <path> --help` prints an `examples:` section with each line."""
    with pytest.raises(SystemExit):
        main([*path.split(), "--help"])
    shown = capsys.readouterr().out
    assert "\nexamples:\n" in shown
    assert all(f"  {line}\n" in shown for line in examples.EXAMPLES[path])


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["chek"], "engine: unknown command 'chek'; did you mean 'check'?"),
        (["aprove", "prop-1"], "engine: unknown command 'aprove'; did you mean 'approve'?"),
        (
            ["schedule", "pase", "reaper"],
            "engine schedule: unknown command 'pase'; did you mean 'pause'?",
        ),
        (
            ["findings", "promte", "f"],
            "engine findings: unknown command 'promte'; did you mean 'promote'?",
        ),
        (["zzzz"], "engine: unknown command 'zzzz'; see --help for the commands"),
    ],
)
def test_a_mistyped_command_is_answered_with_the_closest(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A usage error (exit 2) naming the unknown word and the closest command."""
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == USAGE
    assert capsys.readouterr().err == message + "\n"


@pytest.mark.parametrize("interval", ["0", "-1", "soon", "3601"])
def test_a_bad_follow_interval_is_a_usage_error(
    interval: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """`engine journal --follow --interval X` takes seconds from 0.05 to 3600 (exit 2)."""
    with pytest.raises(SystemExit) as exited:
        main(["journal", "--follow", "--interval", interval])
    assert exited.value.code == USAGE
    assert f"expected seconds from 0.05 to 3600, not '{interval}'" in capsys.readouterr().err
