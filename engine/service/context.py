"""What every service operation works with: the store, the compiled rules, their
validators, the lifecycle machines and the clock."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.clock import Clock, system_clock
from engine.core.envelope import iso
from engine.core.ids import stable_id as stable_id
from engine.core.machines import Lifecycle
from engine.core.records import JournalEntry
from engine.core.ruleset import RuleSet
from engine.core.validation import Validators
from engine.places import Root
from engine.store.ports import Store, Tx


@dataclass
class Runtime:
    store: Store
    rules: RuleSet
    validators: Validators
    clock: Clock = system_clock
    artifacts: Path = Path("var/artifacts")
    # The directories the rules were read from, by the names places give them
    # (`loops/...`: docs/rules.md#places): where a recorded place's file is now.
    roots: tuple[Root, ...] = ()
    lifecycle: Lifecycle = field(init=False)
    # The work-bound instances the rules hold now (engine.service.instances): each
    # binding's id, state and version, to tell when they change.
    instances: tuple[tuple[str, str, int], ...] = ()

    def __post_init__(self) -> None:
        self.lifecycle = Lifecycle(self.rules)

    def use_rules(self, rules: RuleSet) -> None:
        """Plan with `rules` from now on (the same rules with other instances)."""
        self.rules = rules
        self.lifecycle = Lifecycle(rules)

    def now(self) -> str:
        return iso(self.clock())

    def entry(
        self,
        entity: str,
        entity_id: str,
        action: str,
        actor: str,
        *,
        from_state: str | None = None,
        to_state: str | None = None,
        note: str = "",
        data: dict[str, Any] | None = None,
        at: str | None = None,
    ) -> JournalEntry:
        """One lifecycle record, stamped with the rules digest in force."""
        return JournalEntry(
            at=at or self.now(),
            entity=entity,
            entity_id=entity_id,
            action=action,
            actor=actor,
            from_state=from_state,
            to_state=to_state,
            rules_digest=self.rules.digest,
            note=note,
            data=data,
        )

    def journal(
        self,
        tx: Tx,
        entity: str,
        entity_id: str,
        action: str,
        actor: str,
        *,
        from_state: str | None = None,
        to_state: str | None = None,
        note: str = "",
        data: dict[str, Any] | None = None,
        at: str | None = None,
    ) -> None:
        """Append one lifecycle record (`entry`)."""
        tx.append_journal(
            self.entry(
                entity,
                entity_id,
                action,
                actor,
                from_state=from_state,
                to_state=to_state,
                note=note,
                data=data,
                at=at,
            )
        )
