"""Golden event streams (docs/testing.md, "Golden streams"): recorded event streams
replayed through the real service, and what they must keep deciding and storing.

A stream (`tests/data/golden/<name>.stream.json`) is data: the rule tree it runs on
(a tree of tests/data, with an instance config of its own when it needs one), the
instant it starts at, and its steps, each at an instant of the injected clock: pump
the runtime loop (fire due slots, resume retries, publish chained events, plan),
admit an envelope as an actor, work off the queue with recorded run results, or an
operator's action (approve, reject, cancel, pause, resume, backfill, promote, dismiss; not
`trigger`, whose event id is random).

Its golden (`<name>.golden.json`) holds every plan `engine.core.decide.decide` made
while the stream ran, in order (the event, the facts it read, the plan's effects by
kind with their fields), and the durable records the stream left: the journal in
order, decisions, events, occurrences, proposals, runs, findings, notifications,
loop state and skipped slots. Nothing in them is random: ids are derived from the
events, and every time is the injected clock's.

    python tests/golden.py           # replay every stream on SQLite; exit 1 on a difference
    python tests/golden.py --write   # record the goldens anew from this code

Regenerating is a decision, never a fix for a failing test: the diff of the goldens
is the change of behaviour a reviewer must accept."""

from __future__ import annotations

import argparse
import inspect
import json
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import chdir, contextmanager
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(ROOT))

import engine.core.decide as decide_module  # noqa: E402
from engine.core.codec import revive, to_json  # noqa: E402
from engine.core.envelope import Envelope, parse_iso  # noqa: E402
from engine.core.records import EventRecord  # noqa: E402
from engine.core.validation import Validators  # noqa: E402
from engine.errors import EngineError  # noqa: E402
from engine.loading import Paths, load_rules  # noqa: E402
from engine.service import Execution, Service  # noqa: E402
from engine.service.context import Runtime  # noqa: E402
from engine.store.ports import Store  # noqa: E402

DATA = ROOT / "tests" / "data"
GOLDEN = DATA / "golden"
NO_CONFIG = DATA / "no_config"
WORKER = "w1"
LEASE_SECONDS = 60.0


def streams() -> list[str]:
    """The names of the recorded streams, sorted."""
    return sorted(p.name.removesuffix(".stream.json") for p in GOLDEN.glob("*.stream.json"))


