"""The scheduler as docs/scheduling.md describes it, against real `engine serve` processes: each
start's clock is placed with ENGINE_NOW, state lives in a real database (every test runs twice: on a
SQLite file and on a PostgreSQL database), and the answers come from the HTTP API (events,
proposals, runs, journal) or the database's own tables. The tree is
tests/data/scheduling_acceptance; every test writes a config/schedule.yaml that switches on only the
loops it watches.

`pulse` (every 1s) is the heartbeat where one is needed: a pulse tick at or after a
start's clock proves that start's scheduler has made its first pass, and every other
loop due at that moment would have fired in the same pass."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from databases import rows

ROOT = Path(__file__).resolve().parent.parent.parent
TREE = ROOT / "tests" / "data" / "scheduling_acceptance"  # conftest's SCHEDULING_TREE
EVENT_SECRET = "test-event-secret"  # conftest's, given to every start as ENGINE_EVENT_SECRET
TOKEN = "tok"  # ENGINE_OPERATOR_TOKEN=alice:tok
LOOPS = ("hourly", "hourly-last", "hourly-all", "watched", "auto", "pulse", "slow", "bridge")
HOUR = "2026-11-30T{}:00:00Z"

pytestmark = pytest.mark.slow


# ---- helpers ---------------------------------------------------------------------------


def overlay(directory: Path, *enabled: str) -> Path:
    """A config directory whose schedule.yaml switches on only `enabled` loops."""
    directory.mkdir(parents=True, exist_ok=True)
    lines = [f"  {name}: {{enabled: {str(name in enabled).lower()}}}" for name in LOOPS]
    (directory / "schedule.yaml").write_text("schedules:\n" + "\n".join(lines) + "\n")
    return directory


def get(serve: Any, path: str) -> Any:
    status, answer = serve.request("GET", path, token=TOKEN)
    assert status == 200, (path, answer)
    return answer


def by_slot(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(events, key=lambda e: str(e["payload"]["slot"]))


def ticks(serve: Any, loop: str) -> list[dict[str, Any]]:
    """The loop's admitted ticks, oldest slot first."""
    return by_slot(get(serve, f"/events?type=clock.tick.{loop}&limit=1000")["events"])


def wait_ticks(
    serve: Any, loop: str, ready: Callable[[list[dict[str, Any]]], bool], within: float = 15
) -> list[dict[str, Any]]:
    """Poll the loop's ticks until `ready(ticks)`."""
    answer = serve.wait_for(
        f"/events?type=clock.tick.{loop}&limit=1000",
        lambda a: ready(by_slot(a["events"])),
        TOKEN,
        within,
    )
    return by_slot(answer["events"])


def has_slot(slot: str) -> Callable[[list[dict[str, Any]]], bool]:
    return lambda found: any(e["payload"]["slot"] == slot for e in found)


def passed(serve: Any, now: str) -> None:
    """Wait until this start's scheduler has made a pass: a pulse tick at or after `now`."""
    wait_ticks(serve, "pulse", lambda found: bool(found) and found[-1]["payload"]["slot"] >= now)


def slots(events: list[dict[str, Any]]) -> list[str]:
    return [str(e["payload"]["slot"]) for e in events]


def of_loop(serve: Any, what: str, loop: str) -> list[dict[str, Any]]:
    """Proposals or runs (any state) of one loop."""
    query = "state=all&limit=1000"
    return [r for r in get(serve, f"/{what}?{query}")[what] if r["loop"] == loop]


def journal(serve: Any) -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = []
    after = 0
    while True:
        page = get(serve, f"/journal?limit=1000&after={after}")
        entries += page["entries"]
        if len(page["entries"]) < 1000:
            return entries
        after = page["next"]


def skips(db: str, loop: str) -> list[tuple[Any, ...]]:
    """The loop's skip records (first slot, last slot, count, reason), oldest first."""
    query = "SELECT first_slot, last_slot, count, reason FROM slot_skips WHERE loop = ? "
    return rows(db, query + "ORDER BY first_slot", loop)


