"""The triggers that wait for something (engine/core/triggers.py, docs/rules.md
"Triggers"): `on_event TYPE [window VALUE] [if EXPR]` and `after LOOP [outcome ...]
[state ...]`, from the rule text to the tick a firing admits, and the planner's rule
that only the runtime makes such ticks."""

from __future__ import annotations

import hashlib
import itertools
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsl.diagnostics import RulesError
from engine.core.envelope import EVENT_ID_PATTERN, Envelope
from engine.core.planner import loop_of
from engine.core.ruleset import Loop, RuleSet, Trigger, TriggerKind
from engine.core.triggers import (
    MAX_WINDOW,
    Conclusion,
    after_tick,
    dependency_cycle,
    dependents,
    event_tick,
    fired_by,
    window_text,
)
from engine.loading import Paths, load_rules

NOW = datetime(2026, 12, 1, 10, tzinfo=UTC)
REGISTRY = """\
event_types:
  wait.done: {description: a tick}
  wait.asked: {description: a request from outside}
definitions:
  - {id: look, version: 1, adapter: agent, output_contract: r/v1, mutating: false,
     outcomes: [OK, FAILED]}
"""


def load(tmp_path: Path, rules: str) -> RuleSet:
    """The RuleSet of one rule file over a small registry (an empty config)."""
    (tmp_path / "config").mkdir()
    return load_with_config(tmp_path, rules)


def load_with_config(tmp_path: Path, rules: str) -> RuleSet:
    """The RuleSet of one rule file over a small registry and `tmp_path/config`."""
    (tmp_path / "loops").mkdir(exist_ok=True)
    (tmp_path / "registry" / "contracts").mkdir(parents=True, exist_ok=True)
    (tmp_path / "loops" / "t.rules").write_text(rules + "\nroute wait.done to look@1\n")
    types, definitions = REGISTRY.split("definitions:\n")
    (tmp_path / "registry" / "event-types.yaml").write_text(types)
    (tmp_path / "registry" / "definitions.yaml").write_text("definitions:\n" + definitions)
    (tmp_path / "registry" / "contracts" / "r.json").write_text('{"$id": "r/v1"}')
    return load_rules(Paths(tmp_path / "loops", tmp_path / "registry", tmp_path / "config"))


def diagnostics(tmp_path: Path, rules: str) -> list[tuple[int, int, str]]:
    with pytest.raises(RulesError) as err:
        load(tmp_path, rules)
    return [(d.span.line, d.span.column, d.code) for d in err.value.diagnostics]


def asked(event_id: str = "ask-1", **payload: Any) -> Envelope:
    return Envelope(
        eventId=event_id, type="wait.asked", source="github", occurredAt=NOW, payload=payload
    )


REVIEW = """\
loop review
  on_event wait.asked window [event.payload.repo, event.payload.pr] if event.payload.repo == "r1"
  emit wait.done { kind: "review" }
  enabled true
"""


# ---- the rule text ------------------------------------------------------------------------


def test_an_on_event_loop_compiles_to_its_trigger(tmp_path: Path) -> None:
    """`on_event TYPE window VALUE if EXPR` is the loop's one trigger: its type, guard
    and window, described for listings."""
    loop = load(tmp_path, REVIEW).loops["review"]
    assert loop.trigger.kind is TriggerKind.EVENT
    assert loop.trigger.event_type == "wait.asked"
    assert loop.trigger.guard is not None and loop.trigger.window is not None
    assert loop.trigger.describe() == "on_event wait.asked (guarded)"


def test_an_after_loop_compiles_with_its_filters(tmp_path: Path) -> None:
    """`after LOOP outcome A B state S` names the upstream loop and what it waits for;
    inside a `for` block the upstream may be a template of the repo's loop."""
    rules = load(
        tmp_path,
        "loop nightly\n  every 1h\n  emit wait.done\n\n"
        "loop follow\n  after nightly outcome OK FAILED state completed failed\n"
        "  emit wait.done\n",
    )
    trigger = rules.loops["follow"].trigger
    assert (trigger.kind, trigger.upstream) == (TriggerKind.AFTER, "nightly")
    assert (trigger.outcomes, trigger.states) == (("OK", "FAILED"), ("completed", "failed"))
    assert trigger.describe() == "after nightly outcome OK FAILED state completed failed"


