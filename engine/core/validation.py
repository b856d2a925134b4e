"""JSON Schema validators for a RuleSet's event payloads and output contracts, built
once per rule set (building a validator is far dearer than using one)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from jsonschema import Draft202012Validator

from engine.core.ruleset import RuleSet


@dataclass(frozen=True)
class Validators:
    payloads: dict[str, Draft202012Validator]
    contracts: dict[str, Draft202012Validator]

    @classmethod
    def build(cls, rules: RuleSet) -> Validators:
        payloads = {
            name: Draft202012Validator(et.payload_schema)
            for name, et in rules.event_types.items()
            if et.payload_schema is not None
        }
        contracts = {cid: Draft202012Validator(dict(s)) for cid, s in rules.contracts.items()}
        return cls(payloads, contracts)

    def payload_errors(self, event_type: str, payload: dict[str, Any]) -> list[str]:
        validator = self.payloads.get(event_type)
        return [] if validator is None else _messages(validator, payload)

    def contract_errors(self, contract: str, result: Any) -> list[str]:
        validator = self.contracts.get(contract)
        if validator is None:
            return [f"unknown output contract '{contract}'"]
        return _messages(validator, result)


def _messages(validator: Draft202012Validator, value: Any) -> list[str]:
    errors = sorted(validator.iter_errors(value), key=lambda e: list(e.absolute_path))
    out = []
    for e in errors[:10]:
        where = "/".join(str(p) for p in e.absolute_path)
        out.append(f"{where}: {e.message}" if where else e.message)
    return out
