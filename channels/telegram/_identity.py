"""Who writes on Telegram: the actor a user resolves to, the thread of a chat and the user's language."""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol, runtime_checkable

from gateway import RoleMap
from tools import Actor

from ._options import TelegramOptions
from ._updates import Chat, User

__all__ = ["OptionsUserResolver", "ThreadNamer", "UserResolver", "keyed_thread_namer", "language_for"]


@runtime_checkable
class UserResolver(Protocol):
    """Maps a Telegram user to the ``Actor`` their turns act for."""

    async def resolve(self, user: User) -> Actor | None:
        """The user's actor; ``None`` refuses them (a polite refusal, once an hour; no turn)."""
        ...


class OptionsUserResolver(RoleMap):
    """The default resolver: actor ``telegram:<user id>`` with roles from ``TelegramOptions``.

    Users in ``roles`` get their roles; the others get ``default_roles`` when ``allow_unknown``,
    and are refused otherwise.
    """

    @classmethod
    def from_options(cls, options: TelegramOptions) -> OptionsUserResolver:
        """``roles``, ``default_roles`` and ``allow_unknown`` of the options."""
        return cls(roles=options.roles, default_roles=options.default_roles, allow_unknown=options.allow_unknown)

    async def resolve(self, user: User) -> Actor | None:
        """The user's actor, or ``None`` for an unknown user when those are refused."""
        return self.actor(str(user.id), f"telegram:{user.id}")


ThreadNamer = Callable[[Chat, User], str]
"""Names the thread of a chat's turns; it must match ``[A-Za-z0-9_.:-]{1,200}``."""


def keyed_thread_namer(secret: bytes) -> ThreadNamer:
    """One thread per private chat, one per member in a group: ``telegram-<24 hex digits>``.

    The name is an HMAC under the gateway's secret, so no other channel (a web socket, an AG-UI
    or A2A caller choosing ids) can guess and open a Telegram thread first. A thread belongs to
    one actor (the runtime refuses anyone else's turns on it), so in a group each member who
    addresses the bot has a thread of their own; all of them are delivered to the group.
    """

    def name(chat: Chat, user: User) -> str:
        who = f"{chat.id}" if chat.type == "private" else f"{chat.id}:{user.id}"
        digest = hmac.new(secret, f"telegram-thread:{who}".encode(), hashlib.sha256).hexdigest()
        return f"telegram-{digest[:24]}"

    return name


def language_for(user: User, languages: Mapping[str, Sequence[str]] | None = None) -> str:
    """The user's language: configured by id first, then their app's (``pt*`` -> ``pt-BR``), else ``en``."""
    configured = (languages or {}).get(str(user.id))
    if configured:
        return configured[0]
    if user.language_code and user.language_code.lower().startswith("pt"):
        return "pt-BR"
    return "en"
