"""What `engine replay` compares and prints (docs/replay.md), pure: a recorded
decision and the decision the new rules make of the same event and facts, reduced to
what a reviewer cares about (`Verdict`), compared, summarised and rendered. The rule
that decided (`file:line:col`) is shown on both sides but never compared: a rule that
only moved (lines inserted above it) decides the same, so it is not a difference. A
webhook delivery the new `webhook github` table translates otherwise
(`Retranslation`) is always a difference of its event's decision."""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

from engine.core.decisions import DecisionKind
from engine.core.effects import Decide, Plan, Propose, QueueRun
from engine.core.records import DecisionRecord

# What a decision went on to do, beside its kind.
PROPOSES, RUNS, SHADOW, NOTHING = "proposes", "runs", "records shadow", "nothing"
# What a new `webhook github` table makes of a recorded delivery, when not its event.
IGNORED, REJECTED, EMITS = "ignored", "rejected", "emits"


@dataclass(frozen=True, slots=True)
class Verdict:
    """A decision as a reviewer compares it; `rule` is where it was decided (shown,
    not compared)."""

    kind: str
    reason: str | None
    definition: str | None
    approved_by: str | None
    human_only: bool
    mutating: bool
    acts: str
    rule: str | None = field(default=None, compare=False)

    def brief(self) -> str:
        """`propose`, `noop/ignored`, `ignored unhandled_action`: the kind, and the
        reason when there is one."""
        if self.kind in (IGNORED, REJECTED):
            return f"{self.kind} {self.reason}"
        return f"{self.kind}/{self.reason}" if self.reason else self.kind


def recorded(decision: DecisionRecord, proposed: bool, ran: bool) -> Verdict:
    """The verdict of a stored decision; `proposed` and `ran`: whether a proposal, or a
    run without one, was stored for its event."""
    if decision.kind == DecisionKind.SHADOW:
        acts = SHADOW
    else:
        acts = PROPOSES if proposed else RUNS if ran else NOTHING
    return _verdict(decision, acts)


def decided(plan: Plan) -> Verdict | None:
    """The verdict of a new plan; None when it decides nothing (another process had)."""
    record = next((e.record for e in plan if isinstance(e, Decide)), None)
    if record is None:
        return None
    if record.kind == DecisionKind.SHADOW:
        acts = SHADOW
    elif any(isinstance(e, Propose) for e in plan):
        acts = PROPOSES
    elif any(isinstance(e, QueueRun) for e in plan):
        acts = RUNS
    else:
        acts = NOTHING
    return _verdict(record, acts)


def _verdict(d: DecisionRecord, acts: str) -> Verdict:
    return Verdict(
        d.kind, d.reason, d.definition, d.approved_by, d.human_only, d.mutating, acts, d.rule
    )


@dataclass(frozen=True, slots=True)
class Retranslation:
    """A recorded webhook delivery that the new `webhook github` table no longer
    translates into its event: `outcome` is `ignored` or `rejected` (with `reason`),
    or `emits` another event (`event_id`, `type`; `differs` names what is not the
    recorded event's). `admitted_by` is the `emit` line that admitted it, `rule` the
    table line that decides now (None: no table or no line matched)."""

    delivery_id: str
    kind: str
    admitted_by: str
    outcome: str
    reason: str | None
    rule: str | None
    event_id: str | None = None
    type: str | None = None
    differs: tuple[str, ...] = ()

    def refusal(self) -> Verdict:
        """The new side of a delivery now ignored or rejected: nothing admitted, so
        nothing decided."""
        return Verdict(self.outcome, self.reason, None, None, False, False, NOTHING, self.rule)

    def lines(self) -> list[str]:
        """`delivery GUID (KIND) admitted by FILE:L:C`, and for another event `now emits
        TYPE ID by FILE:L:C (differs: payload)`."""
        out = [f"delivery {self.delivery_id} ({self.kind}) admitted by {self.admitted_by}"]
        if self.outcome == EMITS:
            differs = ", ".join(self.differs)
            out.append(f"now emits {self.type} {self.event_id} by {self.rule} (differs: {differs})")
        return out

    def document(self) -> dict[str, Any]:
        return {
            "deliveryId": self.delivery_id,
            "kind": self.kind,
            "admittedBy": self.admitted_by,
            "outcome": self.outcome,
            "reason": self.reason,
            "rule": self.rule,
            "eventId": self.event_id,
            "type": self.type,
            "differs": list(self.differs),
        }


@dataclass(frozen=True, slots=True)
class Change:
    """One recorded decision the new rules decide otherwise (`new` None: not at all).
    `delivery`: the webhook delivery the event came from, when the new `webhook
    github` table translates it otherwise (`new` is then its refusal, or the decision
    of the other event it emits)."""

    event_id: str
    loop: str | None
    type: str
    decided_at: str
    old: Verdict
    new: Verdict | None
    delivery: Retranslation | None = None

    def document(self) -> dict[str, Any]:
        return {
            "eventId": self.event_id,
            "loop": self.loop,
            "type": self.type,
            "decidedAt": self.decided_at,
            "old": _camel(self.old),
            "new": _camel(self.new) if self.new is not None else None,
            "delivery": self.delivery.document() if self.delivery is not None else None,
        }


