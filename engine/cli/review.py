"""`engine proposals show ID` as text: the review of one proposal (Service.review,
docs/runtime.md#reviewing-a-proposal) — the proposal, its event's payload, the rule that
decided it with its lines, and the exact argv its run will execute. Pure: the review
document and `now` in, lines out."""

from __future__ import annotations

import json
import shlex
from datetime import datetime
from typing import Any

from engine.cli.render import cell
from engine.core.timefmt import relative_text


def when(text: str | None, now: datetime) -> str:
    """`2026-11-30T11:52:34Z (12m ago)`, or `-`."""
    return "-" if not text else f"{cell(text)} ({relative_text(text, now)})"


def lines(doc: dict[str, Any], now: datetime) -> list[str]:
    """The whole review, one section after another."""
    return [
        *_proposal(doc["proposal"], now),
        *_event(doc["event"], now),
        *_rule(doc["rule"]),
        *_definition(doc["definition"]),
        *_runs(doc["lastRuns"], now),
    ]


def _proposal(p: dict[str, Any], now: datetime) -> list[str]:
    decided = f"{p['decidedBy']} {when(p['decidedAt'], now)}" if p["decidedBy"] else "-"
    return [
        f"proposal {p['proposalId']}: {p['state']}",
        f"  definition  {p['definition']}",
        f"  loop        {cell(p['loop'])}",
        f"  human-only  {cell(p['humanOnly'])}",
        f"  mutating    {cell(p['mutating'])}",
        f"  created     {when(p['createdAt'], now)}",
        f"  decided     {decided}" + (f": {p['note']}" if p["note"] else ""),
    ]


def _event(e: dict[str, Any], now: datetime) -> list[str]:
    payload = json.dumps(e["payload"], indent=2, sort_keys=True, ensure_ascii=False)
    return [
        f"event {e['eventId']}: {e['type']} from {e['source']}",
        f"  admitted    {when(e['admittedAt'], now)} by {e['admittedBy']}",
        "  payload",
        *(f"    {line}" for line in payload.splitlines()),
    ]


def _rule(r: dict[str, Any] | None) -> list[str]:
    if r is None:
        return ["rule: - (the decision names no rule)"]
    head = f"rule {r['at']}"
    if r["stale"]:
        head += " (the rules changed since the decision: these lines may not be the ones)"
    shown = [f"  {n['number']:>4} | {n['text']}" for n in r["lines"]]
    return [head, *shown, *([f"  cannot read it now: {r['problem']}"] if r["problem"] else [])]


def _definition(d: dict[str, Any] | None) -> list[str]:
    if d is None:
        return ["definition: - (not in the loaded registry)"]
    out = [f"definition {d['ref']}: {d['adapter']} adapter, timeout {d['timeout']}"]
    if d["adapter"] != "command":
        out.append(f"  argv        - (no command: the {d['adapter']} adapter does the work)")
    elif d["argvProblem"]:
        out.append(f"  argv        - (the run would be refused: {d['argvProblem']})")
    elif d["argv"] is not None:
        out.append(f"  argv        {shlex.join(d['argv'])}")
    if d["pending"]:
        out.append(f"  filled by the run: {', '.join(d['pending'])}")
    if d["workspace"]:
        out.append(f"  workspace   {d['workspace']}")
    if d["env"]:
        out.append(f"  env         {', '.join(d['env'])}")
    return out


def _runs(runs: list[dict[str, Any]], now: datetime) -> list[str]:
    if not runs:
        return ["last runs: -"]
    return [
        "last runs",
        *(
            f"  {r['runId']}  {r['state']} {cell(r['outcome'])}  "
            f"{relative_text(r['createdAt'], now)}"
            for r in runs
        ),
    ]
