"""Who writes on WhatsApp: the sender, the actor it resolves to, its thread and its language."""

from __future__ import annotations

import hashlib
import hmac
import logging
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from gateway import PushTarget, RoleMap, StaffMember
from tools import Actor

from ._options import WhatsAppSenderOptions

__all__ = [
    "SenderResolver",
    "SettingsSenderResolver",
    "ThreadNamer",
    "WhatsAppSender",
    "language_for",
    "staff_members",
    "thread_per_sender",
]

logger = logging.getLogger("channels.whatsapp")

_E164 = re.compile(r"^\+[1-9]\d{6,14}$")


def normalize_number(value: str) -> str:
    """``whatsapp:+1 555-123-4567`` or ``15551234567`` -> ``+15551234567`` (not validated)."""
    digits = re.sub(r"[^\d]", "", value.removeprefix("whatsapp:"))
    return f"+{digits}" if digits else ""


@dataclass(frozen=True, kw_only=True)
class WhatsAppSender:
    """The person behind an inbound message, as Twilio describes them."""

    address: str
    """Twilio's ``From``: ``whatsapp:+E164``. Replies go to this address."""
    e164: str
    """The number, ``+15551234567``."""
    profile_name: str | None = None
    """Their WhatsApp profile name (``ProfileName``), when Twilio sends it."""

    @classmethod
    def from_webhook(cls, from_: str, wa_id: str | None = None, profile_name: str | None = None) -> WhatsAppSender:
        """The sender of a webhook's ``From`` / ``WaId`` / ``ProfileName``.

        Raises:
            ValueError: Neither field holds a valid E.164 number.
        """
        e164 = normalize_number(wa_id) if wa_id else normalize_number(from_)
        if not _E164.match(e164):
            raise ValueError(f"not a WhatsApp sender: {from_!r}")
        address = from_ if from_.startswith("whatsapp:") else f"whatsapp:{e164}"
        return cls(address=address, e164=e164, profile_name=profile_name or None)


@runtime_checkable
class SenderResolver(Protocol):
    """Maps a WhatsApp sender to the ``Actor`` their turns act for."""

    async def resolve(self, sender: WhatsAppSender) -> Actor | None:
        """The sender's actor; ``None`` refuses them (they get a polite refusal, no turn)."""
        ...


class SettingsSenderResolver(RoleMap):
    """The default resolver: actor ``whatsapp:+E164`` with roles from a map (``gateway.RoleMap``).

    Senders in ``roles`` get their roles; the others get ``default_roles`` when
    ``allow_unknown``, and are refused otherwise.
    """

    def __init__(
        self,
        *,
        roles: Mapping[str, Sequence[str]] | None = None,
        default_roles: Sequence[str] = ("member",),
        allow_unknown: bool = True,
    ) -> None:
        super().__init__(
            roles=roles, default_roles=default_roles, allow_unknown=allow_unknown, normalize=normalize_number
        )

    @classmethod
    def from_options(cls, options: WhatsAppSenderOptions) -> SettingsSenderResolver:
        """``AGORA_WHATSAPP_ROLES``, ``AGORA_WHATSAPP_DEFAULT_ROLES`` and ``AGORA_WHATSAPP_ALLOW_UNKNOWN``."""
        return cls(roles=options.roles, default_roles=options.default_roles, allow_unknown=options.allow_unknown)

    async def resolve(self, sender: WhatsAppSender) -> Actor | None:
        """The sender's actor, or ``None`` for an unknown sender when those are refused."""
        return self.actor(sender.e164, f"whatsapp:{sender.e164}")


ThreadNamer = Callable[[Actor, WhatsAppSender], str]
"""Names the thread of a sender's turns; it must match ``[A-Za-z0-9_.:-]{1,200}`` so the web can
open it too."""


def thread_per_sender(actor: Actor, sender: WhatsAppSender) -> str:
    """One thread per sender, named by the number: ``whatsapp-15551234567``.

    Predictable: another channel could open that thread first. Only for deployments where no
    other channel lets people choose thread ids; the default is ``keyed_thread_namer``.
    """
    return f"whatsapp-{sender.e164.lstrip('+')}"


def keyed_thread_namer(secret: bytes) -> ThreadNamer:
    """One thread per sender, named by an HMAC of the number: ``whatsapp-<24 hex digits>``.

    Nobody who lacks the gateway's secret can guess a sender's thread id, so no other channel
    (a web socket, an AG-UI or A2A caller choosing ids) can open it before the sender does.
    """

    def name(actor: Actor, sender: WhatsAppSender) -> str:
        digest = hmac.new(secret, f"whatsapp-thread:{sender.e164}".encode(), hashlib.sha256).hexdigest()
        return f"whatsapp-{digest[:24]}"

    return name


_CALLING_CODES = {"55": "pt-BR"}
"""Country calling codes whose people most likely read the built-in non-English tables.

Twilio does not forward the WhatsApp app's language, so the number is the only hint."""


def language_for(sender: WhatsAppSender, languages: Mapping[str, Sequence[str]] | None = None) -> str:
    """The sender's language: ``whatsapp_languages`` first, then their country code, else ``en``."""
    for number, tags in (languages or {}).items():
        if normalize_number(number) == sender.e164 and tags:
            return tags[0]
    for code, tag in _CALLING_CODES.items():
        if sender.e164.startswith(f"+{code}"):
            return tag
    return "en"


async def staff_members(
    resolver: SenderResolver,
    role: str,
    *,
    thread_for: Callable[[Actor, WhatsAppSender], str],
    languages: Mapping[str, Sequence[str]] | None,
    extra: Callable[[WhatsAppSender], dict[str, str]],
) -> list[StaffMember]:
    """The chats of the configured numbers (``AGORA_WHATSAPP_ROLES``) holding ``role``, on either provider.

    Each number is resolved by the channel's resolver, so the actor a card is bound to is the one
    its tap resolves to. A custom resolver that is no ``RoleMap`` names no staff. ``extra`` is
    what the provider's targets carry (Twilio: the number; the Cloud API: the ``wa_id`` too).
    """
    members: list[StaffMember] = []

    roles = resolver.roles if isinstance(resolver, RoleMap) else {}
    for number, held in roles.items():
        if role not in held:
            continue
        try:
            sender = WhatsAppSender.from_webhook(f"whatsapp:{number}")
        except ValueError:
            logger.warning("AGORA_WHATSAPP_ROLES holds an entry that is not a number; skipped for staff")
            continue
        actor = await resolver.resolve(sender)
        if actor is None or role not in actor.roles:
            continue
        target = PushTarget(
            thread_id=thread_for(actor, sender),
            address=sender.address,
            actor_id=actor.id,
            language=language_for(sender, languages),
            extra=extra(sender),
        )
        members.append(StaffMember(target=target, actor=actor))
    return members
