"""``RunIds``: which AG-UI ``runId`` a client gave each segment of our runs.

A ``POST`` stream echoes the ``runId`` of its request. A re-attach (``GET .../events``) opens
segments itself and names each after the request that caused it: the turn that started our run,
or the resume that decided its approval. Both are remembered in the store's channel state, so
any process answers the same. A segment no AG-UI request caused (a turn or a decision made on
another channel, an expiry) is named after our own run id.
"""

from __future__ import annotations

from gateway import ChannelState
from gateway.events import ApprovalSettledEvent, RunEvent, RunStartedEvent

__all__ = ["RUN_ID_TTL", "RunIds"]

RUN_ID_TTL = 30 * 24 * 3600.0
"""Seconds a ``runId`` is remembered for re-attaching."""


class RunIds:
    """The client ``runId`` of each segment, kept in the store's channel state."""

    def __init__(self, store: ChannelState, *, ttl: float = RUN_ID_TTL) -> None:
        self.store = store
        self.ttl = ttl

    @staticmethod
    def _turn_key(thread_id: str, agora_run_id: str) -> str:
        return f"ag-ui:{thread_id}:turn:{agora_run_id}"

    @staticmethod
    def _resume_key(thread_id: str, tool_call_id: str) -> str:
        return f"ag-ui:{thread_id}:resume:{tool_call_id}"

    async def remember_turn(self, thread_id: str, agora_run_id: str, run_id: str) -> None:
        """The client's ``run_id`` started our run ``agora_run_id``."""
        await self.store.set(self._turn_key(thread_id, agora_run_id), run_id, ttl=self.ttl)

    async def remember_resume(self, thread_id: str, tool_call_id: str, run_id: str) -> None:
        """The client's ``run_id`` decided the approval ``tool_call_id`` (and carries what follows)."""
        await self.store.set(self._resume_key(thread_id, tool_call_id), run_id, ttl=self.ttl)

    async def name(self, event: RunEvent) -> str:
        """The ``runId`` of the segment ``event`` opens."""
        key: str | None = None
        match event:
            case RunStartedEvent():
                key = self._turn_key(event.thread_id, event.run_id)
            case ApprovalSettledEvent():
                key = self._resume_key(event.thread_id, event.tool_call_id)
        value = await self.store.get(key) if key else None
        return value if isinstance(value, str) else event.run_id