def wait_until(ready: Callable[[], Any], what: str, within: float = 15) -> Any:
    deadline = time.monotonic() + within
    while not (found := ready()):
        if time.monotonic() > deadline:
            raise AssertionError(f"never happened: {what}")
        time.sleep(0.05)
    return found


def engine(db: str, config: Path, now: str, *args: str) -> subprocess.CompletedProcess[str]:
    """The `engine` command on a database and the tree (with `config`), its clock at `now`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ENGINE_")}
    tree = ["--rules", str(TREE / "loops"), "--registry", str(TREE / "registry")]
    return subprocess.run(
        [sys.executable, "-m", "engine", *args, "--db", db, *tree, "--config", str(config)],
        env={**env, "ENGINE_NOW": now},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def hours(first: str, last: str) -> list[str]:
    """The hourly slots from `first` to `last`, both included."""
    start, end = (datetime.fromisoformat(t.replace("Z", "+00:00")) for t in (first, last))
    count = (end - start) // timedelta(hours=1) + 1
    return [(start + timedelta(hours=i)).strftime("%Y-%m-%dT%H:%M:%SZ") for i in range(count)]


def signed(body: bytes) -> dict[str, str]:
    """The signing recipe of docs/api.md, written out independently of the engine."""
    stamp = str(int(time.time()))
    mac = hmac.new(EVENT_SECRET.encode(), stamp.encode() + b"." + body, hashlib.sha256)
    return {"X-Engine-Timestamp": stamp, "X-Engine-Signature": f"sha256={mac.hexdigest()}"}


# ---- slots make restarts safe (docs/scheduling.md#slots-the-identity-of-a-firing) --------


def test_restarts_within_one_interval_admit_exactly_one_tick(
    serve_clock: Any, tmp_path: Path
) -> None:
    """Restarting serve three times within one hour admits exactly one tick for its slot.

    Timeline (ENGINE_NOW of each start): 09:59:59 - the first start sees `hourly` for the
    first time and records it enabled since 09:59:59, so 10:00 is due; it fires about a
    second later, then SIGTERM. 10:20, 10:25, 10:40 - three restarts; each waits for its
    first scheduler pass (a pulse tick at or after its clock), then SIGTERM. The events
    table holds exactly one hourly tick, `clock:hourly:2026-11-30T10:00:00Z`."""
    config = overlay(tmp_path / "config", "hourly", "pulse")
    first = serve_clock.start("2026-11-30T09:59:59Z", "--no-worker", config=config)
    (tick,) = wait_ticks(first, "hourly", bool)
    assert first.stop() == 0
    for now in ("10:20", "10:25", "10:40"):
        restarted = serve_clock.start(f"2026-11-30T{now}:00Z", "--no-worker", config=config)
        passed(restarted, f"2026-11-30T{now}:00Z")
        assert [e["eventId"] for e in ticks(restarted, "hourly")] == [
            "clock:hourly:2026-11-30T10:00:00Z"
        ]
        assert restarted.stop() == 0
    assert (tick["type"], tick["source"], tick["admittedBy"]) == (
        "clock.tick.hourly",
        "schedule",
        "schedule",
    )
    assert tick["payload"] == {
        "loop": "hourly",
        "slot": "2026-11-30T10:00:00Z",
        "cadenceSeconds": 3600,
        "skippedSlots": 0,
    }


def test_two_serves_on_one_database_converge_on_one_run_per_slot(
    serve_clock: Any, tmp_path: Path
) -> None:
    """Two serve processes firing the same one-second auto loop on one database admit
    each slot's tick once and queue exactly one run per slot; a second admission of a
    fired tick answers duplicate and writes no second row."""
    config = overlay(tmp_path / "config", "pulse")
    with ThreadPoolExecutor(2) as pool:
        one, two = pool.map(lambda _: serve_clock.start(None, "--no-worker", config=config), "ab")
    both_up = datetime.now(UTC)
    backend = "postgresql" if serve_clock.db.startswith("postgresql://") else "sqlite"
    assert [get(serve, "/status")["database"] for serve in (one, two)] == [backend] * 2
    later = (both_up + timedelta(seconds=3)).strftime("%Y-%m-%dT%H:%M:%SZ")
    fired = wait_ticks(two, "pulse", lambda found: slots(found)[-1:] >= [later])
    replay = {k: fired[0][k] for k in ("eventId", "type", "source", "subject", "payload")}
    body = json.dumps({**replay, "occurredAt": fired[0]["occurredAt"]}).encode()
    assert one.request("POST", "/events", raw=body, headers=signed(body)) == (
        200,
        {"admitted": False, "duplicate": True, "eventId": fired[0]["eventId"]},
    )
    for serve in (one, two):
        serve.process.terminate()
    assert [one.process.wait(15), two.process.wait(15)] == [0, 0]

    db = serve_clock.db
    events = dict(rows(db, "SELECT event_id, payload FROM events WHERE loop = 'pulse'"))
    admitted = Counter(
        entity_id
        for (entity_id,) in rows(
            db, "SELECT entity_id FROM journal WHERE entity = 'event' AND action = 'admitted'"
        )
    )
    decisions = Counter(e for (e,) in rows(db, "SELECT event_id FROM decisions"))
    runs = rows(db, "SELECT idempotency_key, event_id FROM runs WHERE loop = 'pulse'")
    keys = Counter(key for key, _ in runs)
    slots_fired = [json.loads(p)["slot"] for p in events.values()]
    assert len(slots_fired) == len(set(slots_fired)) >= 3
    assert set(admitted) == set(events) and set(admitted.values()) == {1}
    assert set(decisions) == set(events) and set(decisions.values()) == {1}
    assert keys == Counter(f"loop:pulse:{slot}" for slot in slots_fired)


# ---- missed slots, one shared night (docs/scheduling.md#missed-slots-catch-up) -----------


@dataclass
class Night:
    """The ticks, proposals and skips of three hourly loops, one per catch-up policy."""

    first: dict[str, list[dict[str, Any]]]  # after the 21:59:59 start
    morning: dict[str, list[dict[str, Any]]]  # after the 04:10 start
    evening: dict[str, list[dict[str, Any]]]  # after the 17:10 start
    proposals: dict[str, list[dict[str, Any]]]  # after the 04:10 start
    db: str
    config: Path


CATCH_UP = ("hourly", "hourly-last", "hourly-all")


@pytest.fixture(scope="module")
def night(module_serve_clock: Any) -> Night:
    """Serve at 2026-11-29T21:59:59Z until the 22:00 ticks (the loops are enabled since
    21:59:59), asleep until 2026-11-30T04:10:00Z (23:00-03:00 missed, 04:00 due), then
    asleep again until 17:10 (05:00-17:00 due: thirteen, more than `all`'s cap of 10)."""
    clock = module_serve_clock
    config = overlay(clock.workdir / "config", *CATCH_UP)

    def run(now: str, until: str) -> tuple[Any, dict[str, list[dict[str, Any]]]]:
        serve = clock.start(now, "--no-worker", config=config)
        return serve, {loop: wait_ticks(serve, loop, has_slot(until)) for loop in CATCH_UP}

    serve, first = run("2026-11-29T21:59:59Z", "2026-11-29T22:00:00Z")
    assert serve.stop() == 0
    serve, morning = run("2026-11-30T04:10:00Z", HOUR.format("04"))
    proposals = {loop: of_loop(serve, "proposals", loop) for loop in CATCH_UP}
    assert serve.stop() == 0
    serve, evening = run("2026-11-30T17:10:00Z", HOUR.format("17"))
    assert serve.stop() == 0
    return Night(first, morning, evening, proposals, clock.db, config)


def after(events: list[dict[str, Any]], slot: str) -> list[dict[str, Any]]:
    return [e for e in events if e["payload"]["slot"] > slot]


def test_catch_up_none_fires_the_current_slot_and_records_five_skips(night: Night) -> None:
    """Six due hourly slots under `catch-up none` (23:00-04:00) fire one tick, 04:00 with
    skippedSlots 5, make one proposal per fired slot, and record one skip range of five
    slots with reason catchup_none."""
    assert slots(night.first["hourly"]) == ["2026-11-29T22:00:00Z"]
    (tick,) = after(night.morning["hourly"], "2026-11-29T22:00:00Z")
    assert tick["eventId"] == "clock:hourly:2026-11-30T04:00:00Z"
    assert tick["payload"]["skippedSlots"] == 5
    assert Counter(p["eventId"] for p in night.proposals["hourly"]) == Counter(
        e["eventId"] for e in night.morning["hourly"]
    )
    shown = engine(
        night.db,
        night.config,
        "2026-11-30T17:10:30Z",
        *("schedule", "slots", "hourly", "--since", "2026-11-29T21:00:00Z", "--json"),
    )
    assert shown.returncode == 0, shown.stderr
    history = [
        (r["slot"], r["lastSlot"], r["count"], r["status"], r["reason"])
        for r in json.loads(shown.stdout)["slots"]
    ]
    assert history[:3] == [
        ("2026-11-29T22:00:00Z", "2026-11-29T22:00:00Z", 1, "fired", None),
        ("2026-11-29T23:00:00Z", "2026-11-30T03:00:00Z", 5, "skipped", "catchup_none"),
        (HOUR.format("04"), HOUR.format("04"), 1, "fired", None),
    ]
    assert skips(night.db, "hourly")[0] == (
        "2026-11-29T23:00:00Z",
        "2026-11-30T03:00:00Z",
        5,
        "catchup_none",
    )


def test_catch_up_last_fires_the_newest_missed_slot_then_the_current_one(night: Night) -> None:
    """Under `catch-up last` the same night fires 03:00 (skippedSlots 4) first and the
    current slot 04:00 (skippedSlots 0) on a later pass; 23:00-02:00 are recorded as
    catchup_last skips."""
    late, current = after(night.morning["hourly-last"], "2026-11-29T22:00:00Z")
    assert (late["payload"]["slot"], late["payload"]["skippedSlots"]) == (HOUR.format("03"), 4)
    assert (current["payload"]["slot"], current["payload"]["skippedSlots"]) == (
        HOUR.format("04"),
        0,
    )
    assert current["admittedAt"] > late["admittedAt"]  # a pass later
    assert skips(night.db, "hourly-last")[0] == (
        "2026-11-29T23:00:00Z",
        "2026-11-30T02:00:00Z",
        4,
        "catchup_last",
    )


def test_catch_up_all_fires_every_missed_slot_in_order_up_to_its_cap(night: Night) -> None:
    """Under `catch-up all cap 10` the six due slots of the night all fire, oldest first,
    each with its own proposal; the thirteen due by 17:10 exceed the cap, so the oldest
    three (05:00-07:00) are skipped as catchup_cap and 08:00-17:00 fire in order."""
    night_ticks = after(night.morning["hourly-all"], "2026-11-29T22:00:00Z")
    assert slots(night_ticks) == ["2026-11-29T23:00:00Z"] + [
        HOUR.format(h) for h in ("00", "01", "02", "03", "04")
    ]
    assert [e["payload"]["skippedSlots"] for e in night_ticks] == [0] * 6
    opened = Counter(p["eventId"] for p in night.proposals["hourly-all"])
    assert opened == Counter(e["eventId"] for e in night.morning["hourly-all"])
    assert {p["state"] for p in night.proposals["hourly-all"]} == {"open"}

    capped = after(night.evening["hourly-all"], HOUR.format("04"))
    assert slots(capped) == [HOUR.format(f"{h:02}") for h in range(8, 18)]
    assert [e["payload"]["skippedSlots"] for e in capped] == [3] + [0] * 9
    assert skips(night.db, "hourly-all") == [
        (HOUR.format("05"), HOUR.format("07"), 3, "catchup_cap")
    ]
    admitted = [  # admission order is journal order
        entity_id
        for (entity_id,) in rows(
            night.db,
            "SELECT entity_id FROM journal WHERE entity = 'event' "
            "AND action = 'admitted' AND entity_id LIKE 'clock:hourly-all:%' ORDER BY seq",
        )
    ]
    assert admitted == sorted(admitted) and len(admitted) == 1 + 6 + 10


# ---- disabling a loop (docs/scheduling.md#operating-schedules) ---------------------------


def test_disabling_stops_ticks_and_reenabling_does_not_replay(
    serve_clock: Any, tmp_path: Path
) -> None:
    """A loop switched off in config/schedule.yaml fires nothing after a restart, and
    switching it on again resumes without replaying the disabled period: every slot is
    accounted for exactly once, fired or skipped with reason disabled.

    Timeline: 09:59:59 on, fires 10:00; 12:30 off; 13:30 on (11:00-13:00 skipped as
    disabled, nothing fires); 13:40 off; 16:00:00 on again (14:00-15:00 skipped as
    disabled; 16:00, the slot of the enabling second, fires when the first pass runs
    within that second, as it usually does, and is skipped otherwise - never both)."""
    on = overlay(tmp_path / "on", "hourly", "pulse")
    off = overlay(tmp_path / "off", "pulse")
    serve = serve_clock.start("2026-11-30T09:59:59Z", "--no-worker", config=on)
    wait_ticks(serve, "hourly", has_slot(HOUR.format("10")))
    assert serve.stop() == 0
    for now, config in (("12:30", off), ("13:30", on), ("13:40", off), ("16:00", on)):
        serve = serve_clock.start(f"2026-11-30T{now}:00Z", "--no-worker", config=config)
        passed(serve, f"2026-11-30T{now}:00Z")
        if config is off:
            assert slots(ticks(serve, "hourly")) == [HOUR.format("10")]
            assert serve.stop() == 0
    actions = [
        (e["action"], e["actor"])
        for e in get(serve, "/journal?entity=loop&entityId=hourly")["entries"]
    ]
    assert actions == [("enabled", "system"), ("disabled", "system")] * 2 + [("enabled", "system")]

    fired = slots(ticks(serve, "hourly"))
    skipped = skips(serve_clock.db, "hourly")
    assert all(count == len(hours(first, last)) for first, last, count, _ in skipped)
    accounted = fired + [slot for first, last, _, _ in skipped for slot in hours(first, last)]
    assert sorted(accounted) == hours(HOUR.format("10"), HOUR.format("16"))  # each once
    assert {reason for *_, reason in skipped} == {"disabled"}
    assert skipped[:2] == [
        (HOUR.format("11"), HOUR.format("13"), 3, "disabled"),
        (HOUR.format("14"), skipped[1][1], skipped[1][2], "disabled"),
    ]
    assert fired in ([HOUR.format("10"), HOUR.format("16")], [HOUR.format("10")])
    assert get(serve, "/schedules/hourly")["schedule"]["nextDue"] == HOUR.format("17")


# ---- approval, watched first and earned (docs/rules.md#approval-state-description) -------


def test_watched_proposes_per_slot_and_auto_runs_as_schedule(
    serve_clock: Any, tmp_path: Path
) -> None:
    """A watched loop makes one proposal per slot and runs nothing until an operator
    approves (then exactly one run, approved by operator:alice); an auto loop's runs,
    proposals and every journal record about them name schedule, system or a worker as
    the actor, never an operator.

    Timeline: 09:59:59 both loops fire 10:00; restart at 12:00:30, both fire 12:00."""
    config = overlay(tmp_path / "config", "watched", "auto")

    def done(serve: Any, slot: str) -> None:
        wait_ticks(serve, "watched", has_slot(slot))
        wait_until(
            lambda: any(
                r["state"] == "succeeded" and r["eventId"] == f"clock:auto:{slot}"
                for r in of_loop(serve, "runs", "auto")
            ),
            f"the auto run of {slot} succeeded",
        )

    serve = serve_clock.start("2026-11-30T09:59:59Z", config=config)
    done(serve, HOUR.format("10"))
    assert serve.stop() == 0
    serve = serve_clock.start("2026-11-30T12:00:30Z", config=config)
    done(serve, HOUR.format("12"))

    watched = ticks(serve, "watched")
    assert slots(watched) == [HOUR.format("10"), HOUR.format("12")]
    proposals = of_loop(serve, "proposals", "watched")
    assert sorted(p["eventId"] for p in proposals) == [e["eventId"] for e in watched]
    assert of_loop(serve, "runs", "watched") == []
    newest = next(p for p in proposals if p["eventId"] == watched[-1]["eventId"])
    status, approved = serve.request(
        "POST", f"/proposals/{newest['proposalId']}/approve", {}, token=TOKEN
    )
    assert status == 200, approved
    (run,) = of_loop(serve, "runs", "watched")
    assert (run["runId"], run["approvedBy"]) == (approved["run"]["runId"], "operator:alice")

    auto_events = {e["eventId"] for e in ticks(serve, "auto")}
    auto_runs = of_loop(serve, "runs", "auto")
    auto_proposals = of_loop(serve, "proposals", "auto")
    assert len(auto_events) == len(auto_runs) == len(auto_proposals) == 2
    assert {r["approvedBy"] for r in auto_runs} == {"schedule"}
    assert {(p["state"], p["decidedBy"]) for p in auto_proposals} == {("approved", "schedule")}
    about = (
        auto_events | {r["runId"] for r in auto_runs} | {p["proposalId"] for p in auto_proposals}
    )
    actors = {e["actor"] for e in journal(serve) if e["entityId"] in about}
    assert {"schedule", "system"} <= actors
    assert all(a in ("schedule", "system") or a.startswith("worker:") for a in actors), actors


# ---- one run at a time (docs/scheduling.md#overlap-one-at-a-time-and-previous_run_in_flight)


def test_a_loop_with_a_run_in_flight_gets_a_noop_not_a_second_run(
    serve_clock: Any, tmp_path: Path
) -> None:
    """The next slot of a singleton auto loop whose run (a five-second command) is still
    in flight is decided NOOP with reason previous_run_in_flight, and no second run is
    queued."""
    config = overlay(tmp_path / "config", "slow")
    scripts = {"SCHEDULING_SCRIPTS": str(TREE / "scripts")}
    serve = serve_clock.start(None, config=config, env=scripts)
    first, second = wait_ticks(serve, "slow", lambda found: len(found) >= 2)[:2]
    decided = serve.wait_for(
        f"/events/{second['eventId']}", lambda a: a["decision"] is not None, TOKEN
    )["decision"]
    assert (decided["kind"], decided["reason"]) == ("noop", "previous_run_in_flight")
    (run,) = of_loop(serve, "runs", "slow")
    assert run["eventId"] == first["eventId"] and run["state"] in ("queued", "claimed", "running")


# ---- visibility and the doctor (docs/scheduling.md#the-doctor) ---------------------------


def test_schedule_answers_is_it_running_when_did_it_last_fire_what_happened(
    serve_clock: Any, tmp_path: Path
) -> None:
    """GET /schedules and `engine schedule --json` answer, per loop, whether it is
    enabled, its cadence, approval and source, the last slot fired, the next slot due
    and the last outcome (an auto loop's succeeded run, a watched loop's open proposal).

    Timeline: 09:59:59 `auto` and `watched` start; both fire 10:00; 11:00 is next."""
    config = overlay(tmp_path / "config", "auto", "watched")
    serve = serve_clock.start("2026-11-30T09:59:59Z", config=config)
    wait_ticks(serve, "watched", has_slot(HOUR.format("10")))
    serve.wait_for(
        "/schedules",
        lambda a: any(
            s["name"] == "auto" and (s["lastOutcome"] or {}).get("state") == "succeeded"
            for s in a["schedules"]
        ),
        TOKEN,
    )
    listed = engine(serve_clock.db, config, "2026-11-30T10:00:30Z", "schedule", "--json")
    assert listed.returncode == 0, listed.stderr
    keys = ("enabled", "cadenceSeconds", "approval", "source", "lastSlot", "nextDue")
    for answer in (get(serve, "/schedules"), json.loads(listed.stdout)):
        found = {s["name"]: s for s in answer["schedules"]}
        auto, watched, hourly = found["auto"], found["watched"], found["hourly"]
        assert [auto[k] for k in keys] == [
            True,
            3600,
            "auto",
            "kernel",
            HOUR.format("10"),
            HOUR.format("11"),
        ]
        assert (auto["lastOutcome"]["state"], auto["lastOutcome"]["outcome"]) == (
            "succeeded",
            "OK",
        )
        assert [watched[k] for k in keys[2:]] == [
            "watched",
            "kernel",
            HOUR.format("10"),
            HOUR.format("11"),
        ]
        assert (watched["lastDecision"], watched["openProposals"]) == ("propose", 1)
        assert (hourly["enabled"], hourly["nextDue"]) == (False, None)


def test_a_stopped_clock_raises_a_doctor_anomaly(serve_clock: Any, tmp_path: Path) -> None:
    """An enabled loop with no admitted tick for more than two intervals is a stopped
    clock: `engine doctor` exits 1 naming it, and GET /status lists a host-clock loop
    whose timer never posted under doctor.stoppedSchedules while serve is up.

    Timeline: 09:59:59 serve starts `hourly` and the host-clock `bridge` (60m); hourly
    fires 10:00 and the doctor is content; serve stops. At 13:30 (11:00, 12:00 and 13:00
    missed) `engine doctor` reports both; serve restarted at 13:30 fires 13:00, after
    which only `bridge` is stopped."""
    config = overlay(tmp_path / "config", "hourly", "bridge")
    serve = serve_clock.start("2026-11-30T09:59:59Z", "--no-worker", config=config)
    wait_ticks(serve, "hourly", has_slot(HOUR.format("10")))
    status = get(serve, "/status")
    assert (status["doctor"]["ok"], status["doctor"]["stoppedSchedules"]) == (True, [])
    assert serve.stop() == 0

    checked = engine(serve_clock.db, config, "2026-11-30T13:30:00Z", "doctor", "--json")
    assert checked.returncode == 1, checked.stderr
    report = json.loads(checked.stdout)
    stopped = {s["loop"]: s for s in report["stoppedSchedules"]}
    assert sorted(stopped) == ["bridge", "hourly"] and report["ok"] is False
    assert (stopped["hourly"]["lastTick"], stopped["hourly"]["missedSlots"]) == (
        HOUR.format("10"),
        3,
    )
    assert {(a["kind"], a["loop"]) for a in report["anomalies"]} == {
        ("stopped_schedule", "bridge"),
        ("stopped_schedule", "hourly"),
    }

    serve = serve_clock.start("2026-11-30T13:30:00Z", "--no-worker", config=config)
    wait_ticks(serve, "hourly", has_slot(HOUR.format("13")))
    doctor = get(serve, "/status")["doctor"]
    assert [s["loop"] for s in doctor["stoppedSchedules"]] == ["bridge"]
    assert doctor["ok"] is False
