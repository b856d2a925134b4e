"""`engine emit`'s retries (docs/deploy.md#engine-emit), pure: how long it waits before
each retry of a post that found no runtime."""

from __future__ import annotations

import random

from hypothesis import given
from hypothesis import strategies as st

from engine.bridge import retry_delays


def test_the_waits_double_from_the_first_up_to_the_cap() -> None:
    """Without jitter (draw 1 -> the whole wait): 0.5, 1, 2, 4, 8, then 8 again."""
    assert retry_delays(7, 0.5, 8.0, lambda: 1.0) == [0.5, 1.0, 2.0, 4.0, 8.0, 8.0, 8.0]
    assert retry_delays(0, 0.5, 8.0, lambda: 1.0) == []


@given(
    retries=st.integers(0, 200),
    first=st.floats(0.01, 10),
    cap=st.floats(0.01, 3600),
    seed=st.integers(0, 2**32),
)
def test_every_wait_is_jittered_within_its_upper_half_and_bounded(
    retries: int, first: float, cap: float, seed: int
) -> None:
    """Each wait lies between half and all of min(cap, first * 2**n), so the total of
    N retries is bounded by N * cap however many there are."""
    draw = random.Random(seed).random
    waits = retry_delays(retries, first, cap, draw)
    assert len(waits) == retries
    for n, wait in enumerate(waits):
        full = min(cap, first * 2**n)
        assert full / 2 <= wait <= full
    assert sum(waits) <= retries * cap
