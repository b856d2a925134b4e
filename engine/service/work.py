"""Work items as the operator, a controller and the rules meet them (docs/work.md):
open (existing work first), list, show, continue (a controller claims the lease),
block, reopen, complete and cancel, each journaled with the actor the request proved.

Every operation reads the item, decides with the pure machine of engine.core.work and
writes the result as a compare-and-set on the version it read, in one transaction with
its journal entry: two writers racing one item never both win, and the loser is told
(409) rather than silently overwritten. Two writers opening one semantic key at once
both answer the one item the store kept."""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from typing import Any

from dsl.diagnostics import did_you_mean
from engine.core.decisions import Actor, Entity, JournalAction
from engine.core.effects import MoveBinding, WorkCommand
from engine.core.ids import stable_id
from engine.core.paging import Page, page_limit, run_cursor_text
from engine.core.work import (
    COMMAND_TYPES,
    DEFAULT_LEASE,
    BindingState,
    WorkBinding,
    WorkItem,
    WorkQuery,
    WorkRequest,
    WorkTrigger,
    bind,
    binding_id_for,
    claim,
    move,
    open_work,
    request_of,
)
from engine.errors import Conflict, EngineError, NotFound
from engine.service.context import Runtime
from engine.store.ports import Tx

# What each trigger journals.
ACTIONS: dict[WorkTrigger, str] = {
    WorkTrigger.CONTINUE: JournalAction.CONTINUED,
    WorkTrigger.BLOCK: JournalAction.BLOCKED,
    WorkTrigger.REOPEN: JournalAction.REOPENED,
    WorkTrigger.COMPLETE: JournalAction.COMPLETED,
    WorkTrigger.CANCEL: JournalAction.CANCELLED,
}


# Items of one key ever opened, read to number the next one (a key holds a handful).
MAX_GENERATIONS = 10_000


def work_id_for(semantic_key: str, generation: int) -> str:
    """The id of the `generation`-th item (1, 2, ...) ever opened for a key: the same
    on every machine and in every replay, and another once the key's item ended and
    the key is opened again."""
    return stable_id("work", f"{semantic_key}\n{generation}")


def add(rt: Runtime, req: WorkRequest, actor: str) -> tuple[WorkItem, bool]:
    """The item answering `req` and whether it is new: a non-terminal item holding the
    key is answered as it is (journaled `existing_work`), never a second one."""
    with rt.store.write() as tx:
        return add_in(rt, tx, req, actor, rt.now())


def add_in(rt: Runtime, tx: Tx, req: WorkRequest, actor: str, at: str) -> tuple[WorkItem, bool]:
    """`add` inside the caller's transaction, at `at`."""
    existing = tx.live_work_by_key(req.semantic_key)
    if existing is None:
        generation = 1 + len(tx.page_work(WorkQuery(key=req.semantic_key), MAX_GENERATIONS))
        work_id = work_id_for(req.semantic_key, generation)
    else:
        work_id = existing.work_id
    item, created = open_work(existing, req, work_id, actor, at)
    if created and not tx.insert_work(item):
        # Another writer opened the key between the read and the insert (or the id
        # exists): the one the store kept is the answer.
        kept = tx.live_work_by_key(req.semantic_key) or tx.get_work(item.work_id)
        if kept is None:
            raise Conflict(f"work '{item.work_id}' could not be opened", reason="work_conflict")
        item, created = kept, False
    action = JournalAction.OPENED if created else JournalAction.EXISTING_WORK
    rt.journal(
        tx,
        Entity.WORK,
        item.work_id,
        action,
        actor,
        to_state=item.state,
        at=at,
        data={"key": item.semantic_key, "repo": item.repo},
    )
    return item, created


def apply_command(rt: Runtime, tx: Tx, effect: WorkCommand, at: str) -> None:
    """A `work.*` event's command (engine.core.effects.WorkCommand), in the planning
    transaction: `work.open` opens (existing work first); `work.complete` and
    `work.cancel` move the item the payload names (`workId`, else the live item of
    `semanticKey`). What the machine refuses is journaled `work_refused` on the event
    and changes nothing: an event is never un-admitted for it."""
    try:
        trigger = COMMAND_TYPES[effect.command]
        if trigger is None:
            add_in(rt, tx, request_of(effect.payload), effect.actor, at)
            return
        found = _named(tx, effect.payload)
        moved = move(found, trigger, at)
        _write(rt, tx, found, moved, trigger, effect.actor, str(effect.payload.get("note", "")), at)
    except EngineError as err:
        rt.journal(
            tx,
            Entity.EVENT,
            effect.event_id,
            JournalAction.WORK_REFUSED,
            effect.actor,
            at=at,
            note=err.message,
            data={
                "type": effect.command,
                **({"reason": r} if (r := err.details.get("reason")) else {}),
            },
        )


def _named(tx: Tx, payload: dict[str, Any]) -> WorkItem:
    work_id, key = payload.get("workId"), payload.get("semanticKey")
    found = tx.get_work(str(work_id)) if work_id else None
    if found is None and key and not work_id:
        found = tx.live_work_by_key(str(key))
    if found is None:
        raise NotFound(f"no live work item {work_id or key!r}", reason="no_work")
    return found


def items(rt: Runtime, query: WorkQuery, limit: int = 50) -> Page[WorkItem]:
    """A page of items, newest first; `next` asks for the older ones (the runs' kind
    of cursor, of (created_at, work_id)), None at the end."""
    with rt.store.read() as tx:
        found = tx.page_work(query, page_limit(limit) + 1)
    shown = found[:limit]
    last = shown[-1] if shown else None
    more = len(found) > limit and last is not None
    return Page(shown, run_cursor_text(last.created_at, last.work_id) if more and last else None)