@pytest.mark.parametrize(
    ("rules", "expected"),
    [
        # a second trigger, whichever comes first, conflicts at the later line
        ("loop a\n  every 1h\n  on_event wait.asked\n  emit wait.done\n", [(3, 3, "E0102")]),
        ("loop a\n  on_event wait.asked\n  after b\n  emit wait.done\n", [(3, 3, "E0102")]),
        # an unregistered type, a name other than `event`
        ("loop a\n  on_event wait.askd\n  emit wait.done\n", [(2, 12, "E0203")]),
        ("loop a\n  on_event wait.asked if payload.x\n  emit wait.done\n", [(2, 26, "E0601")]),
        ("loop a\n  on_event wait.asked window repo.name\n  emit wait.done\n", [(2, 30, "E0601")]),
        # after: its arguments, and a loop that waits for itself
        ("loop a\n  after\n  emit wait.done\n", [(2, 3, "E0105")]),
        ("loop a\n  after b c\n  emit wait.done\n", [(2, 11, "E0105")]),
        ("loop a\n  after b outcome\n  emit wait.done\n", [(2, 11, "E0105")]),
        ("loop a\n  after a\n  emit wait.done\n", [(2, 9, "E1002")]),
        # the engine fills window and trigger (upstream) in these ticks
        ("loop a\n  on_event wait.asked\n  emit wait.done { window: 1 }\n", [(3, 18, "E0208")]),
        (
            "loop n\n  manual\n  emit wait.done\n"
            "loop a\n  after n\n  emit wait.done { upstream: 1 }\n",
            [(6, 18, "E0208")],
        ),
    ],
)
def test_a_bad_waiting_trigger_is_a_located_error(
    tmp_path: Path, rules: str, expected: list[tuple[int, int, str]]
) -> None:
    """Each mistake in a waiting trigger is one error at file:line:col."""
    assert diagnostics(tmp_path, rules) == expected


# ---- on_event -----------------------------------------------------------------------------


def test_an_event_fires_the_loops_whose_guard_holds(tmp_path: Path) -> None:
    """An event of the type fires an enabled loop whose guard holds, with the window
    its expression gives (as canonical JSON); another repository's does not, nor does a
    loop's own tick, nor a disabled loop."""
    rules = load(tmp_path, REVIEW)
    (firing,) = fired_by(rules, asked(repo="r1", pr=[7]), is_tick=False)
    assert (firing.loop.name, firing.window, firing.error) == ("review", '["r1",[7]]', None)
    assert fired_by(rules, asked(repo="r2", pr=[7]), is_tick=False) == []
    assert fired_by(rules, asked(repo="r1", pr=[7]), is_tick=True) == []
    off = replace(rules.loops["review"], enabled=False)
    assert fired_by(replace(rules, loops={"review": off}), asked(repo="r1"), False) == []


def test_a_guard_that_cannot_be_read_fires_nothing_and_says_why(tmp_path: Path) -> None:
    """An event missing a field the guard reads does not fire the loop; the firing
    carries the error with the rule's place, for the journal."""
    rules = load(tmp_path, REVIEW)
    (firing,) = fired_by(rules, asked(pr=[7]), is_tick=False)
    assert firing.window is None
    assert firing.error is not None and firing.error.startswith("loops/t.rules:2:")


def test_the_window_defaults_to_the_event_id(tmp_path: Path) -> None:
    """Without `window`, each event is its own window."""
    rules = load(tmp_path, "loop a\n  on_event wait.asked\n  emit wait.done\n  enabled true\n")
    (firing,) = fired_by(rules, asked("ask-9"), is_tick=False)
    assert firing.window == "ask-9"


