"""The condition-watch trigger in the rules: `watch PROBE every DURATION`, the probe
registry, the checks on a watch loop, its tick envelope and who may make one."""

from __future__ import annotations

import shutil
from datetime import UTC, datetime
from pathlib import Path

import pytest

from dsl.diagnostics import RulesError
from engine.core.decisions import DecisionKind
from engine.core.occurrence import identity
from engine.core.planner import Snapshot, loop_of, plan
from engine.core.records import EventRecord
from engine.core.ruleset import RuleSet, Trigger, TriggerKind
from engine.core.ticks import idempotency_key, watch_tick
from engine.loading import Paths, load_rules

DATA = Path(__file__).resolve().parents[1] / "data" / "watch"
NOW = datetime(2026, 11, 30, 10, 0, 7, 250000, tzinfo=UTC)
LOOP = """
loop ci-watch
  watch status every 5m
  emit test.changed { script: "/p.py", state: "/s.json" }
  enabled true
"""
ROUTE = "route test.changed to report@1\n"


def tree(root: Path, rules: str, probes: str | None = None, schedule: str | None = None) -> Paths:
    """The watch tests' registry (or `probes` as its probes.yaml) and `rules`."""
    shutil.copytree(DATA / "registry", root / "registry")
    if probes is not None:
        (root / "registry" / "probes.yaml").write_text(probes)
    (root / "loops").mkdir()
    (root / "loops" / "t.rules").write_text(rules + ROUTE)
    (root / "config").mkdir()
    if schedule is not None:
        (root / "config" / "schedule.yaml").write_text(schedule)
    return Paths(root / "loops", root / "registry", root / "config")


def diagnostics(paths: Paths) -> list[tuple[str, int, int, str, str]]:
    with pytest.raises(RulesError) as caught:
        load_rules(paths)
    return [
        (Path(d.span.file).name, d.span.line, d.span.column, d.code, d.message)
        for d in caught.value.diagnostics
    ]


def test_a_watch_loop_compiles_with_its_probe(tmp_path: Path) -> None:
    """`watch status every 5m` is a watch trigger on the probe with a 300s cadence; the
    rule set carries the registered probes."""
    rules = load_rules(tree(tmp_path, LOOP))
    loop = rules.loops["ci-watch"]
    assert loop.trigger == Trigger(TriggerKind.WATCH, every_seconds=300, probe="status")
    assert loop.trigger.describe() == "watch status every 5m"
    assert sorted(rules.probes) == ["slow", "status"]
    assert rules.probes["status"].timeout_seconds == 20


@pytest.mark.parametrize(
    ("setting", "column", "code", "says"),
    [
        ("watch status", 3, "E0105", "'watch' takes PROBE every DURATION"),
        ("watch status each 5m", 3, "E0105", "'watch' takes a probe name and its poll cadence"),
        ('watch "status" every 5m', 3, "E0105", "'watch' takes a probe name"),
        ("watch status every 5 minutes", 24, "E0105", "'watch' takes PROBE every DURATION"),
        ("watch status every soon", 22, "E0201", "bad duration"),
        ("watch stats every 5m", 9, "E0209", "unknown probe 'stats'"),
    ],
)
def test_a_bad_watch_setting_is_located(
    tmp_path: Path, setting: str, column: int, code: str, says: str
) -> None:
    """A malformed `watch` setting is one diagnostic at the argument that is wrong."""
    rules = LOOP.replace("watch status every 5m", setting)
    found = diagnostics(tree(tmp_path, rules))
    assert len(found) == 1
    name, line, col, got, message = found[0]
    assert (name, line, col, got) == ("t.rules", 3, column, code)
    assert says in message


def test_an_unknown_probe_suggests_the_close_one(tmp_path: Path) -> None:
    """An unknown probe's hint is `did you mean` the registered probe it resembles."""
    with pytest.raises(RulesError) as caught:
        load_rules(tree(tmp_path, LOOP.replace("watch status", "watch statu")))
    (diagnostic,) = caught.value.diagnostics
    assert diagnostic.hint == "did you mean 'status'?"


def test_a_watch_never_polls_a_browser_probe(tmp_path: Path) -> None:
    """`watch` runs a command probe's argv; naming a browser probe is E0209 at the
    probe's name, not a poll that could never run."""
    probes = (
        "probes:\n  - id: status\n    kind: browser\n    browser:\n"
        "      allow: [https://status.example.com]\n      url: https://status.example.com/\n"
    )
    rules = LOOP.replace('{ script: "/p.py", state: "/s.json" }', "{}")
    ((name, line, col, code, message),) = diagnostics(tree(tmp_path, rules, probes))
    assert (name, line, col, code) == ("t.rules", 3, 9, "E0209")
    assert "is a browser probe" in message


