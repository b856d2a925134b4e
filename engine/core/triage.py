"""Triage before execution (docs/occurrences.md#triage-decide-before-anything-runs): a loop's
`triage` table, read over a bounded snapshot of the world, decides what one occurrence does. The
first matching line wins; no line matching (or no table) gives the default decision:
`run_repair_task` for a mutating definition, `run_readonly_check` otherwise. Pure: the runtime
builds the snapshot, this module only reads it.

Guards and finding keys are expressions of `dsl.expr`, evaluated by its safe evaluator
over the snapshot's names (`TriageSnapshot.scope`), which the compiler checks at load
time (`TRIAGE_NAMES`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from dsl import expr as ex
from dsl.diagnostics import Span

if TYPE_CHECKING:
    from engine.core.ruleset import Loop


class TriageDecision(StrEnum):
    """The normalized decisions of docs/occurrences.md#triage-decide-before-anything-runs."""

    NOTHING_TO_DO = "nothing_to_do"
    CONTINUE_EXISTING_TASK = "continue_existing_task"
    RETRY_INFRASTRUCTURE_FAILURE = "retry_infrastructure_failure"
    CREATE_CANDIDATE_FINDING = "create_candidate_finding"
    PROMOTE_EXISTING_FINDING = "promote_existing_finding"  # a human's act, never a rule's
    RUN_READONLY_CHECK = "run_readonly_check"
    RUN_REPAIR_TASK = "run_repair_task"
    RELEASE_READY = "release_ready"
    EXTERNAL_BLOCKER = "external_blocker"
    HUMAN_ATTENTION_REQUIRED = "human_attention_required"


# Decisions that dispatch work (the route's definition); the others end the occurrence
# without a run (or, for create_candidate_finding, with a finding recorded).
DISPATCHING = frozenset(
    {
        TriageDecision.CONTINUE_EXISTING_TASK,
        TriageDecision.RETRY_INFRASTRUCTURE_FAILURE,
        TriageDecision.RUN_READONLY_CHECK,
        TriageDecision.RUN_REPAIR_TASK,
    }
)

# Decisions a rule may not produce: only a human promotes a finding
# (docs/occurrences.md#candidate-findings).
HUMAN_ONLY_DECISIONS = frozenset({TriageDecision.PROMOTE_EXISTING_FINDING})

# Decisions that take `key` (required) and `category` (optional).
FINDING_DECISIONS = frozenset({TriageDecision.CREATE_CANDIDATE_FINDING})
DEFAULT_CATEGORY = "general"

# The names a triage expression may read, and what each holds (docs, hints).
TRIAGE_NAMES: Mapping[str, str] = {
    "payload": "the tick's payload",
    "loop": "the loop's name",
    "repo": "the repository {name, github, disabled, frozen, report_only}, or null",
    "in_flight": "the loop's runs queued, claimed or running",
    "active": "other non-terminal occurrences of this loop and repo",
    "failures": "consecutive failed occurrences of the loop",
    "nothing_streak": "consecutive nothing_to_do occurrences of the loop",
    "last_outcome": "the outcome of the loop's last run, or null",
    "findings": "open candidate findings of the loop",
    "budget": "{daily_runs_used, daily_runs_left, daily_wall_clock_used, daily_wall_clock_left}",
    "paused": "the loop is paused",
    "freeze": "the repo is frozen or a release freeze is on",
    "existing": "what the checks of the loop's key found (a loop with a key only):"
    " {key, work, job, failed_attempt, resolved_finding, other_loop}",
}

