"""The one spelling of the rules language, and the old spellings it replaced.

Everything a rule file spells as a word of the language is snake_case, as the journal,
the API, the overlay (config/schedule.yaml) and the expression names already are: a value
is written the way it is read back. A yes/no setting is `KEY true|false`, as in an
expression and in the overlay. Names (loops, event types, definitions, repositories) are
data and keep their own spelling (docs/rules.md#one-spelling).

This module is data only: the loader reads the old spellings with a W0901 warning and a
fix-it hint from it, and `engine fmt --write` rewrites them with it."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

# ---- the words a block takes ---------------------------------------------------------------

# The settings a loop block takes, one a line, in the one spelling (docs/rules.md#loops);
# engine.core.loopsettings gives each its meaning (a test holds the two to one list).
LOOP_SETTINGS = frozenset(
    {
        *("every", "cron", "at", "manual", "host_clock", "after", "watch", "on_event"),
        *("catch_up", "max_lateness", "overlap", "approval", "enabled", "description"),
        *("budget", "backoff", "circuit_breaker", "stop_when", "shadow", "key"),
        *("work", "cooldown"),  # a work-bound loop shape (docs/rules.md#work-bound-loop-shapes)
    }
)

# The lines that belong to a block other than a loop's settings: an emit (loops, chains,
# webhook tables), a chain's stop, a webhook table's let, ignore and reject, a loop's
# triage table.
BLOCK_LINES = frozenset({"emit", "stop", "let", "ignore", "reject", "triage"})

# ---- keys --------------------------------------------------------------------------------

# A loop setting or top-level keyword whose old spelling was kebab-case.
RENAMED_KEYS: dict[str, str] = {
    "catch-up": "catch_up",
    "max-lateness": "max_lateness",
    "host-clock": "host_clock",
    "on-event": "on_event",
    "stop-when": "stop_when",
    "circuit-breaker": "circuit_breaker",
    "human-only": "human_only",
}

# `budget KEY VALUE ...` keys.
RENAMED_BUDGET_KEYS: dict[str, str] = {
    "jobs-per-occurrence": "jobs_per_occurrence",
    "retries-per-occurrence": "retries_per_occurrence",
    "wall-clock": "wall_clock",
    "daily-wall-clock": "daily_wall_clock",
    "daily-runs": "daily_runs",
}

# ---- booleans ------------------------------------------------------------------------------

# A bare flag of the old language and the `KEY true|false` it is now.
OLD_FLAGS: dict[str, tuple[str, str]] = {
    "enabled": ("enabled", "true"),
    "disabled": ("enabled", "false"),
}

# `shadow on|off` is now `shadow true|false`.
OLD_SHADOW: dict[str, str] = {"on": "true", "off": "false"}

# ---- overlap -------------------------------------------------------------------------------


class Overlap(StrEnum):
    """What a loop does when it fires while its previous firing is still going
    (docs/rules.md#overlap): one setting for runs and occurrences."""

    SKIP = "skip"  # one at a time; a firing meanwhile is a no-op linked to the active one
    BUFFER_ONE = "buffer_one"  # one at a time; firings meanwhile fold into one follow-up
    ALLOW = "allow"  # runs and occurrences overlap, `max N` active occurrences per repo


@dataclass(frozen=True, slots=True)
class OverlapMeaning:
    """What one overlap value sets at each level: the run level (`singleton`: a tick
    while a run of the loop is in flight is a no-op), and the occurrence level (how
    many may be active per repo, and what a trigger beyond that does)."""

    singleton: bool
    on_active: str  # "return" | "coalesce" | "skip" (the last only from an old spelling)
    active_occurrences: int | None  # None: the default of the level (1, or no limit)


def meaning(overlap: Overlap, max_active: int | None = None) -> OverlapMeaning:
    """The run- and occurrence-level settings of `overlap VALUE [max N]`."""
    if overlap is Overlap.ALLOW:
        return OverlapMeaning(False, "return", max_active)
    return OverlapMeaning(True, "coalesce" if overlap is Overlap.BUFFER_ONE else "return", None)


@dataclass(frozen=True, slots=True)
class Rewrite:
    """The overlap setting an old combination means; `note` says what differs, if anything."""

    value: Overlap
    max_active: int | None = None  # `overlap allow max N`
    note: str | None = None

    @property
    def line(self) -> str:
        """The setting as a rule file writes it: `overlap allow max 2`."""
        most = "" if self.max_active is None else f" max {self.max_active}"
        return f"overlap {self.value}{most}"


_NOW_LINKED = "its no-op's reason is now occurrence_active, linked to the active occurrence"


def overlap_of(singleton: bool, on_active: str, active: int | None) -> Rewrite | None:
    """The `overlap` setting that means what the old `singleton`/`overlapping`, `on-active`
    and `budget active-occurrences` settings meant together, or None when no single
    overlap value does (the loader keeps loading them, with a warning that says so)."""
    if singleton and active in (None, 1):
        if on_active == "coalesce":
            return Rewrite(Overlap.BUFFER_ONE)
        return Rewrite(Overlap.SKIP, note=_NOW_LINKED if on_active == "skip" else None)
    if not singleton and on_active in ("return", "skip"):
        linked = on_active == "skip" and active is not None
        return Rewrite(Overlap.ALLOW, active, _NOW_LINKED if linked else None)
    return None


# The old settings that the one overlap setting replaced.
OLD_OVERLAP_KEYS = ("singleton", "overlapping", "on-active")

# Every word that starts a loop setting, in the one spelling or an old one.
LOOP_SETTING_WORDS = frozenset(
    {
        *LOOP_SETTINGS,
        *(old for old, new in RENAMED_KEYS.items() if new in LOOP_SETTINGS),
        *OLD_FLAGS,
        *OLD_OVERLAP_KEYS,
    }
)

# ---- the warning ---------------------------------------------------------------------------

OLD_SPELLING = "W0901"
FIX_IT = "engine fmt --write rewrites it"

__all__ = [
    "BLOCK_LINES",
    "FIX_IT",
    "LOOP_SETTINGS",
    "LOOP_SETTING_WORDS",
    "OLD_FLAGS",
    "OLD_OVERLAP_KEYS",
    "OLD_SHADOW",
    "OLD_SPELLING",
    "RENAMED_BUDGET_KEYS",
    "RENAMED_KEYS",
    "Overlap",
    "OverlapMeaning",
    "Rewrite",
    "meaning",
    "overlap_of",
]
