"""Graduating a work-bound loop instance out of shadow mode
(docs/work.md#graduating-an-instance): at once, or deferred to the next natural start of
`engine serve`, which applies it once and never forces a restart.

An instance (`shape@work-id`, engine.core.work.instance_name) graduates only when its
shape's reviewed rule file writes `shadow false`; a declared loop's shadow mode follows
its rule file and is never graduated here. The pure decision is engine.core.work
`graduate` and `graduate_at_restart`; each write here is a compare-and-set on the
instance's version, in one transaction with its journal entry (entity `work`), so two
serves starting at once apply a deferral once between them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.core.decisions import Actor, Entity, JournalAction
from engine.core.work import (
    WorkBinding,
    binding_id_for,
    graduate_at_restart,
    instance_name,
    is_pending,
    parse_instance,
)
from engine.core.work import graduate as decide_graduation
from engine.errors import Conflict, NotFound
from engine.service.context import Runtime
from engine.store.ports import Tx

# Deferred graduations read at once (a serve start reads pages of them until none is left).
PENDING_LIMIT = 1000

# Why a serve start dropped a deferred graduation (engine.core.work.graduate_at_restart).
DROPPED = {
    "not_shadow": "the instance is no longer in shadow",
    "shadow_only": "its shape's rule file no longer allows it (no `shadow false`)",
    "no_shape": "its shape is no longer in the rules",
    "illegal_transition": "its work item ended",
}


@dataclass(frozen=True, slots=True)
class Applied:
    """What a serve start did with one deferred graduation: `binding` as it left it
    (live, or as it was), `dropped` why it did not graduate (None when it did), and
    who had deferred it."""

    binding: WorkBinding
    dropped: str | None
    deferred_by: str | None


def instance_named(rt: Runtime, name: str) -> tuple[str, str]:
    """(shape, work id) of the instance `name`. A declared loop is refused (Conflict,
    reason `declared_loop`: its shadow mode follows its rule file, whose place is
    told); any other name that is no instance is NotFound (`unknown_instance`)."""
    declared = rt.rules.loops.get(name)
    declared = declared if declared is not None and declared.work is None else None
    if declared is not None:
        where = f"{declared.origin.file}:{declared.origin.line}"
        raise Conflict(
            f"'{name}' is a declared loop: its shadow mode follows its rule file ({where}); "
            "only an instance of a work-bound loop shape (SHAPE@WORK-ID) graduates",
            reason="declared_loop",
            origin=where,
        )
    parsed = parse_instance(name)
    if parsed is None:
        if name in rt.rules.work_shapes:
            why = f"'{name}' is a work-bound loop shape; name one of its instances, {name}@WORK-ID"
        else:
            why = "an instance is SHAPE@WORK-ID"
        raise NotFound(
            f"no loop instance '{name}': {why} (`engine work show ID` lists an item's)",
            reason="unknown_instance",
        )
    return parsed


def graduate(rt: Runtime, name: str, actor: str, at_restart: bool, note: str = "") -> WorkBinding:
    """Graduate the instance `name` (`shape@work-id`) out of shadow: live now, or (with
    `at_restart`) recorded for the next serve start. Journaled `graduated` or
    `graduation_deferred` on its work item, with `actor`."""
    shape, work_id = instance_named(rt, name)
    return graduate_bound(rt, work_id, shape, actor, at_restart, note)


def graduate_bound(
    rt: Runtime, work_id: str, shape: str, actor: str, at_restart: bool, note: str = ""
) -> WorkBinding:
    """`graduate` of the instance of `shape` bound to `work_id`: 404 `no_work` or
    `no_binding` when there is none, `no_shape` when its shape left the rules; 409 with
    the reason engine.core.work.graduate gives."""
    name = instance_name(shape, work_id)
    note = note.strip()
    with rt.store.write() as tx:
        found = tx.get_binding(binding_id_for(work_id, shape))
        item = tx.get_work(work_id)
        if found is None:
            if item is None:
                raise NotFound(f"no work item '{work_id}'", reason="no_work")
            raise NotFound(
                f"no loop instance '{name}': '{shape}' is not bound to {work_id}",
                reason="no_binding",
            )
        declared = rt.rules.work_shapes.get(shape)
        if declared is None:
            raise NotFound(
                f"'{name}' is an instance of '{shape}', a shape the rules no longer declare",
                reason="no_shape",
            )
        at = rt.now()
        origin = f"{declared.origin.file}:{declared.origin.line}"
        after = decide_graduation(
            found, declared.graduates, at_restart, actor, at, note, origin, item
        )
        _write(tx, found, after)
        data = _data(found)
        if at_restart:
            action, said = JournalAction.GRADUATION_DEFERRED, note or "at the next restart"
        else:
            action, said = JournalAction.GRADUATED, note
            if is_pending(found):  # now takes the place of the deferral
                by = found.graduation_requested_by
                data.update(deferredBy=by)
                said = said or f"now, in place of the graduation {by} deferred to the next restart"
        rt.journal(tx, Entity.WORK, work_id, action, actor, at=at, note=said, data=data)
        return after


def pending(rt: Runtime, limit: int = PENDING_LIMIT) -> list[WorkBinding]:
    """The instances whose graduation waits for the next serve start, oldest first."""
    with rt.store.read() as tx:
        return tx.pending_graduations(limit)


def pending_view(rt: Runtime) -> list[dict[str, Any]]:
    """The deferred graduations as `engine schedule` and `GET /schedules` show them."""
    return [
        {
            "loop": instance_name(b.shape, b.work_id),
            "shape": b.shape,
            "workId": b.work_id,
            "bindingId": b.binding_id,
            "state": b.state,
            "requestedBy": b.graduation_requested_by,
            "requestedAt": b.graduation_requested_at,
            "note": b.graduation_note or "",
        }
        for b in pending(rt)
    ]


def apply_deferred(rt: Runtime) -> list[Applied]:
    """At a serve start, before the scheduler's first pass: each deferred graduation
    once. An instance still in shadow (and still allowed) goes live; any other has its
    pending mark cleared. Either is journaled (`graduated` or `graduation_dropped`,
    actor `system`, the note naming who deferred it) in the transaction that writes it;
    an instance another serve applied first is left as it is."""
    done: list[Applied] = []
    while True:
        batch = pending(rt)
        applied = [a for a in (_apply_one(rt, b.binding_id) for b in batch) if a is not None]
        done += applied
        if len(batch) < PENDING_LIMIT or not applied:
            return done


def _apply_one(rt: Runtime, binding_id: str) -> Applied | None:
    with rt.store.write() as tx:
        found = tx.get_binding(binding_id)
        if found is None or not is_pending(found):
            return None  # another serve applied it first
        declared = rt.rules.work_shapes.get(found.shape)
        at = rt.now()
        graduates = None if declared is None else declared.graduates
        after, dropped = graduate_at_restart(found, graduates, at, tx.get_work(found.work_id))
        if not tx.update_binding(after, found.version):
            return None
        by, asked = found.graduation_requested_by, found.graduation_requested_at
        deferred = f"deferred by {by} at {asked}" + (
            f": {found.graduation_note}" if found.graduation_note else ""
        )
        data = {**_data(found), "deferredBy": by, "deferredAt": asked}
        if dropped is None:
            action, note = JournalAction.GRADUATED, deferred
        else:
            action, note = JournalAction.GRADUATION_DROPPED, f"{DROPPED[dropped]} ({deferred})"
            data.update(reason=dropped, state=found.state)
        system = Actor.SYSTEM
        rt.journal(tx, Entity.WORK, found.work_id, action, system, at=at, note=note, data=data)
        return Applied(after, dropped, by)


def _write(tx: Tx, before: WorkBinding, after: WorkBinding) -> None:
    if not tx.update_binding(after, before.version):
        name = instance_name(before.shape, before.work_id)
        raise Conflict(
            f"'{name}' changed while this request read it; read it again",
            reason="binding_changed",
        )


def _data(b: WorkBinding) -> dict[str, Any]:
    return {"shape": b.shape, "binding": b.binding_id, "loop": instance_name(b.shape, b.work_id)}
