"""Everything a person needs to decide a proposal, as data (docs/runtime.md, "Reviewing a
proposal"): the proposal, its event with the full payload, the deciding rule with its
lines as the rule file has them now, the definition with the exact argv its run will
execute (filled from the payload as the command adapter fills it, engine.core.argv),
the loop's last runs, its shadow evidence and the event's causal chain (`engine
explain`). Read only; each part is read in a snapshot of its own."""

from __future__ import annotations

from typing import Any

from dsl.diagnostics import Collector
from engine import files
from engine.core.argv import preview
from engine.core.paging import RunQuery
from engine.core.records import DecisionRecord, EventRecord, ProposalRecord, RunRecord, document
from engine.core.statements import location, statement
from engine.errors import BadRequest, NotFound
from engine.places import locate
from engine.service import explain, findings
from engine.service.context import Runtime
from engine.store.ports import TxView

# The most runs `last_runs` may ask for, and, for a proposal of no loop, how many of
# the newest runs are read to find its definition's loopless ones.
MAX_LAST_RUNS = 100
RUNS_SCANNED = 1000


def review(
    rt: Runtime, proposal_id: str, last_runs: int = 5, with_shadow: bool = True
) -> dict[str, Any]:
    """The review of proposal `proposal_id` (NotFound when there is none); `last_runs`
    of the loop's newest runs, 0 to MAX_LAST_RUNS (BadRequest otherwise). Without
    `with_shadow`, `shadow` is left None for the caller, who reads it once per loop
    (`shadow`): the web inbox reviews many proposals of few loops."""
    if not 0 <= last_runs <= MAX_LAST_RUNS:
        raise BadRequest(f"last runs must be 0 to {MAX_LAST_RUNS}, not {last_runs}")
    with rt.store.read() as tx:
        proposal = tx.get_proposal(proposal_id)
        if proposal is None:
            raise NotFound(f"no proposal '{proposal_id}'")
        event = tx.get_event(proposal.event_id)
        decision = tx.get_decision(proposal.event_id)
        recent = _last_runs(tx, proposal, last_runs)
    if event is None:  # pragma: no cover - a proposal is made from an admitted event
        raise NotFound(f"no event '{proposal.event_id}' of proposal '{proposal_id}'")
    return {
        "proposal": document(proposal),
        "event": document(event),
        "rule": rule(rt, decision),
        "definition": definition(rt, proposal.definition, event),
        "lastRuns": [_run(r) for r in recent],
        "shadow": shadow(rt, proposal.loop) if with_shadow else None,
        "explain": explain.explain(rt, event.event_id),
    }


def rule(rt: Runtime, decision: DecisionRecord | None) -> dict[str, Any] | None:
    """The deciding rule's place and the lines of its statement in the file now;
    `stale` when the rules changed since the decision (another digest), `problem` when
    the file cannot be read now. None without a rule location."""
    at = location(decision.rule) if decision is not None and decision.rule else None
    if decision is None or at is None:
        return None
    collector = Collector()
    text = files.read_text(locate(at.file, rt.roots), at.file, collector)
    lines = [] if text is None else text.splitlines()
    return {
        "at": str(at),
        "file": at.file,
        "line": at.line,
        "column": at.column,
        "lines": [{"number": n, "text": lines[n - 1]} for n in statement(lines, at.line)],
        "stale": decision.rules_digest != rt.rules.digest,
        "problem": collector.items[0].message if collector.items else None,
    }


def definition(rt: Runtime, ref: str, event: EventRecord) -> dict[str, Any] | None:
    """The definition `ref` (id@version) as loaded, with its argv filled from `event`'s
    payload (`argvProblem`: why the run would be refused); None when the loaded
    registry has no such definition."""
    found = next((d for r, d in rt.rules.definitions.items() if str(r) == ref), None)
    if found is None:
        return None
    filled = preview(found, event.event_id, event.payload) if found.adapter == "command" else None
    return {
        "ref": ref,
        "id": found.id,
        "version": found.version,
        "description": found.description,
        "adapter": found.adapter,
        "mutating": found.mutating,
        "humanOnly": any(str(r) == ref for r in rt.rules.human_only_definitions),
        "timeout": found.timeout,
        "timeoutSeconds": found.timeout_seconds,
        "env": list(found.env),
        "argv": list(filled.argv) if filled is not None and filled.argv is not None else None,
        "workspace": filled.workspace if filled is not None else None,
        "pending": list(filled.pending) if filled is not None else [],
        "argvProblem": filled.problem if filled is not None else None,
    }


def _last_runs(tx: TxView, proposal: ProposalRecord, most: int) -> list[RunRecord]:
    """The newest `most` runs of the proposal's loop, newest first; for a proposal of no
    loop (a webhook, a chain, an injection), the loopless runs of its definition among
    the RUNS_SCANNED newest runs."""
    if most == 0:
        return []
    if proposal.loop is not None:
        return tx.page_runs(RunQuery(loop=proposal.loop), most)
    scanned = tx.list_runs(RUNS_SCANNED)
    return [r for r in scanned if r.loop is None and r.definition == proposal.definition][:most]


def _run(run: RunRecord) -> dict[str, Any]:
    return {
        "runId": run.run_id,
        "state": run.state,
        "outcome": run.outcome,
        "approvedBy": run.approved_by,
        "createdAt": run.created_at,
        "finishedAt": run.finished_at,
    }


def shadow(rt: Runtime, loop: str | None) -> dict[str, Any] | None:
    """The loop's shadow report (engine.service.findings) when the loop runs in shadow
    or recorded what shadow mode would have dispatched; None otherwise, and for a
    proposal of no loop or of a loop the rules no longer declare."""
    declared = rt.rules.loops.get(loop) if loop is not None else None
    if declared is None:
        return None
    report = findings.shadow_report(rt, declared.name)
    recorded = any(w["wouldDispatch"] for w in report["windows"])
    return report if recorded or declared.policy.shadow else None
