"""Approvals on text channels: buttons whose payloads are single-use server tokens, and typed answers.

An ``approval-requested`` event gets two tokens, made once per approval (every process and every
resend sends the same), and a third, "always" (approve and remember), where the policy lets the
decision be remembered: ``{p}:btn:{token}`` names the tool call, the decision, and the address
and actor it was sent to. A button carries ``agora:<token>``; nothing about the decision can be
read from it or forged. Redeeming a token claims it once (``{p}:btn-used:{token}``), so a
second tap, on any process, reads "already decided". A typed ``yes`` / ``no 2`` decides the
actor's pending approvals of the thread in order; in a staff member's chat, where nothing of
the chat's own thread waits, it decides the role's approvals sent there (oldest first), as the
staff card's instruction says.
"""

from __future__ import annotations

import logging
import secrets
import time
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from tools import Actor

from .._approvals import REQUESTER
from .._errors import (
    ApprovalExpiredError,
    ApprovalForbiddenError,
    ApprovalNotFoundError,
    ApprovalSettledError,
    RememberRefusedError,
)
from .._logs import actor_hash
from ..events import ApprovalRequestedEvent
from ._state import DAY, PushState, PushTarget
from ._texts import ChatTexts

if TYPE_CHECKING:
    from .._channel import ChannelRuntime
    from ..stores import ApprovalRecord

__all__ = ["BUTTON_PREFIX", "ApprovalTokens", "ChatApprovals", "Redeemed"]

logger = logging.getLogger("gateway.push.approvals")

BUTTON_PREFIX = "agora:"
"""Every button payload the gateway sends starts with this."""


@dataclass(frozen=True, kw_only=True)
class ApprovalTokens:
    """The single-use tokens of one approval (url-safe, 24 characters).

    ``always`` (approve and remember) is empty where the decision may not be remembered.
    """

    approve: str
    reject: str
    title: str
    always: str = ""

    def payload(self, approve: bool, *, remember: bool = False) -> str:
        """The button payload: ``agora:<token>`` (``remember``: the "always" button's)."""
        if remember:
            return BUTTON_PREFIX + self.always
        return BUTTON_PREFIX + (self.approve if approve else self.reject)


@dataclass(frozen=True, kw_only=True)
class Redeemed:
    """What a button tap did: ``decided``, or ``reply`` says why not (not yours, already decided...)."""

    decided: bool
    approve: bool | None = None
    tool_call_id: str | None = None
    reply: str | None = None


