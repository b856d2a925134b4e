"""The pure parts of a proposal's review: a command template filled before its run
exists (engine.core.argv.preview), and the lines of a rule statement
(engine.core.statements)."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from dsl.diagnostics import Span
from engine.core.argv import build_argv, preview
from engine.core.registry import Definition
from engine.core.statements import MAX_LINES, location, statement


def command(**changes: Any) -> Definition:
    data: dict[str, Any] = {
        "id": "tool",
        "version": 1,
        "adapter": "command",
        "argv": ["{python}", "tool.py", "--title={title}", "{run_dir}/out", "{event_id}"],
        "params": {"title": {"from": "payload.title", "type": "text"}},
        "output_contract": "factory.command-result/v1",
        "mutating": False,
        "outcomes": ["OK"],
        **changes,
    }
    return Definition.model_validate(data)


def test_a_preview_fills_params_and_the_event_and_marks_what_the_run_knows() -> None:
    """Params and {event_id} are filled; {python} and {run_dir} show as `<name>` and
    are pending, in the order they first appear."""
    shown = preview(command(), "ev-1", {"title": "Fix it"})
    assert shown.argv == ("<python>", "tool.py", "--title=Fix it", "<run_dir>/out", "ev-1")
    assert shown.pending == ("python", "run_dir")
    assert (shown.workspace, shown.problem) == (None, None)


def test_a_preview_fills_the_workspace_too() -> None:
    """A workspace template is filled like argv, its run-only builtins pending too."""
    params = {"name": {"from": "payload.name", "type": "name"}}
    spaced = command(argv=["tool", "{name}"], params=params, workspace={"path": "{run_id}/{name}"})
    shown = preview(spaced, "ev-1", {"name": "web"})
    assert (shown.argv, shown.workspace, shown.pending) == (
        ("tool", "web"),
        "<run_id>/web",
        ("run_id",),
    )


def test_a_preview_of_a_payload_that_does_not_fit_is_the_refusal() -> None:
    """A value the worker would refuse gives no argv, only the refusal's text."""
    shown = preview(command(), "ev-1", {"title": "-rf"})
    assert shown.argv is None
    assert shown.problem == (
        "param 'title' (payload.title) = '-rf' is not a valid text; a value may never start "
        "with '-'"
    )


@given(
    title=st.text(min_size=1).filter(lambda t: t[0] != "-" and not set(t) & set("\x00<")),
    run_dir=st.text(alphabet="abc/-_", min_size=1),
    python=st.text(alphabet="abc/-_.", min_size=1),
)
def test_the_preview_is_what_the_worker_runs_once_the_run_is_known(
    title: str, run_dir: str, python: str
) -> None:
    """Putting the run's values for the pending builtins into the preview gives the
    argv the command adapter builds for the run, whatever the payload's text."""
    definition = command()
    shown = preview(definition, "ev-1", {"title": title})
    assert shown.argv is not None
    run = {"python": python, "run_id": "r", "run_dir": run_dir, "event_id": "ev-1"}
    filled = list(shown.argv)
    for name in shown.pending:
        filled = [item.replace(f"<{name}>", run[name]) for item in filled]
    assert filled == build_argv(definition, run, {"title": title})


# ---- the lines of a statement ----------------------------------------------------------

RULES = """\
# The file's header.

route a.b to x@1
# What the loop does.
# Another line of it.
loop l
  every 60m
  emit a.b {
    repo: "web",
# a comment inside the object, at column 1
    note: "a } and a # in a string",
  }

  # a comment inside the block
  approval watched \\
    # carried on by the backslash
  enabled true
# the next loop's comment
loop m
  manual
"""


def numbers(line: int, text: str = RULES) -> list[int]:
    return list(statement(text.splitlines(), line))


def test_a_one_line_statement_is_its_line() -> None:
    """A route is its own line (the header, parted by a blank line, is not its)."""
    assert numbers(3) == [3]


def test_a_block_is_its_comment_head_and_every_deeper_line() -> None:
    """A loop is the comment right above it, its head and its indented block: lines an
    open bracket carries (whatever their indentation), blank and comment lines inside
    it, a backslash continuation; not the next statement's comment."""
    assert numbers(6) == list(range(4, 18))


def test_the_last_block_runs_to_the_end_of_the_file() -> None:
    """The last statement ends with the file."""
    assert numbers(19) == [18, 19, 20]


def test_a_line_the_file_does_not_have_has_no_statement() -> None:
    """A line past the end (the file shrank since) or before the start shows nothing."""
    assert numbers(99) == []
    assert numbers(0) == []


def test_a_huge_block_is_cut_at_max_lines() -> None:
    """At most MAX_LINES lines of one statement are shown."""
    text = "loop l\n" + "  every 60m\n" * (MAX_LINES * 2)
    assert numbers(1, text) == list(range(1, MAX_LINES + 1))


def test_a_location_is_read_with_colons_in_the_file_name() -> None:
    """`file:line:col` is split from the right; anything else is no location."""
    assert location("loops/a.rules:12:5") == Span("loops/a.rules", 12, 5)
    assert location("C:/rules/a.rules:3:1") == Span("C:/rules/a.rules", 3, 1)
    assert location("loops/a.rules") is None
    assert location("a.rules:x:1") is None
    assert location("a.rules:0:1") is None


def test_brackets_in_strings_and_comments_carry_nothing() -> None:
    """A bracket inside a string (an escaped quote kept inside it) or a comment does
    not carry the statement onto the next, dedented line."""
    for line in (
        '  emit a.b { note: "a { in a string" }',
        '  emit a.b { note: "a \\" and a { in it" }',
        "  emit a.b  # a { in a comment",
    ):
        assert numbers(1, f"loop l\n{line}\nroute c.d to x@1\n") == [1, 2]
