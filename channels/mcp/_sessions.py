"""MCP sessions (``Mcp-Session-Id``), kept in the store so any process serves any session.

=============================  ==============================================  ==============
key                            value                                           ttl
=============================  ==============================================  ==============
``mcp:session:{id}``           ``McpSession``: its actor, agent, revision,     ``session_ttl``
                               whether the client can be asked (elicitation)   (renewed on use)
=============================  ==============================================  ==============
"""

from __future__ import annotations

import secrets
import time

from pydantic import BaseModel, ConfigDict, ValidationError

from gateway import ChannelState
from tools import Actor

__all__ = ["DEFAULT_SESSION_TTL", "McpSession", "SessionBook"]

DEFAULT_SESSION_TTL = 24 * 3600.0
"""Seconds a session lives after its last use."""

_RENEW_AFTER = 60.0
"""A session used again within this many seconds of its last renewal is not written again."""


class McpSession(BaseModel):
    """One client's session: who opened it and what it negotiated."""

    model_config = ConfigDict(extra="forbid")

    session_id: str
    actor_id: str
    tenant_ref: str | None = None
    agent: str
    protocol_version: str
    elicitation: bool
    """The client declared form elicitation: actions are listed and asked through it."""
    client: str = ""
    """The client's name and version, as it said (for logs)."""
    renewed: float = 0.0

    def owned_by(self, actor: Actor) -> bool:
        """Whether ``actor`` is the one who opened the session (same id, same tenant)."""
        return actor.id == self.actor_id and actor.tenant_ref == self.tenant_ref


class SessionBook:
    """Sessions under ``mcp:session:`` in the channel's state.

    Args:
        state: The channel's keys (``services.state("mcp")``).
        ttl: Seconds a session lives after its last use.
    """

    def __init__(self, state: ChannelState, *, ttl: float = DEFAULT_SESSION_TTL) -> None:
        self.state = state
        self.ttl = ttl

    def _key(self, session_id: str) -> str:
        return self.state.key("session", session_id)

    async def open(
        self, actor: Actor, *, agent: str, protocol_version: str, elicitation: bool, client: str
    ) -> McpSession:
        """A new session for ``actor``, stored; its id is 192 random bits (visible ASCII)."""
        session = McpSession(
            session_id=secrets.token_urlsafe(24),
            actor_id=actor.id,
            tenant_ref=actor.tenant_ref,
            agent=agent,
            protocol_version=protocol_version,
            elicitation=elicitation,
            client=client[:200],
            renewed=time.time(),
        )
        await self.state.set(self._key(session.session_id), session.model_dump(), ttl=self.ttl)
        return session

    async def get(self, session_id: str) -> McpSession | None:
        """The live session of that id (renewed when it was last renewed a while ago), or ``None``."""
        if not session_id or len(session_id) > 64 or not session_id.isascii() or not session_id.isprintable():
            return None
        value = await self.state.get(self._key(session_id))
        if value is None:
            return None
        try:
            session = McpSession.model_validate(value)
        except ValidationError:
            return None
        now = time.time()
        if now - session.renewed > _RENEW_AFTER:
            session.renewed = now
            await self.state.set(self._key(session_id), session.model_dump(), ttl=self.ttl)
        return session

    async def end(self, session_id: str) -> None:
        """Forget a session (``DELETE /mcp``)."""
        await self.state.delete(self._key(session_id))
