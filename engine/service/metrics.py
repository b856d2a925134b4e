"""Audit metrics (docs/occurrences.md#audit-and-metrics): what the automation did and
whether it helped, read from the durable tables in one snapshot. `stats()` is the
structured form (`engine stats`, `--json`); `scrape()` reads what `GET /metrics` shows
and `prometheus()` renders it in the Prometheus text format
(docs/observability.md#metrics).

Everything here comes from the database, so every serve on one database reports the
same figures, whichever process (serve or worker) did the work: the run histograms
are counted over every stored run at scrape time.

The point is to remove unhelpful automation, not to prove it is active: next to the
counts are the no-op rate, duplicates suppressed, retries by class, budget use, the
candidate promotion rate and the human adoption of proposals and findings."""

from __future__ import annotations

from bisect import bisect_right
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from statistics import fmean
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from engine.core.decisions import DUPLICATE_REASONS, JournalAction
from engine.core.envelope import iso
from engine.core.machines import OCCURRENCE_TERMINAL
from engine.core.policy import FailureClass
from engine.core.slots import slots_of
from engine.core.states import FindingStatus, OccurrenceState, ProposalState
from engine.service.context import Runtime
from engine.service.schedules import next_due
from engine.store.ports import Tx

TERMINAL = frozenset(OCCURRENCE_TERMINAL)
# Journal actions that are retry classifications.
RETRIES = {
    JournalAction.RETRY_SCHEDULED: FailureClass.INFRASTRUCTURE_FAILURE,
    JournalAction.CONFLICT_WAIT: FailureClass.CONFLICT,
}
TIMING_SAMPLE = 1000
ALL_RUNS = 2**62  # the run_timings limit that reads every run
# Bucket bounds (seconds) of the run histograms: queue waits and runs of seconds to hours.
RUN_BUCKETS = (0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 1800.0, 3600.0, 14400.0)
PROMETHEUS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def _ratio(part: float, whole: float) -> float | None:
    return part / whole if whole else None


def _seconds(start: str | None, end: str | None) -> float | None:
    if not start or not end:
        return None
    a, b = (datetime.fromisoformat(t.replace("Z", "+00:00")) for t in (start, end))
    return (b - a).total_seconds()


Timings = list[tuple[str, str | None, str | None]]  # (queued, started, finished) per run


def stats(rt: Runtime) -> dict[str, Any]:
    """Every figure of the audit, computed from one read snapshot."""
    with rt.store.read() as tx:
        snap, timings, budgets = _audit(rt, tx, TIMING_SAMPLE)
    return _figures(snap, timings, budgets)


def _audit(
    rt: Runtime, tx: Tx, runs: int
) -> tuple[dict[str, list[dict[str, Any]]], Timings, dict[str, dict[str, int]]]:
    day = iso(rt.clock() - timedelta(days=1))
    budgets = {
        name: tx.budget_usage(name, _repo(loop.payload), day)
        for name, loop in sorted(rt.rules.loops.items())
    }
    return tx.metrics_snapshot(), tx.run_timings(runs), budgets


@dataclass(frozen=True)
class Histogram:
    """Cumulative counts per upper bound (the last is +Inf), and the sum."""

    buckets: tuple[tuple[str, int], ...]
    total: float


def histogram(values: Iterable[float], bounds: tuple[float, ...] = RUN_BUCKETS) -> Histogram:
    """The Prometheus histogram of `values` over `bounds` (each bucket counts the values
    at most its bound; +Inf counts all). A negative value counts as 0: a run queued on
    one host and claimed on another whose clock is behind has a negative wait, and a
    Prometheus histogram's sum only grows."""
    seen = sorted(max(0.0, v) for v in values)
    counts = [bisect_right(seen, b) for b in bounds]
    labels = [f"{b:g}" for b in bounds]
    return Histogram((*zip(labels, counts, strict=True), ("+Inf", len(seen))), float(sum(seen)))


@dataclass(frozen=True)
class Scrape:
    """What GET /metrics reads from the database, in one snapshot."""

    figures: dict[str, Any]
    queue_wait: Histogram  # seconds from a run's queueing to its claim
    run_duration: Histogram  # seconds from a run's claim to its end
    last_tick: dict[str, float]  # unix seconds of each loop's newest fired slot
    next_due: dict[str, float]  # unix seconds of each scheduled loop's next slot


def scrape(rt: Runtime) -> Scrape:
    """The audit figures, the run histograms over every stored run, and each loop's
    last and next slot, from one read snapshot."""
    now = rt.clock()
    with rt.store.read() as tx:
        snap, timings, budgets = _audit(rt, tx, ALL_RUNS)
        states = tx.loop_states_of(rt.rules.loops)
    last, due = {}, {}
    for name, loop in sorted(rt.rules.loops.items()):
        state = states.get(name)
        if state is not None and state.last_slot:
            last[name] = _unix(state.last_slot)
        at = next_due(loop, slots_of(loop.trigger), state, now)
        if at is not None:
            due[name] = at.timestamp()
    return Scrape(
        _figures(snap, timings[:TIMING_SAMPLE], budgets),
        histogram(w for c, s, _ in timings if (w := _seconds(c, s)) is not None),
        histogram(x for _, s, f in timings if (x := _seconds(s, f)) is not None),
        last,
        due,
    )


