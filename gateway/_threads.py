"""``Threads``: conversations as data their owner controls (list, names, erasure, export, retention).

A runtime has one (``Runtime.threads``). Only a thread's owner (same id, same tenant) lists,
renames, erases or exports it: an approver who may read a thread while a decision of theirs is
pending may do none of these.

Erasure stops the thread's runs first, through the runtime: a running run is cancelled and
waited for (wherever it runs: another process sees the request on its next maintenance pass); a
parked one ends at once, its pending approvals withdrawn. Then whatever else holds the thread's
data forgets it (``erasers``: the app's rendered media; the personas it pins,
``gateway._personas``), then the store erases it, then the
erasers once more (for a render that was in flight). A failure before the store's erasure leaves
the thread in place, so the request can be repeated.

Retention (``retention_days``) erases threads nobody wrote to for that long, in the runtime's
background passes (at most every minute, each erasing for ``retention_budget`` seconds at
most), never one with a run running or waiting for an approval: such a thread is passed over
until it is idle. A turn that begins on a thread in the
instant between that check and the erasure is erased with it.

Handoffs (``gateway._handoffs``) give a conversation child threads of its own, one per sub-agent
run: they are part of it, not conversations of their own. The owner's list leaves them out, and
erasing a thread (by its owner or by retention) stops and erases its children, theirs first.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any, Protocol

from tools import Actor

from ._agents import MAX_HANDOFF_DEPTH
from ._errors import (
    RunNotActiveError,
    StoreUnavailableError,
    ThreadBusyError,
    ThreadForbiddenError,
    ThreadNotFoundError,
)
from ._handoff_parts import child_threads_of, children_key, is_child_thread, parked_key
from ._personas import PIN_KEY
from .events import RUN_EVENT_ADAPTER, RunStatus, now_iso
from .models import UserMessage
from .stores import TITLE_CHARS, Store, ThreadRecord, ThreadSummary

__all__ = ["DAY", "ThreadEraser", "Threads"]

logger = logging.getLogger("gateway.threads")

DAY = 86_400.0
"""Seconds in a day of retention."""

_ACTIVE = frozenset({"running", "awaiting-approval"})
_RETENTION_EVERY = 60.0
"""Seconds between two retention passes at most (a tenth of the retention when that is shorter)."""
_PAGE = 500


class ThreadEraser(Protocol):
    """Something besides the store that holds a thread's data (rendered media) and forgets it on erasure."""

    async def forget_thread(self, thread_id: str) -> None:
        """Erase what is kept for ``thread_id``; raise when it could not (the erasure then stops)."""
        ...


class RunControl(Protocol):
    """What erasure needs of the runtime: stopping a run and waiting for it."""

    async def cancel(self, run_id: str, actor: Actor) -> None:
        """Stop a run as ``actor`` (its owner)."""
        ...

    async def wait(self, run_id: str, timeout: float | None = None) -> RunStatus:
        """Wait until the run is not running any more."""
        ...


