"""Candidate findings (docs/occurrences.md#candidate-findings) and the shadow report
(docs/occurrences.md#shadow-mode): what the automation observed but may not act on by itself, and
the evidence for graduating a loop out of shadow mode. Only a human promotes a finding; a promotion
is journaled with the operator and, when the registry declares the `finding.promoted` event type,
admits one event that routes can turn into (human-approved) work."""

from __future__ import annotations

from collections import Counter
from typing import Any

from engine.core.decisions import DUPLICATE_REASONS, DecisionKind, Entity, is_human
from engine.core.envelope import Envelope, iso
from engine.core.records import FindingRecord, OccurrenceRecord, RunRecord
from engine.core.states import FindingStatus
from engine.core.timefmt import given_instant
from engine.errors import BadRequest, Conflict, Forbidden, NotFound
from engine.service.admission import admit_in, check
from engine.service.context import Runtime
from engine.service.notifications import notify
from engine.service.schedules import loop_named

PROMOTED_TYPE = "finding.promoted"
REPORT_LIMIT = 10_000


def findings(
    rt: Runtime,
    limit: int = 50,
    status: str | None = FindingStatus.CANDIDATE,
    loop: str | None = None,
) -> list[FindingRecord]:
    with rt.store.read() as tx:
        return tx.list_findings(limit, status, loop)


def finding(rt: Runtime, finding_id: str) -> FindingRecord:
    with rt.store.read() as tx:
        found = tx.get_finding(finding_id)
    if found is None:
        raise NotFound(f"no finding '{finding_id}'")
    return found


def promote(rt: Runtime, finding_id: str, actor: str, note: str = "") -> FindingRecord:
    """candidate -> promoted, by a human only; admits `finding.promoted` when the
    registry declares it."""
    return _decide(rt, finding_id, actor, FindingStatus.PROMOTED, note)


def dismiss(rt: Runtime, finding_id: str, actor: str, reason: str) -> FindingRecord:
    """candidate -> dismissed (a false positive), by a human only."""
    return _decide(rt, finding_id, actor, FindingStatus.DISMISSED, reason)


def _decide(rt: Runtime, finding_id: str, actor: str, to: str, note: str) -> FindingRecord:
    if not is_human(actor):
        raise Forbidden(f"only an operator may decide a finding, not '{actor}'")
    with rt.store.write() as tx:
        found = tx.get_finding(finding_id)
        if found is None:
            raise NotFound(f"no finding '{finding_id}'")
        at = rt.now()
        event_id = f"finding:{found.finding_id}" if to == FindingStatus.PROMOTED else None
        promoted_event = event_id if PROMOTED_TYPE in rt.rules.event_types else None
        if not tx.decide_finding(
            finding_id, FindingStatus.CANDIDATE, to, actor, at, promoted_event
        ):
            raise Conflict(
                f"finding '{finding_id}' is {found.status}, not candidate", status=found.status
            )
        rt.journal(
            tx,
            Entity.FINDING,
            finding_id,
            to,
            actor,
            from_state=FindingStatus.CANDIDATE,
            to_state=to,
            note=note,
            at=at,
            data={"key": found.semantic_key, "event": promoted_event},
        )
        if to == FindingStatus.PROMOTED:
            notify(
                rt,
                tx,
                "finding",
                "finding_promoted",
                f"{actor} promoted finding {found.semantic_key}",
                loop=found.loop,
                repo=found.repo,
                links={"finding": finding_id, "event": promoted_event},
                at=at,
                subject=finding_id,
            )
        if promoted_event is not None:
            envelope = Envelope.model_validate(
                {
                    "eventId": promoted_event,
                    "type": PROMOTED_TYPE,
                    "source": "operator",
                    "subject": found.repo or found.loop or found.semantic_key,
                    "occurredAt": rt.clock(),
                    "payload": _payload(found),
                }
            )
            admit_in(rt, tx, check(rt, envelope), actor, at)
        decided = tx.get_finding(finding_id)
        assert decided is not None
        return decided


def _payload(found: FindingRecord) -> dict[str, Any]:
    payload: dict[str, Any] = {
        "findingId": found.finding_id,
        "semanticKey": found.semantic_key,
        "category": found.category,
        "occurrences": found.occurrence_count,
    }
    if found.loop:
        payload["loop"] = found.loop
    if found.repo:
        payload["repo"] = found.repo
    return payload


