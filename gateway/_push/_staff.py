"""Staff approvers on text channels: an approval a role decides goes to the chats of its people.

When an ``approval-requested`` event names a role (``ApprovalPolicy`` with
``ApprovalRule(approver="staff")``), the requester's chat gets no buttons (they could only
answer "not yours"): it is told that a person at the brand will approve (``waiting_for_staff``),
and each staff chat the port knows (``PushPort.staff_targets``: the configured numbers or users
holding the role, in the requester's tenant) gets the approval card with its buttons, wrapped in
``Forwarded`` so the delivery sends it there. The buttons are the kit's single-use tokens, bound
to that staff member's address and actor: the tap is redeemed as any other (``ChatApprovals``),
by the runtime as the staff actor, whose roles it checks again; the decision resumes the run
wherever it is parked. Then the requester is told the outcome (``staff_approved`` /
``staff_rejected``).

Everything travels through the requester's thread's delivery (its cursor and lease): a card is
sent once per staff chat, by whichever process delivers the thread, even across a crash.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tools import Actor, Confirmation

from .._approvals import REQUESTER
from ..events import ApprovalRequestedEvent, ApprovalSettledEvent
from ._approvals import ApprovalTokens, make_tokens
from ._state import PushState, PushTarget

if TYPE_CHECKING:
    from ._delivery import PushPort

__all__ = ["Forwarded", "StaffMember", "staff_outcome_parts", "staff_request_parts"]

logger = logging.getLogger("gateway.push.staff")


@dataclass(frozen=True, kw_only=True)
class StaffMember:
    """A staff chat a port can reach: where it is, and who is there (with their roles)."""

    target: PushTarget
    actor: Actor


@dataclass(frozen=True)
class Forwarded:
    """A part for another chat than the thread's own (an approval card on a staff member's chat)."""

    target: PushTarget
    part: Any

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = self.part.to_json()
        return {"forwarded_to": self.target.actor_id, **data}


async def staff_tokens(
    state: PushState, event: ApprovalRequestedEvent, member: StaffMember, ttl: float
) -> ApprovalTokens:
    """The approval's tokens for one staff chat, made once (every process and resend gets the same).

    Stored as ``ChatApprovals`` stores its own (``btn:<token>``), so a tap is redeemed the same
    way; bound to the staff member's address and actor.
    """
    key = state.key("appr-staff", event.tool_call_id, member.target.address)
    return await make_tokens(state, key, event, to=member.target.address, actor_id=member.actor.id, ttl=ttl)


async def staff_request_parts(port: PushPort[Any], target: PushTarget, event: ApprovalRequestedEvent) -> list[Any]:
    """The parts of an approval a role decides: the requester's "waiting" line, a card per staff chat."""
    texts = port.texts(target)
    brand = port.services.branding.name
    parts: list[Any] = []
    free = await port._free(event)
    line = texts.waiting_for_staff.format(brand=brand, title=event.confirmation.title)
    parts.extend(free or port.line_parts(target, line))
    record = await port.services.runtime.get_approval(event.tool_call_id)
    if record is None:
        return parts
    policy = port.services.runtime.approval_policy
    ttl = port.delivery.approvals._ttl(event)
    for member in await port.staff_targets(event.approver):
        if member.target.address == target.address or not policy.can_decide(member.actor, record):
            continue  # the requester's own chat, or staff of another tenant
        staff_texts = port.texts(member.target)
        asked = staff_texts.asked_by.format(requester=record.requester_id, channel=texts.via(port.via))
        detail = f"{event.confirmation.detail}\n{asked}" if event.confirmation.detail else asked
        shown = event.model_copy(
            update={
                "confirmation": Confirmation(
                    title=event.confirmation.title, verb=event.confirmation.verb, detail=detail
                )
            }
        )
        tokens = await staff_tokens(port.delivery.state, event, member, ttl)
        cards = await port.approval_parts(member.target, shown, tokens, None)
        parts.extend(Forwarded(member.target, card) for card in cards)
    if not any(isinstance(part, Forwarded) for part in parts):
        logger.info(
            "approval %s needs role %r: no staff chat of this channel holds it", event.tool_call_id, event.approver
        )
    return parts


async def staff_outcome_parts(port: PushPort[Any], event: ApprovalSettledEvent) -> list[Any] | None:
    """The requester's line when staff decided their approval; ``None`` when it was not a role's."""
    record = await port.services.runtime.get_approval(event.tool_call_id)
    if record is None or record.approver == REQUESTER or event.status == "expired":
        return None
    if event.via in port.silent_via:
        return []
    free = await port._free(event)
    if free:
        return free
    texts = port.texts()
    brand = port.services.branding.name
    sentence = texts.staff_approved if event.status == "approved" else texts.staff_rejected
    line = sentence.format(brand=brand, title=record.confirmation.title)
    if event.status != "approved" and record.reason:
        line = f"{line} ({record.reason})"
    return port.line_parts(port.target, line)
