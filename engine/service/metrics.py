"""Audit metrics (seed 2 §22): what the automation did and whether it helped, read from
the durable tables in one snapshot. `stats()` is the structured form (`engine stats`,
`--json`); `prometheus()` renders it in the Prometheus text format (`GET /metrics`).

The point is to remove unhelpful automation, not to prove it is active: next to the
counts are the no-op rate, duplicates suppressed, retries by class, budget use, the
candidate promotion rate and the human adoption of proposals and findings."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from datetime import datetime, timedelta
from statistics import fmean
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from engine.core.decisions import DUPLICATE_REASONS, JournalAction
from engine.core.envelope import iso
from engine.core.machines import OCCURRENCE_TERMINAL
from engine.core.policy import FailureClass
from engine.core.states import FindingStatus, OccurrenceState, ProposalState
from engine.service.context import Runtime

TERMINAL = frozenset(OCCURRENCE_TERMINAL)
# Journal actions that are retry classifications.
RETRIES = {
    JournalAction.RETRY_SCHEDULED: FailureClass.INFRASTRUCTURE_FAILURE,
    JournalAction.CONFLICT_WAIT: FailureClass.CONFLICT,
}
TIMING_SAMPLE = 1000
PROMETHEUS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def _ratio(part: float, whole: float) -> float | None:
    return part / whole if whole else None


def _seconds(start: str | None, end: str | None) -> float | None:
    if not start or not end:
        return None
    a, b = (datetime.fromisoformat(t.replace("Z", "+00:00")) for t in (start, end))
    return (b - a).total_seconds()


def stats(rt: Runtime) -> dict[str, Any]:
    """Every figure of the audit, computed from one read snapshot."""
    now = rt.clock()
    day = iso(now - timedelta(days=1))
    with rt.store.read() as tx:
        snap = tx.metrics_snapshot()
        timings = tx.run_timings(TIMING_SAMPLE)
        budgets = {
            name: tx.budget_usage(name, _repo(loop.payload), day)
            for name, loop in sorted(rt.rules.loops.items())
        }
    return _figures(snap, timings, budgets)


def _repo(payload: Any) -> str | None:
    repo = payload.get("repo") if isinstance(payload, dict) else None
    return repo if isinstance(repo, str) else None


def _figures(
    snap: dict[str, list[dict[str, Any]]],
    timings: list[tuple[str, str | None, str | None]],
    budgets: dict[str, dict[str, int]],
) -> dict[str, Any]:
    by_loop: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for row in snap["occurrences"]:
        by_loop[row["loop"] or "-"][row["state"]] += int(row["n"])
    loops = {}
    for loop, states in sorted(by_loop.items()):
        terminal = sum(n for s, n in states.items() if s in TERMINAL)
        loops[loop] = {
            "occurrences": dict(sorted(states.items())),
            "terminal": terminal,
            "noopRate": _ratio(states.get(OccurrenceState.NOTHING_TO_DO, 0), terminal),
        }
    journal = {row["action"]: int(row["n"]) for row in snap["journal"]}
    runs = snap["runs"]
    run_total = sum(int(r["n"]) for r in runs)
    dispatched = sum(int(r["n"]) for r in snap.get("dispatched", []))
    findings = {row["status"]: int(row["n"]) for row in snap["findings"]}
    decided_findings = findings.get(FindingStatus.PROMOTED, 0) + findings.get(
        FindingStatus.DISMISSED, 0
    )
    proposals = {row["state"]: int(row["n"]) for row in snap["proposals"]}
    by_operator = {row["state"]: int(row["by_operator"]) for row in snap["proposals"]}
    human_decided = by_operator.get(ProposalState.APPROVED, 0) + by_operator.get(
        ProposalState.REJECTED, 0
    )
    waits = [w for c, s, _ in timings if (w := _seconds(c, s)) is not None]
    runs_s = [x for _, s, f in timings if (x := _seconds(s, f)) is not None]
    return {
        "loops": loops,
        "decisions": [
            {"kind": r["kind"], "reason": r["reason"], "count": int(r["n"])}
            for r in snap["decisions"]
        ],
        "runs": [
            {
                "loop": r["loop"],
                "state": r["state"],
                "outcome": r["outcome"],
                "count": int(r["n"]),
                "attempts": int(r["attempts"] or 0),
            }
            for r in runs
        ],
        "runsPerDispatchedOccurrence": _ratio(run_total, dispatched),
        "duplicatesSuppressed": sum(
            int(r["n"]) for r in snap["decisions"] if r["reason"] in DUPLICATE_REASONS
        ),
        "retries": {cls: journal.get(action, 0) for action, cls in RETRIES.items()},
        "budgetUsed24h": budgets,
        "findings": findings,
        "findingObservations": sum(int(r["occurrences"] or 0) for r in snap["findings"]),
        "candidatePromotionRate": _ratio(
            findings.get(FindingStatus.PROMOTED, 0), sum(findings.values())
        ),
        "findingDismissalRate": _ratio(findings.get(FindingStatus.DISMISSED, 0), decided_findings),
        "proposals": proposals,
        "humanAdoptionRate": _ratio(by_operator.get(ProposalState.APPROVED, 0), human_decided),
        "meanWaitSeconds": fmean(waits) if waits else None,
        "meanExecutionSeconds": fmean(runs_s) if runs_s else None,
    }


class _Figures(Collector):
    """A one-shot collector over computed figures (read at scrape time)."""

    def __init__(self, figures: dict[str, Any]) -> None:
        self.f = figures

    def collect(self) -> Iterator[Metric]:
        f = self.f
        occ = GaugeMetricFamily(
            "engine_occurrences", "Occurrences by loop and state.", labels=["loop", "state"]
        )
        noop = GaugeMetricFamily(
            "engine_noop_rate",
            "Share of a loop's ended occurrences that found nothing to do.",
            labels=["loop"],
        )
        for loop, entry in f["loops"].items():
            for state, n in entry["occurrences"].items():
                occ.add_metric([loop, state], n)
            if entry["noopRate"] is not None:
                noop.add_metric([loop], entry["noopRate"])
        yield occ
        yield noop
        decisions = GaugeMetricFamily(
            "engine_decisions", "Decisions by kind and reason.", labels=["kind", "reason"]
        )
        for d in f["decisions"]:
            decisions.add_metric([d["kind"], d["reason"] or ""], d["count"])
        yield decisions
        runs = GaugeMetricFamily(
            "engine_runs", "Runs by loop, state and outcome.", labels=["loop", "state", "outcome"]
        )
        attempts = GaugeMetricFamily(
            "engine_run_attempts", "Claims of runs (retries included) by loop.", labels=["loop"]
        )
        per_loop: dict[str, int] = defaultdict(int)
        for r in f["runs"]:
            runs.add_metric([r["loop"] or "", r["state"], r["outcome"] or ""], r["count"])
            per_loop[r["loop"] or ""] += r["attempts"]
        for loop, n in sorted(per_loop.items()):
            attempts.add_metric([loop], n)
        yield runs
        yield attempts
        yield from _scalar(
            "engine_runs_per_dispatched_occurrence",
            "Runs per occurrence that dispatched work (1 means no duplicates).",
            f["runsPerDispatchedOccurrence"],
        )
        yield from _scalar(
            "engine_duplicates_suppressed",
            "Triggers that opened no occurrence of their own: their window had one, or "
            "their loop an active one (duplicate_occurrence, occurrence_active, coalesced, "
            "skipped_active).",
            f["duplicatesSuppressed"],
        )
        retries = GaugeMetricFamily("engine_retries", "Retries by failure class.", labels=["class"])
        for cls, n in sorted(f["retries"].items()):
            retries.add_metric([cls], n)
        yield retries
        budget = GaugeMetricFamily(
            "engine_budget_used_24h", "Budget used over the last 24 hours.", labels=["loop", "kind"]
        )
        for loop, used in f["budgetUsed24h"].items():
            for kind, n in sorted(used.items()):
                budget.add_metric([loop, kind], n)
        yield budget
        findings = GaugeMetricFamily(
            "engine_findings", "Candidate findings by status.", labels=["status"]
        )
        for status, n in sorted(f["findings"].items()):
            findings.add_metric([status], n)
        yield findings
        proposals = GaugeMetricFamily("engine_proposals", "Proposals by state.", labels=["state"])
        for state, n in sorted(f["proposals"].items()):
            proposals.add_metric([state], n)
        yield proposals
        for name, key, text in (
            ("engine_finding_observations", "findingObservations", "Observations of findings."),
            (
                "engine_candidate_promotion_rate",
                "candidatePromotionRate",
                "Share of candidate findings a human promoted.",
            ),
            (
                "engine_finding_dismissal_rate",
                "findingDismissalRate",
                "Share of decided findings a human dismissed (false positives).",
            ),
            (
                "engine_human_adoption_rate",
                "humanAdoptionRate",
                "Share of proposals operators decided that they approved.",
            ),
            (
                "engine_mean_wait_seconds",
                "meanWaitSeconds",
                "Mean seconds from a run's queueing to its start (recent runs).",
            ),
            (
                "engine_mean_execution_seconds",
                "meanExecutionSeconds",
                "Mean seconds from a run's start to its end (recent runs).",
            ),
        ):
            yield from _scalar(name, text, f[key])


def _scalar(name: str, text: str, value: float | None) -> Iterator[Metric]:
    if value is not None:
        yield GaugeMetricFamily(name, text, value=value)


def prometheus(figures: dict[str, Any]) -> bytes:
    """The figures in the Prometheus text exposition format (version 0.0.4)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Figures(figures))
    return generate_latest(registry)