def _camel(v: Verdict) -> dict[str, Any]:
    d = asdict(v)
    return {
        "kind": d["kind"],
        "reason": d["reason"],
        "definition": d["definition"],
        "approvedBy": d["approved_by"],
        "humanOnly": d["human_only"],
        "mutating": d["mutating"],
        "acts": d["acts"],
        "rule": d["rule"],
    }


def side(v: Verdict | None) -> str:
    """`propose (loops/a.rules:3:1)`: a verdict as one side of a printed change."""
    if v is None:
        return "no decision"
    return f"{v.brief()} ({v.rule or 'no rule'})"


_SHOWN = ("definition", "approved_by", "human_only", "mutating", "acts")


def fields_apart(old: Verdict, new: Verdict | None) -> str:
    """`approved_by None -> schedule; acts proposes -> runs`: what differs beyond the
    kind and reason."""
    if new is None:
        return ""
    apart = [(n, getattr(old, n), getattr(new, n)) for n in _SHOWN]
    return "; ".join(f"{n} {a} -> {b}" for n, a, b in apart if a != b)


@dataclass(frozen=True, slots=True)
class SlotChange:
    """Due slots of a loop whose outcome differs: `old`/`new` as `fired`, `skipped
    <reason>` or `not due <why>`; `decision` is the new decision of a newly fired slot
    (decided with the facts recorded for the tick fired in the same pass), or why it
    could not be decided."""

    loop: str
    first: str
    last: str
    count: int
    pass_at: str
    old: str
    new: str
    decision: Verdict | None = None
    note: str = ""

    def document(self) -> dict[str, Any]:
        return {
            "loop": self.loop,
            "first": self.first,
            "last": self.last,
            "count": self.count,
            "passAt": self.pass_at,
            "old": self.old,
            "new": self.new,
            "decision": _camel(self.decision) if self.decision is not None else None,
            "note": self.note,
        }


@dataclass(frozen=True, slots=True)
class Report:
    """A replay: the changed decisions, the slots that fire otherwise, and the counts."""

    replayed: int
    changes: tuple[Change, ...]
    unreplayable: tuple[str, ...]  # event ids decided with no facts recorded
    slots: tuple[SlotChange, ...] = ()

    @property
    def differs(self) -> bool:
        return bool(self.changes or self.slots)

    def by_kind(self) -> dict[str, int]:
        """Differing decisions by `old kind -> new kind`."""
        counted = Counter(
            f"{c.old.kind} -> {c.new.kind if c.new else 'none'}" for c in self.changes
        )
        return dict(sorted(counted.items()))

    def retranslated(self) -> int:
        """Differing decisions whose webhook delivery is translated otherwise."""
        return sum(1 for c in self.changes if c.delivery is not None)

    def document(self) -> dict[str, Any]:
        return {
            "replayed": self.replayed,
            "differing": len(self.changes),
            "differingByKind": self.by_kind(),
            "retranslated": self.retranslated(),
            "notReplayable": list(self.unreplayable),
            "changes": [c.document() for c in self.changes],
            "slots": [s.document() for s in self.slots],
        }


def lines(report: Report) -> list[str]:
    """The report for people: each change, each slot change, then the summary."""
    out = []
    for c in report.changes:
        text = f"{c.event_id}  {c.loop or '-'}  {c.type}\n    {side(c.old)} -> {side(c.new)}"
        refused = c.delivery is not None and c.delivery.outcome != EMITS
        if not refused and (apart := fields_apart(c.old, c.new)):
            text += f"\n    {apart}"
        if c.delivery is not None:
            text += "".join(f"\n    {line}" for line in c.delivery.lines())
        out.append(text)
    for s in report.slots:
        slots = s.first if s.count == 1 else f"{s.first} .. {s.last} ({s.count} slots)"
        text = f"{s.loop}@{slots}  (pass at {s.pass_at})\n    {s.old} -> {s.new}"
        if s.decision is not None:
            text += f"\n    decided: {side(s.decision)}"
        if s.note:
            text += f"\n    {s.note}"
        out.append(text)
    if out:
        out.append("")
    kinds = ", ".join(f"{k} {n}" for k, n in report.by_kind().items()) or "none"
    out.append(
        f"replayed {report.replayed} decision(s): {len(report.changes)} differ ({kinds}); "
        f"{report.retranslated()} webhook delivery(ies) translated otherwise; "
        f"{len(report.slots)} slot range(s) fire otherwise; "
        f"{len(report.unreplayable)} not replayable (no facts recorded)"
    )
    return out
