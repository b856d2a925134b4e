"""Condition watches, decided purely (docs/scheduling.md, "Condition watches").

A probe's stdout is parsed as JSON, reduced to the projection its registry entry
declares (the `include` terms, then every `ignore` pattern cut from every string) and
fingerprinted: SHA-256 over the canonical JSON of what remains. `observe` turns what a
probe run reported into a reading; `next_observation` turns the loop's previous
observation and a reading into the new one and says whether the watch fired. Nothing
here runs a process or reads the clock."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from engine.core.envelope import iso
from engine.core.policy import backoff_delay
from engine.core.records import ObservationRecord
from engine.core.registry import Probe
from engine.core.ruleset import Loop

DIAGNOSTIC_MAX = 500  # characters of a failed poll's diagnostic that are kept
STDOUT_MAX = 1 << 20  # bytes of a probe's stdout that are read; more is a failure
FAILING = 3  # consecutive failed polls that make a doctor anomaly

_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)


class ProbeFailure(Exception):
    """A probe's output that cannot be fingerprinted; `str()` is the diagnostic."""


class ObservationStatus(StrEnum):
    OK = "ok"
    FAILED = "failed"


class Outcome(StrEnum):
    """What one poll meant for its loop."""

    BASELINE = "baseline"  # the first fingerprint: silent
    UNCHANGED = "unchanged"  # counted, never journaled
    CHANGED = "changed"  # the loop's tick is admitted
    FAILED = "failed"  # infrastructure failure: the loop's backoff, no tick


@dataclass(frozen=True, slots=True)
class ProbeRun:
    """What running a probe reported: its stdout when it exited 0, else why not."""

    stdout: bytes = b""
    failure: str | None = None


@dataclass(frozen=True, slots=True)
class Reading:
    """A poll's result: the fingerprint, or the diagnostic of a failure."""

    fingerprint: str | None = None
    diagnostic: str | None = None


def bounded(text: str, limit: int = DIAGNOSTIC_MAX) -> str:
    """`text` cut to `limit` characters (an ellipsis marks the cut)."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


# ---- projection and fingerprint --------------------------------------------------------


def parse_output(raw: bytes) -> Any:
    """The JSON document a probe printed; ProbeFailure when it is not one."""
    if len(raw) > STDOUT_MAX:
        raise ProbeFailure(f"the probe printed more than {STDOUT_MAX} bytes")
    try:
        return json.loads(raw.decode("utf-8"), parse_constant=_refuse_constant)
    except UnicodeDecodeError:
        raise ProbeFailure("the probe's stdout is not UTF-8") from None
    except json.JSONDecodeError as err:
        shown = raw[:80].decode("utf-8", "replace")
        raise ProbeFailure(f"the probe's stdout is not JSON ({err.msg}): {shown!r}") from None
    except (RecursionError, ValueError) as err:
        raise ProbeFailure(f"the probe's stdout is not JSON: {bounded(str(err), 120)}") from None


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def term_steps(term: str) -> list[str]:
    """`jobs[].conclusion` -> ["jobs", "[]", "conclusion"]."""
    steps: list[str] = []
    for part in term.split("."):
        key = part.removesuffix("[]")
        if key:
            steps.append(key)
        if part.endswith("[]"):
            steps.append("[]")
    return steps


def select(value: Any, steps: Sequence[str]) -> Any:
    """The part of `value` a term's steps reach: `[]` maps over every item of a list;
    a key that is absent (or a step into something else) selects None."""
    if not steps:
        return value
    step, rest = steps[0], steps[1:]
    if step == "[]":
        return [select(item, rest) for item in value] if isinstance(value, list) else None
    if isinstance(value, dict) and step in value:
        return select(value[step], rest)
    return None


def strip(value: Any, patterns: Sequence[re.Pattern[str]]) -> Any:
    """`value` with every pattern removed from every string in it (keys stay)."""
    if isinstance(value, str):
        for pattern in patterns:
            value = pattern.sub("", value)
        return value
    if isinstance(value, list):
        return [strip(item, patterns) for item in value]
    if isinstance(value, dict):
        return {key: strip(item, patterns) for key, item in value.items()}
    return value


def project(document: Any, include: Sequence[str], ignore: Sequence[str]) -> Any:
    """What counts of a document: each include term's selection by term (the whole
    document when there is none), with the ignore patterns cut from its strings."""
    chosen = {term: select(document, term_steps(term)) for term in include} if include else document
    return strip(chosen, [re.compile(p) for p in ignore])


def fingerprint(projection: Any) -> str:
    """SHA-256 (hex) of the canonical JSON of a projection: sorted keys, no whitespace."""
    return hashlib.sha256(_CANONICAL.encode(projection).encode("utf-8")).hexdigest()


def observe(probe: Probe, run: ProbeRun) -> Reading:
    """The reading of one probe run: its fingerprint, or a bounded diagnostic."""
    if run.failure is not None:
        return Reading(diagnostic=bounded(run.failure))
    try:
        document = parse_output(run.stdout)
    except ProbeFailure as err:
        return Reading(diagnostic=bounded(str(err)))
    return Reading(fingerprint=fingerprint(project(document, probe.include, probe.ignore)))


# ---- the observation row ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Step:
    """A poll decided: the row to store and what it meant."""

    record: ObservationRecord
    outcome: Outcome
    previous: str | None = None  # the fingerprint a change replaced


def next_observation(
    loop: Loop, previous: ObservationRecord | None, reading: Reading, now: datetime
) -> Step:
    """The loop's observation after `reading` at `now`. A failure keeps the last good
    fingerprint, counts itself and delays the next poll by the loop's backoff; a first
    fingerprint is the silent baseline; a different one is a change (counted)."""
    at = iso(now)
    cadence = timedelta(seconds=loop.trigger.every_seconds or 0)
    base = previous or ObservationRecord(loop=loop.name)
    polls = base.polls + 1
    if reading.fingerprint is None:
        failures = base.consecutive_failures + 1
        delay = timedelta(seconds=backoff_delay(loop.policy.backoff, failures - 1))
        record = replace(
            base,
            observed_at=at,
            status=ObservationStatus.FAILED.value,
            diagnostic=bounded(reading.diagnostic or "the probe failed"),
            consecutive_failures=failures,
            polls=polls,
            next_poll_at=iso(now + max(delay, cadence)),
        )
        return Step(record, Outcome.FAILED)
    ok = replace(
        base,
        fingerprint=reading.fingerprint,
        observed_at=at,
        status=ObservationStatus.OK.value,
        diagnostic="",
        consecutive_failures=0,
        polls=polls,
        next_poll_at=iso(now + cadence),
    )
    if base.fingerprint is None:
        return Step(ok, Outcome.BASELINE)
    if base.fingerprint == reading.fingerprint:
        return Step(ok, Outcome.UNCHANGED)
    changed = replace(ok, changes=base.changes + 1, changed_at=at)
    return Step(changed, Outcome.CHANGED, previous=base.fingerprint)