def test_an_events_tick_carries_the_event_that_fired_it(tmp_path: Path) -> None:
    """The tick is `on:<loop>:<event id>` from source `on_event`, at the event's time,
    keeping its correlation; its payload is the static payload with loop, window,
    trigger over it, and the event's repo when the loop sets none."""
    loop = load(tmp_path, REVIEW).loops["review"]
    event = asked("ask-1", repo="r1", pr=[7]).with_defaults()
    tick = event_tick(loop, event, '["r1",[7]]')
    assert (tick.eventId, tick.source, tick.subject, tick.occurredAt) == (
        "on:review:ask-1",
        "on_event",
        "review",
        NOW,
    )
    assert tick.correlationId == "ask-1"
    assert tick.payload == {
        "kind": "review",
        "repo": "r1",
        "loop": "review",
        "window": '["r1",[7]]',
        "trigger": {
            "eventId": "ask-1",
            "type": "wait.asked",
            "source": "github",
            "subject": "",
            "payload": {"repo": "r1", "pr": [7]},
        },
    }


@settings(max_examples=200, deadline=None)
@given(
    st.from_regex(EVENT_ID_PATTERN, fullmatch=True),
    st.from_regex(r"[a-z][a-z0-9-]{0,60}", fullmatch=True),
)
def test_a_ticks_id_is_always_an_event_id(event_id: str, name: str) -> None:
    """Whatever the event id and loop name, the tick's id is a valid event id, the same
    for the same event, and different for different events."""
    loop = Loop(name, Trigger(TriggerKind.EVENT, event_type="wait.asked"), "wait.done", {})
    event = asked(event_id)
    tick = event_tick(loop, event, "w")
    Envelope.model_validate(tick.model_dump())
    assert tick.eventId == event_tick(loop, event, "w").eventId
    assert tick.eventId != event_tick(loop, asked(event_id + "x"), "w").eventId


@given(
    st.recursive(
        st.none() | st.integers() | st.text(max_size=5),
        lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=3), c, max_size=3),
        max_leaves=200,
    )
)
def test_a_window_is_bounded_and_keeps_its_meaning(value: Any) -> None:
    """A window is at most MAX_WINDOW characters (a long one its digest); the same value
    always gives the same window, whatever the order of its keys."""
    text = window_text(value)
    assert len(text) <= MAX_WINDOW
    assert window_text(value) == text
    if isinstance(value, dict):
        assert window_text(dict(reversed(list(value.items())))) == text


# ---- after --------------------------------------------------------------------------------


def conclusion(state: str = "completed", outcome: str | None = "OK") -> Conclusion:
    return Conclusion(
        loop="nightly",
        occurrence="clock:nightly:2026-12-01T09:00:00Z",
        state=state,
        outcome=outcome,
        run="run-1",
        window="2026-12-01T09:00:00Z",
        repo="r1",
        correlation="clock:nightly:2026-12-01T09:00:00Z",
        at=NOW,
    )


AFTERS = """\
loop nightly
  every 1h
  emit wait.done
  enabled true

loop on-ok
  after nightly outcome OK
  emit wait.done
  enabled true

loop on-failure
  after nightly state failed timed_out
  emit wait.done
  enabled true

loop on-anything
  after nightly
  emit wait.done
  enabled true

loop switched-off
  after nightly
  emit wait.done
"""


def test_a_conclusion_fires_the_loops_that_wait_for_it(tmp_path: Path) -> None:
    """An upstream conclusion fires each enabled `after` loop whose outcome and state
    filters it passes (none written: any), and no disabled one."""
    rules = load(tmp_path, AFTERS)
    names = lambda done: [loop.name for loop in dependents(rules, done)]  # noqa: E731
    assert names(conclusion()) == ["on-anything", "on-ok"]
    assert names(conclusion("failed", "FAILED")) == ["on-anything", "on-failure"]
    assert names(conclusion("nothing_to_do", None)) == ["on-anything"]
    assert names(replace(conclusion(), loop="other")) == []


def test_an_after_tick_is_one_per_upstream_occurrence(tmp_path: Path) -> None:
    """The tick is `after:<loop>:<upstream occurrence>`, its window the upstream's
    identity, its payload the upstream's loop, occurrence, state, outcome, run and
    window, and the upstream's repo."""
    loop = load(tmp_path, AFTERS).loops["on-ok"]
    tick = after_tick(loop, conclusion())
    assert (tick.eventId, tick.source, tick.correlationId) == (
        "after:on-ok:clock:nightly:2026-12-01T09:00:00Z",
        "after",
        "clock:nightly:2026-12-01T09:00:00Z",
    )
    assert tick.payload == {
        "repo": "r1",
        "loop": "on-ok",
        "window": "after:clock:nightly:2026-12-01T09:00:00Z",
        "upstream": {
            "loop": "nightly",
            "occurrence": "clock:nightly:2026-12-01T09:00:00Z",
            "state": "completed",
            "outcome": "OK",
            "run": "run-1",
            "window": "2026-12-01T09:00:00Z",
        },
    }


