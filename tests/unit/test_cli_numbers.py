"""Every number an option takes is checked when the command line is parsed: a value
out of its documented range, not finite, or not written in ASCII digits is a usage
error (exit 2) naming the option and the value, before anything is opened or run
(docs/cli.md#exit-codes), never a traceback later nor a value read as another."""

from __future__ import annotations

import pytest

from engine.cli.exits import USAGE
from engine.cli.main import build_parser

PARSER = build_parser()
FULLWIDTH_TEN = "\uff11\uff10"

REFUSED = [
    # a sequence number SQLite cannot hold was an OverflowError at the query
    (["journal", "--after", "99999999999999999999999"], "--after"),
    (["journal", "--after", "-5"], "--after"),
    # a lease that is not finite was an OverflowError or a ValueError at the first claim
    (["worker", "--lease", "inf"], "--lease"),
    (["worker", "--lease", "nan"], "--lease"),
    (["worker", "--lease", "1e400"], "--lease"),
    (["worker", "--lease", "1e-300"], "--lease"),
    (["worker", "--poll", "inf"], "--poll"),
    # int() reads other scripts' digits: '٣' was port 3 and a limit of 3
    (["serve", "--port", "٣"], "--port"),
    (["runs", "--limit", "٣"], "--limit"),
    (["events", "--limit", "²"], "--limit"),
    (["doctor", "--pileup", "٣"], "--pileup"),
    (["doctor", "--pileup", "1000001"], "--pileup"),
    (
        ["schedule", "backfill", "x", "--from", "a", "--to", "b", "--limit", FULLWIDTH_TEN],
        "--limit",
    ),
    (["emit", "x.y", "--retries", "٣"], "--retries"),
]


@pytest.mark.parametrize(("argv", "option"), REFUSED, ids=[" ".join(a) for a, _ in REFUSED])
def test_a_number_out_of_range_or_not_ascii_is_a_usage_error(
    argv: list[str], option: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The parser refuses the value with exit 2, one line naming the option and the value."""
    with pytest.raises(SystemExit) as exited:
        PARSER.parse_args(argv)
    assert exited.value.code == USAGE
    last = capsys.readouterr().err.splitlines()[-1]
    assert f"argument {option}" in last and f"'{argv[-1]}'" in last


@pytest.mark.parametrize(
    "argv",
    [
        ["journal", "--after", str(2**62)],
        ["worker", "--lease", "1", "--poll", "0.01"],
        ["worker", "--lease", "86400", "--poll", "3600"],
        ["serve", "--port", "0"],
        ["doctor", "--pileup", "0"],
    ],
)
def test_the_bounds_themselves_are_taken(argv: list[str]) -> None:
    """Each documented bound is itself a value the option takes."""
    PARSER.parse_args(argv)