def test_a_watch_is_one_trigger_among_the_others(tmp_path: Path) -> None:
    """A loop with `every` and `watch` has two triggers (E0102 at the second)."""
    rules = LOOP.replace("  enabled", "  every 1h\n  enabled")
    assert [d[:4] for d in diagnostics(tree(tmp_path, rules))] == [("t.rules", 5, 3, "E0102")]


def test_a_probe_param_the_payload_does_not_fill_is_an_error(tmp_path: Path) -> None:
    """A watch loop's payload must give each of its probe's params a value, so a poll is
    never refused for a missing argument."""
    rules = LOOP.replace('script: "/p.py", ', "")
    ((name, line, col, code, message),) = diagnostics(tree(tmp_path, rules))
    assert (name, line, col, code) == ("t.rules", 4, 21, "E0209")
    assert "param 'script' reads payload.script" in message


def test_a_watch_payload_may_not_set_the_watch_fields(tmp_path: Path) -> None:
    """The fields of a watch's tick (window, fingerprint, ...) are the engine's."""
    rules = LOOP.replace('state: "/s.json"', 'state: "/s.json", window: "w"')
    ((_, line, _, code, message),) = diagnostics(tree(tmp_path, rules))
    assert (line, code) == (4, "E0208") and "window" in message


def test_a_watch_tick_must_fit_the_event_type(tmp_path: Path) -> None:
    """E0206 checks a sample watch tick (not a slot's) against the type's schema."""
    schema = tmp_path / "registry" / "schemas" / "watch.input.json"
    paths = tree(tmp_path, LOOP)
    text = schema.read_text()
    schema.write_text(text.replace('"format": "date-time"}', '"maxLength": 3}'))
    ((_, _, _, code, message),) = diagnostics(paths)
    assert code == "E0206" and "'2026-01-01T00:00:00Z' is too long" in message


@pytest.mark.parametrize(
    ("probes", "says"),
    [
        ("probes:\n  - id: x\n    argv: [a]\n    timeout: 11m\n", "at most 10m"),
        ("probes:\n  - id: x\n    argv: [a, '{nope}']\n", "'{nope}' is not a declared param"),
        ("probes:\n  - id: x\n    argv: [a]\n    include: ['a..b']\n", "not a dotted path"),
        ("probes:\n  - id: x\n    argv: [a]\n    ignore: ['(']\n", "is not a regex"),
        ("probes:\n  - id: x\n    argv: [a]\n    env: [gh_token]\n", "not an environment"),
        ("probes:\n  - id: x\n    argv: ['--{flag}']\n", "must never choose an option"),
        ("probes:\n  - id: x\n    argv: [a]\n    shell: true\n", "unknown field 'shell'"),
    ],
)
def test_a_bad_probe_entry_is_a_located_registry_error(
    tmp_path: Path, probes: str, says: str
) -> None:
    """registry/probes.yaml is validated like definitions.yaml: each bad entry is an
    E0902 at its place, and nothing loads."""
    found = diagnostics(tree(tmp_path, "", probes))
    assert [(f[0], f[3]) for f in found] == [("probes.yaml", "E0902")]
    assert says in found[0][4]


def test_a_key_that_is_not_a_word_is_quoted_where_it_is_named(tmp_path: Path) -> None:
    """A field whose name is blank or holds spaces reads as one quoted name, so the
    line still says which field it is (a bare blank left the message empty)."""
    found = diagnostics(tree(tmp_path, "", "probes:\n  - id: x\n    argv: [a]\n    ' ': 1\n"))
    assert [f[4] for f in found] == ["' ': unknown field ' '"]


def test_the_overlay_may_change_a_watch_cadence_not_its_probe(tmp_path: Path) -> None:
    """`every: 10m` in the overlay changes a watch loop's poll cadence; the probe is
    pinned by the rule file."""
    rules = load_rules(tree(tmp_path, LOOP, schedule="schedules:\n  ci-watch:\n    every: 10m\n"))
    assert rules.loops["ci-watch"].trigger.describe() == "watch status every 10m"


# ---- the tick and who may make it --------------------------------------------------------


@pytest.fixture
def rules(tmp_path: Path) -> RuleSet:
    return load_rules(tree(tmp_path, LOOP))


