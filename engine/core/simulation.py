"""What a simulation predicts (docs/simulate.md), from the records it left: a row per
slot of each loop, fired or skipped, with the decision and the rule that made it and
what came of it, the events that are not slots (chained, `after`, `on_event`), and a
summary per loop. Pure: records in, a document (and lines for people) out."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from engine.core.decisions import DecisionKind, Entity, JournalAction
from engine.core.records import (
    DecisionRecord,
    EventRecord,
    JournalEntry,
    ProposalRecord,
    RunRecord,
    SkipRecord,
)
from engine.core.ruleset import RuleSet, TriggerKind
from engine.core.states import ProposalState


@dataclass(frozen=True)
class Records:
    """What a simulation left that its prediction reads (seeded rows left out)."""

    events: Sequence[EventRecord]  # in admission order
    decisions: Mapping[str, DecisionRecord]  # by event id
    proposals: Sequence[ProposalRecord]
    runs: Sequence[RunRecord]
    skips: Sequence[SkipRecord]
    journal: Sequence[JournalEntry]  # the loops' entries (pauses, resumes)


def prediction(records: Records, rules: RuleSet, loops: Iterable[str] = ()) -> dict[str, Any]:
    """The document of `engine simulate --json`: `rows` (slots and other events, by
    time then loop), `loops` (a summary of each), and `totals`."""
    wanted = set(loops)
    proposals = _by_event(records.proposals)
    runs = _by_event(records.runs)
    rows: list[dict[str, Any]] = []
    for event in records.events:
        if wanted and event.loop not in wanted:
            continue
        decision = records.decisions.get(event.event_id)
        rows.append(_event_row(event, decision, proposals, runs))
    for skip in records.skips:
        if wanted and skip.loop not in wanted:
            continue
        rows.append(
            {
                "loop": skip.loop,
                "at": skip.first_slot,
                "slot": skip.first_slot,
                "lastSlot": skip.last_slot,
                "count": skip.count,
                "outcome": "skipped",
                "reason": skip.reason,
            }
        )
    rows.sort(key=lambda r: (r["at"], r["loop"] or "", r.get("eventId") or ""))
    names = sorted(wanted or {r["loop"] for r in rows if r["loop"]} | _enabled(rules))
    summary = {name: _summary(name, rows, records.journal, rules) for name in names}
    totals = Counter[str]()
    for each in summary.values():
        for key in ("fired", "skipped", "proposals", "runs", "shadow", "noop"):
            totals[key] += each[key]
    return {"rows": rows, "loops": summary, "totals": dict(totals)}


def _enabled(rules: RuleSet) -> set[str]:
    return {name for name, loop in rules.loops.items() if loop.enabled}


def _by_event(records: Sequence[Any]) -> dict[str, list[Any]]:
    found: defaultdict[str, list[Any]] = defaultdict(list)
    for record in records:
        found[record.event_id].append(record)
    return found


def _event_row(
    event: EventRecord,
    decision: DecisionRecord | None,
    proposals: Mapping[str, list[ProposalRecord]],
    runs: Mapping[str, list[RunRecord]],
) -> dict[str, Any]:
    slot = event.payload.get("slot") if event.loop else None
    row: dict[str, Any] = {
        "loop": event.loop,
        "at": slot or event.admitted_at,
        "slot": slot,
        "eventId": event.event_id,
        "type": event.type,
        "source": event.source,
        "outcome": "fired" if slot else "event",
        "admittedAt": event.admitted_at,
        "skippedSlots": int(event.payload.get("skippedSlots") or 0) if slot else 0,
        "decision": None,
    }
    if decision is not None:
        row["decision"] = {
            "kind": decision.kind,
            "reason": decision.reason,
            "definition": decision.definition,
            "approvedBy": decision.approved_by,
            "rule": decision.rule,
            "note": decision.note,
        }
    row["proposals"] = [
        {"proposalId": p.proposal_id, "state": p.state, "decidedBy": p.decided_by}
        for p in proposals.get(event.event_id, ())
    ]
    row["runs"] = [
        {
            "runId": r.run_id,
            "state": r.state,
            "outcome": r.outcome,
            "attempts": r.attempts,
            "approvedBy": r.approved_by,
            "createdAt": r.created_at,
        }
        for r in sorted(runs.get(event.event_id, ()), key=lambda r: r.created_at)
    ]
    return row


def _summary(
    name: str, rows: Sequence[dict[str, Any]], journal: Sequence[JournalEntry], rules: RuleSet
) -> dict[str, Any]:
    mine = [r for r in rows if r["loop"] == name]
    skipped = Counter[str]()
    noop = Counter[str]()
    kinds = Counter[str]()
    proposals = Counter[str]()
    outcomes = Counter[str]()
    per_day = Counter[str]()
    fired = 0
    for row in mine:
        if row["outcome"] == "skipped":
            skipped[row["reason"]] += row["count"]
            continue
        fired += row["outcome"] == "fired"
        decision = row["decision"]
        if decision is not None:
            kinds[decision["kind"]] += 1
            if decision["kind"] == DecisionKind.NOOP:
                noop[decision["reason"] or "-"] += 1
        for proposal in row["proposals"] if decision and decision["kind"] == "propose" else ():
            proposals[proposal["state"]] += 1
        for run in row["runs"]:
            outcomes[run["outcome"] or run["state"]] += 1
            per_day[run["createdAt"][:10]] += 1
    loop = rules.loops.get(name)
    budget = loop.policy.budget.daily_runs if loop is not None else None
    trigger = loop.trigger.kind if loop is not None else None
    busiest = max(per_day.items(), key=lambda item: (item[1], item[0]), default=None)
    pauses = [
        {"at": e.at, "actor": e.actor, "note": e.note}
        for e in journal
        if e.entity == Entity.LOOP and e.entity_id == name and e.action == JournalAction.PAUSED
    ]
    return {
        "trigger": trigger,
        "enabled": loop is not None and loop.enabled,
        "fired": fired,
        "skipped": sum(skipped.values()),
        "skippedBy": dict(skipped),
        "decisions": dict(kinds),
        "noop": kinds[DecisionKind.NOOP],
        "noopBy": dict(noop),
        "proposals": sum(proposals.values()),
        "proposalsBy": dict(proposals),
        "approved": proposals[ProposalState.APPROVED],
        "shadow": kinds[DecisionKind.SHADOW],
        "runs": sum(outcomes.values()),
        "runsBy": dict(outcomes),
        "budget": {
            "dailyRuns": budget,
            "busiestDay": busiest[0] if busiest else None,
            "busiestDayRuns": busiest[1] if busiest else 0,
            "exhausted": noop["budget_exhausted"],
        },
        "paused": pauses,
    }


# ---- for people -----------------------------------------------------------------------------

# Loops whose triggers a simulation does not make, and why (docs/simulate.md).
UNSIMULATED = {
    TriggerKind.MANUAL: "manual: fired by an operator only",
    TriggerKind.HOST: "host_clock: its host timer fires it, not simulated",
    TriggerKind.WATCH: "watch: its probe observes the world, not simulated",
}


def lines(doc: Mapping[str, Any], rows: bool = True) -> list[str]:
    """The prediction as text: a line per row (unless not `rows`), then the summary."""
    out: list[str] = []
    if rows:
        for row in doc["rows"]:
            out.append(_row_text(row))
        if doc["rows"]:
            out.append("")
    for name, each in doc["loops"].items():
        out.extend(_summary_text(name, each))
    return out


def _row_text(row: Mapping[str, Any]) -> str:
    loop = row["loop"] or "-"
    if row["outcome"] == "skipped":
        span = row["slot"] if row["count"] == 1 else f"{row['slot']}..{row['lastSlot']}"
        return f"{loop}  {span}  skipped {row['count']} slot(s): {row['reason']}"
    what = row["slot"] if row["slot"] else f"{row['at']} {row['type']} ({row['source']})"
    head = f"{loop}  {what}"
    if row["skippedSlots"]:
        head += f" (+{row['skippedSlots']} skipped)"
    if row["slot"] and row["admittedAt"][:19] != row["slot"][:19]:
        head += f" (fired at {row['admittedAt'][:19]}Z)"
    decision = row["decision"]
    if decision is None:
        return f"{head}  not decided"
    said = decision["kind"]
    if decision["reason"]:
        said += f" {decision['reason']}"
    if decision["definition"]:
        said += f" {decision['definition']}"
    text = f"{head}  {said}  by {decision['rule'] or '-'}"
    proposed = decision["kind"] == DecisionKind.PROPOSE
    then = [f"proposal {p['state']}" for p in row["proposals"] if proposed]
    then += [f"run {r['outcome'] or r['state']}" for r in row["runs"]]
    return f"{text}  -> {', '.join(then)}" if then else text


def _summary_text(name: str, each: Mapping[str, Any]) -> list[str]:
    def counts(by: Mapping[str, int]) -> str:
        return ", ".join(f"{n} {k}" for k, n in sorted(by.items())) or "none"

    budget = each["budget"]
    used = f"busiest day {budget['busiestDay']} with {budget['busiestDayRuns']} run(s)"
    if budget["dailyRuns"] is not None:
        used += f" of {budget['dailyRuns']}"
    if budget["exhausted"]:
        used += f"; {budget['exhausted']} slot(s) found it exhausted"
    head = f"loop {name}: {each['fired']} fired, {each['skipped']} skipped"
    if not each["enabled"]:
        head += " (disabled)"
    elif each["trigger"] in UNSIMULATED:
        head += f" ({UNSIMULATED[each['trigger']]})"
    if not each["fired"] and not each["skipped"]:
        return [head]
    out = [
        head,
        f"  skipped: {counts(each['skippedBy'])}",
        f"  decisions: {counts(each['decisions'])}",
        f"  no-ops: {counts(each['noopBy'])}",
        f"  proposals: {counts(each['proposalsBy'])}",
        f"  runs: {counts(each['runsBy'])}",
        f"  budget: {used if budget['busiestDay'] else 'no runs'}",
    ]
    for pause in each["paused"]:
        out.append(f"  paused at {pause['at']} by {pause['actor']}: {pause['note']}")
    return out
