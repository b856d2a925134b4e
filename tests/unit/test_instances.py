"""Work-bound instances as loops (engine/core/instances.py) and the gate each firing
passes inside the pure decision (engine/core/decide.py): an instance follows its shape,
starts in shadow, has one active occurrence and routes to its controller's wake; a
firing re-reads its work item first: gone pauses it, terminal disables it, a live lease
or reservation and the cooldown hold it, and only open work reaches the wake."""

from __future__ import annotations

import dataclasses
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from engine.core.decide import Facts, decide
from engine.core.effects import Decide, MoveBinding, PauseLoop, QueueRun
from engine.core.envelope import iso
from engine.core.instances import instance_loop, wake_ref, with_instances
from engine.core.machines import Lifecycle
from engine.core.planner import admitted_record
from engine.core.records import LoopState
from engine.core.ruleset import RuleSet
from engine.core.ticks import tick
from engine.core.work import BindingState, WorkBinding, WorkItem, WorkState
from engine.loading import Paths, load_rules

SHAPES = Path(__file__).resolve().parents[1] / "data" / "shapes"
RULES = """loop nudge
  work continuation controller coder
  every 1h
  emit work.nudged
  approval auto
  shadow false
  cooldown 30m
  backoff base 5m max 2h
  budget daily_runs 12

loop kept
  work continuation controller coder
  every 1h
  emit work.nudged
  cooldown 30m
  backoff base 5m max 2h
  budget daily_runs 12

route work.nudged to nudge@1
"""
SLOT = datetime(2026, 12, 7, 10, tzinfo=UTC)
AT = iso(SLOT)
WORK = "work-0123456789abcdef"


@pytest.fixture(scope="module")
def rules(tmp_path_factory: pytest.TempPathFactory) -> RuleSet:
    root = tmp_path_factory.mktemp("tree")
    shutil.copytree(SHAPES / "registry", root / "registry")
    (root / "loops").mkdir()
    (root / "loops" / "t.rules").write_text(RULES)
    (root / "config").mkdir()
    return load_rules(Paths(root / "loops", root / "registry", root / "config"))


def binding(shape: str = "nudge", state: str = BindingState.LIVE, **more: str) -> WorkBinding:
    return WorkBinding(f"bind-{shape}", WORK, shape, "r1", state, "operator:a", AT, AT, 2, **more)


def item(state: str = WorkState.OPEN, **more: Any) -> WorkItem:
    return WorkItem(WORK, "repair-1", "Repair", state, None, {}, "operator:a", AT, AT, **more)


def test_an_instance_follows_its_shape_in_shadow_until_it_graduates(rules: RuleSet) -> None:
    """`shape@work`, the shape's trigger, one active occurrence, routed to its
    controller's wake; in shadow unless live, and a shape without `shadow false` keeps
    it in shadow even when the binding says live; a disabled binding is not enabled."""
    live = instance_loop(rules.work_shapes["nudge"], binding())
    assert live.name == f"nudge@{WORK}" and live.trigger == rules.work_shapes["nudge"].trigger
    assert live.policy.budget.active_occurrences == 1 and live.policy.shadow is False
    assert live.route is not None and live.route.definition == wake_ref("coder")
    assert live.work is not None and (live.work.work_id, live.work.live) == (WORK, True)
    assert instance_loop(rules.work_shapes["nudge"], binding(state="shadow")).policy.shadow
    kept = instance_loop(rules.work_shapes["kept"], binding("kept"))
    assert kept.policy.shadow is True
    assert not instance_loop(rules.work_shapes["nudge"], binding(state="disabled")).enabled
    with_both = with_instances(rules, [binding(), binding("gone")])
    assert set(with_both.loops) == {f"nudge@{WORK}"}  # a shape that left binds nothing
    assert with_instances(with_both, []).loops == rules.loops