def chain_of(edges: dict[str, str | None]) -> dict[str, Loop]:
    def loop(name: str, upstream: str | None) -> Loop:
        if upstream is None:
            return Loop(name, Trigger(TriggerKind.MANUAL), "wait.done", {})
        return Loop(name, Trigger(TriggerKind.AFTER, upstream=upstream), "wait.done", {})

    return {name: loop(name, up) for name, up in edges.items()}


@given(st.dictionaries(st.sampled_from("abcdef"), st.none() | st.sampled_from("abcdefg")))
def test_a_cycle_is_found_exactly_when_there_is_one(edges: dict[str, str | None]) -> None:
    """`dependency_cycle` finds a circle of `after` edges exactly when following the
    edges from some loop comes back to it (a name that is no loop ends a path), and
    the circle it names is one."""
    loops = chain_of(edges)

    def comes_back(start: str) -> bool:
        seen, node = set(), edges.get(start)
        while node is not None and node in edges and node not in seen:
            if node == start:
                return True
            seen.add(node)
            node = edges.get(node)
        return node == start

    cycle = dependency_cycle(loops)
    assert (cycle is not None) == any(comes_back(name) for name in edges)
    if cycle is not None:
        assert cycle[0] == cycle[-1]
        assert all(edges[a] == b for a, b in itertools.pairwise(cycle))


# ---- only the runtime makes these ticks ------------------------------------------------


@pytest.mark.parametrize("actor", ["bridge", "github", "inject", "chain", "operator:ada"])
def test_nobody_but_the_runtime_fires_a_waiting_loop(tmp_path: Path, actor: str) -> None:
    """A tick of an `on_event` or `after` loop is that loop's only when the runtime
    (`schedule`) admitted it with the loop's own source; from anyone else, or with
    the other trigger's source, it is no loop's tick."""
    rules = load(tmp_path, REVIEW + "\n" + AFTERS)
    event = event_tick(rules.loops["review"], asked(repo="r1", pr=[1]), "w")
    assert loop_of(event, "schedule", rules) == rules.loops["review"]
    assert loop_of(event, actor, rules) is None
    follow = after_tick(rules.loops["on-ok"], conclusion())
    assert loop_of(follow, "schedule", rules) == rules.loops["on-ok"]
    assert loop_of(follow, actor, rules) is None
    crossed = follow.model_copy(update={"source": "on_event"})
    assert loop_of(crossed, "schedule", rules) is None


def test_the_overlay_switches_a_waiting_loop_but_cannot_declare_one(tmp_path: Path) -> None:
    """`config/schedule.yaml` may switch an `on_event` loop off (it then fires nothing)
    and change its payload; a new overlay loop has no way to wait for an event or a
    loop: it needs a clock or `manual` (E0803)."""
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "schedule.yaml").write_text(
        "schedules:\n  review: {enabled: false, payload: {kind: other}}\n"
    )
    rules = load_with_config(tmp_path, REVIEW)
    review = rules.loops["review"]
    assert (review.enabled, review.payload["kind"]) == (False, "other")
    assert fired_by(rules, asked(repo="r1", pr=[7]), is_tick=False) == []
    (tmp_path / "config" / "schedule.yaml").write_text(
        "schedules:\n  fresh: {emit: wait.done, on_event: wait.asked}\n"
    )
    with pytest.raises(RulesError) as err:
        load_with_config(tmp_path, REVIEW)
    assert [d.code for d in err.value.diagnostics] == ["E0802"]


# ---- the edges of windows and ids ----------------------------------------------------------


