"""Waking a work item's controller (docs/work.md#waking-the-controller): the service
side of a wake, the run of an instance's `controller-<id>@1` definition.

- `reserve`, in the commit that starts the run (after the authority check): re-read the
  work item and take its launch reservation (a compare-and-set on its version), or say
  why nothing may be launched: the work ended, a controller holds its lease, another
  wake's reservation is live. Two serves, or a tick delivered twice, never launch two
  controllers: the run is claimed once, and the reservation is taken once.
- `claimed`: whether the controller has claimed (or reported on) the work since, which
  consumes the reservation (engine.core.work.move and claim).
- `ended`, in the commit that records the run: a reservation still held is dropped, and
  one that ended without a claim is journaled `controller_did_not_claim` on the work.

The engine never claims the lease for the controller: the controller calls
`POST /work/{id}/continue` with its own token."""

from __future__ import annotations

from dataclasses import replace

from engine.core import authority
from engine.core.decisions import Actor, Entity, JournalAction
from engine.core.instances import DID_NOT_CLAIM, is_wake
from engine.core.records import RunRecord
from engine.core.ruleset import Loop
from engine.core.work import WorkItem, parse_instance, reserve, unreserved
from engine.errors import Conflict
from engine.service.context import Runtime
from engine.store.ports import Tx


def instance_of(rt: Runtime, run: RunRecord) -> Loop | None:
    """The work-bound instance whose wake `run` is, if it is one."""
    loop = rt.rules.loops.get(run.loop) if run.loop is not None else None
    return loop if loop is not None and loop.work is not None else None


def work_of(run: RunRecord) -> str | None:
    parsed = parse_instance(run.loop) if run.loop is not None else None
    return parsed[1] if parsed is not None else None


def reserve_for(rt: Runtime, tx: Tx, run: RunRecord, worker: str) -> str | None:
    """Take the launch reservation for the wake `run` is (nothing for another run):
    None when it may launch, else why not (nothing is launched, nothing written)."""
    definition = authority.definition_of(rt.rules, run.definition)
    if definition is None or not is_wake(definition):
        return None
    loop = instance_of(rt, run)
    work_id = work_of(run)
    if loop is None or loop.work is None or work_id is None or loop.work.controller is None:
        return f"run '{run.run_id}' wakes no bound instance the rules hold"
    item = tx.get_work(work_id)
    if item is None:
        return f"work '{work_id}' is gone"
    controller = rt.rules.controllers[loop.work.controller]
    now = rt.clock()
    try:
        held = reserve(item, run.run_id, now, controller.reservation_seconds)
    except Conflict as err:
        return str(err)
    if not tx.update_work(held, item.version):
        return f"work '{work_id}' changed while the wake read it"
    binding = tx.get_binding(loop.work.binding_id)
    if binding is not None:
        tx.update_binding(
            replace(binding, last_wake_at=held.updated_at, version=binding.version + 1),
            binding.version,
        )
    rt.journal(
        tx,
        Entity.WORK,
        work_id,
        JournalAction.WAKE_RESERVED,
        f"worker:{worker}",
        note=(
            f"{loop.name} wakes controller {controller.id}; it may claim until "
            f"{held.reserved_until}"
        ),
        data={
            "run": run.run_id,
            "loop": loop.name,
            "controller": controller.id,
            "until": held.reserved_until,
        },
    )
    return None


def claimed(rt: Runtime, work_id: str, run_id: str) -> bool:
    """Whether the wake `run_id`'s reservation was consumed: the controller claimed the
    work (or something reported on it) since the launch."""
    with rt.store.read() as tx:
        item = tx.get_work(work_id)
    return item is None or item.reserved_by != run_id


def ended(rt: Runtime, tx: Tx, run: RunRecord, outcome: str | None, at: str) -> None:
    """A wake's run was recorded: drop its reservation if it still holds one; an
    outcome `DID_NOT_CLAIM` is journaled `controller_did_not_claim` on the work."""
    work_id = work_of(run)
    if work_id is None:
        return
    item = tx.get_work(work_id)
    if item is None:
        return
    if item.reserved_by == run.run_id:
        tx.update_work(unreserved(item, at), item.version)
    if outcome == DID_NOT_CLAIM:
        rt.journal(
            tx,
            Entity.WORK,
            work_id,
            JournalAction.CONTROLLER_DID_NOT_CLAIM,
            Actor.SYSTEM,
            note=f"the controller woken by run {run.run_id} did not claim the work in time",
            at=at,
            data={"run": run.run_id, "loop": run.loop},
        )


def context_of(item: WorkItem) -> dict[str, object]:
    """What a controller is handed: the work item, its context document, no lease."""
    return {
        "workId": item.work_id,
        "semanticKey": item.semantic_key,
        "title": item.title,
        "state": item.state,
        "repo": item.repo,
        "context": item.context,
    }
