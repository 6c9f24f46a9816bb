"""What the WhatsApp channel keeps in the store's channel state, and under which keys.

Every key starts with the channel's prefix (``wa`` by default), so two gateways sharing one Redis
may keep apart by prefix. Values are JSON. Nothing here lives only in a process's memory: any
process sharing the store can receive a webhook, deliver a thread's events or decide a button.

================================  ==========================================================  =======
key                               value                                                       ttl
================================  ==========================================================  =======
``{p}:msg:{MessageSid}``          claimed once per inbound message (dedupe)                   24 h
``{p}:sender:{e164}``             ``{address, last_inbound, language, thread_id}``             30 d
``{p}:refused:{e164}``            an unknown sender was told so (once an hour)                1 h
``{p}:conv:{thread_id}``          ``Conversation``: where the thread's events go              30 d
``{p}:cursor:{thread_id}``        ``{seq, part, failures}``: what was delivered               30 d
``{p}:lock:{thread_id}``          the process delivering the thread now                       lease
``{p}:failed:{thread_id}``        the last 50 messages given up on, with why                  30 d
``{p}:appr:{tool_call_id}``       an approval's two button tokens and title                   approval ttl
``{p}:btn:{token}``               one button: ``{tool_call_id, approve, to, actor_id}``       approval ttl
``{p}:btn-used:{token}``          claimed when the button is redeemed                         approval ttl
``{p}:content:{shape}``           the Content sid of one approval text shape                  none
``{p}:sent:{MessageSid}``         what was sent, to resend or explain a failed status         3 d
``{p}:status-last:{MessageSid}``  the last status callback                                    3 d
``{p}:status:{MessageSid}:{st}``  claimed once per status of a message (Twilio repeats them)  3 d
================================  ==========================================================  =======

Each kind of key has a fixed number of parts. Every part but the last has ``%`` and ``:``
percent-encoded, and the last is taken as it is, so no two part lists of one kind give the same
key, and the keys of ordinary parts (sids, numbers, tokens, thread ids) read as they always did.
(The last status used to be ``{p}:status:{MessageSid}``, the claim's kind with one part fewer:
the claim of ``SM1`` being ``delivered`` was the last status of a message ``SM1:delivered``.)
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Any

from gateway.stores import Store

__all__ = ["DAY", "ChannelState", "Conversation", "Cursor"]

DAY = 24 * 3600.0
_KEEP = 30 * DAY
_FAILURES_KEPT = 50


@dataclass(frozen=True, kw_only=True)
class Conversation:
    """Where a thread's events are delivered: one WhatsApp sender."""

    thread_id: str
    to: str
    """``whatsapp:+E164``."""
    e164: str
    actor_id: str
    language: str


@dataclass(kw_only=True)
class Cursor:
    """How far a thread's delivery got.

    Every event with ``seq <= seq`` is delivered; of the next delivery unit (one event, or a
    call's ``tool-completed`` with its ``ui`` events), ``part`` messages were sent (a long text
    or a multi-page document is several). ``failures`` counts the failed rounds of the next
    message, to give up on it in the end (recorded, never silently).
    """

    seq: int
    part: int = 0
    failures: int = 0
    unit: list[int] | None = None
    """With ``part``: the events (by ``seq``, in delivery order) whose messages ``part`` counts."""


def _escape(part: str) -> str:
    """``part`` with ``%`` and ``:`` percent-encoded (unchanged when it holds neither)."""
    if "%" not in part and ":" not in part:
        return part
    return part.replace("%", "%25").replace(":", "%3A")