def test_a_change_is_one_deterministic_envelope(rules: RuleSet) -> None:
    """The n-th change's tick: `watch:<loop>:<n>-<fp16>`, source `watch`, subject the
    loop, occurred at the observation, payload the static payload plus the change."""
    loop = rules.loops["ci-watch"]
    new, old = "ab" * 32, "cd" * 32
    tick = watch_tick(loop, 3, new, old, NOW)
    assert tick == watch_tick(loop, 3, new, old, NOW)
    assert (tick.eventId, tick.source, tick.subject, tick.occurredAt, tick.correlationId) == (
        "watch:ci-watch:3-abababababababab",
        "watch",
        "ci-watch",
        NOW,
        "watch:ci-watch:3-abababababababab",
    )
    assert tick.payload == {
        "script": "/p.py",
        "state": "/s.json",
        "loop": "ci-watch",
        "window": "watch:3-abababababababab",
        "fingerprint": new,
        "previousFingerprint": old,
        "observedAt": "2026-11-30T10:00:07.250000Z",
    }


@pytest.mark.parametrize(
    "actor", ["bridge", "inject", "github", "chain", "operator:alice", "system", "worker"]
)
def test_only_the_scheduler_makes_a_watch_tick(rules: RuleSet, actor: str) -> None:
    """A tick claiming `source: watch` is the watch loop's only when the scheduler
    admitted it; posted by anyone else it follows its route (a proposal nobody
    approved), never the loop."""
    tick = watch_tick(rules.loops["ci-watch"], 1, "ab" * 32, "cd" * 32, NOW)
    assert loop_of(tick, "schedule", rules) is rules.loops["ci-watch"]
    assert loop_of(tick, actor, rules) is None
    forged = plan(tick, actor, rules, Snapshot())
    assert (forged.kind, forged.loop, forged.approved_by) == (DecisionKind.PROPOSE, None, None)


def test_a_watch_source_names_only_a_watch_loop(tmp_path: Path) -> None:
    """`source: watch` naming an interval loop is no tick of it, even from the scheduler."""
    paths = tree(tmp_path, LOOP.replace("watch status every 5m", "every 5m"))
    (paths.registry / "event-types.yaml").write_text("event_types:\n  test.changed: {}\n")
    rules = load_rules(paths)
    loop = rules.loops["ci-watch"]
    tick = watch_tick(loop, 1, "ab" * 32, "cd" * 32, NOW)
    assert loop_of(tick, "schedule", rules) is None


def test_a_change_is_one_window_and_one_run_key(rules: RuleSet) -> None:
    """A watch tick's occurrence window and run key are its change (`watch:<n>-<fp16>`),
    so the same change admitted again is the same occurrence and the same run; the
    same envelope admitted by anyone but the scheduler is no loop's and keeps its id."""
    loop = rules.loops["ci-watch"]
    tick = watch_tick(loop, 2, "ab" * 32, "cd" * 32, NOW)

    def stored(actor: str) -> EventRecord:
        return EventRecord(
            event_id=tick.eventId,
            type=tick.type,
            source=tick.source,
            subject=tick.subject,
            occurred_at="2026-11-30T10:00:07.250000Z",
            correlation_id=tick.eventId,
            payload=dict(tick.payload),
            loop=loop.name if actor == "schedule" else None,
            admitted_at="2026-11-30T10:00:08.000000Z",
            admitted_by=actor,
        )

    window = "watch:2-abababababababab"
    assert identity(stored("schedule"), loop).key == f"ci-watch|-|{window}"
    assert idempotency_key(stored("schedule")) == f"loop:ci-watch:{window}"
    forged = stored("inject")
    assert identity(forged, None).window == f"event:{tick.eventId}"
    assert idempotency_key(forged) == f"event:{tick.eventId}"


def test_the_probe_registry_is_covered_by_the_digest(tmp_path: Path) -> None:
    """registry/probes.yaml is a kernel file: editing a probe changes the rules digest."""
    paths = tree(tmp_path, LOOP)
    before = load_rules(paths).digest
    probes = paths.registry / "probes.yaml"
    probes.write_text(probes.read_text().replace("timeout: 20s", "timeout: 25s"))
    after = load_rules(paths)
    assert after.digest != before and after.probes["status"].timeout_seconds == 25


def test_a_new_overlay_loop_cannot_be_a_watch(tmp_path: Path) -> None:
    """The unreviewed overlay declares no watch: a new loop naming a probe is refused at
    its `watch` key (a watch is declared in a rule file, like the probe it polls)."""
    overlay = "schedules:\n  my-watch:\n    emit: test.changed\n    every: 5m\n    watch: status\n"
    found = diagnostics(tree(tmp_path, LOOP, schedule=overlay))
    assert [(f[0], f[1], f[3]) for f in found] == [("schedule.yaml", 5, "E0802")]
    assert "unknown field 'watch'" in found[0][4]
