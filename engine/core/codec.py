"""The JSON of plans, facts and records (docs/replay.md, "The recorded facts"): one
codec for the facts each decision read, stored with it (`DecisionRecord.facts`), for
the golden streams (tests/golden.py) and for `engine replay`, which decodes them to
decide again. Pure: values in, values out.

`to_json` turns frozen records, effects, envelopes, enums and datetimes into plain
JSON; `revive` builds the value of a type back from it, guided by the type's hints.
`encode_facts` is the compact text kept with a decision: fields equal to their
default are left out (`revive` restores them), no spaces. `decode_facts` is its
inverse: the Facts decided, equal to the ones the decision read."""

from __future__ import annotations

import dataclasses
import enum
import json
import types
from datetime import datetime
from functools import cache
from typing import Any, Union, get_args, get_origin, get_type_hints

from engine.core.decide import Facts
from engine.core.effects import Decide, Plan
from engine.core.envelope import Envelope

_COMPACT = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)
# The order of a set's items: by their text as the goldens print it (tests/golden.py).
_SORTED = json.JSONEncoder(indent=2, sort_keys=True, ensure_ascii=False)
_MISSING = dataclasses.MISSING


_SCALARS = (str, int, float, bool, type(None))


def to_json(value: Any, tagged: bool = False, compact: bool = False) -> Any:
    """`value` as plain JSON. With `tagged`, a dataclass becomes `{"kind": <class>,
    ...fields}` (the effects of a plan by kind); records inside stay untagged. With
    `compact`, a dataclass field equal to its default is left out."""
    if isinstance(value, _SCALARS) and not isinstance(value, enum.Enum):
        return value
    kind: type = type(value)
    fields = _fields(kind)
    if fields is not None:
        out: dict[str, Any] = {}
        for name, default in fields:
            held = getattr(value, name)
            if not (compact and held == default):
                out[name] = to_json(held, compact=compact)
        return {"kind": type(value).__name__, **out} if tagged else out
    if isinstance(value, Envelope):
        return value.model_dump(mode="json", by_alias=True)
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, dict):
        return {str(k): to_json(v, compact=compact) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        items = [to_json(v, tagged, compact) for v in value]
        if isinstance(value, set | frozenset):
            return sorted(items, key=_SORTED.encode)
        return items
    return value


@cache
def _fields(kind: type) -> tuple[tuple[str, Any], ...] | None:
    """A dataclass's fields with their defaults (`_MISSING` for none), once per class;
    None for a type that is not a dataclass."""
    if not dataclasses.is_dataclass(kind):
        return None
    return tuple(
        (f.name, f.default if f.default is not _MISSING else _factory_default(f))
        for f in dataclasses.fields(kind)
    )


def _factory_default(f: dataclasses.Field[Any]) -> Any:
    factory = f.default_factory
    return _MISSING if factory is _MISSING else factory()


def revive(kind: Any, value: Any) -> Any:
    """The value of type `kind` that `to_json` made `value` from (facts, records and
    events): a field left out takes its default."""
    if value is None:
        return None
    origin = get_origin(kind)
    if origin in (Union, types.UnionType):
        inner = [a for a in get_args(kind) if a is not type(None)]
        return revive(inner[0], value) if len(inner) == 1 else value
    if origin is tuple:
        args = get_args(kind)
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(revive(args[0], v) for v in value)
        return tuple(revive(a, v) for a, v in zip(args, value, strict=True))
    if isinstance(kind, type) and dataclasses.is_dataclass(kind):
        hints, names = _hints(kind)
        return kind(**{k: revive(hints[k], v) for k, v in value.items() if k in names})
    return value


@cache
def _hints(kind: type) -> tuple[dict[str, Any], frozenset[str]]:
    names = frozenset(f.name for f in dataclasses.fields(kind) if f.init)
    return get_type_hints(kind), names


def encode_facts(facts: Facts) -> str:
    """The compact JSON text of the facts a decision read, as its record keeps it."""
    text: str = _COMPACT.encode(to_json(facts, compact=True))
    return text


def decode_facts(text: str) -> Facts:
    """The Facts `encode_facts` made `text` from (ValueError when it is not theirs)."""
    try:
        facts = revive(Facts, json.loads(text))
    except (TypeError, KeyError, AttributeError) as err:
        raise ValueError(f"not the recorded facts of a decision: {err}") from None
    if not isinstance(facts, Facts):
        raise ValueError("not the recorded facts of a decision: not an object")
    return facts


def with_facts(plan: Plan, text: str) -> Plan:
    """`plan` with its decision's record carrying `text`, the facts it was decided on."""
    return tuple(
        Decide(dataclasses.replace(e.record, facts=text)) if isinstance(e, Decide) else e
        for e in plan
    )