# ---- the shadow report -------------------------------------------------------------------


def shadow_report(rt: Runtime, loop_name: str, since: str = "") -> dict[str, Any]:
    """What a loop decided since `since`: occurrences by state and triage decision,
    what shadow mode would have dispatched, the triggers folded away as duplicates,
    and where the shadow decisions and what operators actually ran diverge."""
    loop = loop_named(rt, loop_name)
    since = _instant(since)
    route = rt.rules.routes.get(loop.event_type)
    definition = str(route.definition) if route is not None else None
    with rt.store.read() as tx:
        occs = tx.occurrences_of_loop(loop.name, since, REPORT_LIMIT)
        ticks = tx.loop_events(loop.name, since, REPORT_LIMIT)
        noops: Counter[str] = Counter()
        for event in ticks:
            decision = tx.get_decision(event.event_id)
            if decision is not None and decision.kind == DecisionKind.NOOP and decision.reason:
                noops[decision.reason] += 1
        repo = loop.payload.get("repo")
        human = []
        for r in tx.list_runs(REPORT_LIMIT):
            if not is_human(r.approved_by) or r.definition != definition or r.created_at < since:
                continue
            origin = tx.get_event(r.event_id)
            if repo is None or (origin is not None and origin.payload.get("repo") == repo):
                human.append(r)
    windows = [_window(o) for o in occs]
    divergence = _divergence(windows, human)
    return {
        "loop": loop.name,
        "shadow": loop.policy.shadow,
        "definition": definition,
        "since": since or None,
        "occurrences": len(occs),
        "byState": dict(Counter(o.state for o in occs)),
        "byDecision": dict(Counter(o.decision or "-" for o in occs)),
        "wouldDispatch": sum(1 for w in windows if w["wouldDispatch"]),
        "duplicatesSuppressed": sum(n for r, n in noops.items() if r in DUPLICATE_REASONS),
        "suppressedBy": {r: n for r, n in noops.items() if r in DUPLICATE_REASONS},
        "noopsBy": dict(noops),
        "divergence": divergence,
        "windows": windows,
    }


def _instant(text: str) -> str:
    """An ISO-8601 time as stored (UTC, microseconds), so `--since 13:00:00Z` includes
    the occurrence opened at 13:00:00.5; "" is the beginning. BadRequest otherwise."""
    if not text:
        return ""
    moment = given_instant(text, "since")
    if moment is None:
        raise BadRequest(f"since must be an ISO-8601 time with an offset, not '{text}'")
    return iso(moment)


def _window(occ: OccurrenceRecord) -> dict[str, Any]:
    evidence = occ.evidence or {}
    return {
        "occurrence": occ.event_id,
        "window": occ.window,
        "at": occ.created_at,
        "state": occ.state,
        "decision": occ.decision,
        "wouldDispatch": evidence.get("would_dispatch"),
    }


def _divergence(windows: list[dict[str, Any]], human: list[RunRecord]) -> dict[str, Any]:
    """Match each operator-approved run of the loop's definition (for the loop's repo)
    to the latest window that opened before it; a window agrees when shadow would have
    dispatched and an operator did run the work, or when it would not and nobody did."""
    ordered = sorted((w for w in windows if w["at"]), key=lambda w: w["at"])
    matched: Counter[str] = Counter()
    unmatched = 0
    for run in human:
        before = [w for w in ordered if w["at"] <= run.created_at]
        if before:
            matched[before[-1]["occurrence"]] += 1
        else:
            unmatched += 1
    agree = shadow_only = human_only = 0
    for w in ordered:
        did = matched[w["occurrence"]] > 0
        would = bool(w["wouldDispatch"])
        w["humanRuns"] = matched[w["occurrence"]]
        if would == did:
            agree += 1
        elif would:
            shadow_only += 1
        else:
            human_only += 1
    total = agree + shadow_only + human_only
    return {
        "agree": agree,
        "shadowOnly": shadow_only,
        "humanOnly": human_only,
        "humanRunsBeforeAnyWindow": unmatched,
        "agreementRate": agree / total if total else None,
    }
