"""The codec of the facts kept with each decision (engine.core.codec): what `engine
replay` decodes is exactly what the decision read."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.core.codec import decode_facts, encode_facts, revive, to_json
from engine.core.decide import Facts, History, Superseded
from engine.core.records import LoopState, OccurrenceRecord, ProposalRecord
from tests.golden import load_golden, streams

text = st.text(max_size=12)
maybe_text = st.none() | text
json_leaf = st.none() | st.booleans() | st.integers(-(2**53), 2**53) | text
json_value = st.recursive(
    json_leaf,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(text, inner, max_size=3),
    max_leaves=8,
)
json_object = st.dictionaries(text, json_value, max_size=3)
counts = st.integers(0, 10_000)

occurrences = st.builds(
    OccurrenceRecord,
    event_id=text,
    loop=maybe_text,
    state=text,
    updated_at=text,
    occurrence_key=maybe_text,
    repo=maybe_text,
    window=maybe_text,
    decision=maybe_text,
    evidence=st.none() | json_object,
    attempt=counts,
    retry_at=maybe_text,
    signals=counts,
    reserved=st.none() | json_object,
    used=st.none() | json_object,
    created_at=maybe_text,
    finished_at=maybe_text,
    failure_class=maybe_text,
)
loop_states = st.builds(
    LoopState,
    loop=text,
    enabled=st.booleans(),
    enabled_since=maybe_text,
    cursor=maybe_text,
    last_slot=maybe_text,
    paused=st.booleans(),
    pause_note=text,
    paused_by=maybe_text,
    updated_at=text,
    consecutive_failures=counts,
    nothing_streak=counts,
    quiet_until=maybe_text,
)
proposals = st.builds(
    ProposalRecord,
    proposal_id=text,
    event_id=text,
    loop=maybe_text,
    definition=text,
    state=text,
    human_only=st.booleans(),
    mutating=st.booleans(),
    created_at=text,
    decided_at=maybe_text,
    decided_by=maybe_text,
    note=text,
)
histories = st.builds(
    History,
    last_outcome=maybe_text,
    findings=counts,
    usage=st.dictionaries(text, counts, max_size=3),
    previous=st.none() | occurrences,
    counted=counts,
)
facts_strategy = st.builds(
    Facts,
    decided=st.booleans(),
    existing=st.none() | occurrences,
    state=st.none() | loop_states,
    in_flight=st.booleans(),
    active=st.lists(occurrences, max_size=3).map(tuple),
    history=st.none() | histories,
    open_proposals=st.lists(
        st.builds(
            Superseded, proposal=proposals, occurrence=st.none() | occurrences, correlation=text
        ),
        max_size=2,
    ).map(tuple),
    last_notified=maybe_text,
)


@settings(max_examples=300, deadline=None)
@given(facts_strategy)
def test_decoding_the_recorded_facts_gives_back_the_facts_decided(facts: Facts) -> None:
    """Whatever a decision read, the text kept with it decodes to equal Facts."""
    assert decode_facts(encode_facts(facts)) == facts


@settings(max_examples=100, deadline=None)
@given(facts_strategy)
def test_the_recorded_facts_are_compact_json(facts: Facts) -> None:
    """The kept text is one JSON object without spaces between its tokens, and a field
    at its default is left out of it (so an empty Facts costs two bytes)."""
    encoded = encode_facts(facts)
    assert json.loads(encoded) == to_json(facts, compact=True)
    assert encoded == json.dumps(json.loads(encoded), separators=(",", ":"), ensure_ascii=False)
    assert encode_facts(Facts()) == "{}"


@pytest.mark.parametrize("text", ["[]", '"x"', '{"state": {"loop": "a"}}', '{"active": 3}'])
def test_text_that_is_not_recorded_facts_is_a_value_error(text: str) -> None:
    """A corrupt or foreign `facts` column is refused as such, not a crash elsewhere."""
    with pytest.raises(ValueError, match="not the recorded facts"):
        decode_facts(text)


def _decisions_and_plans(name: str) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    golden = load_golden(name)
    facts_by_event = {}
    for entry in golden["plans"]:
        for effect in entry["plan"]:
            if effect["kind"] == "Decide":
                facts_by_event[effect["record"]["event_id"]] = entry["facts"]
    return [
        (d, facts_by_event[d["event_id"]])
        for d in golden["records"]["decisions"]
        if d["event_id"] in facts_by_event
    ]


@pytest.mark.parametrize("name", streams())
def test_each_stored_decision_keeps_the_facts_its_plan_was_decided_on(name: str) -> None:
    """In every golden stream, the facts stored with a decision are those `decide` read
    when it made that decision's plan."""
    pairs = _decisions_and_plans(name)
    assert pairs
    for decision, facts in pairs:
        assert decision["facts"] is not None, decision["event_id"]
        assert decode_facts(decision["facts"]) == revive(Facts, facts)