# The fields of the names whose shape is fixed (a path into `payload` is open).
REPO_FIELDS = ("name", "github", "disabled", "frozen", "report_only")
BUDGET_FIELDS = (
    "daily_runs_used",
    "daily_runs_left",
    "daily_wall_clock_used",
    "daily_wall_clock_left",
)
# What each check of `existing` holds when it found something (each is null otherwise;
# docs/rules.md#existing-work-first).
EXISTING_FIELDS: Mapping[str, tuple[str, ...]] = {
    "key": (),  # the occurrence's semantic key, text
    "work": ("id", "state", "title", "repo", "lease_owner", "lease_live", "lease_expires_at"),
    "job": ("occurrence", "loop", "repo", "state", "status", "run", "proposal", "retry_at"),
    "failed_attempt": ("occurrence", "loop", "repo", "state", "failure_class", "finished_at"),
    "resolved_finding": ("id", "status", "category", "decided_by", "decided_at"),
    "other_loop": ("name", "kind", "state", "work"),
}
NAME_FIELDS: Mapping[str, tuple[str, ...]] = {
    "repo": REPO_FIELDS,
    "budget": BUDGET_FIELDS,
    "existing": tuple(EXISTING_FIELDS),
}
# The fields of a field, for the names two levels deep (`existing.work.state`).
SUB_FIELDS: Mapping[str, Mapping[str, tuple[str, ...]]] = {"existing": EXISTING_FIELDS}
OPEN_NAMES = frozenset({"payload"})  # any path below these is allowed


def unlimited_budget() -> dict[str, int | None]:
    """Nothing used, nothing limited (a `*_left` is null when unlimited)."""
    return {
        "daily_runs_used": 0,
        "daily_runs_left": None,
        "daily_wall_clock_used": 0,
        "daily_wall_clock_left": None,
    }


@dataclass(frozen=True, slots=True)
class TriageRule:
    """One compiled line of a loop's `triage` table."""

    decision: TriageDecision
    guard: ex.Expr | None  # None: the line always matches
    negate: bool  # True for `unless`
    note: str | None
    key: ex.Expr | None  # the finding's semantic-key template (create_candidate_finding)
    category: str | None  # the finding's category (create_candidate_finding)
    origin: Span

    @property
    def reads_existing(self) -> bool:
        """The line's guard reads `existing`: the line is the author's rule about
        existing work, so the default of docs/rules.md#existing-work-first gives way."""
        return self.guard is not None and any(p.root == "existing" for p in ex.paths(self.guard))

    def matches(self, scope: Mapping[str, Any]) -> bool:
        """Whether the line applies; raises dsl.expr.EvalError when the guard fails."""
        if self.guard is None:
            return True
        return ex.truthy(ex.evaluate(self.guard, scope)) != self.negate

    def finding_key(self, scope: Mapping[str, Any]) -> str | None:
        """The finding's semantic key; raises dsl.expr.EvalError when it fails."""
        if self.key is None:
            return None
        value = ex.evaluate(self.key, scope)
        if not isinstance(value, str):  # pragma: no cover - a key is always a string literal
            raise ex.EvalError("a finding key must be text", self.origin)
        return value


@dataclass(frozen=True, slots=True, kw_only=True)
class TriageSnapshot:
    """What triage may know about the world (bounded;
    docs/occurrences.md#triage-decide-before-anything-runs). The first thirteen fields are the names
    a triage expression reads; the rest serve the stop conditions (engine.core.policy) and the
    evidence. `existing` is None for a loop without a key (and then left out of the evidence)."""

    payload: Mapping[str, Any] = field(default_factory=dict)
    loop: str
    repo: Mapping[str, Any] | None = None
    in_flight: int = 0
    active: int = 0
    failures: int = 0
    nothing_streak: int = 0
    last_outcome: str | None = None
    findings: int = 0
    budget: Mapping[str, Any] = field(default_factory=unlimited_budget)
    paused: bool = False
    freeze: bool = False
    existing: Mapping[str, Any] | None = None  # engine.core.existing.view
    # not readable by rules:
    last_state: str | None = None  # the state of the loop's previous terminal occurrence
    last_decision: str | None = None  # the triage decision of that occurrence
    now: str | None = None  # ISO-8601 time of the decision (for `end_date`)
    occurrences: int = 0  # the loop's occurrences before this one (for `occurrence_count`)

    def scope(self) -> dict[str, Any]:
        """The name -> value mapping a triage expression is evaluated over (plain JSON
        values, copied: evaluation can never change the snapshot)."""
        return {name: _plain(getattr(self, name)) for name in TRIAGE_NAMES}

    def as_dict(self) -> dict[str, Any]:
        """Every field as plain JSON values (the evidence of a decision)."""
        return {
            name: _plain(getattr(self, name))
            for name in _SNAPSHOT_FIELDS
            if name != "existing" or self.existing is not None
        }