def test_a_long_window_or_id_is_kept_as_its_digest() -> None:
    """A window of exactly MAX_WINDOW characters is kept as written, one longer becomes
    `sha256:` and the first 32 hex digits of its SHA-256; a tick id that would pass 256
    characters ends in the digest of the event id instead, one of exactly 256 is kept."""
    fits = "w" * MAX_WINDOW
    assert window_text(fits) == fits
    long = fits + "w"
    assert window_text(long) == "sha256:" + hashlib.sha256(long.encode()).hexdigest()[:32]
    loop = Loop("l", Trigger(TriggerKind.EVENT, event_type="wait.asked"), "wait.done", {})
    exact = "e" * (256 - len("on:l:"))
    assert event_tick(loop, asked(exact), "w").eventId == f"on:l:{exact}"
    longer = exact + "e"
    digest = hashlib.sha256(longer.encode()).hexdigest()[:32]
    assert event_tick(loop, asked(longer), "w").eventId == f"on:l:{digest}"


MANY = """\
loop a-off
  on_event wait.asked
  emit wait.done
loop b-on
  on_event wait.asked
  emit wait.done
  enabled true
loop c-guarded
  on_event wait.asked if event.payload.go == true
  emit wait.done
  enabled true
loop d-unreadable
  on_event wait.asked if event.payload.missing.deeper
  emit wait.done
  enabled true
loop e-on
  on_event wait.asked
  emit wait.done
  enabled true
loop f-other-type
  on_event wait.done
  emit wait.done
  enabled true
loop g-after
  after b-on
  emit wait.done
  enabled true
"""


def test_one_event_is_told_to_every_loop_of_its_type(tmp_path: Path) -> None:
    """Every `on_event` loop of the event's type is asked in turn: a disabled one, a
    guard that does not hold and one that cannot be read do not stop the loops after
    them; a loop of another type, or another trigger, is never asked."""
    rules = load(tmp_path, MANY)
    firings = fired_by(rules, asked(go=False), is_tick=False)
    assert [(f.loop.name, f.error is not None) for f in firings] == [
        ("b-on", False),
        ("d-unreadable", True),
        ("e-on", False),
    ]


def test_a_tick_keeps_the_loops_repo_and_the_events_correlation() -> None:
    """The loop's static `repo` wins over the event's, an event repo that is not text
    is not taken, and the tick keeps the event's correlation id (its own id when it has
    none)."""
    loop = Loop(
        "l", Trigger(TriggerKind.EVENT, event_type="wait.asked"), "wait.done", {"repo": "mine"}
    )
    assert event_tick(loop, asked(repo="theirs"), "w").payload["repo"] == "mine"
    bare = replace(loop, payload={})
    assert "repo" not in event_tick(bare, asked(repo=7), "w").payload
    assert event_tick(bare, asked("x1"), "w").correlationId == "x1"
    correlated = asked("x2").model_copy(update={"correlationId": "c-9"})
    assert event_tick(bare, correlated, "w").correlationId == "c-9"


def test_every_loop_after_an_upstream_is_found(tmp_path: Path) -> None:
    """`dependents` asks every loop in turn: a loop after another upstream, a disabled
    one, or one whose outcome or state filter the conclusion fails, does not stop the
    loops after it; the upstream's repo
    is the tick's only when the loop sets none."""
    rules = load(
        tmp_path,
        "loop nightly\n  every 1h\n  emit wait.done\n  enabled true\n"
        "loop other\n  manual\n  emit wait.done\n  enabled true\n"
        "loop a-after-other\n  after other\n  emit wait.done\n  enabled true\n"
        "loop a2-switched-off\n  after nightly\n  emit wait.done\n"
        "loop a3-on-failed\n  after nightly outcome FAILED\n  emit wait.done\n  enabled true\n"
        "loop b-on-failure\n  after nightly state failed\n  emit wait.done\n  enabled true\n"
        'loop c-on-anything\n  after nightly\n  emit wait.done { repo: "mine" }\n  enabled true\n',
    )
    (found,) = dependents(rules, conclusion())
    assert found.name == "c-on-anything"
    assert after_tick(found, conclusion()).payload["repo"] == "mine"
    bare = replace(found, payload={})
    assert "repo" not in after_tick(bare, replace(conclusion(), repo=None)).payload
