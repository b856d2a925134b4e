"""Who an actor is (engine/core/decisions.py): operator names, the reserved actor names
that no operator may take, and which journal actors count as a human."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.core.decisions import (
    RESERVED_NAMES,
    Actor,
    is_human,
    operator_actor,
    operator_name_problem,
)

RESERVED = ("schedule", "system", "chain", "github", "worker", "inject", "bridge")


def test_the_reserved_names_are_the_runtimes_own_actors() -> None:
    """Every fixed actor of the runtime is reserved, and nothing else is."""
    assert frozenset(RESERVED) == RESERVED_NAMES == frozenset(a.value for a in Actor)


@pytest.mark.parametrize("name", RESERVED)
def test_a_reserved_name_is_never_an_operator(name: str) -> None:
    """`operator:schedule` is not a human: neither as a name nor as a journal actor."""
    problem = operator_name_problem(name)
    assert problem is not None and "reserved actor name" in problem
    assert not is_human(operator_actor(name))


@pytest.mark.parametrize("name", ["alice", "bob.smith", "ops-1", "a", "x" * 64])
def test_plain_operator_names_are_humans(name: str) -> None:
    """A lower-case name of up to 64 characters is an operator, and their actor a human."""
    assert operator_name_problem(name) is None
    assert is_human(operator_actor(name))


@pytest.mark.parametrize("name", ["", "Alice", "1ops", "a b", "x" * 65, "ops:1", "-x"])
def test_malformed_names_are_refused(name: str) -> None:
    """A name outside the pattern is refused with the pattern named."""
    problem = operator_name_problem(name)
    assert problem is not None and "must match" in problem
    assert not is_human(operator_actor(name))


@given(st.text(max_size=80))
def test_only_operator_actors_with_valid_names_are_human(actor: str) -> None:
    """is_human holds exactly for `operator:<name>` with a name an operator may have."""
    name = actor.removeprefix("operator:")
    expected = actor.startswith("operator:") and operator_name_problem(name) is None
    assert is_human(actor) is expected
    assert not is_human(name) or name.startswith("operator:")


def test_a_long_refused_name_is_quoted_cut_at_80_characters() -> None:
    """A refused operator name is quoted in the error (shown by the CLI and the HTTP
    answer) at most its first 80 characters, so a huge header never floods either."""
    problem = operator_name_problem("Z" * 10_000)
    assert problem is not None and problem.startswith(f"operator name '{'Z' * 80}' must match")