@dataclass(kw_only=True, eq=False)
class Threads:
    """A runtime's threads as data their owner controls (see the module's docstring)."""

    store: Store
    runs: RunControl
    retention_days: float | None = None
    """Erase threads idle for this many days (fractions allowed); ``None`` keeps them for good."""
    retention_budget: float = 1.0
    """Seconds one retention pass may spend erasing (at least one thread); the rest waits for the
    next maintenance pass. The pass shares its turn with lease renewals: a long one would let this
    process's leases lapse."""
    stop_timeout: float = 30.0
    """Seconds an erasure waits for a cancelled run to stop before it answers ``ThreadBusyError``."""
    erasers: list[ThreadEraser] = field(default_factory=list)
    """What else forgets a thread when it is erased (the app's media store)."""
    handoffs: bool = False
    """An agent hands off: threads may have child threads (listed with their parent, erased with it).
    Without handoffs neither the list nor erasure looks for any."""
    _next_retention: float = 0.0

    # -- the owner's ------------------------------------------------------------------------------

    async def owned(self, thread_id: str, actor: Actor) -> ThreadRecord:
        """The thread, when ``actor`` owns it.

        Raises:
            ThreadNotFoundError: No such thread.
            ThreadForbiddenError: Someone else's thread.
        """
        thread = await self.store.get_thread(thread_id)
        if thread is None:
            raise ThreadNotFoundError(f"No thread {thread_id!r}")
        if not thread.owned_by(actor):
            raise ThreadForbiddenError(f"Thread {thread_id!r} belongs to another actor")
        return thread

    async def for_owner(
        self, actor: Actor, *, before: tuple[float, str] | None = None, limit: int = 20
    ) -> list[ThreadSummary]:
        """``actor``'s threads, newest activity first, after ``before`` (a previous page's last pair).

        A sub-agent's thread is not listed: it is part of its parent's conversation.
        """
        if not self.handoffs:
            return await self.store.list_threads(actor.key, before=before, limit=limit)
        lines: list[ThreadSummary] = []
        while len(lines) < limit:
            page = await self.store.list_threads(actor.key, before=before, limit=limit)
            lines.extend([line for line in page if not await is_child_thread(self.store, line.thread_id)])
            if len(page) < limit:
                break
            before = (page[-1].last_activity_ts, page[-1].thread_id)
        return lines[:limit]

    async def rename(self, thread_id: str, actor: Actor, title: str | None) -> str | None:
        """Name the thread (``None``: its first message again); answer the title it now has.

        Raises:
            ThreadNotFoundError: No such thread.
            ThreadForbiddenError: Someone else's thread.
        """
        await self.owned(thread_id, actor)
        if not await self.store.rename_thread(thread_id, title):
            raise ThreadNotFoundError(f"No thread {thread_id!r}")
        if title is not None:
            return title
        first = next((m.content for m in await self.store.get_messages(thread_id) if isinstance(m, UserMessage)), None)
        return first[:TITLE_CHARS] if first else None

    async def delete(self, thread_id: str, actor: Actor) -> None:
        """Erase the thread as its owner: its runs stopped first, then everything of it.

        Raises:
            ThreadNotFoundError: No such thread.
            ThreadForbiddenError: Someone else's thread (nothing is changed).
            ThreadBusyError: A run did not stop within ``stop_timeout`` (nothing is erased).
        """
        await self.owned(thread_id, actor)
        await self._stop_runs(thread_id, actor)
        children = await self._descendants(thread_id)
        for child in children:  # stopped with their parent, as a rule; one that began meanwhile stops here
            await self._stop_runs(child, actor)
        await self._erase_with(thread_id, children)
        logger.info("erased thread %s at its owner's request", thread_id)

    async def _descendants(self, thread_id: str) -> list[str]:
        """The threads of the thread's sub-agent runs, and of theirs, nearest first."""
        if not self.handoffs:
            return []
        found: list[str] = []
        level = [thread_id]
        for _ in range(MAX_HANDOFF_DEPTH):
            level = [child for parent in level for child in await child_threads_of(self.store, parent)]
            level = [child for child in level if child not in found and child != thread_id]
            if not level:
                break
            found.extend(level)
        return found

    async def _erase_with(self, thread_id: str, children: list[str]) -> bool:
        """Erase the thread's children (the deepest first), then the thread: a failure leaves the parent to repeat."""
        for child in reversed(children):
            await self._erase(child)
        return await self._erase(thread_id)

    async def _stop_runs(self, thread_id: str, actor: Actor) -> None:
        for _ in range(3):
            active = [run for run in await self.store.thread_runs(thread_id) if run.status in _ACTIVE]
            if not active:
                return
            for run in active:
                try:
                    await self.runs.cancel(run.run_id, actor)
                except RunNotActiveError:
                    continue  # it ended meanwhile
                if run.status == "running":
                    try:
                        await self.runs.wait(run.run_id, timeout=self.stop_timeout)
                    except TimeoutError:
                        raise ThreadBusyError(
                            f"A run on thread {thread_id!r} did not stop in time; try again"
                        ) from None
        raise ThreadBusyError(f"Runs keep starting on thread {thread_id!r}; try again")

    async def _erase(self, thread_id: str) -> bool:
        # What else holds the thread's data first: if that fails, the thread stays, and so does the
        # request. Once more after the store: a render in flight meanwhile (a socket replaying the
        # thread) may have put media of it since.
        for eraser in self.erasers:
            await eraser.forget_thread(thread_id)
        await self.store.channel_delete(PIN_KEY.format(thread_id=thread_id))  # its pinned personas
        if self.handoffs:
            await self.store.channel_delete(children_key(thread_id))  # its list of running children
            await self.store.channel_delete(parked_key(thread_id))  # its run parked on a sub-agent
        erased = await self.store.delete_thread(thread_id)
        for eraser in self.erasers:
            try:
                await eraser.forget_thread(thread_id)
            except Exception as exc:  # the thread is gone; what a late render put expires by itself
                logger.warning("erased thread %s, but not what was rendered for it meanwhile: %s", thread_id, exc)
        return erased

    async def export(self, thread_id: str, actor: Actor) -> dict[str, Any]:
        """Everything the store keeps of the thread, as JSON-ready data (its owner's copy).

        The thread record, its messages, its runs each with its journal, its events and its
        approvals, settled or pending.

        Raises:
            ThreadNotFoundError: No such thread.
            ThreadForbiddenError: Someone else's thread.
        """
        thread = await self.owned(thread_id, actor)
        runs = []
        for run in await self.store.thread_runs(thread_id):
            journal = await self.store.read_journal(thread_id, run.run_id)
            runs.append({**run.model_dump(mode="json"), "journal": [e.model_dump(mode="json") for e in journal]})
        events: list[Any] = []
        after = 0
        while True:
            page = await self.store.read_events(thread_id, after, limit=_PAGE)
            events.extend(RUN_EVENT_ADAPTER.dump_python(event, mode="json") for event in page)
            if len(page) < _PAGE:
                break
            after = page[-1].seq
        return {
            "exported_at": now_iso(),
            "thread": thread.model_dump(mode="json"),
            "messages": [m.model_dump(mode="json") for m in await self.store.get_messages(thread_id)],
            "runs": runs,
            "events": events,
            "approvals": [a.model_dump(mode="json") for a in await self.store.thread_approvals(thread_id)],
        }

    # -- retention --------------------------------------------------------------------------------

    async def sweep(self) -> int:
        """One retention pass, when one is due: erase idle threads; answer how many went."""
        if self.retention_days is None:
            return 0
        now = time.time()
        if now < self._next_retention:
            return 0
        keep = self.retention_days * DAY
        self._next_retention = now + min(_RETENTION_EVERY, keep / 10)
        erased = await self._erase_idle(now - keep, deadline=time.monotonic() + self.retention_budget)
        if erased:
            logger.info("retention erased %d thread(s) idle for more than %g day(s)", erased, self.retention_days)
        return erased

    async def _erase_idle(self, cutoff: float, *, deadline: float) -> int:
        erased = 0
        passed: set[str] = set()
        limit = 100
        for _ in range(10):
            idle = await self.store.idle_threads(cutoff, limit=limit)
            for thread_id in idle:
                if thread_id in passed:
                    continue
                children = await self._descendants(thread_id)
                if await self._busy(thread_id) or any([await self._busy(child) for child in children]):
                    passed.add(thread_id)
                else:
                    try:
                        erased += await self._erase_with(thread_id, children)
                    except StoreUnavailableError:
                        raise  # the whole pass waits for the store (the runtime says so)
                    except Exception as exc:  # an eraser (the media backend) is away: next pass
                        logger.warning("retention could not erase thread %s now: %s", thread_id, exc)
                        passed.add(thread_id)
                if time.monotonic() >= deadline:
                    self._next_retention = 0.0  # more may be idle: the next pass goes on
                    return erased
            if len(idle) < limit:
                break
            limit = len(passed) + 100  # the threads passed over come first again: reach past them
        return erased

    async def _busy(self, thread_id: str) -> bool:
        """A run of the thread is running or waits for an approval: retention leaves it."""
        if any(run.status in _ACTIVE for run in await self.store.thread_runs(thread_id)):
            return True
        return bool(await self.store.pending_approvals(thread_id))