def plan_of(rules: RuleSet, facts: Facts, shape: str = "nudge") -> tuple[object, ...]:
    planned = with_instances(rules, [facts.binding or binding(shape)])
    loop = planned.loops[f"{shape}@{WORK}"]
    event = admitted_record(planned, tick(loop, SLOT, 0), "schedule", AT)
    assert event.loop == loop.name
    return decide(event, planned, facts, Lifecycle(planned), AT)


def state() -> LoopState:
    return LoopState(f"nudge@{WORK}", True, AT, None, None, False, "", None, AT)


def reason(plan: tuple[object, ...]) -> str | None:
    decided = [e for e in plan if isinstance(e, Decide)]
    assert len(decided) == 1
    return decided[0].record.reason


def test_open_work_reaches_the_wake(rules: RuleSet) -> None:
    plan = plan_of(rules, Facts(state=state(), work=item(), binding=binding()))
    queued = [e for e in plan if isinstance(e, QueueRun)]
    assert [q.record.definition for q in queued] == ["controller-coder@1"]


def test_terminal_work_disables_the_instance_and_launches_nothing(rules: RuleSet) -> None:
    for ended in (WorkState.COMPLETED, WorkState.CANCELLED):
        plan = plan_of(rules, Facts(state=state(), work=item(ended), binding=binding()))
        assert reason(plan) == "nothing_to_do"
        assert not [e for e in plan if isinstance(e, QueueRun)]
        moves = [e for e in plan if isinstance(e, MoveBinding)]
        assert [(m.binding_id, m.to_state) for m in moves] == [("bind-nudge", "disabled")]


def test_missing_work_pauses_the_instance(rules: RuleSet) -> None:
    plan = plan_of(rules, Facts(state=state(), work=None, binding=binding()))
    assert reason(plan) == "work_missing"
    assert [e.to_state for e in plan if isinstance(e, MoveBinding)] == ["paused"]
    assert [e.loop for e in plan if isinstance(e, PauseLoop)] == [f"nudge@{WORK}"]
    assert not [e for e in plan if isinstance(e, QueueRun)]


def test_a_live_lease_or_reservation_holds_the_firing(rules: RuleSet) -> None:
    later = iso(SLOT + timedelta(minutes=5))
    leased = item(WorkState.ACTIVE, lease_owner="controller:coder", lease_expires_at=later)
    reserved = item(reserved_by="run-1", reserved_until=later)
    lapsed = item(WorkState.ACTIVE, lease_owner="controller:coder", lease_expires_at=AT)
    for work, why in ((leased, "controller_active"), (reserved, "controller_active")):
        plan = plan_of(rules, Facts(state=state(), work=work, binding=binding()))
        assert reason(plan) == why
        assert not [e for e in plan if isinstance(e, QueueRun | MoveBinding)]
    plan = plan_of(rules, Facts(state=state(), work=lapsed, binding=binding()))
    assert [e for e in plan if isinstance(e, QueueRun)]  # an expired lease holds nothing


def test_the_cooldown_holds_a_wake_until_it_passed(rules: RuleSet) -> None:
    woke = binding(last_wake_at=iso(SLOT - timedelta(minutes=20)))
    plan = plan_of(rules, Facts(state=state(), work=item(), binding=woke))
    assert reason(plan) == "cooldown"
    woke = dataclasses.replace(woke, last_wake_at=iso(SLOT - timedelta(minutes=30)))
    plan = plan_of(rules, Facts(state=state(), work=item(), binding=woke))
    assert [e for e in plan if isinstance(e, QueueRun)]


def test_a_shadow_instance_records_the_wake_it_would_run(rules: RuleSet) -> None:
    shadow = binding(state="shadow")
    plan = plan_of(rules, Facts(state=state(), work=item(), binding=shadow))
    decided = next(e for e in plan if isinstance(e, Decide)).record
    assert (decided.kind, decided.definition) == ("shadow", "controller-coder@1")
    assert not [e for e in plan if isinstance(e, QueueRun)]
