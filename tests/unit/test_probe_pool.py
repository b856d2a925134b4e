"""The probe pool (engine/service/probing.py, docs/scheduling.md#condition-watches): probes
run in threads of their own, at most `size` side by side, a loop's probe once at a time;
the caller never waits unless it asks to. The loops are tests/data/watch's; the probe
runner is a stand-in the test holds."""

from __future__ import annotations

import shutil
import threading
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from engine.core.probes import ProbeRun
from engine.core.registry import Probe
from engine.core.ruleset import Loop
from engine.loading import Paths, load_rules
from engine.service.probing import ProbePool

DATA = Path(__file__).resolve().parents[1] / "data" / "watch"
AT = datetime(2026, 11, 30, 10, tzinfo=UTC)


class Held:
    """A probe runner whose probes answer only when the test lets them."""

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.lock = threading.Lock()
        self.running = self.most = 0

    def __call__(self, probe: Probe, payload: Mapping[str, Any]) -> ProbeRun:
        with self.lock:
            self.running += 1
            self.most = max(self.most, self.running)
        self.gate.wait(30)
        with self.lock:
            self.running -= 1
        return ProbeRun(stdout=str(payload["state"]).encode())


@pytest.fixture
def loops(tmp_path: Path) -> list[Loop]:
    """The watch tree's two watch loops."""
    shutil.copytree(DATA / "registry", tmp_path / "registry")
    (tmp_path / "loops").mkdir()
    rules = (DATA / "loops" / "watch.rules.in").read_text().replace("@DIR@", str(tmp_path))
    (tmp_path / "loops" / "watch.rules").write_text(rules)
    found = load_rules(Paths(tmp_path / "loops", tmp_path / "registry", tmp_path / "config"))
    return [found.loops["ci-watch"], found.loops["slow-watch"]]


def probe_of(loop: Loop) -> Probe:
    return Probe(id=loop.trigger.probe or "", argv=("true",))


def test_start_returns_at_once_and_a_loop_is_polled_once_at_a_time(loops: list[Loop]) -> None:
    """Starting a poll never waits for the probe; a second start of the same loop while
    its poll has not been taken is refused; once taken, the loop may start again."""
    held = Held()
    pool = ProbePool(held, 2)
    ci = loops[0]
    assert pool.start(ci, probe_of(ci), AT) is True
    assert pool.start(ci, probe_of(ci), AT) is False
    assert pool.finished() == []
    held.gate.set()
    pool.wait()
    (poll,) = pool.finished()
    assert (poll.loop.name, poll.at, poll.run.stdout) == (
        "ci-watch",
        AT,
        ci.payload["state"].encode(),
    )
    assert pool.start(ci, probe_of(ci), AT) is True
    pool.wait()


def test_no_more_than_size_probes_run_side_by_side(loops: list[Loop]) -> None:
    """With one thread, the second loop's probe waits for the first's to answer."""
    held = Held()
    pool = ProbePool(held, 1)
    for loop in loops:
        assert pool.start(loop, probe_of(loop), AT)
    held.gate.set()
    pool.wait()
    assert sorted(p.loop.name for p in pool.finished()) == ["ci-watch", "slow-watch"]
    assert held.most == 1


def test_a_finished_poll_wakes_the_caller(loops: list[Loop]) -> None:
    """The pool calls `woken` once a poll has finished, from its own thread."""
    woke = threading.Event()
    pool = ProbePool(lambda probe, payload: ProbeRun(stdout=b"{}"), 1)
    pool.woken = woke.set
    pool.start(loops[0], probe_of(loops[0]), AT)
    assert woke.wait(30)
    assert [p.loop.name for p in pool.finished()] == ["ci-watch"]


def test_a_runner_that_raises_fails_the_poll_and_keeps_the_pool(loops: list[Loop]) -> None:
    """A probe runner's bug is the poll's failure, and the pool's thread goes on."""

    def broken(probe: Probe, payload: Mapping[str, Any]) -> ProbeRun:
        raise RuntimeError("boom")

    pool = ProbePool(broken, 1)
    pool.start(loops[0], probe_of(loops[0]), AT)
    pool.wait()
    (poll,) = pool.finished()
    assert poll.run.failure == "the probe runner failed: boom"
    pool.start(loops[1], probe_of(loops[1]), AT)
    pool.wait()
    assert len(pool.finished()) == 1


def test_polls_given_back_are_taken_again(loops: list[Loop]) -> None:
    """Polls the store could not record are kept for the next pass, their loops still
    busy meanwhile."""
    pool = ProbePool(lambda probe, payload: ProbeRun(stdout=b"{}"), 1)
    pool.start(loops[0], probe_of(loops[0]), AT)
    pool.wait()
    polls = pool.finished()
    pool.put_back(polls)
    assert pool.start(loops[0], probe_of(loops[0]), AT) is False
    assert pool.finished() == polls
