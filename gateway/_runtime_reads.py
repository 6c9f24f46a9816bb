"""``ThreadReads``: what a runtime answers about threads, runs and approvals from the store.

A part of ``Runtime`` (``gateway._runtime``), kept apart for its size: reads only, each a thin
answer from the store, with the access rule of a thread (``check_thread_access``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from tools import Actor

from ._errors import RunNotFoundError, ThreadForbiddenError, ThreadNotFoundError
from ._runtime_parts import RuntimeParts
from .events import RunEvent
from .stores import ApprovalRecord, RunRecord, ThreadRecord

__all__ = ["ThreadReads"]


class ThreadReads:
    """The reads of ``Runtime``."""

    async def events(
        self: RuntimeParts, thread_id: str, after_seq: int = 0, follow: bool = False
    ) -> AsyncIterator[RunEvent]:
        """The thread's events after ``after_seq``; with ``follow`` keep yielding live ones."""
        if follow:
            async for event in self.store.subscribe(thread_id, after_seq):
                yield event
            return
        while True:
            page = await self.store.read_events(thread_id, after_seq, limit=500)
            for event in page:
                yield event
            if len(page) < 500:
                return
            after_seq = page[-1].seq

    async def read_events(
        self: RuntimeParts, thread_id: str, after_seq: int = 0, limit: int | None = None
    ) -> list[RunEvent]:
        """The thread's events with ``seq > after_seq``, in order (at most ``limit``)."""
        return await self.store.read_events(thread_id, after_seq, limit=limit)

    async def last_seq(self: RuntimeParts, thread_id: str) -> int:
        """The newest ``seq`` of the thread (0 when it has none)."""
        return await self.store.last_seq(thread_id)

    def subscribe(self: RuntimeParts, thread_id: str, after_seq: int = 0) -> AsyncIterator[RunEvent]:
        """The thread's events after ``after_seq``, then its live ones as they are written."""
        return self.store.subscribe(thread_id, after_seq)

    async def get_thread(self: RuntimeParts, thread_id: str) -> ThreadRecord | None:
        """The thread record, or ``None`` (no access check: see ``check_thread_access``)."""
        return await self.store.get_thread(thread_id)

    async def ensure_thread(self: RuntimeParts, thread: ThreadRecord) -> ThreadRecord:
        """Reserve ``thread`` unless one of its id exists; the stored one is answered."""
        return await self.store.ensure_thread(thread)

    async def thread_runs(self: RuntimeParts, thread_id: str) -> list[RunRecord]:
        """The thread's runs, oldest first."""
        return await self.store.thread_runs(thread_id)

    async def get_approval(self: RuntimeParts, tool_call_id: str) -> ApprovalRecord | None:
        """The approval record, or ``None``."""
        return await self.store.get_approval(tool_call_id)

    async def get_run(self: RuntimeParts, run_id: str) -> RunRecord:
        """The run record.

        Raises:
            RunNotFoundError: No such run.
        """
        run = await self.store.get_run(run_id)
        if run is None:
            raise RunNotFoundError(f"No run {run_id!r}")
        return run

    async def check_thread_access(self: RuntimeParts, thread_id: str, actor: Actor) -> ThreadRecord:
        """The thread, when ``actor`` may read it.

        Its owner may (same id, same tenant); so may a member of a role that must decide one of
        the thread's pending approvals, in the requester's tenant, for as long as it is pending.

        Raises:
            ThreadNotFoundError: No such thread.
            ThreadForbiddenError: Someone else's thread.
        """
        thread = await self.store.get_thread(thread_id)
        if thread is None:
            raise ThreadNotFoundError(f"No thread {thread_id!r}")
        if thread.owned_by(actor):
            return thread
        if not self.approval_policy.approver_roles().isdisjoint(actor.roles):
            for approval in await self.store.pending_approvals(thread_id):
                if self.approval_policy.can_decide(actor, approval):
                    return thread
        raise ThreadForbiddenError(f"Thread {thread_id!r} belongs to another actor")