def load_stream(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((GOLDEN / f"{name}.stream.json").read_text())
    return loaded


def golden_path(name: str) -> Path:
    return GOLDEN / f"{name}.golden.json"


def load_golden(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(golden_path(name).read_text())
    return loaded


def dumps(value: Any) -> str:
    """The one text of a golden: sorted keys, two-space indent, a final newline."""
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


# ---- recording the plans ------------------------------------------------------------------


@contextmanager
def recording(plans: list[dict[str, Any]]) -> Iterator[None]:
    """While inside, every call of `engine.core.decide.decide` (by whichever engine
    module holds it) appends its event, facts and plan to `plans`, after checking that
    the same arguments decide the same plan again (the decision is pure)."""
    original = decide_module.decide
    signature = inspect.signature(original)

    def recorded(*args: Any, **kwargs: Any) -> Any:
        plan = original(*args, **kwargs)
        if original(*args, **kwargs) != plan:
            raise AssertionError(f"deciding the same event twice gave two plans: {args[0]}")
        given = signature.bind(*args, **kwargs).arguments
        plans.append(
            {
                "event": to_json(given["event"]),
                "at": given["at"],
                "facts": to_json(given["facts"]),
                "plan": to_json(plan, tagged=True),
            }
        )
        return plan

    holders = [
        (module, name)
        for module in list(sys.modules.values())
        if getattr(module, "__name__", "").startswith("engine.")
        for name, held in list(vars(module).items())
        if held is original
    ]
    for module, name in holders:
        setattr(module, name, recorded)
    try:
        yield
    finally:
        for module, name in holders:
            setattr(module, name, original)


def redecide(entry: dict[str, Any], rt: Runtime) -> Any:
    """Decide a recorded plan again, purely, from its recorded event and facts."""
    event = revive(EventRecord, entry["event"])
    facts = revive(decide_module.Facts, entry["facts"])
    plan = decide_module.decide(event, rt.rules, facts, rt.lifecycle, entry["at"])
    return to_json(plan, tagged=True)


# ---- replaying a stream ---------------------------------------------------------------------


class Clock:
    """The injected clock: where the stream's last step placed it."""

    def __init__(self, start: datetime) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now


def paths_of(stream: dict[str, Any], workdir: Path) -> Paths:
    """The stream's rule tree; its config written to `workdir` when the stream has one."""
    tree = DATA / stream["tree"]
    config = tree / "config" if (tree / "config").is_dir() else NO_CONFIG
    if "config" in stream:
        config = workdir / "config"
        config.mkdir(parents=True, exist_ok=True)
        for name, text in stream["config"].items():
            (config / name).write_text(text)
    return Paths(tree / "loops", tree / "registry", config)


def runtime_of(stream: dict[str, Any], store: Store, workdir: Path) -> tuple[Runtime, Clock]:
    paths = paths_of(stream, workdir)
    with chdir(ROOT):  # a rule's `file:line:col` is written relative to the checkout
        rules = load_rules(paths)
    clock = Clock(parse_iso(stream["start"]))
    rt = Runtime(store, rules, Validators.build(rules), clock, workdir / "artifacts")
    return rt, clock


def replay(stream: dict[str, Any], store: Store, workdir: Path) -> dict[str, Any]:
    """Run `stream` through a Service on `store` (fresh, empty): the plans it made and
    the records it left, as its golden holds them."""
    rt, clock = runtime_of(stream, store, workdir)
    service = Service(rt)
    plans: list[dict[str, Any]] = []
    refusals: list[dict[str, Any]] = []
    with recording(plans):
        service.pump()  # the start: enablement recorded, nothing due yet
        for number, step in enumerate(stream["steps"]):
            if "at" in step:
                clock.now = parse_iso(step["at"])
            try:
                STEPS[step["do"]](service, clock, step)
            except EngineError as err:
                if not step.get("refused"):
                    raise
                refusals.append({"step": number, "error": type(err).__name__, "message": str(err)})
            else:
                if step.get("refused"):
                    raise AssertionError(f"step {number} ({step['do']}) was not refused")
    found = records(store)
    return _without({"plans": plans, "refusals": refusals, "records": found}, str(workdir))


def _pump(service: Service, clock: Clock, step: dict[str, Any]) -> None:
    service.pump()


def _admit(service: Service, clock: Clock, step: dict[str, Any]) -> None:
    envelope = Envelope.model_validate(step["envelope"])
    service.admit(envelope, step["actor"])
    if step.get("pump", True):
        service.pump()


def _execution(spec: dict[str, Any]) -> Execution:
    return Execution(
        result=spec.get("result"),
        error=spec.get("error"),
        timed_out=spec.get("timed_out", False),
        workspace_refused=spec.get("workspace_refused", False),
    )


def _work(service: Service, clock: Clock, step: dict[str, Any]) -> None:
    """Claim, start and finish every claimable run, each with the result recorded for
    its loop, or for its definition when it has no loop (a list is used up in order, its
    last entry then repeats; `default` for any other), pumping after each round, until
    nothing is claimable; `seconds` is how long each run takes on the clock."""
    answers = {
        loop: list(a) if isinstance(a, list) else [a] for loop, a in step.get("results", {}).items()
    }
    default = step.get("default", {"result": {"outcome": "OK", "summary": "done"}})
    seconds = step.get("seconds", 0)
    while True:
        ran = 0
        while (run := service.claim(WORKER, LEASE_SECONDS)) is not None:
            ran += 1
            service.start(run, WORKER)
            queue = answers.get(run.loop or run.definition, [default])
            spec = queue.pop(0) if len(queue) > 1 else queue[0]
            clock.now += timedelta(seconds=seconds)
            current = service.run(run.run_id)
            if current.state == "running":
                service.finish(current, WORKER, _execution(spec))
        service.pump()
        if not ran:
            return


def _open_proposal(service: Service, event_id: str) -> str:
    (found,) = [p for p in service.proposals(1000, "open") if p.event_id == event_id]
    return found.proposal_id


def _approve(service: Service, clock: Clock, step: dict[str, Any]) -> None:
    service.approve(_open_proposal(service, step["event"]), step["actor"], step.get("note", ""))


def _reject(service: Service, clock: Clock, step: dict[str, Any]) -> None:
    service.reject(_open_proposal(service, step["event"]), step["actor"], step["note"])


def _cancel(service: Service, clock: Clock, step: dict[str, Any]) -> None:
    queued = service.runs(1000, "queued")
    (run,) = [
        r
        for r in queued
        if step.get("loop", r.loop) == r.loop and step.get("event", r.event_id) == r.event_id
    ]
    service.cancel(run.run_id, step["actor"], step.get("note", ""))


def _pause(service: Service, clock: Clock, step: dict[str, Any]) -> None:
    service.pause(step["loop"], step["actor"], step.get("note", ""))


def _resume(service: Service, clock: Clock, step: dict[str, Any]) -> None:
    service.resume(step["loop"], step["actor"], step.get("note", ""))


def _backfill(service: Service, clock: Clock, step: dict[str, Any]) -> None:
    start, end = parse_iso(step["start"]), parse_iso(step["end"])
    service.backfill(step["loop"], start, end, step["actor"])
    service.pump()


def _finding(service: Service, step: dict[str, Any]) -> str:
    (found,) = [f for f in service.findings(1000, None) if f.semantic_key == step["key"]]
    return found.finding_id


def _promote(service: Service, clock: Clock, step: dict[str, Any]) -> None:
    service.promote(_finding(service, step), step["actor"], step.get("note", ""))


def _dismiss(service: Service, clock: Clock, step: dict[str, Any]) -> None:
    service.dismiss(_finding(service, step), step["actor"], step["note"])


STEPS: dict[str, Callable[[Service, Clock, dict[str, Any]], None]] = {
    "pump": _pump,
    "admit": _admit,
    "work": _work,
    "approve": _approve,
    "reject": _reject,
    "cancel": _cancel,
    "pause": _pause,
    "resume": _resume,
    "backfill": _backfill,
    "promote": _promote,
    "dismiss": _dismiss,
}


# ---- the durable records ------------------------------------------------------------------

MANY = 100_000


def records(store: Store) -> dict[str, Any]:
    """Every durable record the stream left, as JSON: the journal in its order (without
    its sequence numbers), every other kind sorted by its id."""
    with store.read() as tx:
        events = sorted(tx.list_events(MANY), key=lambda e: e.event_id)
        states = sorted(tx.list_loop_states(), key=lambda s: s.loop)
        found = {
            "journal": [_entry(e) for e in tx.list_journal(MANY)],
            "events": events,
            "decisions": [d for e in events if (d := tx.get_decision(e.event_id)) is not None],
            "occurrences": sorted(tx.list_occurrences(MANY), key=lambda o: o.event_id),
            "proposals": sorted(tx.list_proposals(MANY), key=lambda p: p.proposal_id),
            "runs": sorted(tx.list_runs(MANY), key=lambda r: r.run_id),
            "findings": sorted(tx.list_findings(MANY), key=lambda f: f.finding_id),
            "notifications": sorted(
                (_unnumbered(n) for n in tx.list_notifications(MANY)), key=dumps
            ),
            "loop_states": states,
            "skips": [s for state in states for s in tx.list_skips(state.loop, "")],
        }
    out: dict[str, Any] = to_json(found)
    return out


def _entry(entry: Any) -> dict[str, Any]:
    out: dict[str, Any] = to_json(entry)
    del out["seq"]
    return out


def _unnumbered(notification: Any) -> dict[str, Any]:
    out: dict[str, Any] = to_json(notification)
    out.pop("seq", None)
    return out


def _without(value: Any, workdir: str) -> Any:
    """`value` with the replay's scratch directory written as `<workdir>`, and the
    checkout's paths (a rule's `file:line:col` when the rules were loaded from another
    working directory) relative to it, as they are from the checkout."""
    if isinstance(value, str):
        return value.replace(workdir, "<workdir>").replace(f"{ROOT}/", "")
    if isinstance(value, dict):
        return {k: _without(v, workdir) for k, v in value.items()}
    if isinstance(value, list):
        return [_without(v, workdir) for v in value]
    return value


# ---- the command ----------------------------------------------------------------------------


def replay_on_sqlite(name: str) -> dict[str, Any]:
    """Replay stream `name` on a fresh SQLite file in a scratch directory."""
    from engine.store.sqlite import SqliteStore

    with tempfile.TemporaryDirectory(prefix="golden-") as scratch:
        workdir = Path(scratch)
        store = SqliteStore(workdir / "engine.db")
        try:
            return replay(load_stream(name), store, workdir)
        finally:
            store.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help="record the goldens anew")
    parser.add_argument("names", nargs="*", help="streams (default: all)")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.names) - set(streams()))
    if unknown:
        parser.error(f"no recorded stream {', '.join(unknown)} in {GOLDEN.relative_to(ROOT)}")
    differ = 0
    for name in args.names or streams():
        text = dumps(replay_on_sqlite(name))
        path = golden_path(name)
        if args.write:
            path.write_text(text)
            print(f"wrote {path.relative_to(ROOT)}")
        elif not path.is_file() or path.read_text() != text:
            differ += 1
            print(f"{name}: differs from {path.relative_to(ROOT)}")
        else:
            print(f"{name}: same")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