class ChannelState:
    """Typed access to the channel's keys in a ``Store``."""

    def __init__(self, store: Store, prefix: str = "wa") -> None:
        self.store = store
        self.prefix = prefix

    def key(self, kind: str, *parts: str) -> str:
        """``{prefix}:{kind}:{part}...``: every part but the last escaped (``%`` and ``:``).

        A kind must always take the same number of parts: that is what makes the key of one
        part list never the key of another.
        """
        *head, last = (kind, *parts)
        return ":".join((self.prefix, *map(_escape, head), last))

    # -- inbound ------------------------------------------------------------------------------------

    async def claim_message(self, message_sid: str) -> bool:
        """True the first time a ``MessageSid`` is seen (for 24 h)."""
        return await self.store.channel_claim(self.key("msg", message_sid), ttl=DAY)

    async def sender(self, e164: str) -> dict[str, Any] | None:
        """The sender's record (last inbound time, language, thread)."""
        value = await self.store.channel_get(self.key("sender", e164))
        return value if isinstance(value, dict) else None

    async def touch_sender(self, e164: str, *, address: str, language: str, thread_id: str | None) -> None:
        """Record an inbound message: it opens (or extends) the 24 h window."""
        record = {"address": address, "last_inbound": time.time(), "language": language, "thread_id": thread_id}
        await self.store.channel_set(self.key("sender", e164), record, ttl=_KEEP)

    async def last_inbound(self, e164: str) -> float | None:
        """When the sender last wrote (epoch seconds)."""
        record = await self.sender(e164)
        value = record.get("last_inbound") if record else None
        return float(value) if isinstance(value, int | float) else None

    # -- conversations and delivery -----------------------------------------------------------------

    async def conversation(self, thread_id: str) -> Conversation | None:
        """The thread's WhatsApp conversation, or ``None`` for other threads."""
        value = await self.store.channel_get(self.key("conv", thread_id))
        if not isinstance(value, dict):
            return None
        try:
            return Conversation(**value)
        except TypeError:
            return None

    async def bind(self, conversation: Conversation, *, start_seq: int) -> None:
        """Deliver the thread's events to ``conversation`` from after ``start_seq``.

        The cursor is created only once: a thread bound again keeps its delivery position.
        """
        await self.store.channel_claim(
            self.key("cursor", conversation.thread_id), ttl=_KEEP, value=asdict(Cursor(seq=start_seq))
        )
        await self.store.channel_set(self.key("conv", conversation.thread_id), asdict(conversation), ttl=_KEEP)

    async def cursor(self, thread_id: str) -> Cursor | None:
        """The thread's delivery cursor."""
        value = await self.store.channel_get(self.key("cursor", thread_id))
        if not isinstance(value, dict):
            return None
        unit = value.get("unit")
        return Cursor(
            seq=int(value.get("seq", 0)),
            part=int(value.get("part", 0)),
            failures=int(value.get("failures", 0)),
            unit=[int(seq) for seq in unit] if isinstance(unit, list) else None,
        )

    async def save_cursor(self, thread_id: str, cursor: Cursor) -> None:
        """Move the thread's delivery cursor."""
        await self.store.channel_set(self.key("cursor", thread_id), asdict(cursor), ttl=_KEEP)

    async def lock(self, thread_id: str, owner: str, ttl: float) -> bool:
        """Take the thread's delivery lease; False while another process holds it."""
        return await self.store.channel_claim(self.key("lock", thread_id), ttl=ttl, value=owner)

    async def renew(self, thread_id: str, owner: str, ttl: float) -> None:
        """Extend the lease we hold."""
        if await self.store.channel_get(self.key("lock", thread_id)) == owner:
            await self.store.channel_set(self.key("lock", thread_id), owner, ttl=ttl)

    async def unlock(self, thread_id: str, owner: str) -> None:
        """Give the lease back (only if we still hold it)."""
        if await self.store.channel_get(self.key("lock", thread_id)) == owner:
            await self.store.channel_delete(self.key("lock", thread_id))

    async def record_failure(self, thread_id: str, failure: dict[str, Any]) -> None:
        """Remember a message given up on (the last 50 per thread)."""
        key = self.key("failed", thread_id)
        failures = await self.store.channel_get(key)
        failures = failures if isinstance(failures, list) else []
        failures.append({"at": time.time(), **failure})
        await self.store.channel_set(key, failures[-_FAILURES_KEPT:], ttl=_KEEP)

    async def failures(self, thread_id: str) -> list[dict[str, Any]]:
        """The messages given up on for the thread, oldest first."""
        failures = await self.store.channel_get(self.key("failed", thread_id))
        return failures if isinstance(failures, list) else []

    # -- sent messages and their statuses -----------------------------------------------------------

    async def record_sent(self, message_sid: str, record: dict[str, Any]) -> None:
        """Remember what a ``MessageSid`` carried, for its status callbacks."""
        await self.store.channel_set(self.key("sent", message_sid), record, ttl=3 * DAY)

    async def sent(self, message_sid: str) -> dict[str, Any] | None:
        """What a ``MessageSid`` carried."""
        value = await self.store.channel_get(self.key("sent", message_sid))
        return value if isinstance(value, dict) else None

    async def record_status(self, message_sid: str, status: dict[str, Any]) -> bool:
        """Record a status callback; False when this exact status was already recorded."""
        fresh = await self.store.channel_claim(
            self.key("status", message_sid, str(status.get("status"))), ttl=3 * DAY, value=status
        )
        if fresh:
            await self.store.channel_set(self.key("status-last", message_sid), status, ttl=3 * DAY)
        return fresh

    async def status(self, message_sid: str) -> dict[str, Any] | None:
        """The last status Twilio reported for a message."""
        value = await self.store.channel_get(self.key("status-last", message_sid))
        return value if isinstance(value, dict) else None