def bind_loop(
    rt: Runtime, work_id: str, shape: str, actor: str, request_id: str
) -> tuple[WorkBinding, bool]:
    """Bind the reviewed shape `shape` of loops/*.rules to the work item: the instance
    (in shadow) and whether it is new; idempotent by `request_id`. 404 for a shape the
    rules do not declare (a plain loop is no shape) or an unknown item."""
    if shape not in rt.rules.work_shapes:
        hint = did_you_mean(shape, rt.rules.work_shapes)
        raise NotFound(
            f"no work-bound loop shape '{shape}'" + (f" ({hint})" if hint else ""),
            reason="no_shape",
        )
    with rt.store.write() as tx:
        found = _read(tx, work_id)
        pair = tx.get_binding(binding_id_for(work_id, shape))
        at = rt.now()
        made, created = bind(
            found, shape, request_id, tx.binding_by_request(request_id), pair, actor, at
        )
        if not created:
            return made, False
        if not tx.insert_binding(made):
            kept = tx.binding_by_request(request_id) or tx.get_binding(made.binding_id)
            if kept is None:
                raise Conflict("the binding could not be made", reason="work_changed")
            return kept, False
        rt.journal(
            tx,
            Entity.WORK,
            work_id,
            JournalAction.BOUND,
            actor,
            at=at,
            note=f"{shape} bound in shadow mode",
            data={"shape": shape, "binding": made.binding_id, "request": request_id},
        )
        return made, True


def move_binding(rt: Runtime, tx: Tx, effect: MoveBinding, at: str) -> None:
    """A firing's gate moved its instance (its work ended: disabled; its work is gone:
    paused), journaled on the work item by the engine. Applied over the instance as the
    transaction reads it: one already in that state, or disabled, stays as it is."""
    found = tx.get_binding(effect.binding_id)
    if found is None or found.state in (effect.to_state, BindingState.DISABLED):
        return
    moved = dataclasses.replace(
        found, state=effect.to_state, updated_at=at, version=found.version + 1
    )
    if not tx.update_binding(moved, found.version):
        changed = f"instance '{found.binding_id}' changed while it was moved"
        raise Conflict(changed, reason="work_changed")
    action = (
        JournalAction.INSTANCE_DISABLED
        if effect.to_state == BindingState.DISABLED
        else JournalAction.INSTANCE_PAUSED
    )
    rt.journal(
        tx,
        Entity.WORK,
        effect.work_id,
        action,
        Actor.SYSTEM,
        from_state=found.state,
        to_state=effect.to_state,
        at=at,
        note=effect.note,
        data={"shape": found.shape, "binding": found.binding_id},
    )


def bindings(rt: Runtime, work_id: str) -> list[WorkBinding]:
    with rt.store.read() as tx:
        _read(tx, work_id)
        return tx.bindings_of_work(work_id)


def overview(rt: Runtime, query: WorkQuery, limit: int) -> list[dict[str, Any]]:
    """Each of the newest `limit` items of `query` with its work-bound loop instances."""
    with rt.store.read() as tx:
        found = tx.page_work(query, page_limit(limit))
        return [{"item": w, "bindings": tx.bindings_of_work(w.work_id)} for w in found]


def item(rt: Runtime, work_id: str) -> WorkItem:
    with rt.store.read() as tx:
        found = tx.get_work(work_id)
    if found is None:
        raise NotFound(f"no work item '{work_id}'", reason="no_work")
    return found


def transition(
    rt: Runtime, work_id: str, trigger: WorkTrigger, actor: str, note: str = ""
) -> WorkItem:
    """Move an item by `trigger` (block, reopen, complete, cancel): 409
    `illegal_transition` from a state the machine does not leave that way."""
    if trigger == WorkTrigger.CONTINUE:
        raise ValueError("continue takes a lease: use claim_lease")
    with rt.store.write() as tx:
        found = _read(tx, work_id)
        at = rt.now()
        return _write(rt, tx, found, move(found, trigger, at), trigger, actor, note, at)


def claim_lease(
    rt: Runtime,
    work_id: str,
    principal: str,
    session: str,
    ttl: timedelta = DEFAULT_LEASE,
    note: str = "",
) -> WorkItem:
    """`continue`: the authenticated `principal` takes (or renews) the controller lease
    for `session`; 409 `lease_held` while another principal's lease is live."""
    with rt.store.write() as tx:
        found = _read(tx, work_id)
        now = rt.clock()
        claimed = claim(found, principal, session, now, ttl)
        return _write(
            rt, tx, found, claimed, WorkTrigger.CONTINUE, principal, note, claimed.updated_at
        )


def _read(tx: Tx, work_id: str) -> WorkItem:
    found = tx.get_work(work_id)
    if found is None:
        raise NotFound(f"no work item '{work_id}'", reason="no_work")
    return found


def _write(
    rt: Runtime,
    tx: Tx,
    before: WorkItem,
    after: WorkItem,
    trigger: WorkTrigger,
    actor: str,
    note: str,
    at: str,
) -> WorkItem:
    if not tx.update_work(after, before.version):
        raise Conflict(
            f"work '{before.work_id}' changed while this request read it; read it again",
            reason="work_changed",
        )
    data: dict[str, Any] = {"key": after.semantic_key}
    if before.reserved_by is not None and after.reserved_by is None:
        data["wake"] = before.reserved_by  # the report consumed that wake's reservation
    if trigger == WorkTrigger.CONTINUE:
        data.update(session=after.lease_session, expires=after.lease_expires_at)
    rt.journal(
        tx,
        Entity.WORK,
        after.work_id,
        ACTIONS[trigger],
        actor,
        from_state=before.state,
        to_state=after.state,
        note=note,
        at=at,
        data=data,
    )
    return after