class ChatApprovals:
    """Makes approval tokens and redeems taps and typed answers, in a channel's state."""

    def __init__(self, state: PushState) -> None:
        self.state = state

    async def tokens(
        self, event: ApprovalRequestedEvent, target: PushTarget, *, always: bool = False
    ) -> ApprovalTokens:
        """The approval's tokens, made once (every process and every resend gets the same).

        ``always`` adds the "approve and remember" token (where the policy allows remembering).
        """
        key = self.state.key("appr", event.tool_call_id)
        return await make_tokens(
            self.state, key, event, to=target.address, actor_id=target.actor_id, ttl=self._ttl(event), always=always
        )

    async def title(self, tool_call_id: str) -> str | None:
        """The confirmation title an approval was sent with, while its tokens live."""
        record = await self.state.get(self.state.key("appr", tool_call_id))
        title = record.get("title") if isinstance(record, dict) else None
        return title if isinstance(title, str) else None

    @staticmethod
    def _ttl(event: ApprovalRequestedEvent) -> float:
        """Tokens outlive the approval by a day, so a late tap reads "expired", not "unknown"."""
        try:
            remaining = datetime.fromisoformat(event.expires_at).timestamp() - time.time()
        except ValueError:
            remaining = DAY
        return max(60.0, remaining) + DAY

    async def button(self, token: str) -> dict[str, Any] | None:
        """What a token names (``{tool_call_id, approve, to, actor_id}``), or ``None``."""
        value = await self.state.get(self.state.key("btn", token)) if token else None
        return value if isinstance(value, dict) else None

    async def redeem(
        self, runtime: ChannelRuntime, payload: str, *, address: str, actor: Actor, texts: ChatTexts, via: str
    ) -> Redeemed:
        """Decide the approval a tapped button names.

        The token must have been sent to this address and actor and not used; the runtime then
        checks that the actor may decide and that the approval is still pending. Nothing is
        decided when ``reply`` is set.
        """
        token = payload.removeprefix(BUTTON_PREFIX)
        button = await self.button(token)
        if button is None:
            return Redeemed(decided=False, reply=texts.expired)
        if button.get("to") != address or button.get("actor_id") != actor.id:
            # Both by their pseudonyms (gateway._logs): a number is never written to the log.
            tapped, owner = actor_hash(address), actor_hash(str(button.get("to")))
            logger.warning("sender %s tapped a button sent to %s; refused", tapped, owner)
            return Redeemed(decided=False, reply=texts.not_yours)
        used_key = self.state.key("btn-used", token)
        if not await self.state.claim(used_key, ttl=2 * DAY):
            return Redeemed(decided=False, reply=texts.already_decided)
        tool_call_id = str(button["tool_call_id"])
        approve = bool(button["approve"])
        try:
            await runtime.decide(tool_call_id, actor, approve=approve, via=via, remember=bool(button.get("remember")))
        except RememberRefusedError:  # the policy changed since the button was sent
            await self.state.delete(used_key)
            return Redeemed(decided=False, tool_call_id=tool_call_id, reply=texts.remember_refused)
        except ApprovalSettledError:
            reply = await self._settled_reply(runtime, tool_call_id, texts)
            return Redeemed(decided=False, tool_call_id=tool_call_id, reply=reply)
        except (ApprovalExpiredError, ApprovalNotFoundError):
            return Redeemed(decided=False, tool_call_id=tool_call_id, reply=texts.expired)
        except ApprovalForbiddenError:
            return Redeemed(decided=False, tool_call_id=tool_call_id, reply=texts.not_yours)
        except Exception:
            await self.state.delete(used_key)  # not decided: the button still works
            raise
        return Redeemed(decided=True, approve=approve, tool_call_id=tool_call_id)

    @staticmethod
    async def _settled_reply(runtime: ChannelRuntime, tool_call_id: str, texts: ChatTexts) -> str:
        """``already_decided``, or ``expired`` for an approval that lapsed (the runtime calls both settled)."""
        record = await runtime.get_approval(tool_call_id)
        return texts.expired if record is not None and record.status == "expired" else texts.already_decided

    async def decide_text(
        self,
        runtime: ChannelRuntime,
        thread_id: str,
        decision: tuple[bool, int | None],
        *,
        actor: Actor,
        texts: ChatTexts,
        via: str,
        remember: bool = False,
    ) -> str | None:
        """Decide by a typed ``yes`` / ``no [n]`` (``yes always``: ``remember``); the reply to send, ``None`` for none.

        A ``remember`` the policy forbids (a role decides: four eyes) decides nothing and is
        answered ``remember_refused``.

        Raises:
            LookupError: Nothing waits for this actor and no number was given: the text is an
                ordinary message, not a decision.
        """
        approve, number = decision
        policy = runtime.approval_policy
        pending = [a for a in await runtime.pending_approvals(thread_id) if policy.can_decide(actor, a)]
        if not pending and not policy.approver_roles().isdisjoint(actor.roles):
            pending = await self._sent_to_staff(runtime, actor)
        if not pending:
            if number is None:
                raise LookupError("no pending approval")
            return texts.nothing_pending
        if number is None and len(pending) > 1:
            items = "\n".join(f"{i}. {a.confirmation.title}" for i, a in enumerate(pending, 1))
            return texts.which_one.format(items=items)
        index = (number or 1) - 1
        if not 0 <= index < len(pending):
            return texts.nothing_pending
        try:
            await runtime.decide(pending[index].tool_call_id, actor, approve=approve, via=via, remember=remember)
        except RememberRefusedError:
            return texts.remember_refused
        except ApprovalSettledError:
            return await self._settled_reply(runtime, pending[index].tool_call_id, texts)
        except (ApprovalExpiredError, ApprovalNotFoundError):
            return texts.expired
        except ApprovalForbiddenError:
            return texts.not_yours
        return None

    @staticmethod
    async def _sent_to_staff(runtime: ChannelRuntime, actor: Actor) -> list[ApprovalRecord]:
        """What waits for a staff member, oldest first: their chat's cards say "reply yes or no".

        The role's pending approvals of other threads that ``actor`` may decide (the newest
        ``_STAFF_SCAN`` the store holds): a typed answer in a staff chat decides them as a tap would.
        """
        policy = runtime.approval_policy
        records = await runtime.store.open_approvals(limit=_STAFF_SCAN)
        mine = [a for a in records if a.approver != REQUESTER and not a.lapsed() and policy.can_decide(actor, a)]
        return mine[::-1]


_STAFF_SCAN = 100
"""Pending approvals a staff member's typed answer looks through."""


async def make_tokens(
    state: PushState,
    key: str,
    event: ApprovalRequestedEvent,
    *,
    to: str,
    actor_id: str,
    ttl: float,
    always: bool = False,
) -> ApprovalTokens:
    """An approval's button tokens for one chat, made once under ``key`` (every process and resend gets the same).

    Each token is stored as ``btn:<token>``, bound to the chat's address ``to`` and ``actor_id``,
    so a tap is redeemed by ``ChatApprovals.redeem`` whoever's chat it is (the requester's, or a
    staff member's). ``always`` adds the "approve and remember" token.
    """
    existing = await state.get(key)
    if isinstance(existing, dict):
        return _tokens(existing)
    record = {
        "approve": secrets.token_urlsafe(18),
        "reject": secrets.token_urlsafe(18),
        "title": event.confirmation.title,
        "thread_id": event.thread_id,
    }
    decisions = ["approve", "reject"]
    if always:
        record["always"] = secrets.token_urlsafe(18)
        decisions.append("always")
    for decision in decisions:
        button = {
            "tool_call_id": event.tool_call_id,
            "approve": decision != "reject",
            "remember": decision == "always",
            "to": to,
            "actor_id": actor_id,
        }
        await state.set(state.key("btn", record[decision]), button, ttl=ttl)
    if await state.claim(key, ttl=ttl, value=record):
        return _tokens(record)
    for decision in decisions:  # another process won: its tokens are the ones sent
        await state.delete(state.key("btn", record[decision]))
    existing = await state.get(key)
    return _tokens(existing if isinstance(existing, dict) else record)


def _tokens(record: dict[str, Any]) -> ApprovalTokens:
    return ApprovalTokens(
        approve=str(record["approve"]),
        reject=str(record["reject"]),
        title=str(record.get("title") or ""),
        always=str(record.get("always") or ""),
    )
