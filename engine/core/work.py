"""Work items (docs/work.md): a finite objective the engine knows, its state machine and
its controller lease, as data. No I/O and no clock: `now` is an argument.

A work item is `open`, `active` or `blocked` until it ends, `completed` or `cancelled`;
a terminal item never moves again. Opening a semantic key that a non-terminal item
holds answers that item (existing work first), never a second one. The controller
lease (owner principal, session, expiry) is claimed by the controller itself
(`POST /work/{id}/continue`): a live lease held by another owner refuses the claim."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any, Final

from engine.core.envelope import iso, parse_iso
from engine.core.ids import stable_id
from engine.errors import Conflict, PayloadTooLarge, Unprocessable

MAX_CONTEXT_BYTES: Final = 64 * 1024  # a context document's bound, as compact UTF-8 JSON
MAX_TITLE = 200
MAX_KEY = 200
DEFAULT_LEASE: Final = timedelta(minutes=15)
MAX_LEASE: Final = timedelta(hours=24)


class WorkState(StrEnum):
    """A work item's state (persisted; a member's value never changes once released)."""

    OPEN = "open"
    ACTIVE = "active"  # a controller claimed it (`continue`)
    BLOCKED = "blocked"
    COMPLETED = "completed"
    CANCELLED = "cancelled"


class WorkTrigger(StrEnum):
    CONTINUE = "continue"  # a controller claims (or renews) the lease: -> active
    BLOCK = "block"  # -> blocked
    REOPEN = "reopen"  # active/blocked -> open
    COMPLETE = "complete"  # -> completed (terminal)
    CANCEL = "cancel"  # -> cancelled (terminal)


TERMINAL: Final = frozenset({WorkState.COMPLETED, WorkState.CANCELLED})
LIVE: Final = tuple(s.value for s in WorkState if s not in TERMINAL)

# The machine as one table: (state, trigger) -> state. What is absent is refused.
_S, _T = WorkState, WorkTrigger
TRANSITIONS: Final[dict[tuple[WorkState, WorkTrigger], WorkState]] = {
    (_S.OPEN, _T.CONTINUE): _S.ACTIVE,
    (_S.OPEN, _T.BLOCK): _S.BLOCKED,
    (_S.OPEN, _T.COMPLETE): _S.COMPLETED,
    (_S.OPEN, _T.CANCEL): _S.CANCELLED,
    (_S.ACTIVE, _T.CONTINUE): _S.ACTIVE,
    (_S.ACTIVE, _T.BLOCK): _S.BLOCKED,
    (_S.ACTIVE, _T.REOPEN): _S.OPEN,
    (_S.ACTIVE, _T.COMPLETE): _S.COMPLETED,
    (_S.ACTIVE, _T.CANCEL): _S.CANCELLED,
    (_S.BLOCKED, _T.CONTINUE): _S.ACTIVE,
    (_S.BLOCKED, _T.REOPEN): _S.OPEN,
    (_S.BLOCKED, _T.COMPLETE): _S.COMPLETED,
    (_S.BLOCKED, _T.CANCEL): _S.CANCELLED,
}


@dataclass(frozen=True, slots=True)
class WorkItem:
    """One work item as the store keeps it. `version` grows by one with every change:
    each write is a compare-and-set on the version the writer read."""

    work_id: str
    semantic_key: str
    title: str
    state: str
    repo: str | None
    context: dict[str, Any]  # {"summary": str, "links": [str, ...]}, bounded
    created_by: str
    created_at: str
    updated_at: str
    version: int = 1
    lease_owner: str | None = None
    lease_session: str | None = None
    lease_expires_at: str | None = None
    # A wake's launch reservation: the run that launched the controller, and until when
    # the controller may claim before the wake counts as `controller_did_not_claim`.
    reserved_by: str | None = None
    reserved_until: str | None = None


class BindingState(StrEnum):
    """A work-bound loop instance's state (persisted). An instance starts in `shadow`
    (it records what it would do); `disabled` is final: its work ended."""

    SHADOW = "shadow"
    LIVE = "live"
    PAUSED = "paused"  # its work item went missing
    DISABLED = "disabled"


@dataclass(frozen=True, slots=True)
class WorkBinding:
    """One instance of a work-bound loop shape (docs/work.md#work-bound-loops): the
    reviewed shape `shape` of loops/*.rules bound to the work item `work_id`. One per
    (work, shape); binding is idempotent by `request_id`."""

    binding_id: str
    work_id: str
    shape: str
    request_id: str
    state: str
    created_by: str
    created_at: str
    updated_at: str
    version: int = 1
    last_wake_at: str | None = None  # when it last woke its controller (its cooldown)
    # A graduation out of shadow deferred to the next serve start (`engine schedule
    # graduate --at-restart`): who asked, when, and why; all None when none is pending.
    graduation_requested_by: str | None = None
    graduation_requested_at: str | None = None
    graduation_note: str | None = None


@dataclass(frozen=True, slots=True)
class WorkQuery:
    """Which work items a page holds; every filter given must hold (None: any). Its
    cursor is the runs' kind, of (created_at, work_id)."""

    state: str | None = None
    repo: str | None = None
    key: str | None = None  # the semantic key, exact
    before: tuple[str, str] | None = None  # strictly older than (created_at, work_id)


@dataclass(frozen=True, slots=True)
class WorkRequest:
    """What opening a work item asks for (CLI, HTTP or a `work.open` event)."""

    semantic_key: str
    title: str
    repo: str | None = None
    summary: str = ""
    links: tuple[str, ...] = ()


# The event types that carry a command on work (registry/event-types.yaml), and the
# move each makes; `work.open` opens (existing work first).
OPEN_TYPE: Final = "work.open"
COMMAND_TYPES: Final[dict[str, WorkTrigger | None]] = {
    OPEN_TYPE: None,
    "work.complete": WorkTrigger.COMPLETE,
    "work.cancel": WorkTrigger.CANCEL,
}


def request_of(payload: dict[str, Any]) -> WorkRequest:
    """The `work.open` payload (registry/schemas/work-open.input.json) as a request."""
    return WorkRequest(
        str(payload["semanticKey"]),
        str(payload["title"]),
        payload.get("repo"),
        str(payload.get("summary", "")),
        tuple(str(link) for link in payload.get("links", ())),
    )


def is_terminal(state: str) -> bool:
    return state in TERMINAL


def context_document(summary: str, links: tuple[str, ...]) -> dict[str, Any]:
    """The context document of a work item: its summary and links, refused (413,
    reason `context_too_large`) beyond MAX_CONTEXT_BYTES."""
    doc: dict[str, Any] = {"links": list(links), "summary": summary}  # as stored: sorted
    size = len(json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode())
    if size > MAX_CONTEXT_BYTES:
        raise PayloadTooLarge(
            f"a work item's context is at most {MAX_CONTEXT_BYTES} bytes, not {size}",
            reason="context_too_large",
            limit=MAX_CONTEXT_BYTES,
            size=size,
        )
    return doc


def request_problem(req: WorkRequest) -> str | None:
    """Why the request cannot open work, or None."""
    if not req.semantic_key.strip() or len(req.semantic_key) > MAX_KEY:
        return f"a semantic key is 1 to {MAX_KEY} characters"
    if not req.title.strip() or len(req.title) > MAX_TITLE:
        return f"a title is 1 to {MAX_TITLE} characters"
    if any(not isinstance(link, str) or not link for link in req.links):
        return "each link is a non-empty string"
    return None


def open_work(
    existing: WorkItem | None, req: WorkRequest, work_id: str, actor: str, now: str
) -> tuple[WorkItem, bool]:
    """The item that answers `req`: (existing, False) when a non-terminal item holds
    the key (existing work first), else (a new open item, True)."""
    problem = request_problem(req)
    if problem is not None:
        raise Unprocessable(problem, reason="bad_work")
    if existing is not None and not is_terminal(existing.state):
        return existing, False
    doc = context_document(req.summary, req.links)
    item = WorkItem(
        work_id, req.semantic_key, req.title, WorkState.OPEN, req.repo, doc, actor, now, now
    )
    return item, True


def move(item: WorkItem, trigger: WorkTrigger, now: str) -> WorkItem:
    """The item after `trigger`; Conflict (reason `illegal_transition`, nothing
    changed) when the table has no such move. A terminal state drops the lease; so
    does `reopen`."""
    to = TRANSITIONS.get((WorkState(item.state), trigger))
    if to is None:
        raise Conflict(
            f"work '{item.work_id}' is {item.state}: it cannot {trigger.value}",
            reason="illegal_transition",
            state=item.state,
        )
    # Any report on the work (the controller's claim, a move) consumes a pending wake.
    changed = dataclasses.replace(
        item,
        state=to,
        updated_at=now,
        version=item.version + 1,
        reserved_by=None,
        reserved_until=None,
    )
    if to in TERMINAL or trigger == WorkTrigger.REOPEN:
        return _released(changed)
    return changed


def lease_live(item: WorkItem, now: datetime) -> bool:
    """A controller holds the item's lease at `now`."""
    expires = item.lease_expires_at
    return expires is not None and parse_iso(expires) > now


def reservation_live(item: WorkItem, now: datetime) -> bool:
    """A wake launched a controller that may still claim the item at `now`."""
    until = item.reserved_until
    return item.reserved_by is not None and until is not None and parse_iso(until) > now


def reserve(item: WorkItem, run_id: str, now: datetime, seconds: int) -> WorkItem:
    """The item with a wake's launch reservation: run `run_id` launched its controller,
    which has until now + `seconds` to claim it. Refused (409) while a controller holds
    the lease or another wake's reservation is live, and for terminal work."""
    if is_terminal(item.state):
        raise Conflict(
            f"work '{item.work_id}' is {item.state}: nothing is woken for it",
            reason="illegal_transition",
            state=item.state,
        )
    if lease_live(item, now):
        raise Conflict(
            f"work '{item.work_id}' is held by {item.lease_owner} until {item.lease_expires_at}",
            reason="lease_held",
            owner=item.lease_owner,
        )
    if reservation_live(item, now) and item.reserved_by != run_id:
        raise Conflict(
            f"a wake of work '{item.work_id}' ({item.reserved_by}) may still be claimed "
            f"until {item.reserved_until}",
            reason="wake_pending",
            run=item.reserved_by,
        )
    return dataclasses.replace(
        item,
        reserved_by=run_id,
        reserved_until=iso(now + timedelta(seconds=seconds)),
        updated_at=iso(now),
        version=item.version + 1,
    )


def unreserved(item: WorkItem, now: str) -> WorkItem:
    """The item with its pending wake's reservation dropped (it ended unclaimed)."""
    return dataclasses.replace(
        item, reserved_by=None, reserved_until=None, updated_at=now, version=item.version + 1
    )


def claim(
    item: WorkItem, owner: str, session: str, now: datetime, ttl: timedelta = DEFAULT_LEASE
) -> WorkItem:
    """`continue`: `owner` takes (or renews) the controller lease until now + ttl and
    the item becomes active. Refused (409, reason `lease_held`) while another owner's
    lease is live; a terminal item refuses (`illegal_transition`)."""
    if not timedelta(0) < ttl <= MAX_LEASE:
        raise Unprocessable(f"a lease lasts more than 0s and at most {MAX_LEASE}", reason="bad_ttl")
    if lease_live(item, now) and item.lease_owner != owner:
        raise Conflict(
            f"work '{item.work_id}' is held by {item.lease_owner} until {item.lease_expires_at}",
            reason="lease_held",
            owner=item.lease_owner,
            expires=item.lease_expires_at,
        )
    at = iso(now)
    moved = move(item, WorkTrigger.CONTINUE, at)
    until = iso(now + ttl)
    return dataclasses.replace(
        moved, lease_owner=owner, lease_session=session, lease_expires_at=until
    )


def _released(item: WorkItem) -> WorkItem:
    return dataclasses.replace(item, lease_owner=None, lease_session=None, lease_expires_at=None)


def as_dict(item: WorkItem) -> dict[str, Any]:
    """The wire form (camelCase, as the HTTP API and `--json` answer)."""
    return {
        "workId": item.work_id,
        "semanticKey": item.semantic_key,
        "title": item.title,
        "state": item.state,
        "repo": item.repo,
        "context": item.context,
        "createdBy": item.created_by,
        "createdAt": item.created_at,
        "updatedAt": item.updated_at,
        "version": item.version,
        "lease": {
            "owner": item.lease_owner,
            "session": item.lease_session,
            "expiresAt": item.lease_expires_at,
        },
    }


class WorkGate(StrEnum):
    """What re-reading the work item says a work-bound firing may do (docs/work.md),
    decided before anything is launched or any page opened."""

    PROCEED = "proceed"
    MISSING = "work_missing"  # no such item: the loop pauses (journaled)
    DONE = "work_done"  # terminal: the loop is disabled, the occurrence `nothing_to_do`
    CONTROLLER_ACTIVE = "controller_active"  # a live lease: this firing is a no-op


def gate(item: WorkItem | None, now: datetime) -> WorkGate:
    """The gate of one firing over the item as the decision's transaction read it."""
    if item is None:
        return WorkGate.MISSING
    if is_terminal(item.state):
        return WorkGate.DONE
    if lease_live(item, now):
        return WorkGate.CONTROLLER_ACTIVE
    return WorkGate.PROCEED


MAX_REQUEST_ID = 200


# An instance's loop name: its shape and its work item, `nudge-repair@work-c35a...`. A
# declared loop's name never holds `@`, so an instance never takes a declared loop's.
INSTANCE_SEP: Final = "@"


def instance_name(shape: str, work_id: str) -> str:
    """The loop name of the instance of `shape` bound to `work_id`."""
    return f"{shape}{INSTANCE_SEP}{work_id}"


def parse_instance(name: str) -> tuple[str, str] | None:
    """(shape, work id) of an instance's loop name; None for any other name."""
    shape, sep, work_id = name.partition(INSTANCE_SEP)
    if not sep or not shape or not work_id.startswith("work-"):
        return None
    return shape, work_id


def binding_id_for(work_id: str, shape: str) -> str:
    """An instance's id: its work item and shape (one instance per pair)."""
    return stable_id("bind", f"{work_id}\n{shape}")


def bind(
    item: WorkItem,
    shape: str,
    request_id: str,
    by_request: WorkBinding | None,
    by_pair: WorkBinding | None,
    actor: str,
    now: str,
) -> tuple[WorkBinding, bool]:
    """The instance that answers a bind request, and whether it is new. The same
    request id answers what it made; the same (work, shape) under another request id
    answers the instance that exists; terminal work binds nothing (409
    `illegal_transition`); a request id reused for another pair is 409
    `request_reused`."""
    if not request_id.strip() or len(request_id) > MAX_REQUEST_ID:
        raise Unprocessable(
            f"a request id is 1 to {MAX_REQUEST_ID} characters", reason="bad_request_id"
        )
    if by_request is not None:
        if (by_request.work_id, by_request.shape) != (item.work_id, shape):
            raise Conflict(
                f"request '{request_id}' bound {by_request.shape} to {by_request.work_id}",
                reason="request_reused",
                binding=by_request.binding_id,
            )
        return by_request, False
    if by_pair is not None:
        return by_pair, False
    if is_terminal(item.state):
        raise Conflict(
            f"work '{item.work_id}' is {item.state}: nothing binds to it",
            reason="illegal_transition",
            state=item.state,
        )
    made = WorkBinding(
        binding_id_for(item.work_id, shape),
        item.work_id,
        shape,
        request_id,
        BindingState.SHADOW,
        actor,
        now,
        now,
    )
    return made, True


def binding_dict(b: WorkBinding) -> dict[str, Any]:
    """The wire form of an instance; `pendingGraduation` is the graduation deferred to
    the next serve start (None when none is pending)."""
    return {
        "bindingId": b.binding_id,
        "workId": b.work_id,
        "shape": b.shape,
        "loop": instance_name(b.shape, b.work_id),
        "requestId": b.request_id,
        "state": b.state,
        "createdBy": b.created_by,
        "createdAt": b.created_at,
        "updatedAt": b.updated_at,
        "version": b.version,
        "pendingGraduation": pending_dict(b),
    }


def pending_dict(b: WorkBinding) -> dict[str, Any] | None:
    """The graduation deferred to the next serve start, as the wire has it."""
    if b.graduation_requested_at is None:
        return None
    return {
        "requestedBy": b.graduation_requested_by,
        "requestedAt": b.graduation_requested_at,
        "note": b.graduation_note or "",
    }


# ---- graduating an instance out of shadow (docs/work.md#graduating-an-instance) ----------


def is_pending(b: WorkBinding) -> bool:
    """A graduation of the instance waits for the next serve start."""
    return b.graduation_requested_at is not None


def graduate(
    binding: WorkBinding,
    graduates: bool,
    deferred: bool,
    actor: str,
    now: str,
    note: str = "",
    allowed_at: str = "",
    work: WorkItem | None = None,
) -> WorkBinding:
    """The instance after an operator's graduation out of shadow: live at once, or (with
    `deferred`) still in shadow with the request recorded for the next serve start.
    An immediate graduation takes the place of a deferred one pending. Conflict (nothing
    changed) with a `reason`: `shadow_only` when the shape's rule file does not allow it
    (`graduates` False: no reviewed `shadow false`, written at `allowed_at`),
    `illegal_transition` when its work item ended, `not_shadow` for an instance that is
    live, paused or disabled, `graduation_pending` for a second deferral."""
    name = instance_name(binding.shape, binding.work_id)
    if not graduates:
        where = f" in {allowed_at}" if allowed_at else " in its rule file"
        raise Conflict(
            f"'{name}' stays in shadow: shape '{binding.shape}' does not let its instances "
            f"graduate; a reviewed `shadow false`{where} allows it",
            reason="shadow_only",
            loop=name,
        )
    if work is not None and is_terminal(work.state):
        raise Conflict(
            f"work '{work.work_id}' is {work.state}: its instance '{name}' does not graduate",
            reason="illegal_transition",
            state=work.state,
        )
    if binding.state != BindingState.SHADOW:
        raise Conflict(
            f"'{name}' is {binding.state}, not in shadow: only a shadow instance graduates",
            reason="not_shadow",
            state=binding.state,
        )
    if deferred and is_pending(binding):
        raise Conflict(
            f"'{name}' already graduates at the next restart (asked by "
            f"{binding.graduation_requested_by} at {binding.graduation_requested_at})",
            reason="graduation_pending",
            requestedBy=binding.graduation_requested_by,
            requestedAt=binding.graduation_requested_at,
        )
    bumped = dataclasses.replace(binding, updated_at=now, version=binding.version + 1)
    if deferred:
        return dataclasses.replace(
            bumped,
            graduation_requested_by=actor,
            graduation_requested_at=now,
            graduation_note=note,
        )
    return _undeferred(dataclasses.replace(bumped, state=BindingState.LIVE))


def graduate_at_restart(
    binding: WorkBinding,
    graduates: bool | None,
    now: str,
    work: WorkItem | None = None,
) -> tuple[WorkBinding, str | None]:
    """A deferred graduation, as a serve start applies it: (the instance live, its
    pending mark cleared; None), or, when it may no longer graduate, (the instance as it
    was with its mark cleared; why: `not_shadow` (disabled or paused meanwhile),
    `shadow_only` (the rules no longer allow it), `no_shape` (`graduates` None: the
    shape left the rules), `illegal_transition` (its work ended)). ValueError for an
    instance with nothing pending."""
    if not is_pending(binding):
        raise ValueError(f"no graduation of {binding.binding_id} is pending")
    cleared = _undeferred(dataclasses.replace(binding, updated_at=now, version=binding.version + 1))
    if graduates is None:
        return cleared, "no_shape"
    try:
        live = graduate(binding, graduates, False, "", now, work=work)
    except Conflict as refused:
        return cleared, str(refused.details.get("reason", "refused"))
    return live, None


def _undeferred(b: WorkBinding) -> WorkBinding:
    return dataclasses.replace(
        b, graduation_requested_by=None, graduation_requested_at=None, graduation_note=None
    )