def _unix(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


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
        # work-bound instances (docs/work.md#waking-the-controller)
        "wakes": journal.get(JournalAction.WAKE_RESERVED, 0),
        "unclaimedReservations": journal.get(JournalAction.CONTROLLER_DID_NOT_CLAIM, 0),
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
    """A one-shot collector over a scrape (read at scrape time). Counts that only grow
    are counters (`_total`); counts of rows by a state they leave are gauges."""

    def __init__(self, scraped: Scrape, version: str) -> None:
        self.s = scraped
        self.version = version

    def collect(self) -> Iterator[Metric]:
        f = self.s.figures
        build = GaugeMetricFamily("engine_build_info", "The engine's version.", labels=["version"])
        build.add_metric([self.version], 1)
        yield build
        yield from self._loops()
        yield from self._occurrences(f)
        yield from self._runs(f)
        yield from self._audit(f)

    def _loops(self) -> Iterator[Metric]:
        last = GaugeMetricFamily(
            "engine_loop_last_tick_timestamp_seconds",
            "Unix time of the newest slot each loop fired.",
            labels=["loop"],
        )
        for loop, at in self.s.last_tick.items():
            last.add_metric([loop], at)
        due = GaugeMetricFamily(
            "engine_loop_next_due_timestamp_seconds",
            "Unix time of each scheduled loop's next slot (in the past while behind).",
            labels=["loop"],
        )
        for loop, at in self.s.next_due.items():
            due.add_metric([loop], at)
        yield last
        yield due

    def _occurrences(self, f: dict[str, Any]) -> Iterator[Metric]:
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
        decisions = CounterMetricFamily(
            "engine_decisions", "Decisions by kind and reason.", labels=["kind", "reason"]
        )
        for d in f["decisions"]:
            decisions.add_metric([d["kind"], d["reason"] or ""], d["count"])
        yield decisions

    def _runs(self, f: dict[str, Any]) -> Iterator[Metric]:
        runs = GaugeMetricFamily(
            "engine_runs", "Runs by loop, state and outcome.", labels=["loop", "state", "outcome"]
        )
        attempts = CounterMetricFamily(
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
        for name, text, h in (
            (
                "engine_run_queue_wait_seconds",
                "Seconds from a run's queueing to its claim by a worker (every stored run).",
                self.s.queue_wait,
            ),
            (
                "engine_run_duration_seconds",
                "Seconds from a run's claim to its end (every stored run).",
                self.s.run_duration,
            ),
        ):
            yield HistogramMetricFamily(name, text, buckets=list(h.buckets), sum_value=h.total)
        yield from _scalar(
            "engine_runs_per_dispatched_occurrence",
            "Runs per occurrence that dispatched work (1 means no duplicates).",
            f["runsPerDispatchedOccurrence"],
        )

    def _audit(self, f: dict[str, Any]) -> Iterator[Metric]:
        yield CounterMetricFamily(
            "engine_duplicates_suppressed",
            "Triggers that opened no occurrence of their own: their window had one, or "
            "their loop an active one (duplicate_occurrence, occurrence_active, coalesced, "
            "skipped_active).",
            value=f["duplicatesSuppressed"],
        )
        retries = CounterMetricFamily(
            "engine_retries", "Retries by failure class.", labels=["class"]
        )
        for cls, n in sorted(f["retries"].items()):
            retries.add_metric([cls], n)
        yield retries
        yield CounterMetricFamily(
            "engine_work_wakes",
            "Controller wakes launched: a wake took its work item's launch reservation.",
            value=f["wakes"],
        )
        yield CounterMetricFamily(
            "engine_work_unclaimed_reservations",
            "Wakes whose controller did not claim the work within its launch reservation.",
            value=f["unclaimedReservations"],
        )
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
        yield CounterMetricFamily(
            "engine_finding_observations",
            "Observations of findings.",
            value=f["findingObservations"],
        )
        for name, key, text in (
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
        ):
            yield from _scalar(name, text, f[key])


def _scalar(name: str, text: str, value: float | None) -> Iterator[Metric]:
    if value is not None:
        yield GaugeMetricFamily(name, text, value=value)


def prometheus(scraped: Scrape, version: str, *more: CollectorRegistry) -> bytes:
    """The scrape, then the metrics of `more` registries (the process's own), in the
    Prometheus text exposition format (version 0.0.4)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Figures(scraped, version))
    return generate_latest(registry) + b"".join(generate_latest(r) for r in more)
