"""The docs test's own parts: finding examples, normalising, regenerating."""

from __future__ import annotations

import docs_harness as h
import pytest

DOC = """# Page

<!-- example: setup docs/examples/state.sh; serve -->
```console
$ engine runs \\
    --json
run-0123456789abcdef  done
$ echo $?
0
```

```
$ engine digest
sha256:aaaa
...
last line
```
"""


def test_blocks_are_found_with_their_annotation_commands_and_output() -> None:
    """A `$ ` block yields its commands (a trailing backslash continues one), the lines
    each prints, and the annotation on the line before the fence."""
    first, second = h.find_blocks("docs/x.md", DOC)
    assert (first.line, first.setup, first.serve, first.not_run) == (
        4,
        ("docs/examples/state.sh",),
        True,
        None,
    )
    assert [c.text for c in first.commands] == ["engine runs \\\n    --json", "echo $?"]
    assert first.commands[0].output == ("run-0123456789abcdef  done",)
    assert second.id == "docs/x.md:12" and second.setup == () and not second.serve


def test_an_unknown_annotation_is_refused() -> None:
    """A misspelt annotation fails the collection rather than running the block fresh."""
    with pytest.raises(h.AnnotationError):
        h.parse_annotation("serv")
    assert h.parse_annotation("not run — needs launchctl").not_run == "needs launchctl"


def test_ids_and_times_are_normalised_but_digests_are_not() -> None:
    """Two runs differ in ids and times, never in a digest."""
    assert h.matches(
        ["run-0123456789abcdef  2026-12-01T14:00:00Z  4m ago"],
        ["run-fedcba9876543210  2026-12-02T05:00:01Z  12m ago"],
    )
    assert h.matches(["queued  just now"], ["queued  5s ago"])
    assert h.matches(
        ["2026-11-30 11:53:38,223 worker w2: claimed run run-cb9364adabe7dcae"],
        ["2026-12-02 06:36:05,493 worker w2: claimed run run-cb9364adabe7dcae"],
    )
    assert not h.matches(["digest: sha256:aaaa"], ["digest: sha256:bbbb"])
    assert h.matches(  # a paging cursor holds the page's last instant
        ["more: engine runs --before WyIyMDI2LTEyLTAyVDA3OjA1OjA5LjY2MjcyMVoiLCJ"],
        ["more: engine runs --before WyIyMDI2LTEyLTAyVDA3OjA1OjI5Ljk5NzQ2MloiLCJ"],
    )
    assert not h.matches(["more: engine runs --loop a"], ["more: engine runs --loop b"])
    # the budget line of `engine stats`: the seconds the runs took are measured, the runs not
    assert h.matches(["budget used (24h): a 6 runs/0s"], ["budget used (24h): a 6 runs/1s"])
    assert not h.matches(["budget used (24h): a 6 runs/0s"], ["budget used (24h): a 5 runs/0s"])
    # ... in a triage snapshot and `engine stats --json` too; a reservation is configured
    snap = '{"daily_runs_left":1,"daily_wall_clock_left":7200,"daily_wall_clock_used":0}'
    late = '{"daily_runs_left":1,"daily_wall_clock_left":7199,"daily_wall_clock_used":1}'
    assert h.matches([snap], [late])
    assert not h.matches([snap], [snap.replace('left":1', 'left":2')])
    assert h.matches(['    "wall_clock_seconds": 0'], ['    "wall_clock_seconds": 1'])
    assert not h.matches(['{"wall_clock_seconds":30}'], ['{"wall_clock_seconds":60}'])


def test_an_elision_stands_for_any_lines() -> None:
    """`...` matches zero or more lines, and only between the lines around it."""
    assert h.matches(["a", "...", "z"], ["a", "b", "c", "z"])
    assert h.matches(["{", '  "a": 1,', "  …", "}"], ["{", '  "a": 1,', '  "b": 2', "}"])
    assert h.matches(["a", "...", "z"], ["a", "z"])
    assert not h.matches(["a", "...", "z"], ["a", "b", "y"])


def test_regeneration_keeps_matching_lines_and_elisions() -> None:
    """A regenerated output is what was printed, except that lines that already match
    keep their shown ids and the `...` lines stay."""
    assert h.regenerated(
        ["run-0123456789abcdef ok", "old"], ["run-ffffffffffffffff ok", "new"]
    ) == [
        "run-0123456789abcdef ok",
        "new",
    ]
    assert h.regenerated(["head", "...", "tail"], ["HEAD", "x", "y", "TAIL"]) == [
        "HEAD",
        "...",
        "TAIL",
    ]


def test_rewrite_replaces_only_the_output_of_the_block() -> None:
    """Rewriting finds the block by its position and leaves commands, annotation and the
    other blocks alone, even when an earlier block grew."""
    second = h.find_blocks("docs/x.md", DOC)[1]
    grown = DOC.replace("run-0123456789abcdef  done", "one\ntwo\nthree")
    new = h.rewrite(grown, second, [["sha256:bbbb", "x", "last line"]])
    assert new == grown.replace("sha256:aaaa", "sha256:bbbb")


def test_regeneration_keeps_a_part_between_two_elisions_still_printed() -> None:
    """A part shown between two `…` stays when it is still printed, in its place."""
    want = ["[1] a", "…", "[7] green", "…", "[10] end"]
    got = ["[1] A", "[2] x", "[7] green", "[8] y", "[10] END"]
    assert h.regenerated(want, got) == ["[1] A", "…", "[7] green", "…", "[10] END"]


def test_table_padding_that_follows_a_relative_time_does_not_matter() -> None:
    """A column that widens by a digit from one run to the next still matches; a missing
    column does not."""
    shown = ["AT        BY", "────────────", "9s ago    inject"]
    printed = ["AT         BY", "─────────────", "10s ago    inject"]
    assert h.matches(shown, printed)
    assert not h.matches(shown, ["AT         BY", "─────────────", "10s ago"])
