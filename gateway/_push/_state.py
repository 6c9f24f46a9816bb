"""A channel's keys in the store's channel state, and what push delivery keeps there.

Every key starts with the channel's prefix (``wa``, ``tg``...), so channels sharing one store keep
apart. Values are JSON. Nothing here lives only in a process's memory: any process sharing the
store can receive a webhook, deliver a thread's events or redeem a button.

================================  ==========================================================  =======
key                               value                                                       ttl
================================  ==========================================================  =======
``{p}:conv:{thread_id}``          ``PushTarget``: where the thread's events go                30 d
``{p}:cursor:{thread_id}``        ``{seq, part, failures, unit}``: what was delivered         30 d
``{p}:lock:{thread_id}``          the process delivering the thread now                       lease
``{p}:failed:{thread_id}``        the last 50 messages given up on, with why                  30 d
``{p}:sent:{message_id}``         what was sent, to resend or explain a failed status         3 d
``{p}:appr:{tool_call_id}``       an approval's two button tokens and title                   approval ttl
``{p}:btn:{token}``               one button: ``{tool_call_id, approve, to, actor_id}``       approval ttl
``{p}:btn-used:{token}``          claimed when the button is redeemed                         approval ttl
``{p}:refused:{address}``         an unknown sender was told so (once an hour)                1 h
================================  ==========================================================  =======

Each kind of key has a fixed number of parts. Every part but the last has ``%`` and ``:``
percent-encoded, and the last is taken as it is, so no two part lists of one kind give the same
key, and the keys of ordinary parts (sids, numbers, tokens, thread ids) read as they always did.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from ..stores import Store

__all__ = ["DAY", "ChannelState", "PushCursor", "PushState", "PushTarget"]

logger = logging.getLogger("gateway.push")

DAY = 24 * 3600.0
KEEP = 30 * DAY
_FAILURES_KEPT = 50

JsonValue = Any
"""A value the store keeps as JSON (``dict``, ``list``, ``str``, number, ``bool`` or ``None``)."""


def _escape(part: str) -> str:
    """``part`` with ``%`` and ``:`` percent-encoded (unchanged when it holds neither)."""
    if "%" not in part and ":" not in part:
        return part
    return part.replace("%", "%25").replace(":", "%3A")


class ChannelState:
    """A channel's own keys in a ``Store``'s channel state, under ``prefix``."""

    def __init__(self, store: Store, prefix: str) -> None:
        self.store = store
        self.prefix = prefix

    def key(self, kind: str, *parts: str) -> str:
        """``{prefix}:{kind}:{part}...``: every part but the last escaped (``%`` and ``:``).

        A kind must always take the same number of parts: that is what makes the key of one
        part list never the key of another.
        """
        *head, last = (kind, *parts)
        return ":".join((self.prefix, *map(_escape, head), last))

    async def get(self, key: str) -> JsonValue:
        """The value at ``key`` (``None`` when absent or expired)."""
        return await self.store.channel_get(key)

    async def set(self, key: str, value: JsonValue, *, ttl: float | None = None) -> None:
        """Store ``value`` at ``key``, expiring after ``ttl`` seconds when given."""
        await self.store.channel_set(key, value, ttl=ttl)

    async def claim(self, key: str, *, ttl: float, value: JsonValue = True) -> bool:
        """Set ``key`` only if absent (a webhook's message id seen once, a lease); True if claimed."""
        return await self.store.channel_claim(key, ttl=ttl, value=value)

    async def delete(self, key: str) -> None:
        """Drop ``key``."""
        await self.store.channel_delete(key)

    async def delete_if(self, key: str, expected: JsonValue) -> bool:
        """Drop ``key`` only while it holds ``expected`` (atomically); True if dropped."""
        return await self.store.channel_delete_if(key, expected)

    async def renew_if(self, key: str, expected: JsonValue, *, ttl: float) -> bool:
        """Give ``key`` a new ``ttl`` only while it holds ``expected`` (atomically); True if renewed."""
        return await self.store.channel_renew_if(key, expected, ttl=ttl)


@dataclass(frozen=True, kw_only=True)
class PushTarget:
    """Where one thread's events are pushed: a person (or group) on one channel."""

    thread_id: str
    address: str
    """The channel's own address: ``whatsapp:+E164``, a Telegram chat id..."""
    actor_id: str
    """Who the thread is for: buttons sent there are theirs only."""
    language: str = "en"
    extra: Mapping[str, str] = field(default_factory=dict)
    """What else the channel needs to reach them (``{"e164": ...}``, ``{"chat_type": "group"}``)."""

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["extra"] = dict(self.extra)
        return data

    @classmethod
    def from_json(cls, value: Any) -> PushTarget | None:
        """The target ``to_json`` wrote, or ``None`` for anything else.

        Also reads the WhatsApp channel's earlier form (``{thread_id, to, e164, actor_id,
        language}``), so conversations bound before the kit keep their delivery.
        """
        if not isinstance(value, dict):
            return None
        try:
            if "to" in value and "address" not in value:
                return cls(
                    thread_id=str(value["thread_id"]),
                    address=str(value["to"]),
                    actor_id=str(value["actor_id"]),
                    language=str(value.get("language") or "en"),
                    extra={"e164": str(value.get("e164") or "")},
                )
            extra = value.get("extra") or {}
            return cls(
                thread_id=str(value["thread_id"]),
                address=str(value["address"]),
                actor_id=str(value["actor_id"]),
                language=str(value.get("language") or "en"),
                extra={str(k): str(v) for k, v in extra.items()} if isinstance(extra, dict) else {},
            )
        except KeyError:
            return None


@dataclass(kw_only=True)
class PushCursor:
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


class PushState(ChannelState):
    """The keys of push delivery: conversations, cursors, leases, failures and sent messages."""

    async def target(self, thread_id: str) -> PushTarget | None:
        """Where the thread's events go, or ``None`` for threads of other channels."""
        return PushTarget.from_json(await self.get(self.key("conv", thread_id)))

    async def bind(self, target: PushTarget, *, start_seq: int) -> None:
        """Deliver the thread's events to ``target`` from after ``start_seq``.

        The cursor is created only once: a thread bound again keeps its delivery position.
        """
        await self.claim(self.key("cursor", target.thread_id), ttl=KEEP, value=asdict(PushCursor(seq=start_seq)))
        await self.set(self.key("conv", target.thread_id), target.to_json(), ttl=KEEP)

    async def cursor(self, thread_id: str) -> PushCursor | None:
        """The thread's delivery cursor."""
        value = await self.get(self.key("cursor", thread_id))
        if not isinstance(value, dict):
            return None
        unit = value.get("unit")
        return PushCursor(
            seq=int(value.get("seq", 0)),
            part=int(value.get("part", 0)),
            failures=int(value.get("failures", 0)),
            unit=[int(seq) for seq in unit] if isinstance(unit, list) else None,
        )

    async def save_cursor(self, thread_id: str, cursor: PushCursor) -> None:
        """Move the thread's delivery cursor."""
        await self.set(self.key("cursor", thread_id), asdict(cursor), ttl=KEEP)

    async def lock(self, thread_id: str, owner: str, ttl: float) -> bool:
        """Take the thread's delivery lease; False while another process holds it."""
        return await self.claim(self.key("lock", thread_id), ttl=ttl, value=owner)

    async def renew(self, thread_id: str, owner: str, ttl: float) -> bool:
        """Extend the lease we hold (atomically: never one another process took since)."""
        return await self.renew_if(self.key("lock", thread_id), owner, ttl=ttl)

    async def unlock(self, thread_id: str, owner: str) -> bool:
        """Give the lease back, only if we still hold it (atomically)."""
        return await self.delete_if(self.key("lock", thread_id), owner)

    async def record_failure(self, thread_id: str, failure: dict[str, Any]) -> None:
        """Remember a message given up on (the last 50 per thread)."""
        key = self.key("failed", thread_id)
        failures = await self.get(key)
        failures = failures if isinstance(failures, list) else []
        failures.append({"at": time.time(), **failure})
        await self.set(key, failures[-_FAILURES_KEPT:], ttl=KEEP)

    async def failures(self, thread_id: str) -> list[dict[str, Any]]:
        """The messages given up on for the thread, oldest first."""
        failures = await self.get(self.key("failed", thread_id))
        return failures if isinstance(failures, list) else []

    async def give_up(self, sent: dict[str, Any], reason: str) -> None:
        """Record as given up a message ``record_sent`` kept (a failed status that cannot be resent)."""
        thread_id = sent.get("thread_id")
        logger.error(
            "giving up on message seq %s part %s of thread %s: %s", sent.get("seq"), sent.get("part"), thread_id, reason
        )
        if isinstance(thread_id, str):
            failure = {"seq": sent.get("seq"), "part": sent.get("part"), "event": sent.get("event"), "reason": reason}
            await self.record_failure(thread_id, failure)

    async def record_sent(self, message_id: str, record: dict[str, Any]) -> None:
        """Remember what a provider message id carried (for status callbacks and edits)."""
        await self.set(self.key("sent", message_id), record, ttl=3 * DAY)

    async def sent(self, message_id: str) -> dict[str, Any] | None:
        """What a provider message id carried."""
        value = await self.get(self.key("sent", message_id))
        return value if isinstance(value, dict) else None