_SNAPSHOT_FIELDS = tuple(f.name for f in fields(TriageSnapshot))
_SCALARS = frozenset({str, int, float, bool, type(None)})


def _plain(value: Any) -> Any:
    kind = type(value)
    if kind in _SCALARS:
        return value
    if kind is dict:
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


@dataclass(frozen=True, slots=True)
class Triage:
    """The decision of one occurrence, with what it saw. `rule` is the matching line
    (None for the default decision); `evidence` is the snapshot and that line's
    file:line, as persisted on the occurrence."""

    decision: TriageDecision
    note: str
    rule: Span | None
    finding_key: str | None = None
    finding_category: str | None = None
    evidence: dict[str, Any] = field(default_factory=dict)
    about_existing: bool = False  # the matching line reads `existing` (TriageRule.reads_existing)

    @property
    def dispatches(self) -> bool:
        """True when the decision dispatches the route's definition."""
        return self.decision in DISPATCHING


def default_decision(mutating: bool) -> TriageDecision:
    """The decision when no line matches: repair for mutating work, a check otherwise."""
    return TriageDecision.RUN_REPAIR_TASK if mutating else TriageDecision.RUN_READONLY_CHECK


def where(span: Span) -> str:
    """`file:line` of a rule, as evidence and notes name it."""
    return f"{span.file}:{span.line}"


def triage(loop: Loop, mutating: bool, snapshot: TriageSnapshot) -> Triage:
    """Decide one occurrence of `loop`: the first line of its triage table whose guard
    holds, else the default decision. A guard or key that fails to evaluate (data
    missing or of the wrong type) stops at `human_attention_required`, naming the line:
    a broken rule never dispatches work."""
    scope = snapshot.scope() if loop.triage else {}
    for rule in loop.triage:
        try:
            if not rule.matches(scope):
                continue
            key = rule.finding_key(scope)
        except ex.EvalError as err:
            return broken(snapshot, f"the triage rule at {where(rule.origin)}", rule.origin, err)
        note = rule.note or f"{rule.decision.value} (triage rule at {where(rule.origin)})"
        return Triage(
            rule.decision,
            note,
            rule.origin,
            finding_key=key,
            finding_category=rule.category if key is not None else None,
            evidence=_evidence(snapshot, rule.origin),
            about_existing=rule.reads_existing,
        )
    decision = default_decision(mutating)
    kind = "mutating" if mutating else "read-only"
    why = "no triage rule matched" if loop.triage else "no triage table"
    return Triage(
        decision,
        f"{why}: the default for a {kind} definition",
        None,
        evidence=_evidence(snapshot, None),
    )


def broken(snapshot: TriageSnapshot, what: str, origin: Span, err: ex.EvalError) -> Triage:
    """A rule that failed to evaluate (a guard, a finding key, the loop's semantic key)
    stops at `human_attention_required`, naming it: a broken rule never dispatches."""
    return Triage(
        TriageDecision.HUMAN_ATTENTION_REQUIRED,
        f"{what} failed: {err.message}",
        origin,
        evidence=_evidence(snapshot, origin, error=f"{err.span}: {err.message}"),
    )


def _evidence(
    snapshot: TriageSnapshot, rule: Span | None, error: str | None = None
) -> dict[str, Any]:
    evidence: dict[str, Any] = {
        "snapshot": snapshot.as_dict(),
        "rule": where(rule) if rule is not None else None,
    }
    if error is not None:
        evidence["error"] = error
    return evidence
